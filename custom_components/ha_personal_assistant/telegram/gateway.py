"""The Telegram gateway: telegram_bot's messages in, the assistant's answers out.

It composes the parts: ``inbound`` (the one seam into telegram_bot),
``queue`` (each chat in order, answered once), ``commands``, ``media``,
``confirm_ui`` (the Confirm buttons), ``stream`` and ``delivery``; the
``outbox`` it is given (delivery, Confirm buttons, senders) is shared with
the tasks and notices.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

from homeassistant.core import callback
from homeassistant.helpers.event import async_track_time_interval

from ..media import MediaSettings
from ..tasks.chat import CMD_TASK_CANCEL
from .commands import Commands
from .confirm_ui import Decisions
from .inbound import Inbound
from .media import MediaHandler, MediaTurn
from .queue import PRUNE_INTERVAL, ChatQueues
from .stream import ReplyStream

if TYPE_CHECKING:
    from collections.abc import Callable

    from homeassistant.config_entries import ConfigEntry
    from homeassistant.core import HomeAssistant

    from ..assistant import Assistant
    from ..documents.index import DocumentIndex
    from ..executor import BlockingExecutor
    from ..media import Attachment
    from ..models import Speaker, TurnResult
    from ..tasks.manager import TaskManager
    from ..tasks.notices import Notices
    from .incoming import Incoming
    from .outbox import Outbox
    from .watch import EarlyUpdates

# A stop or unload that comes while an answer is being sent waits this long
# for it before cutting it off.
DELIVERY_GRACE: Final = 3.0  # seconds


class TelegramGateway:
    """Receive messages, keep each chat in order, and send the replies."""

    def __init__(  # noqa: PLR0913 - keyword-only wiring
        self,
        hass: HomeAssistant,
        entry: ConfigEntry[Any],
        assistant: Assistant,
        *,
        outbox: Outbox,
        tasks: TaskManager,
        notices: Notices,
        documents: DocumentIndex | None,
        executor: BlockingExecutor,
        media: MediaSettings | None = None,
    ) -> None:
        """Build the parts; ``async_start`` subscribes to the bots."""
        self.hass = hass
        self.entry = entry
        self.assistant = assistant
        self.media = media or MediaSettings()
        self._senders = outbox.senders
        self._delivery = outbox.delivery
        self.confirmations = outbox.confirm_ui.confirmations
        decisions = Decisions(
            outbox.confirm_ui, on_decided=assistant.stats.async_notify
        )
        self._decisions = decisions
        self._media = MediaHandler(
            hass,
            entry,
            assistant=assistant,
            settings=self.media,
            executor=executor,
            documents=documents,
            confirm_ui=outbox.confirm_ui,
        )
        # Reminders, timers and watches (/tasks and its buttons), notices.
        self._commands = Commands(
            assistant=assistant,
            senders=self._senders,
            delivery=self._delivery,
            decisions=decisions,
            tasks=tasks,
            notices=notices,
        )
        self._queues = ChatQueues(
            hass,
            entry,
            database=assistant.database,
            delivery=self._delivery,
            senders=self._senders,
            handle=self._async_handle,
        )
        self._inbound = Inbound(
            hass,
            senders=self._senders,
            on_message=self._queues.async_put,
            on_press=self._async_on_press,
        )
        self._unsubs: list[Callable[[], None]] = []
        self.last_latency: float | None = None

    async def async_start(self, early: EarlyUpdates | None = None) -> None:
        """Listen to telegram_bot's bots.

        The messages a stop left unanswered are taken first: a message that
        comes in at once (Telegram delivers what was sent while Home
        Assistant was down as soon as it is back) is this start's own, not
        one to report as interrupted. ``early`` holds what telegram_bot
        delivered while the entry was being set up: answered first, in order.
        """
        interrupted = await self._queues.async_take_interrupted()
        self._unsubs.extend(self._inbound.async_start(early))
        self._unsubs.append(
            async_track_time_interval(
                self.hass,
                self._queues.async_prune,
                PRUNE_INTERVAL,
                name="ha_personal_assistant prune",
                cancel_on_shutdown=True,
            )
        )
        # Messages a stop of Home Assistant left unanswered: say so.
        if interrupted:
            self.entry.async_create_background_task(
                self.hass,
                self._queues.async_report_interrupted(interrupted),
                "ha_personal_assistant interrupted messages",
            )

    async def async_stop(self) -> None:
        """Stop listening and cancel the turns in flight."""
        while self._unsubs:
            self._unsubs.pop()()
        await self._queues.async_stop()

    def language_of(self, user_id: int) -> str | None:
        """Return a Telegram user's language_code, if their updates told it."""
        return self._senders.language_of(user_id)

    @callback
    def _async_on_press(self, incoming: Incoming) -> None:
        """Answer a button press at once, not after the chat's queued turns.

        The database makes concurrent presses safe.
        """
        if incoming.command == CMD_TASK_CANCEL:
            press = self._commands.async_on_task_press(incoming)
        else:
            press = self._decisions.async_on_press(incoming)
        self.entry.async_create_background_task(
            self.hass, press, "ha_personal_assistant button press"
        )

    async def _async_handle(self, incoming: Incoming, in_flight: int | None) -> None:
        """Answer a message; its in-flight row goes as soon as the answer is out."""
        if incoming.command is not None:
            await self._commands.async_handle(incoming)
            await self._queues.async_answered(in_flight)
            return
        if incoming.attachment is not None:
            await self._async_handle_attachment(
                incoming, incoming.attachment, in_flight
            )
            return
        await self._async_answer(incoming, in_flight)

    async def _async_handle_attachment(
        self, incoming: Incoming, attachment: Attachment, in_flight: int | None
    ) -> None:
        """Answer a voice note, a photo or a file; anything else is declined."""
        outcome = await self._media.async_read(incoming, attachment)
        if isinstance(outcome, tuple):
            await self._async_answer(outcome[0], in_flight, outcome[1])
            return
        if outcome:
            await self._delivery.async_send(incoming, outcome)
        await self._queues.async_answered(in_flight)

    async def _async_answer(
        self, incoming: Incoming, in_flight: int | None, turn: MediaTurn | None = None
    ) -> None:
        """Run the agent on a message (typed, heard or seen) and send the answer."""
        turn = turn or MediaTurn()
        started = time.monotonic()
        speaker = self._senders.speaker(incoming)
        typing = self.entry.async_create_background_task(
            self.hass,
            self._delivery.async_keep_typing(incoming),
            "ha_personal_assistant typing",
        )
        stream = ReplyStream(self.hass, self.entry, self._delivery, incoming)
        stream.start()
        prefix = turn.prefix

        def on_text(text: str) -> None:
            stream.update(prefix + text)

        try:
            result = await self.assistant.async_turn(
                incoming.key,
                incoming.text,
                speaker,
                on_text=on_text,
                images=turn.images,
                # Someone else's words (a forward, a quoted reply) are outside
                # text, whichever way they came: typed, heard or a caption.
                sources=(*turn.sources, *incoming.outside_sources),
                model=turn.model,
            )
        except BaseException:
            stream.close()
            raise
        finally:
            typing.cancel()
        spoken = result.reply
        if prefix:
            result = replace(result, reply=prefix + result.reply)
        # The answer exists: an unload or stop that comes now lets it go out
        # (briefly), rather than cutting it between the reply and its buttons
        # and then reporting an answered message as unanswered.
        delivery = self.hass.async_create_task(
            self._async_send_answer(
                incoming,
                speaker,
                result,
                stream,
                in_flight,
                spoken if turn.voice and self.media.voice_replies else None,
            ),
            "ha_personal_assistant delivery",
        )
        try:
            await asyncio.shield(delivery)
        except asyncio.CancelledError:
            await asyncio.wait({delivery}, timeout=DELIVERY_GRACE)
            delivery.cancel()
            raise
        self.last_latency = time.monotonic() - started
        self.assistant.stats.async_record_result("telegram", result, self.last_latency)
        # Only now: summaries and learning must never delay the reply.
        self.assistant.async_after_reply(result)

    async def _async_send_answer(  # noqa: PLR0913, PLR0917 - the answer and where it goes
        self,
        incoming: Incoming,
        speaker: Speaker,
        result: TurnResult,
        stream: ReplyStream,
        in_flight: int | None,
        spoken: str | None = None,
    ) -> None:
        """Send the reply and its Confirm buttons; cross the message off.

        ``spoken``: the answer to a voice note, also sent as a voice note.
        """
        await stream.async_finish(result.reply)
        if result.proposals and speaker.may_act:
            # Never a Confirm button for someone who may not act (the tools
            # already refused; this holds even if one did not).
            await self._decisions.ui.async_request(incoming, speaker, result.proposals)
        if spoken:
            await self._media.async_send_spoken(incoming, speaker, spoken)
        await self._queues.async_answered(in_flight)
