"""The one seam into telegram_bot: its bots' update signals and raw updates.

Every update comes from the signal of a telegram_bot entry's bot (not from
the telegram_* events, which anyone may fire); the raw update, seen by a
handler in the bot's python-telegram-bot application, tells the sender's
language and whose words the message carries (origin.py).
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

from homeassistant.config_entries import SIGNAL_CONFIG_ENTRY_CHANGED, ConfigEntryChange
from homeassistant.core import callback
from homeassistant.helpers.dispatcher import async_dispatcher_connect
from telegram import Update
from telegram.ext import TypeHandler

from ..const import LOGGER
from .incoming import EVENT_TYPES, parse_update
from .origin import OriginLog
from .watch import (
    RAW_HANDLER_GROUP,
    TELEGRAM_DOMAIN,
    SignalWatch,
    bot_application,
    bot_signal,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from homeassistant.config_entries import ConfigEntry
    from homeassistant.core import HomeAssistant

    from .incoming import Incoming
    from .senders import Senders
    from .watch import EarlyUpdates

# The python-telegram-bot handler group that learns each sender's language:
# below telegram_bot's own (0), so it runs before the update's event is fired.
LANGUAGE_HANDLER_GROUP: Final = RAW_HANDLER_GROUP


class Inbound:
    """Follow telegram_bot's bots; hand each message or press on, enriched."""

    def __init__(
        self,
        hass: HomeAssistant,
        *,
        senders: Senders,
        on_message: Callable[[Incoming], None],
        on_press: Callable[[Incoming], None],
    ) -> None:
        """Hand messages to ``on_message`` and button presses to ``on_press``."""
        self.hass = hass
        self._senders = senders
        self._on_message = on_message
        self._on_press = on_press
        # telegram_bot entry id -> unsubscribe from its bot's update signal.
        self._bots: dict[str, Callable[[], None]] = {}
        # Whose words each message carries, from the raw updates.
        self.origins = OriginLog()
        # The bots' applications that report the raw updates (telegram_bot
        # entry id -> the application and our handler in it).
        self._language_handlers: dict[str, tuple[Any, TypeHandler[Any, Any, Any]]] = {}
        # Updates telegram_bot reported on the bus but not through the signal.
        self.signal_watch = SignalWatch(hass, EVENT_TYPES, self._bots.keys)

    @callback
    def async_start(self, early: EarlyUpdates | None) -> list[Callable[[], None]]:
        """Follow every bot; return what undoes it, in the order it was done.

        ``early`` holds what telegram_bot delivered while the entry was being
        set up: handed on first, in order.
        """
        # Not the telegram_* events: anyone may fire those on the bus (REST
        # API, websocket, automations, scripts), and the assistant must only
        # obey what telegram_bot received from Telegram.
        for bot_entry in self.hass.config_entries.async_entries(TELEGRAM_DOMAIN):
            self._async_follow_bot(bot_entry)
        if early is not None:
            # No await since the bots were followed: every update is either
            # in ``early`` or comes to the gateway itself, never both.
            self.origins.absorb(early.origins)
            for bot_entry_id, event_type, data in early.async_stop():
                self._async_on_update(bot_entry_id, event_type, data)
        return [
            self.signal_watch.async_start(),
            self.signal_watch.async_remove_issue,
            async_dispatcher_connect(
                self.hass, SIGNAL_CONFIG_ENTRY_CHANGED, self._async_entry_changed
            ),
            self._async_unfollow_bots,
        ]

    @callback
    def _async_follow_bot(self, bot_entry: ConfigEntry[Any]) -> None:
        """Receive the updates of a telegram_bot entry's bot."""
        if bot_entry.entry_id in self._bots or (name := bot_signal(bot_entry)) is None:
            return
        entry_id = bot_entry.entry_id

        @callback
        def _on_update(event_type: str, data: Mapping[str, Any]) -> None:
            self.signal_watch.async_delivered(event_type, data)
            self._async_on_update(entry_id, event_type, data)

        self._bots[entry_id] = async_dispatcher_connect(self.hass, name, _on_update)
        self._async_watch_languages(bot_entry)

    @callback
    def _async_watch_languages(self, bot_entry: ConfigEntry[Any]) -> None:
        """Learn each sender's language_code and each message's origin.

        telegram_bot's events leave the language out, and where the text came
        from (origin.py), but the update it came in has both. The
        bot's python-telegram-bot application (polling and webhooks; a
        broadcast bot receives nothing) runs a handler of a lower group
        before telegram_bot's own, which sends the update to us. If
        telegram_bot changes inside, the texts fall back to HA's language.
        """
        application = bot_application(bot_entry)
        watched = self._language_handlers.get(bot_entry.entry_id)
        if application is None:
            if bot_entry.data.get("platform") != "broadcast":
                # Polling and webhook bots have one: telegram_bot has changed.
                LOGGER.warning(
                    "Cannot read the Telegram users' languages from bot %s, "
                    "nor whose words its messages carry (telegram_bot has "
                    "changed); replies use Home Assistant's language and every "
                    "state change waits for Confirm. Update this integration",
                    bot_entry.title,
                )
            return
        if watched and watched[0] is application:
            return
        self._async_unwatch_languages(bot_entry.entry_id)
        handler: TypeHandler[Any, Any, Any] = TypeHandler(Update, self._note_language)
        try:
            application.add_handler(handler, group=LANGUAGE_HANDLER_GROUP)
        except Exception as err:  # noqa: BLE001 - the texts fall back to HA's language
            LOGGER.debug("Cannot learn the Telegram users' languages: %s", err)
            return
        self._language_handlers[bot_entry.entry_id] = (application, handler)

    @callback
    def _async_unwatch_languages(self, bot_entry_id: str) -> None:
        if (watched := self._language_handlers.pop(bot_entry_id, None)) is None:
            return
        application, handler = watched
        with suppress(Exception):
            application.remove_handler(handler, group=LANGUAGE_HANDLER_GROUP)

    async def _note_language(self, update: object, context: object) -> None:
        """Remember the sender's language_code and the message's origin.

        The update goes on unchanged.
        """
        bot_id = getattr(getattr(context, "bot", None), "id", None)
        self.origins.note_update(update, bot_id if isinstance(bot_id, int) else None)
        user = getattr(update, "effective_user", None)
        code = getattr(user, "language_code", None)
        if isinstance(code, str) and code and isinstance(user_id := user.id, int):  # type: ignore[union-attr]
            self._senders.note_language(user_id, code)

    @callback
    def _async_entry_changed(
        self, change: ConfigEntryChange, entry: ConfigEntry[Any]
    ) -> None:
        """Follow telegram_bot entries added later; drop removed ones."""
        if entry.domain != TELEGRAM_DOMAIN:
            return
        if change is ConfigEntryChange.REMOVED:
            if (unsub := self._bots.pop(entry.entry_id, None)) is not None:
                unsub()
            self._async_unwatch_languages(entry.entry_id)
            return
        self._async_follow_bot(entry)
        # A reloaded bot has a new application.
        self._async_watch_languages(entry)

    @callback
    def _async_unfollow_bots(self) -> None:
        while self._bots:
            self._bots.popitem()[1]()
        for bot_entry_id in list(self._language_handlers):
            self._async_unwatch_languages(bot_entry_id)

    @callback
    def _async_on_update(
        self, bot_entry_id: str, event_type: str, data: Mapping[str, Any]
    ) -> None:
        """Read an update; hand on a message or press from a user let in."""
        try:
            incoming = parse_update(bot_entry_id, event_type, data)
        except Exception:  # noqa: BLE001 - a strange update must not reach telegram_bot
            LOGGER.debug("Ignoring an update that could not be read: %s", data)
            return
        if incoming is None:
            return
        if language := self._senders.language_of(incoming.user_id):
            incoming = replace(incoming, language=language)
        if incoming.callback_id is None:
            incoming = replace(
                incoming,
                origin=self.origins.take(incoming.chat_id, incoming.message_id),
            )
        if not self._senders.lets_in(incoming.user_id):
            LOGGER.debug(
                "Ignoring Telegram user %s: not in the allowed list", incoming.user_id
            )
            return
        if incoming.callback_id is not None:
            self._on_press(incoming)
            return
        self._on_message(incoming)
