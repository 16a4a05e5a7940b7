"""Notice when telegram_bot's updates stop reaching the assistant.

The gateway takes Telegram messages from telegram_bot's internal dispatcher
signal, not from the ``telegram_*`` events on the bus, which anyone may fire.
That signal is not a public API: a Home Assistant release may rename it or
change what it carries, and the assistant would fall silent without a word.
So the bus events are watched too, never acted on: when telegram_bot reports
updates of a bot the assistant follows and the signal brings none of them,
a repair issue tells the user to update the integration. The first update
that arrives through the signal again clears it.

A forged bus event can at worst raise that issue (it needs several in a row
and no real update in between); it never reaches the assistant.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Final

from homeassistant.const import __version__ as ha_version
from homeassistant.core import CALLBACK_TYPE, Event, HomeAssistant, callback
from homeassistant.helpers import issue_registry as ir
from homeassistant.helpers.dispatcher import async_dispatcher_connect
from telegram import Update
from telegram.ext import TypeHandler

from ..const import DOMAIN, LOGGER
from .origin import OriginLog

if TYPE_CHECKING:
    import asyncio

    from homeassistant.config_entries import ConfigEntry

TELEGRAM_DOMAIN: Final = "telegram_bot"
# telegram_bot's dispatcher signal (``telegram_bot.const.SIGNAL_UPDATE_EVENT``).
SIGNAL_UPDATE_EVENT: Final = "telegram_bot_update_event"
# Updates kept while the assistant starts; more are dropped (and logged).
MAX_EARLY_UPDATES: Final = 200

ISSUE_SIGNAL_SILENT: Final = "telegram_signal_silent"
# How long after telegram_bot's event its signal may still come.
SIGNAL_GRACE: Final = 10.0  # seconds
# Updates in a row that never came through the signal before the issue.
MISSES_FOR_ISSUE: Final = 3
ISSUE_TRACKER: Final = (
    "https://github.com/ha-personal-assistant/ha_personal_assistant/issues"
)

# The python-telegram-bot handler group that reads raw updates: below
# telegram_bot's own (0), so it runs before the update's event is fired.
RAW_HANDLER_GROUP: Final = -1

type UpdateKey = tuple[str, object, object, object]
# (telegram_bot entry id, event type, event data) as the signal carried it.
type EarlyUpdate = tuple[str, str, Mapping[str, Any]]


def bot_signal(bot_entry: ConfigEntry[Any]) -> str | None:
    """Return the dispatcher signal telegram_bot sends each update of a bot on.

    The bot id is the number before the colon of the API token. Dispatcher
    signals are internal to Home Assistant: neither the REST API, nor a
    websocket client, nor an automation or script can send one, unlike events.
    """
    token = bot_entry.data.get("api_key")
    if not isinstance(token, str) or not token.partition(":")[0].isdigit():
        return None
    return f"{SIGNAL_UPDATE_EVENT}_{token.partition(':')[0]}"


def bot_application(bot_entry: ConfigEntry[Any]) -> Any:
    """Return a telegram_bot entry's python-telegram-bot application, if any.

    Polling and webhook bots have one; a broadcast bot receives nothing.
    Internal to telegram_bot: None when it is not where it was.
    """
    service = getattr(bot_entry, "runtime_data", None)
    return getattr(getattr(service, "app", None), "application", None)


class EarlyUpdates:
    """Keep the updates telegram_bot delivers while the assistant starts.

    telegram_bot is set up first and receives at once what was written while
    Home Assistant was down (polling fetches it, Telegram posts it to the
    webhook). The assistant needs a few seconds more (the model server is
    asked, the databases opened): what comes meanwhile is kept here and
    answered, in order, once the gateway listens. A setup that fails drops
    it, as before.
    """

    def __init__(self, hass: HomeAssistant) -> None:
        """Nothing is followed yet."""
        self.hass = hass
        self._updates: list[EarlyUpdate] = []
        self._unsubs: list[CALLBACK_TYPE] = []
        self._dropped = 0
        # Whose words each kept message carries (telegram/origin.py).
        self.origins = OriginLog()

    @callback
    def async_start(self) -> None:
        """Follow every telegram_bot entry's updates."""
        for bot_entry in self.hass.config_entries.async_entries(TELEGRAM_DOMAIN):
            if (name := bot_signal(bot_entry)) is None:
                continue
            entry_id = bot_entry.entry_id

            @callback
            def _on_update(
                event_type: str, data: Mapping[str, Any], entry_id: str = entry_id
            ) -> None:
                if len(self._updates) >= MAX_EARLY_UPDATES:
                    self._dropped += 1
                    return
                self._updates.append((entry_id, event_type, data))

            self._unsubs.append(async_dispatcher_connect(self.hass, name, _on_update))
            self._async_read_origins(bot_entry)

    @callback
    def _async_read_origins(self, bot_entry: ConfigEntry[Any]) -> None:
        """Note each kept message's origin from the bot's raw updates."""
        if (application := bot_application(bot_entry)) is None:
            return

        async def _note(update: object, context: object) -> None:
            bot_id = getattr(getattr(context, "bot", None), "id", None)
            self.origins.note_update(
                update, bot_id if isinstance(bot_id, int) else None
            )

        handler: TypeHandler[Any, Any, Any] = TypeHandler(Update, _note)
        try:
            application.add_handler(handler, group=RAW_HANDLER_GROUP)
        except Exception as err:  # noqa: BLE001 - kept messages are then UNCHECKED
            LOGGER.debug("Cannot read the origin of Telegram messages: %s", err)
            return

        @callback
        def _remove() -> None:
            with suppress(Exception):
                application.remove_handler(handler, group=RAW_HANDLER_GROUP)

        self._unsubs.append(_remove)

    @callback
    def async_discard(self) -> None:
        """Stop following and drop what was kept (the setup failed)."""
        self.async_stop()

    @callback
    def async_stop(self) -> list[EarlyUpdate]:
        """Stop following; return what came meanwhile, oldest first."""
        while self._unsubs:
            self._unsubs.pop()()
        updates, self._updates = self._updates, []
        if self._dropped:
            LOGGER.warning(
                "%s Telegram updates that came while the assistant started "
                "were dropped (more than %s)",
                self._dropped,
                MAX_EARLY_UPDATES,
            )
            self._dropped = 0
        return updates


