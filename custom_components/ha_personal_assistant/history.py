"""Conversation history and summaries, written in the background after replies."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from typing import TYPE_CHECKING, Final

from langchain_core.messages import HumanMessage, SystemMessage

from .agent.graph import message_text
from .const import KEPT_TURNS, LOGGER
from .store import history as store

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.language_models import BaseChatModel

    from .assistant import Interaction
    from .store.checkpoints import CheckpointStore
    from .store.database import Database, Session

# Summarize once this many turns have dropped out of the prompt, not after each
# one: every summary is a model call on home hardware.
SUMMARY_BATCH: Final = 4
# A session shorter than this needs no summary for the next one.
MIN_TURNS_TO_SUMMARIZE: Final = 3
MAX_SUMMARY_CHARS: Final = 1500

SUMMARY_PROMPT: Final = """\
You summarize a chat between a member of a household and their home \
assistant. Write a short summary, at most five sentences, of what matters to \
continue the conversation: what the user asked for, what was done or decided, \
and open questions. Write in the language of the conversation. Do not invent \
anything. Answer with the summary only."""


class HistoryKeeper:
    """Stores every turn and keeps a summary of what left the prompt."""

    def __init__(
        self,
        database: Database,
        model: BaseChatModel,
        model_slots: asyncio.Semaphore,
        *,
        request_timeout: float,
        session_timeout: float,
    ) -> None:
        """Keep the storage and the plain (tool-less) chat model."""
        self.database = database
        self.model = model
        self.model_slots = model_slots
        self.request_timeout = request_timeout
        self.session_timeout = session_timeout
        self._lock = asyncio.Lock()

    async def async_after_reply(self, interaction: Interaction) -> None:
        """Persist the turn, then summarize what dropped out of the prompt."""
        try:
            await self.database.async_run(
                lambda conn: store.append_turn(
                    conn,
                    session_id=interaction.session_id,
                    conversation_key=interaction.conversation_key,
                    person=interaction.speaker.person,
                    user_text=interaction.user_text,
                    reply=interaction.reply,
                    now=time.time(),
                )
            )
        except sqlite3.Error as err:
            LOGGER.warning("Could not store the conversation history: %s", err)
            return
        try:
            await self.async_summarize(
                interaction.session_id, keep_recent=KEPT_TURNS, min_new=SUMMARY_BATCH
            )
        except (sqlite3.Error, RuntimeError) as err:
            # The database went away (unload, stop) or is busy: the sweep
            # summarizes the session later.
            LOGGER.debug("Could not summarize the conversation: %s", err)

    async def async_prompt_summary(self, session: Session, key: str) -> str:
        """Return the summary that goes into this session's prompt."""
        try:
            summary, _ = await self.database.async_run(
                lambda conn: store.get_summary(conn, session.id)
            )
            if summary:
                return summary
            previous = await self.database.async_run(
                lambda conn: store.previous_summary(conn, key, session.id)
            )
        except sqlite3.Error as err:
            LOGGER.debug("Could not read the summary: %s", err)
            return ""
        return previous or ""

    async def async_summarize(
        self, session_id: int, *, keep_recent: int, min_new: int
    ) -> bool:
        """Fold turns older than the ``keep_recent`` latest into the summary."""
        # One summary at a time: they share the model with the replies.
        async with self._lock:
            turns = await self.database.async_run(
                lambda conn: store.session_turns(conn, session_id)
            )
            summary, upto = await self.database.async_run(
                lambda conn: store.get_summary(conn, session_id)
            )
            older = turns[:-keep_recent] if keep_recent else turns
            new = [turn for turn in older if turn.user_id > upto]
            if len(new) < min_new:
                return False
            text = await self._async_write_summary(summary, new)
            if text is None:
                return False
            last = new[-1].assistant_id
            await self.database.async_run(
                lambda conn: store.set_summary(conn, session_id, text, last)
            )
            return True

    async def async_sweep(self) -> None:
        """Summarize sessions that ended or went quiet, for the next session."""
        try:
            ids = await self.database.async_run(
                lambda conn: store.idle_sessions_to_summarize(
                    conn, time.time() - self.session_timeout, MIN_TURNS_TO_SUMMARIZE
                )
            )
            for session_id in ids:
                await self.async_summarize(session_id, keep_recent=0, min_new=1)
        except sqlite3.Error as err:
            LOGGER.debug("Could not summarize idle sessions: %s", err)

    async def async_clear(
        self, chat_id: int | None, checkpoints: CheckpointStore
    ) -> int:
        """Forget the history of one chat (or all), checkpoints included."""
        threads = await self.database.async_run(lambda conn: store.clear(conn, chat_id))
        for thread_id in threads:
            await checkpoints.async_delete_thread(thread_id)
        return len(threads)

    async def _async_write_summary(
        self, previous: str | None, turns: Sequence[store.Turn]
    ) -> str | None:
        lines = []
        if previous:
            lines.append(f"Summary so far: {previous}")
        for turn in turns:
            lines.append(f"User: {turn.user}")
            lines.append(f"Assistant: {turn.assistant}")
        messages = [
            SystemMessage(content=SUMMARY_PROMPT),
            HumanMessage(content="\n".join(lines)),
        ]
        try:
            async with self.model_slots, asyncio.timeout(self.request_timeout):
                response = await self.model.ainvoke(messages)
        except Exception as err:  # noqa: BLE001 - a summary is never worth an error
            LOGGER.debug("Could not write a summary: %s", err)
            return None
        text = message_text(response)
        return text[:MAX_SUMMARY_CHARS] if text else None
