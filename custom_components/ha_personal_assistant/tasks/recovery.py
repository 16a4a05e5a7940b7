"""What a restart left: the stored tasks armed again, or settled and told.

A task whose time passed while Home Assistant was down fires once at start
if it is at most ``GRACE`` late; otherwise its maker is told it was missed
(a repeating one goes on). A task a stop caught firing may have run: it is
never run twice.
"""

from __future__ import annotations

import sqlite3
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Final

from ..const import LOGGER
from . import store
from .describe import made_text, summary_line, when_text
from .store import Task, TaskKind, TaskStatus
from .telling import is_group
from .timeline import next_fire
from .when import Repeat

if TYPE_CHECKING:
    from collections.abc import Callable

    from homeassistant.core import HomeAssistant

    from ..store.database import Database
    from .firing import Firer
    from .telling import Teller
    from .watches import Watches

# A task whose time passed while Home Assistant was down fires once at start
# if it is at most this late; otherwise its maker is told it was missed.
GRACE: Final = timedelta(minutes=15)


class Recovery:
    """Loads the stored tasks at start and settles what happened meanwhile."""

    def __init__(  # noqa: PLR0913 - keyword-only, each one part
        self,
        hass: HomeAssistant,
        database: Database,
        *,
        tasks: dict[int, Task],
        confirmation_timeout: float,
        watches: Watches,
        teller: Teller,
        firer: Firer,
        keep: Callable[[Task], None],
    ) -> None:
        """Arm through ``keep``; fire, settle and end through ``firer``."""
        self.hass = hass
        self.database = database
        self._tasks = tasks
        self._confirmation_timeout = confirmation_timeout
        self._watches = watches
        self._teller = teller
        self._firer = firer
        self._keep = keep

    async def async_load(self) -> None:
        """Arm what was stored; settle what a stop interrupted or made late."""
        now = time.time()
        tasks = await self.database.async_run(store.open_tasks)
        later = []
        # Whether a watched entity is gone or hidden: asked once for all its
        # watches (nothing can change it during this loop).
        unwatchable: dict[str, bool] = {}
        for task in tasks:
            if self._as_stored(task, now, unwatchable):
                # Nothing happened to it while Home Assistant was down.
                self._keep(task)
            else:
                later.append(task)
        for task in later:
            try:
                await self._async_recover(task, now)
            except sqlite3.Error:
                raise
            except Exception:  # noqa: BLE001 - one bad row must not stop the rest
                LOGGER.exception("Could not restore task %s", task.id)

    def _as_stored(self, task: Task, now: float, unwatchable: dict[str, bool]) -> bool:
        """Tell whether a stored task is simply armed again (the usual case).

        ``unwatchable`` keeps, by entity, what ``Watches.unwatchable`` said of it.
        """
        if task.status == TaskStatus.SUSPENDED:
            return task.created_at + self._confirmation_timeout > now
        if task.status != TaskStatus.PENDING:
            return False
        if task.fire_at is not None:
            return task.fire_at > now
        if task.until is not None and task.until <= now:
            return False
        entity_id = task.entity_id or ""
        if (gone := unwatchable.get(entity_id)) is None:
            gone = unwatchable[entity_id] = self._watches.unwatchable(
                entity_id, thorough=False
            )
        return not gone

    async def _async_recover(self, task: Task, now: float) -> None:
        if task.status == TaskStatus.RUNNING:
            await self._async_interrupted(task, now)
            return
        if task.status == TaskStatus.SUSPENDED:
            # Not kept by _as_stored (at the same ``now``): its Confirm expired.
            await self._firer.async_settle(task, TaskStatus.EXPIRED, "never confirmed")
            return
        # Not armed before these: a past-due timer would fire it as well.
        if task.kind == TaskKind.WATCH and task.until is not None and task.until <= now:
            self._tasks[task.id] = task
            await self._firer.async_give_up(task.id)
            return
        if task.kind == TaskKind.WATCH and self._watches.unwatchable(
            task.entity_id or "", thorough=False
        ):
            self._tasks[task.id] = task
            await self._firer.async_fail_watch(task.id)
            return
        if task.fire_at is not None and task.fire_at <= now:
            if now - task.fire_at <= GRACE.total_seconds():
                # Late, but within the grace window: once, now.
                self._tasks[task.id] = task
                await self._firer.async_fire(task.id, late=True)
            else:
                await self._async_missed(task, now)
            return
        self._keep(task)

    async def _async_interrupted(self, task: Task, now: float) -> None:
        """Settle a task a stop caught firing: it may have run; never twice."""
        texts = await self._teller.async_texts(task)
        text = texts("task_interrupted", task=task.id)
        if task.repeat != Repeat.NONE and task.kind != TaskKind.WATCH:
            upcoming = next_fire(task, now)
            updated = await self.database.async_run(
                lambda conn: store.reschedule(
                    conn, task.id, fire_at=upcoming, now=now, outcome="interrupted"
                )
            )
            if updated is not None:
                self._keep(updated)
        else:
            await self._firer.async_settle(task, TaskStatus.FAILED, "interrupted")
        await self._teller.async_tell(task, text)

    async def _async_missed(self, task: Task, now: float) -> None:
        """Beyond the grace window: the maker is told; a repeat goes on."""
        assert task.fire_at is not None  # noqa: S101 - only timed tasks are missed
        texts = await self._teller.async_texts(task)
        due = when_text(texts, task.fire_at, now)
        what = (
            f'"{task.message}"'
            if task.message
            else summary_line(self.hass, task, texts)
        )
        lines = [texts("task_missed", what=what, time=due)]
        if task.repeat != Repeat.NONE and task.kind != TaskKind.WATCH:
            upcoming = next_fire(task, now)
            updated = await self.database.async_run(
                lambda conn: store.reschedule(
                    conn, task.id, fire_at=upcoming, now=now, outcome="missed"
                )
            )
            if updated is not None:
                self._keep(updated)
            lines.append(texts("task_next_due", time=when_text(texts, upcoming, now)))
        else:
            await self._firer.async_settle(task, TaskStatus.MISSED, "missed")
        lines.append(made_text(task, texts, group=is_group(task)))
        await self._teller.async_tell(task, "\n".join(lines))
        self._teller.event(task, "missed", late=True)
