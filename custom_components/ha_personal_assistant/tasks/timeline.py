"""When open tasks are due: one heap of times behind one Home Assistant timer.

Every time a task waits for (its firing, the end of a "stays for N minutes"
hold, a watch's time limit, the expiry of a task waiting for its Confirm, a
retry) is an entry of one heap, behind one ``async_track_point_in_utc_time``
timer set for the soonest. Nothing polls: with 1,000 open tasks the event
loop does nothing until one of them is due.
"""

from __future__ import annotations

import heapq
import itertools
import time
from dataclasses import dataclass, field
from datetime import time as dt_time
from enum import StrEnum
from typing import TYPE_CHECKING

from homeassistant.core import callback
from homeassistant.helpers.event import async_track_point_in_utc_time
from homeassistant.util import dt as dt_util

from .when import Condition, Repeat, next_occurrence

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from homeassistant.core import CALLBACK_TYPE, HomeAssistant

    from .store import Task


class Due(StrEnum):
    """What an entry of the timer heap does when its time comes."""

    FIRE = "fire"
    HOLD = "hold"
    LIMIT = "limit"
    EXPIRE = "expire"
    RETRY = "retry"


@dataclass(slots=True)
class Armed:
    """What keeps one task listening.

    Its times are entries of the timeline's heap; an entry counts only while
    its token is here (cancelling is forgetting the token).
    """

    tokens: dict[Due, int] = field(default_factory=dict)
    condition: Condition | None = None
    entity_id: str | None = None
    # How a retried firing was triggered (a claim that found the file busy).
    retry_trigger: str = "time"


class Timeline:
    """The armed tasks and the times they wait for, behind one HA timer."""

    def __init__(
        self, hass: HomeAssistant, on_due: Callable[[int, Due, Armed], None]
    ) -> None:
        """Call ``on_due(task_id, what, armed)`` whenever a time comes."""
        self.hass = hass
        self._on_due = on_due
        # What keeps each armed task listening, by task id.
        self.armed: dict[int, Armed] = {}
        # Every time a task waits for, soonest first: (when, token, task, what).
        # One HA timer is armed for the first; stale entries are skipped.
        self._heap: list[tuple[float, int, int, Due]] = []
        self._tokens = itertools.count(1)
        self._timer_unsub: CALLBACK_TYPE | None = None
        self._timer_at: float | None = None

    @callback
    def at(self, armed: Armed, task_id: int, what: Due, when: float) -> None:
        """Make ``task_id`` do ``what`` at ``when`` (replacing an earlier one)."""
        token = next(self._tokens)
        armed.tokens[what] = token
        heapq.heappush(self._heap, (when, token, task_id, what))
        self._compact()
        if self._timer_at is None or when < self._timer_at:
            self._set_timer(when)

    @callback
    def clear(self) -> None:
        """Forget every armed task and time; stop the timer."""
        self.armed.clear()
        self._heap.clear()
        if self._timer_unsub is not None:
            self._timer_unsub()
            self._timer_unsub = self._timer_at = None

    @callback
    def _compact(self) -> None:
        """Drop the entries of cancelled times once they outnumber the live ones.

        A cancelled time stays in the heap until it comes up; made and
        cancelled often, far ahead, they would pile up.
        """
        if len(self._heap) > 2 * len(self.armed) + 64:
            self._heap = [entry for entry in self._heap if self._live(entry)]
            heapq.heapify(self._heap)

    @callback
    def _set_timer(self, when: float) -> None:
        if self._timer_unsub is not None:
            self._timer_unsub()
        self._timer_at = when
        self._timer_unsub = async_track_point_in_utc_time(
            self.hass, self._async_due, dt_util.utc_from_timestamp(when)
        )

    def _live(self, entry: tuple[float, int, int, Due]) -> bool:
        _when, token, task_id, what = entry
        armed = self.armed.get(task_id)
        return armed is not None and armed.tokens.get(what) == token

    @callback
    def _async_due(self, now: datetime) -> None:
        """Run every entry whose time came; arm the timer for the next one."""
        self._timer_unsub = self._timer_at = None
        stamp = max(now.timestamp(), time.time())
        heap = self._heap
        while heap and heap[0][0] <= stamp:
            entry = heapq.heappop(heap)
            if not self._live(entry):
                continue
            _when, _token, task_id, what = entry
            armed = self.armed[task_id]
            del armed.tokens[what]
            self._on_due(task_id, what, armed)
        while heap and not self._live(heap[0]):
            heapq.heappop(heap)
        self._compact()
        if self._heap:
            self._set_timer(self._heap[0][0])


def call_at(
    hass: HomeAssistant, when: float, action: Callable[[], None]
) -> CALLBACK_TYPE:
    """Arm an HA timer of its own (rare: a record stored again)."""

    @callback
    def _due(_now: datetime) -> None:
        action()

    return async_track_point_in_utc_time(hass, _due, dt_util.utc_from_timestamp(when))


def next_fire(task: Task, after: float) -> float:
    """Return when a repeating task is due next, after ``after`` (a timestamp)."""
    clock = dt_time.fromisoformat(task.clock or "00:00:00")
    previous = dt_util.as_local(dt_util.utc_from_timestamp(task.fire_at or after))
    return next_occurrence(
        Repeat(task.repeat),
        clock,
        previous,
        dt_util.as_local(dt_util.utc_from_timestamp(after)),
    ).timestamp()
