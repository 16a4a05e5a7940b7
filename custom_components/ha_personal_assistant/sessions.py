"""Sessions: every turn stored, and the summaries written in the background.

A summary is a model call, so it never runs in a turn: it waits for quiet
(see :mod:`.model_queue`), and its request starts with the chat's own cached
prefix (the system prompt, the tools and the session's history exactly as
sent), so on a one-slot server it neither evicts the chat's cache nor costs
more than its instruction and its answer. Summaries never carry untrusted
text: a turn that read some is summarized from the user's own words only.
"""

from __future__ import annotations

import sqlite3
import time
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from homeassistant.core import callback
from langchain_core.messages import AIMessage, HumanMessage

from .agent.budget import SUMMARIZE_AT
from .agent.graph import message_text
from .agent.turns import (
    UNTRUSTED,
    USER_TEXT,
    is_tainted_turn,
    split_turns,
    stub_turn,
    with_opening,
)
from .const import LOGGER
from .store import turns as store

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine, Sequence

    from homeassistant.core import HomeAssistant
    from langchain_core.messages import AnyMessage

    from .agent.background import BackgroundModel
    from .models import Interaction
    from .store.checkpoints import CheckpointStore
    from .store.database import Database, Session

    # Reads a thread's messages and its opening (agent.graph.async_read_thread).
    type ReadThread = Callable[[str], Awaitable[tuple[list[AnyMessage], str]]]
    type Spawn = Callable[[Coroutine[Any, Any, None], str], object]

# A session shorter than this needs no summary for the next one.
MIN_TURNS_TO_SUMMARIZE: Final = 3
MAX_SUMMARY_CHARS: Final = 1500
# A summary's input: at most this share of num_ctx (the part summarized is
# the older half of the history, which is itself within its room).
SUMMARY_INPUT_SHARE: Final = 0.6

SUMMARY_REQUEST: Final = """\
[Summary request, not a message from the user] Do not call any tool. Write a \
short summary, at most five sentences, of the conversation above up to and \
including the user's message "{last}" and its answer: what the user asked \
for, what was done or decided, and open questions. Write in the language of \
the conversation. Do not invent anything. Answer with the summary only."""
SUMMARY_REQUEST_ALL: Final = """\
[Summary request, not a message from the user] Do not call any tool. Write a \
short summary, at most five sentences, of the whole conversation above: what \
the user asked for, what was done or decided, and open questions. Write in \
the language of the conversation. Do not invent anything. Answer with the \
summary only."""
SUMMARY_PROMPT: Final = SUMMARY_REQUEST_ALL


