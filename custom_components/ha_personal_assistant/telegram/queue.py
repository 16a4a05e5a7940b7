"""Each chat's messages in arrival order: recorded first, answered once.

A message id seen before (an edit, a replayed update) is not answered again;
a message a stop left unanswered is reported to its sender at the next start.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final

from homeassistant.core import callback

from ..const import LOGGER
from ..i18n import async_texts
from ..store.inbox import InFlight

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine
    from datetime import datetime

    from homeassistant.config_entries import ConfigEntry
    from homeassistant.core import HomeAssistant

    from ..store.database import Database
    from .delivery import Delivery
    from .incoming import Incoming
    from .senders import Senders

# Telegram retries a webhook update for at most a day; a week is ample to
# recognize edits and replays, and keeps the table small.
SEEN_RETENTION: Final = 7 * 24 * 3600  # seconds
PRUNE_INTERVAL: Final = timedelta(hours=6)
# A message quoted in the notice after a restart is cut to this many characters.
QUOTE_CHARS: Final = 60


class ChatQueues:
    """Answer each chat's messages one after the other, each exactly once."""

    def __init__(  # noqa: PLR0913 - keyword-only wiring
        self,
        hass: HomeAssistant,
        entry: ConfigEntry[Any],
        *,
        database: Database,
        delivery: Delivery,
        senders: Senders,
        handle: Callable[[Incoming, int | None], Coroutine[Any, Any, None]],
    ) -> None:
        """Answer each message with ``handle`` (the message and its in-flight row)."""
        self.hass = hass
        self.entry = entry
        self.database = database
        self._delivery = delivery
        self._senders = senders
        self._handle = handle
        # Each chat's messages in arrival order, with the task that records
        # each one (durably, before it is answered).
        self._queues: dict[
            str, asyncio.Queue[tuple[Incoming, asyncio.Task[tuple[bool, int | None]]]]
        ] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}

    async def async_take_interrupted(self) -> list[InFlight]:
        """Return (and forget) the messages a stop left unanswered."""
        try:
            return await self.database.async_take_in_flight()
        except sqlite3.Error as err:
            LOGGER.debug("Could not read the messages left unanswered: %s", err)
            return []

    @callback
    def async_put(self, incoming: Incoming) -> None:
        """Queue a message on its chat's queue, in arrival order."""
        # background; the chat's worker waits for it before answering.
        receipt = self.entry.async_create_task(
            self.hass,
            self._async_receive(incoming),
            "ha_personal_assistant receive",
            eager_start=True,
        )
        queue = self._queues.setdefault(incoming.key, asyncio.Queue())
        queue.put_nowait((incoming, receipt))
        if incoming.key not in self._workers:
            # Not started eagerly: the worker must be registered before it can
            # finish, or a finished worker would stay registered and the chat
            # would never get another one.
            self._workers[incoming.key] = self.entry.async_create_background_task(
                self.hass,
                self._async_work(incoming.key, queue),
                f"ha_personal_assistant chat {incoming.key}",
                eager_start=False,
            )

    async def _async_work(
        self,
        key: str,
        queue: asyncio.Queue[tuple[Incoming, asyncio.Task[tuple[bool, int | None]]]],
    ) -> None:
        """Handle a chat's messages one after the other, then end."""
        try:
            while not queue.empty():
                incoming, receipt = queue.get_nowait()
                fresh, in_flight = await receipt
                if not fresh:
                    # An edited message or a replayed update: answered once.
                    LOGGER.debug("Ignoring message %s seen before", incoming.message_id)
                    continue
                try:
                    await self._handle(incoming, in_flight)
                except asyncio.CancelledError:
                    # Stopping before the answer went out: the message stays
                    # in flight, and the next start tells its sender.
                    raise
                except sqlite3.Error as err:
                    # A command that needs the database (/new, /confirm, ...)
                    # while it is locked or full: nothing was done.
                    LOGGER.debug("Storage unavailable for a command: %s", err)
                    texts = await self._senders.async_texts(incoming)
                    await self._delivery.async_send(
                        incoming, texts("storage_unavailable")
                    )
                    await self.async_answered(in_flight)
                except Exception:  # noqa: BLE001 - one bad turn must not end the chat
                    LOGGER.exception("Could not handle a Telegram message")
                    texts = await self._senders.async_texts(incoming)
                    await self._delivery.async_send(incoming, texts("internal_error"))
                    await self.async_answered(in_flight)
        finally:
            if self._workers.get(key) is asyncio.current_task():
                del self._workers[key]
            if queue.empty() and self._queues.get(key) is queue:
                del self._queues[key]

    async def _async_receive(self, incoming: Incoming) -> tuple[bool, int | None]:
        """Record a message before it is answered; tell whether it is new.

        Returns whether this message id is new in its chat, and its
        in-flight row: until the message is answered, a stop of Home
        Assistant leaves the row, and the next start tells the sender.
        """
        text = incoming.text
        if incoming.command is not None:
            text = f"{incoming.command} {text}".strip()
        try:
            return await self.database.async_receive(
                InFlight(
                    conversation_key=incoming.key,
                    bot_entry_id=incoming.bot_entry_id,
                    chat_id=incoming.chat_id,
                    message_id=incoming.message_id,
                    text=text,
                    received_at=time.time(),
                )
            )
        except sqlite3.Error as err:
            # Better to answer an edit twice than to leave a message unanswered.
            LOGGER.debug("Could not record message %s: %s", incoming.message_id, err)
            return True, None

    async def async_answered(self, in_flight: int | None) -> None:
        """Forget a message's in-flight row once it was answered.

        Right after the answer went out, and not cut short by a stop or an
        unload that comes meanwhile (it is one short write): an answered
        message must not be reported as unanswered after the start.
        """
        if in_flight is None:
            return
        done = self.hass.async_create_task(
            self._async_forget(in_flight), "ha_personal_assistant answered"
        )
        try:
            await asyncio.shield(done)
        except asyncio.CancelledError:
            await done
            raise

    async def _async_forget(self, in_flight: int) -> None:
        try:
            await self.database.async_answered(in_flight)
        except sqlite3.Error as err:
            # Left behind: the next start may tell the sender needlessly.
            LOGGER.debug("Could not settle message row %s: %s", in_flight, err)

    async def async_report_interrupted(self, messages: list[InFlight]) -> None:
        """Tell the senders of messages that a stop left unanswered.

        At most once: the rows were taken before the notices are sent.
        """
        chats: dict[tuple[str, int], list[str]] = {}
        for message in messages:
            chats.setdefault((message.bot_entry_id, message.chat_id), []).append(
                _quote(message.text)
            )
        if chats:
            LOGGER.info(
                "%s message(s) in %s chat(s) were not answered before the last "
                "stop; telling their senders",
                len(messages),
                len(chats),
            )
        # The senders' languages are not known yet after a start: HA's.
        texts = await async_texts(self.hass)
        for (bot_entry_id, chat_id), quotes in chats.items():
            text = (
                texts("interrupted_one", message=quotes[0])
                if len(quotes) == 1
                else texts(
                    "interrupted_many",
                    messages=", ".join(quotes[:-1]),
                    last=quotes[-1],
                )
            )
            await self._delivery.async_send_to(bot_entry_id, chat_id, text)

    async def async_prune(self, _now: datetime) -> None:
        """Forget message ids old enough that Telegram will not send them again."""
        try:
            await self.database.async_prune(time.time() - SEEN_RETENTION)
        except sqlite3.Error as err:
            LOGGER.debug("Could not prune seen messages: %s", err)

    async def async_stop(self) -> None:
        """Cancel the chats' workers (the turns in flight)."""
        workers = list(self._workers.values())
        for task in workers:
            task.cancel()
        if workers:
            # Not ``await task`` under suppress(CancelledError): that would
            # also swallow a cancel of this stop (HA's stop has a time limit).
            await asyncio.wait(workers)
        for task in workers:
            if not task.cancelled() and (err := task.exception()) is not None:
                LOGGER.debug("A chat's worker had stopped: %s", err)
        self._workers.clear()
        self._queues.clear()


def _quote(text: str) -> str:
    """Quote a message, cut to QUOTE_CHARS characters."""
    text = " ".join(text.split())
    if len(text) > QUOTE_CHARS:
        text = text[: QUOTE_CHARS - 1] + "…"
    return f'"{text}"'
