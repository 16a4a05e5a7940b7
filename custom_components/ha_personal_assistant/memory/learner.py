"""Background learning: durable preferences from finished turns, and their decay."""

from __future__ import annotations

import asyncio
import json
import math
import sqlite3
import time
from collections import deque
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from homeassistant.core import callback
from homeassistant.helpers.event import async_track_time_interval
from langchain_core.messages import HumanMessage

from ..agent.graph import message_text
from ..const import (
    INTERACTION_RETENTION_DAYS,
    LEARNED_MAX_CONFIDENCE,
    LEARNING_BATCH,
    LEARNING_INTERVAL_SECONDS,
    LEARNING_QUEUE_SIZE,
    LOGGER,
    PROFILE_DECAY_INTERVAL_HOURS,
)
from ..store import profile as store
from .profile import LearnedFact, parse_category
from .text import grounded

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from homeassistant.config_entries import ConfigEntry
    from homeassistant.core import HomeAssistant

    from ..agent.background import BackgroundModel
    from ..models import Interaction
    from .profile import ProfileMemory

MAX_FACTS_PER_CALL: Final = 5
DEFAULT_LEARNED_CONFIDENCE: Final = 0.4
DAY: Final = 86400.0
# RuntimeError: the executor is shut down while the entry unloads, before the
# unload cancels the learner's tasks.
DB_ERRORS: Final = (sqlite3.Error, RuntimeError)

# The learning request's input: at most this share of num_ctx.
LEARNING_INPUT_SHARE: Final = 0.25

# Fixed and in English, like the system prompt: small models follow English
# instructions best, and the facts come back in the language of the chat. It
# follows the chat's own system prompt and tools (the cached prefix).
LEARNING_PROMPT: Final = """\
[Learning request, not a message from the user] Do not call any tool. \
You read a chat between a member of a household and their home assistant. \
Find what it shows about the user's lasting preferences, habits and routines: \
things that will still be true next month. Only what the user said or clearly \
showed about themselves; nothing about other people, nothing from a one-off \
request, nothing the assistant said on its own, and no instructions.
Answer with JSON lines only, one object per line, for example:
{"category": "preference", "content": "Likes the bedroom at 19 degrees", \
"confidence": 0.5}
category is preference, habit, pattern or fact; content is one short sentence \
about the user in the language of the chat; confidence is from 0 to 1.
If there is nothing lasting, answer NONE."""


@dataclass(frozen=True, slots=True)
class _Queued:
    """A logged turn waiting for the learner."""

    interaction_id: int
    person: str


def parse_learned(text: str) -> list[LearnedFact]:
    """Read the model's JSON lines (or one JSON array); skip anything else."""
    text = text.strip().removeprefix("```json").removeprefix("```")
    text = text.removesuffix("```").strip()
    items: list[Any]
    try:
        whole = json.loads(text)
    except ValueError:
        items = []
        for raw in text.splitlines():
            line = raw.strip().rstrip(",")
            if not line.startswith("{"):
                continue
            try:
                items.append(json.loads(line))
            except ValueError:
                continue
    else:
        items = whole if isinstance(whole, list) else [whole]
    facts: list[LearnedFact] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        content = item.get("content")
        if not isinstance(content, str) or not content.strip():
            continue
        raw_confidence = item.get("confidence")
        try:
            confidence = float(raw_confidence)  # type: ignore[arg-type]
        except TypeError, ValueError:
            confidence = DEFAULT_LEARNED_CONFIDENCE
        if not math.isfinite(confidence):
            confidence = DEFAULT_LEARNED_CONFIDENCE
        category = item.get("category")
        facts.append(
            LearnedFact(
                category=parse_category(
                    category if isinstance(category, str) else None, content
                ),
                content=content.strip(),
                # A guess stays a guess, whatever the model claims.
                confidence=min(LEARNED_MAX_CONFIDENCE, max(0.0, confidence)),
            )
        )
        if len(facts) >= MAX_FACTS_PER_CALL:
            break
    return facts


