"""A reply shown while the model writes it: drafts in private chats, else edits."""

from __future__ import annotations

import asyncio
import secrets
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Final

from homeassistant.core import callback

from ..const import LOGGER
from .delivery import sent_message_id, split_message

if TYPE_CHECKING:
    from homeassistant.config_entries import ConfigEntry
    from homeassistant.core import HomeAssistant

    from .delivery import Delivery
    from .incoming import Incoming

# Streaming replies: the first partial text after about a second, then drafts
# at most once a second (private chats) or edits at most every 3 s (groups,
# where drafts do not exist and each edit counts against the rate limit).
DRAFT_FIRST_SECONDS: Final = 1.0
DRAFT_INTERVAL_SECONDS: Final = 1.0
EDIT_FIRST_SECONDS: Final = 2.0
EDIT_INTERVAL_SECONDS: Final = 3.0


class ReplyStream:
    """Show a reply while the model writes it, then deliver it once, whole.

    Private chats get ``send_message_draft`` (Telegram shows the text as the
    bot typing it, and the final ``send_message`` replaces it). Elsewhere, or
    when a draft is refused, a message is sent and then edited. The texts
    come through the assistant's reply filters, like the final reply.
    """

    def __init__(
        self,
        hass: HomeAssistant,
        entry: ConfigEntry[Any],
        delivery: Delivery,
        incoming: Incoming,
    ) -> None:
        """Prepare the stream; ``start`` begins showing text."""
        self._hass = hass
        self._entry = entry
        self._delivery = delivery
        self._incoming = incoming
        self._drafts = incoming.chat_id > 0
        self._draft_id = secrets.randbelow(2**31 - 2) + 1
        self._text = ""
        self._shown = ""
        self._message_id: int | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @callback
    def update(self, text: str) -> None:
        """Take the (filtered) reply so far; shown at the next tick."""
        self._text = text

    @callback
    def start(self) -> None:
        """Start showing partial text in the background."""
        self._task = self._entry.async_create_background_task(
            self._hass, self._async_run(), "ha_personal_assistant reply stream"
        )

    async def _async_wait(self, seconds: float) -> bool:
        """Wait ``seconds``; return True at once when the stream is closed."""
        with suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._stop.wait()
        return self._stop.is_set()

    async def _async_run(self) -> None:
        first = DRAFT_FIRST_SECONDS if self._drafts else EDIT_FIRST_SECONDS
        if await self._async_wait(first):
            return
        while True:
            if self._text and self._text != self._shown:
                await self._async_show(self._text)
            interval = DRAFT_INTERVAL_SECONDS if self._drafts else EDIT_INTERVAL_SECONDS
            if await self._async_wait(interval):
                return

    async def _async_show(self, text: str) -> None:
        """Show ``text`` (its first Telegram-sized part) as a draft or a message."""
        delivery, incoming = self._delivery, self._incoming
        part = split_message(text)[0]
        if self._shown and part == split_message(self._shown)[0]:
            # The text grew past the first part, which is shown already: an
            # edit would change nothing (Telegram refuses it, and each one
            # counts against a group's rate limit).
            self._shown = text
            return
        target = {"config_entry_id": incoming.bot_entry_id, "chat_id": incoming.chat_id}
        # What the chat shows: set only once Telegram took it, so a failed
        # edit is made again (at the next tick, or by the final reply).
        if self._drafts:
            sent = await delivery.async_call(
                "send_message_draft",
                {
                    **target,
                    "draft_id": self._draft_id,
                    "message": part,
                    "parse_mode": "plain_text",
                },
            )
            if sent:
                self._shown = text
                return
            # Drafts are refused (an older client or chat): edit a message instead.
            self._drafts = False
        if self._message_id is None:
            response = await delivery.async_call(
                "send_message",
                {
                    **target,
                    "message": part,
                    "parse_mode": "plain_text",
                    "disable_web_page_preview": True,
                },
                return_response=True,
            )
            self._message_id = sent_message_id(response)
            if self._message_id is None:
                # Nothing to edit: the final reply comes as a new message.
                self._stop.set()
            else:
                self._shown = text
            return
        if await delivery.async_call(
            "edit_message",
            {
                **target,
                "message_id": self._message_id,
                "message": part,
                "parse_mode": "plain_text",
                "disable_web_page_preview": True,
            },
        ):
            self._shown = text

    @callback
    def close(self) -> None:
        """Stop showing partial text without a final reply."""
        self._stop.set()

    async def async_finish(self, reply: str) -> None:
        """Stop showing drafts and deliver the final reply exactly once."""
        self._stop.set()
        if self._task is not None:
            # Never cancelled mid-call: a message sent but not recorded would
            # be sent again.
            try:
                await self._task
            except Exception:  # noqa: BLE001 - the final reply must still go out
                LOGGER.exception("Showing a partial reply failed")
        delivery, incoming = self._delivery, self._incoming
        if self._message_id is None:
            await delivery.async_send(incoming, reply)
            return
        first, *rest = split_message(reply) or [""]
        if first and first != next(iter(split_message(self._shown)), ""):
            edited = await delivery.async_deliver(
                "edit_message",
                {
                    "config_entry_id": incoming.bot_entry_id,
                    "chat_id": incoming.chat_id,
                    "message_id": self._message_id,
                    "message": first,
                    "parse_mode": "plain_text",
                    "disable_web_page_preview": True,
                },
            )
            if not edited:
                # The rest after a first part that is not there would read
                # out of order.
                return
        if rest:
            await delivery.async_send(incoming, "\n\n".join(rest))