def update_key(event_type: str, data: Mapping[str, Any]) -> UpdateKey:
    """Return what identifies one update in both the event and the signal."""
    return (
        event_type,
        data.get("chat_id"),
        data.get("id"),
        data.get("text", data.get("data")),
    )


class SignalWatch:
    """Count updates telegram_bot fired as events that never came as signals."""

    def __init__(
        self,
        hass: HomeAssistant,
        event_types: Collection[str],
        followed: Callable[[], Collection[str]],
        *,
        grace: float | None = None,
    ) -> None:
        """Watch ``event_types`` for the telegram_bot entries ``followed`` names."""
        self.hass = hass
        self.event_types = tuple(event_types)
        self.followed = followed
        self.grace = SIGNAL_GRACE if grace is None else grace
        self.misses = 0
        self._waiting: dict[UpdateKey, asyncio.TimerHandle] = {}

    @callback
    def async_start(self) -> CALLBACK_TYPE:
        """Listen to telegram_bot's events; return the function that stops it."""
        unsubs = [
            self.hass.bus.async_listen(event_type, self._async_on_event)
            for event_type in self.event_types
        ]

        @callback
        def _stop() -> None:
            for unsub in unsubs:
                unsub()
            for handle in self._waiting.values():
                handle.cancel()
            self._waiting.clear()

        return _stop

    @callback
    def _async_on_event(self, event: Event[Mapping[str, Any]]) -> None:
        bot = event.data.get("bot")
        if not isinstance(bot, Mapping) or bot.get("config_entry_id") not in set(
            self.followed()
        ):
            return
        key = update_key(str(event.event_type), event.data)
        if key in self._waiting:
            return
        self._waiting[key] = self.hass.loop.call_later(
            self.grace, self._async_missed, key
        )

    @callback
    def async_delivered(self, event_type: str, data: Mapping[str, Any]) -> None:
        """Note an update that came through the signal: the signal works."""
        if (
            handle := self._waiting.pop(update_key(event_type, data), None)
        ) is not None:
            handle.cancel()
        if self.misses >= MISSES_FOR_ISSUE:
            LOGGER.info("Telegram updates reach the assistant again")
            ir.async_delete_issue(self.hass, DOMAIN, ISSUE_SIGNAL_SILENT)
        self.misses = 0

    @callback
    def _async_missed(self, key: UpdateKey) -> None:
        self._waiting.pop(key, None)
        self.misses += 1
        if self.misses != MISSES_FOR_ISSUE:
            return
        LOGGER.warning(
            "telegram_bot received %s updates that never reached the assistant: "
            "Home Assistant %s may have changed how telegram_bot hands updates on",
            self.misses,
            ha_version,
        )
        ir.async_create_issue(
            self.hass,
            DOMAIN,
            ISSUE_SIGNAL_SILENT,
            is_fixable=False,
            severity=ir.IssueSeverity.ERROR,
            translation_key=ISSUE_SIGNAL_SILENT,
            translation_placeholders={
                "count": str(self.misses),
                "version": ha_version,
                "tracker": ISSUE_TRACKER,
            },
        )

    @callback
    def async_remove_issue(self) -> None:
        """Drop the issue (the entry is unloaded)."""
        ir.async_delete_issue(self.hass, DOMAIN, ISSUE_SIGNAL_SILENT)