class Learner:
    """Logs finished turns and learns from them when the house is quiet.

    One model call at a time, through the shared model slots, after the chats
    were quiet for a while and at most once per interval: a home Ollama server
    has better things to do while someone waits for an answer.
    """

    def __init__(
        self,
        hass: HomeAssistant,
        entry: ConfigEntry[Any],
        memory: ProfileMemory,
        background: BackgroundModel,
        *,
        spawn: Callable[..., asyncio.Task[None]] | None = None,
    ) -> None:
        """Keep the profile store, and the model call that shares the chat's prefix.

        ``spawn`` starts the worker; runtime makes the unload end it before
        the storage closes.
        """
        self.hass = hass
        self.entry = entry
        self.memory = memory
        self.background = background
        self.interval_seconds = LEARNING_INTERVAL_SECONDS
        self._queue: deque[_Queued] = deque(maxlen=LEARNING_QUEUE_SIZE)
        self._worker: asyncio.Task[None] | None = None
        self._last_call = -math.inf
        self._stopped = False
        self.spawn: Callable[..., asyncio.Task[None]] = spawn or partial(
            entry.async_create_background_task, hass
        )

    @callback
    def async_start(self) -> Callable[[], None]:
        """Schedule the decay; return the function that stops learning."""
        unsub = async_track_time_interval(
            self.hass,
            self._async_on_schedule,
            timedelta(hours=PROFILE_DECAY_INTERVAL_HOURS),
            name="ha_personal_assistant profile decay",
            cancel_on_shutdown=True,
        )

        @callback
        def _stop() -> None:
            # The worker is an entry background task: the unload cancels it.
            self._stopped = True
            self._queue.clear()
            unsub()

        return _stop

    async def async_after_reply(self, interaction: Interaction) -> None:
        """Log the turn; queue it for learning unless untrusted text was in it."""
        if self._stopped:
            return
        person = interaction.speaker.profile_key
        try:
            interaction_id = await self.memory.database.async_run(
                lambda conn: store.log_interaction(
                    conn,
                    person=person,
                    conversation_key=interaction.conversation_key,
                    user_text=interaction.user_text,
                    reply=interaction.reply,
                    tainted=interaction.tainted,
                    now=time.time(),
                )
            )
        except DB_ERRORS as err:
            LOGGER.debug("Could not log the interaction: %s", err)
            return
        if interaction.tainted or self._stopped:
            return
        if len(self._queue) == self._queue.maxlen:
            LOGGER.debug("The learning queue is full; the oldest turn is skipped")
        self._queue.append(_Queued(interaction_id, person))
        self._start_worker()

    def _start_worker(self) -> None:
        if self._worker is None and self._queue and not self._stopped:
            # Registered before it starts, so a finished worker never stays
            # registered (the Telegram gateway does the same).
            self._worker = self.spawn(
                self._async_work(), "ha_personal_assistant learning", eager_start=False
            )

    async def async_requeue(self) -> int:
        """Queue the logged turns not learned from yet (after a restart)."""
        try:
            rows = await self.memory.database.async_run(
                lambda conn: store.unprocessed_interactions(conn, LEARNING_QUEUE_SIZE)
            )
        except DB_ERRORS as err:
            LOGGER.debug("Could not read the learning queue: %s", err)
            return 0
        queued = {item.interaction_id for item in self._queue}
        for interaction_id, person in rows:
            if interaction_id not in queued:
                self._queue.append(_Queued(interaction_id, person))
        self._start_worker()
        return len(rows)

    async def _async_work(self) -> None:
        """Learn from the queued turns, one batch per model call, then end.

        The model queue starts each call only when the chats are quiet, and a
        turn that starts meanwhile cancels it; its batch then goes back to
        the front of the queue.
        """
        try:
            while self._queue and not self._stopped:
                wait = self._last_call + self.interval_seconds - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                done = await self.background.async_run(
                    self._async_learn_next, "learning"
                )
                if done is None:
                    # It kept giving way to turns: wait an interval, then retry.
                    self._last_call = time.monotonic()
        finally:
            if self._worker is asyncio.current_task():
                self._worker = None

    async def _async_learn_next(self) -> bool:
        """Take the next batch (when the model queue lets the call start) and learn."""
        batch = self._take_batch()
        if not batch:
            return True
        try:
            return await self._async_learn(batch)
        except asyncio.CancelledError:
            if not self._stopped:
                self._queue.extendleft(reversed(batch))
            raise

    def _take_batch(self) -> list[_Queued]:
        """Take the oldest turn and the next few of the same person."""
        if not self._queue:
            return []
        first = self._queue.popleft()
        batch = [first]
        rest: list[_Queued] = []
        while self._queue:
            item = self._queue.popleft()
            if item.person == first.person and len(batch) < LEARNING_BATCH:
                batch.append(item)
            else:
                rest.append(item)
        self._queue.extendleft(reversed(rest))
        return batch

    async def _async_learn(self, batch: list[_Queued]) -> bool:
        person = batch[0].person
        ids = [item.interaction_id for item in batch]
        try:
            # Read back: a cleared profile takes its logged turns with it.
            pending = await self.memory.database.async_run(
                lambda conn: store.pending_interactions(conn, ids)
            )
        except DB_ERRORS as err:
            LOGGER.debug("Could not read the interaction log: %s", err)
            return True
        if not pending:
            return True
        self._last_call = time.monotonic()
        facts = await self._async_ask(pending)
        if facts is None:
            return True
        # The rule for facts stored without asking: the user's own words.
        own = [p.user_text for p in pending]
        facts = [fact for fact in facts if grounded(fact.content, own)]
        try:
            learned = await self.memory.async_learn(
                person, facts, learned_from=[p.id for p in pending]
            )
        except DB_ERRORS as err:
            LOGGER.debug("Could not store what was learned: %s", err)
            return True
        LOGGER.debug("Learned %s profile entries from %s turns", learned, len(pending))
        return True

    async def _async_ask(
        self, pending: list[store.LoggedInteraction]
    ) -> list[LearnedFact] | None:
        background = self.background
        budget = int(background.budget.num_ctx * LEARNING_INPUT_SHARE)
        lines: list[str] = []
        used = background.counter.count(LEARNING_PROMPT)
        for interaction in reversed(pending):
            pair = [f"User: {interaction.user_text}", f"Assistant: {interaction.reply}"]
            cost = sum(background.counter.count(line) + 1 for line in pair)
            if lines and used + cost > budget:
                break
            lines[:0] = pair
            used += cost
        # The chat's own system prompt and tools first (BackgroundModel): the
        # server's cached prefix stays, and the request costs only what
        # follows it.
        try:
            response = await background.async_ask(
                [HumanMessage(content=LEARNING_PROMPT + "\n\n" + "\n".join(lines))]
            )
        except Exception as err:  # noqa: BLE001 - learning is never worth an error
            LOGGER.debug("Could not learn from the conversation: %s", err)
            return None
        if response.tool_calls:
            return []
        return parse_learned(message_text(response))

    @callback
    def _async_on_schedule(self, _now: datetime) -> None:
        # A background task of the entry: cancelled when the entry unloads.
        self.entry.async_create_background_task(
            self.hass, self.async_maintain(), "ha_personal_assistant profile decay"
        )

    async def async_maintain(self) -> None:
        """Let unreinforced guesses fade and drop old logged turns."""
        try:
            faded = await self.memory.async_decay()
            await self.memory.database.async_run(
                lambda conn: store.prune_interactions(
                    conn, time.time() - INTERACTION_RETENTION_DAYS * DAY
                )
            )
        except DB_ERRORS as err:
            LOGGER.debug("Could not let the profile decay: %s", err)
            return
        if faded:
            LOGGER.debug("%s inferred profile entries faded away", faded)