class SessionKeeper:
    """Stores every turn and writes the summaries that trims and sessions use."""

    def __init__(  # noqa: PLR0913 - keyword-only wiring
        self,
        hass: HomeAssistant,
        database: Database,
        *,
        background: BackgroundModel,
        read_thread: ReadThread,
        session_timeout: float,
        spawn: Spawn | None = None,
    ) -> None:
        """Keep the storage, and the model call that shares the chat's prefix.

        ``spawn`` starts background work that the entry's unload ends.
        """
        self.hass = hass
        self.database = database
        self.background = background
        self._read_thread = read_thread
        self.session_timeout = session_timeout
        self._pending: set[int] = set()
        self._sweep_scheduled = False
        self.spawn: Spawn = spawn or hass.async_create_background_task

    async def async_store_turn(self, interaction: Interaction) -> bool:
        """Persist a finished turn (once); return whether it was stored."""
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
                    tainted=interaction.tainted,
                    turn_id=interaction.turn_id or None,
                )
            )
        except sqlite3.Error as err:
            LOGGER.warning("Could not store the conversation history: %s", err)
            return False
        return True

    async def async_after_reply(self, interaction: Interaction) -> None:
        """Persist the turn; past SUMMARIZE_AT, summarize the older half."""
        if not await self.async_store_turn(interaction):
            return
        if interaction.history_pressure < SUMMARIZE_AT:
            return
        session_id = interaction.session_id
        if session_id in self._pending:
            return
        self._pending.add(session_id)
        try:
            await self.background.async_run(
                partial(
                    self._async_summarize_older,
                    session_id,
                    interaction.thread_id,
                    interaction.history_target,
                ),
                "summary",
            )
        finally:
            self._pending.discard(session_id)

    async def async_openings(
        self, session: Session, key: str
    ) -> tuple[str, tuple[str, str] | None]:
        """Return the last session's summary and this session's ready summary."""
        try:
            update = await self.database.async_run(
                lambda conn: store.summary_of_turn(conn, session.id)
            )
            # Used only when the session has no history yet (graph.prepare).
            previous = await self.database.async_run(
                lambda conn: store.previous_summary(conn, key, session.id)
            )
        except sqlite3.Error as err:
            LOGGER.debug("Could not read the summary: %s", err)
            return "", None
        return previous or "", update

    async def _async_summarize_older(
        self, session_id: int, thread_id: str, target: int
    ) -> None:
        """Summarize the oldest turns, so that what stays fits ``target`` tokens.

        The summary replaces them at the next turn: one large trim, after
        which the history grows again for a long while.
        """
        messages, opening = await self._read_thread(thread_id)
        turns = split_turns(messages)
        if len(turns) < 2:  # noqa: PLR2004 - the last turn always stays
            return
        cost = self.background.counter.count
        sizes = [sum(cost(str(m.content)) + 4 for m in turn) for turn in turns]
        upto = 0
        while upto < len(turns) - 2 and sum(sizes[upto + 1 :]) > target:
            upto += 1
        covered = turns[: upto + 1]
        text = await self._async_write(covered, opening, whole=False)
        if text is None:
            return
        turn_id = str(covered[-1][0].id)
        await self.database.async_run(
            lambda conn: store.set_turn_summary(conn, session_id, text, turn_id)
        )

    async def _async_write(
        self,
        turns: Sequence[Sequence[AnyMessage]],
        opening: str,
        *,
        whole: bool,
    ) -> str | None:
        """Ask the model for a summary of ``turns``, sharing the chat's prefix.

        Tainted turns are reduced to the user's own words first (the request
        then differs from the cached bytes from there on: a rare cost).
        ``turns`` is never empty: both callers return before, without turns.
        """
        clean = [
            message
            for turn in turns
            for message in (stub_turn(turn) if is_tainted_turn(turn) else turn)
        ]
        last = str(clean[0].content)
        for message in clean:
            if isinstance(message, HumanMessage):
                last = _user_words(message)
        request = (
            SUMMARY_REQUEST_ALL
            if whole
            else SUMMARY_REQUEST.format(last=_shorten(last, 120))
        )
        background = self.background
        budget = background.budget
        rendered = with_opening(clean, opening)
        limit = int(budget.num_ctx * SUMMARY_INPUT_SHARE)
        while (
            len(rendered) > 2  # noqa: PLR2004 - keep at least one exchange
            and budget.fixed
            + sum(background.counter.count(str(m.content)) for m in rendered)
            > limit
        ):
            # Too long for the summary's share: its oldest turns go (the
            # opening, already a summary, stays in front).
            rest = split_turns(rendered)[1:]
            rendered = with_opening([m for turn in rest for m in turn], opening)
        try:
            response = await background.async_ask(
                [*rendered, HumanMessage(content=request)]
            )
        except Exception as err:  # noqa: BLE001 - a summary is never worth an error
            LOGGER.debug("Could not write a summary: %s", err)
            return None
        if not isinstance(response, AIMessage) or response.tool_calls:
            LOGGER.debug("The summary came back as a tool call; not used")
            return None
        text = message_text(response)
        return text[:MAX_SUMMARY_CHARS] if text else None

    @callback
    def async_schedule_sweep(self) -> None:
        """Summarize ended sessions when the chats are quiet (once at a time)."""
        if self._sweep_scheduled:
            return
        self._sweep_scheduled = True

        async def _sweep() -> None:
            try:
                await self.async_sweep()
            finally:
                self._sweep_scheduled = False

        self.spawn(_sweep(), "ha_personal_assistant summaries")

    async def async_sweep(self) -> None:
        """Summarize sessions that ended or went quiet, for the next session."""
        try:
            ids = await self.database.async_run(
                lambda conn: store.idle_sessions_to_summarize(
                    conn, time.time() - self.session_timeout, MIN_TURNS_TO_SUMMARIZE
                )
            )
        except sqlite3.Error as err:
            LOGGER.debug("Could not summarize idle sessions: %s", err)
            return
        for session_id in ids:
            await self.background.async_run(
                partial(self._async_summarize_session, session_id), "session summary"
            )

    async def _async_summarize_session(self, session_id: int) -> None:
        """Summarize a whole ended session: its summary opens the next one."""
        try:
            turns = await self.database.async_run(
                lambda conn: store.session_turns(conn, session_id)
            )
            thread = await self.database.async_run(
                lambda conn: store.thread_of(conn, session_id)
            )
        except sqlite3.Error as err:
            LOGGER.debug("Could not read a session to summarize: %s", err)
            return
        if not turns:
            return
        messages: list[AnyMessage] = []
        opening = ""
        if thread is not None:
            try:
                messages, opening = await self._read_thread(thread)
            except Exception as err:  # noqa: BLE001 - the stored rows still work
                LOGGER.debug("Could not read the conversation state: %s", err)
        history = split_turns(messages)
        if not history:
            # The saved state is gone (pruned): the stored rows stand in.
            history = [_turn_messages(turn) for turn in turns]
        text = await self._async_write(history, opening, whole=True)
        if text is None:
            return
        last = turns[-1].assistant_id
        await self.database.async_run(
            lambda conn: store.set_summary(conn, session_id, text, last)
        )

    async def async_clear(
        self, chat_id: int | None, checkpoints: CheckpointStore
    ) -> int:
        """Forget the history of one chat (or all), checkpoints included."""
        threads = await self.database.async_run(lambda conn: store.clear(conn, chat_id))
        for thread_id in threads:
            await checkpoints.async_delete_thread(thread_id)
        return len(threads)


def _user_words(message: AnyMessage) -> str:
    value = message.additional_kwargs.get(USER_TEXT)
    return value if isinstance(value, str) else str(message.content)


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _turn_messages(turn: store.Turn) -> list[AnyMessage]:
    """Return a stored turn as messages (a tainted answer marked as such)."""
    user = HumanMessage(
        content=turn.user,
        id=f"turn-row-{turn.user_id}",
        additional_kwargs={USER_TEXT: turn.user},
    )
    answer = AIMessage(content=turn.assistant, id=f"row-{turn.assistant_id}")
    if turn.tainted:
        answer.additional_kwargs[UNTRUSTED] = ["an earlier answer"]
    return [user, answer]
