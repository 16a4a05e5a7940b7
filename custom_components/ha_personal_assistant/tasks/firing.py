"""Running a due task once: claim it, tell or act, store how it went.

A firing claims its task in the database first, so that it can never run
twice (not even across a restart). A watch that ends without firing (its
time limit came, its entity went away, or a task never got its Confirm)
ends here too, and its maker is told.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final

from ..const import LOGGER
from ..policy.visibility import is_visible
from ..security.confirm_text import entity_label, one_line
from . import store
from .acting import Firing
from .describe import made_text, watch_text, when_text
from .store import Task, TaskKind, TaskStatus
from .telling import gone_text, is_group
from .timeline import Armed, Due, call_at, next_fire
from .when import Repeat, WhenError, parse_condition

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from homeassistant.core import CALLBACK_TYPE, HomeAssistant

    from ..i18n import Texts
    from ..store.database import Database
    from .acting import Acting
    from .briefing import Briefer
    from .telling import Teller
    from .timeline import Timeline

# Firing found the database locked or full: tried again this much later.
RETRY_DELAY: Final = timedelta(seconds=30)


class Firer:
    """Fires due tasks and ends the ones that will not fire."""

    def __init__(  # noqa: PLR0913 - keyword-only, each one part
        self,
        hass: HomeAssistant,
        database: Database,
        *,
        tasks: dict[int, Task],
        timeline: Timeline,
        teller: Teller,
        acting: Acting,
        briefer: Callable[[], Briefer | None],
        keep: Callable[[Task], None],
        disarm: Callable[[int], None],
        forget: Callable[[int], None],
        spawn: Callable[[Coroutine[Any, Any, None], str], None],
        on_stop: Callable[[CALLBACK_TYPE], None],
    ) -> None:
        """Mirror stored changes through ``keep``; ``disarm`` stops a task listening.

        ``forget`` drops a task no longer stored as open; ``spawn`` runs
        background work; ``on_stop`` keeps what the stop must end.
        """
        self.hass = hass
        self.database = database
        self._tasks = tasks
        self._timeline = timeline
        self._teller = teller
        self._acting = acting
        self._briefer = briefer
        self._keep = keep
        self._disarm = disarm
        self._forget = forget
        self._spawn = spawn
        self._on_stop = on_stop
        # Tasks this process is firing right now.
        self._firing: set[int] = set()

    async def async_fire(
        self, task_id: int, *, trigger: str = "time", late: bool = False
    ) -> None:
        """Fire a task once: claim it, judge and run it, store how it went."""
        task = self._tasks.get(task_id)
        if task is None or task_id in self._firing:
            # Settled, or a second trigger while it fires.
            return
        if trigger == "hold" and not self._still_holds(task):
            armed = self._timeline.armed.get(task_id)
            if armed is None or armed.entity_id is None:
                # A retry (the watch was disarmed for it) found the condition
                # over: the watch listens again.
                self._keep(task)
            return
        self._firing.add(task_id)
        try:
            claimed = await self._async_claim(task_id, trigger=trigger)
            if claimed is None:
                return
            self._disarm(task_id)
            self._tasks[task_id] = claimed
            try:
                firing = await self._async_run(claimed, trigger=trigger, late=late)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # noqa: BLE001 - stored as the task's outcome
                LOGGER.exception("Task %s failed", task_id)
                firing = Firing(TaskStatus.FAILED, f"error: {err}")
            await self._async_finish(claimed, firing, late=late)
        finally:
            self._firing.discard(task_id)

    async def _async_claim(self, task_id: int, *, trigger: str) -> Task | None:
        """Claim a task for firing; None when it is not to fire (now)."""
        now = time.time()
        try:
            claimed = await self.database.async_run(
                lambda conn: store.claim(conn, task_id, now)
            )
            if claimed is None:
                # Cancelled meanwhile; or an earlier claim whose answer was
                # lost (the file was slow) while it was stored: no firing of
                # this process holds it, so nothing ran yet and it may go on.
                current = await self.database.async_run(
                    lambda conn: store.get(conn, task_id)
                )
                if current is not None and current.status == TaskStatus.RUNNING:
                    return current
        except sqlite3.Error as err:
            LOGGER.warning("Task %s could not start (%s); trying again", task_id, err)
            self._disarm(task_id)
            armed = Armed(retry_trigger=trigger)
            self._timeline.armed[task_id] = armed
            self._timeline.at(
                armed, task_id, Due.RETRY, now + RETRY_DELAY.total_seconds()
            )
            return None
        return claimed

    def _still_holds(self, task: Task) -> bool:
        """Tell whether a watch's condition holds now (its hold timer came)."""
        state = self.hass.states.get(task.entity_id or "")
        if state is None:
            return False
        armed = self._timeline.armed.get(task.id)
        condition = armed.condition if armed is not None else None
        if condition is None:
            # A retried firing: the watch was disarmed for it.
            try:
                condition = parse_condition(
                    task.condition or "", (task.entity_id or "").partition(".")[0]
                )
            except WhenError:
                return False
        return condition.matches(state.state)

    async def _async_finish(
        self, task: Task, firing: Firing, *, late: bool, announce: bool = True
    ) -> None:
        now = time.time()
        repeats = task.kind != TaskKind.WATCH and task.repeat != Repeat.NONE
        upcoming = next_fire(task, max(now, task.fire_at or now)) if repeats else None
        if firing.fired and announce:
            self._teller.event(task, firing.outcome, late=late)
        try:
            finished = await self.database.async_run(
                lambda conn: store.finish(
                    conn,
                    task.id,
                    status=TaskStatus.PENDING if repeats else firing.status,
                    outcome=firing.outcome,
                    now=now,
                    fired=firing.fired,
                    next_fire_at=upcoming,
                )
            )
        except sqlite3.Error as err:
            # It ran: only its record waits. Stored again shortly; until then
            # it stays running, so it cannot fire twice.
            LOGGER.warning("Task %s: could not store how it went (%s)", task.id, err)
            self._on_stop(
                call_at(
                    self.hass,
                    time.time() + RETRY_DELAY.total_seconds(),
                    lambda: self._spawn(
                        self._async_finish(task, firing, late=late, announce=False),
                        "task record",
                    ),
                )
            )
            return
        if finished is not None:
            self._keep(finished)

    async def _async_run(self, task: Task, *, trigger: str, late: bool) -> Firing:
        """Check, tell and act; return how it went."""
        header: list[str] = []
        texts = await self._teller.async_texts(task)
        if task.kind == TaskKind.WATCH:
            entity_id = task.entity_id or ""
            state = self.hass.states.get(entity_id)
            if state is None or not is_visible(self.hass, entity_id):
                await self._teller.async_tell(task, gone_text(task, texts))
                return Firing(TaskStatus.FAILED, "entity gone or hidden")
            if trigger == "time" and not self._check_now(task, state.state):
                # "If the garage is still open at 22:00": it was not.
                return Firing(TaskStatus.DONE, "condition not met", fired=False)
            name = entity_label(self.hass, entity_id)
            fact = texts("task_fact", name=name, state=one_line(state.state, 60))
            header.append(f"👀 {task.message}" if task.message else f"👀 {fact}")
            if task.message:
                header.append(f"({fact})")
        elif task.kind == TaskKind.BRIEFING:
            return await self._async_brief(task, texts)
        elif task.message:
            header.append(f"⏰ {task.message}")
        if late and task.fire_at is not None:
            header.append(texts("task_late", time=when_text(texts, task.fire_at)))
        footer = made_text(task, texts, group=is_group(task))
        if not task.action:
            await self._teller.async_tell(task, "\n".join([*header, footer]))
            return Firing(TaskStatus.DONE, "told")
        return await self._acting.async_act(task, texts, header, footer)

    async def _async_brief(self, task: Task, texts: Texts) -> Firing:
        """Send a briefing (tasks/briefing.py writes it)."""
        briefer = self._briefer()
        if briefer is None:
            return Firing(TaskStatus.FAILED, "no briefer")
        text, _by_model = await briefer.async_write(
            task, texts, list(self._tasks.values())
        )
        await self._teller.async_tell(task, text)
        return Firing(TaskStatus.DONE, "told")

    def _check_now(self, task: Task, state: str) -> bool:
        """Tell whether a watch that checks once finds its condition met."""
        try:
            condition = parse_condition(
                task.condition or "", (task.entity_id or "").partition(".")[0]
            )
        except WhenError:
            return False
        if not condition.matches(state):
            return False
        if not task.for_minutes:
            return True
        current = self.hass.states.get(task.entity_id or "")
        held = time.time() - current.last_changed.timestamp() if current else 0.0
        return held >= 60.0 * task.for_minutes

    # ------------------------------------------------------------ endings

    async def async_settle(self, task: Task, status: str, outcome: str) -> None:
        """Store a task as ended (``status``) and stop it listening."""
        settled = await self.database.async_run(
            lambda conn: store.set_status(
                conn, task.id, status=status, now=time.time(), outcome=outcome
            )
        )
        if settled is not None:
            self._keep(settled)
        else:
            self._forget(task.id)

    async def _async_end_pending(
        self, task_id: int, status: str, outcome: str
    ) -> Task | None:
        """Settle a still-pending task; return it as it was, None if it was not."""
        task = self._tasks.get(task_id)
        if task is None:
            return None
        ended = await self.database.async_run(
            lambda conn: store.set_status(
                conn,
                task_id,
                status=status,
                now=time.time(),
                outcome=outcome,
                expected=(TaskStatus.PENDING,),
            )
        )
        if ended is None:
            return None
        self._keep(ended)
        return task

    async def async_fail_watch(self, task_id: int) -> None:
        """End a watch whose entity was removed or hidden, and tell its maker."""
        task = await self._async_end_pending(
            task_id, TaskStatus.FAILED, "entity gone or hidden"
        )
        if task is None:
            return
        texts = await self._teller.async_texts(task)
        await self._teller.async_tell(task, gone_text(task, texts))
        self._teller.event(task, "failed", late=False)

    async def async_give_up(self, task_id: int) -> None:
        """End a watch at its time limit, and tell its maker."""
        task = await self._async_end_pending(
            task_id, TaskStatus.EXPIRED, "time limit reached"
        )
        if task is None:
            return
        texts = await self._teller.async_texts(task)
        watched = watch_text(self.hass, task, texts)
        stopped = (
            texts("task_watch_ended", watch=watched, time=when_text(texts, task.until))
            if task.until is not None
            else texts("task_watch_ended_limit", watch=watched)
        )
        await self._teller.async_tell(
            task, stopped, made_text(task, texts, group=is_group(task))
        )

    async def async_expire_suspended(self, task_id: int) -> None:
        """End a task whose maker never confirmed it."""
        task = self._tasks.get(task_id)
        if task is None or task.status != TaskStatus.SUSPENDED:
            return
        await self.async_settle(task, TaskStatus.EXPIRED, "never confirmed")
