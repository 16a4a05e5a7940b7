"""Tasks at run time: the open reminders, timers and watches, armed and fired.

The manager is the face of the tasks: the tools, /tasks, the to-do list and
the setup talk to it. It keeps the open tasks as last stored and builds its
parts: the timeline (when each is due, behind one HA timer), the watches
(one state subscription per watched entity), the firer (running a due task:
telling its maker, judging and running its action, or asking to confirm)
and the recovery (what a restart left). Nothing polls.

A task made while outside text was in the prompt waits, suspended, for the
maker's Confirm before it is armed.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from typing import TYPE_CHECKING, Any, Final

from homeassistant.components.homeassistant.exposed_entities import (
    async_listen_entity_updates,
)
from homeassistant.core import callback
from homeassistant.helpers.event import async_track_point_in_utc_time
from homeassistant.helpers.start import async_at_started
from homeassistant.util import dt as dt_util

from ..const import DOMAIN, LOGGER
from ..policy.visibility import ASSISTANT
from ..tools.registry import ToolError
from . import store
from .acting import Acting
from .firing import RETRY_DELAY, Firer
from .recovery import Recovery
from .store import NewTask, Task, TaskStatus
from .telling import Teller, telegram_user
from .timeline import Armed, Due, Timeline
from .watches import Watches

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Sequence
    from datetime import datetime

    from homeassistant.config_entries import ConfigEntry
    from homeassistant.core import CALLBACK_TYPE, Context, HomeAssistant

    from ..policy.rules import Policy
    from ..policy.verdict import ResolvedCall
    from ..security.confirmations import ConfirmationManager
    from ..store.actions import PendingAction
    from ..store.database import Database
    from .briefing import Briefer
    from .telling import TaskGateway

# Open tasks (armed, or waiting for their Confirm) one person may have.
MAX_OPEN_TASKS: Final = 20
# Pending actions that are not HA service calls: the maker's Confirm of a task
# made while outside text was in the prompt, and of a cancellation then.
INTERNAL_CREATE: Final = (DOMAIN, "create_task")
INTERNAL_CANCEL: Final = (DOMAIN, "cancel_task")

NOT_YOURS: Final = (
    "Only the person who made this task, or an administrator, can see or cancel it."
)
TASK_NOT_FOUND: Final = "There is no open task {task_id} of yours."


class TaskRefusedError(ToolError):
    """A task operation refused; the message is for the person or the model."""


class TaskManager:
    """Keeps the open tasks armed and fires them."""

    def __init__(  # noqa: PLR0913 - keyword-only wiring
        self,
        hass: HomeAssistant,
        entry: ConfigEntry[Any],
        database: Database,
        *,
        policy: Policy | None,
        confirmation_timeout: float,
        gateway: TaskGateway,
        confirmations: ConfirmationManager,
        briefer: Briefer,
    ) -> None:
        """Deliver through ``gateway``; decide through ``confirmations``."""
        self.hass = hass
        self.entry = entry
        self.database = database
        self.policy = policy
        self.confirmation_timeout = confirmation_timeout
        self.gateway: TaskGateway | None = gateway
        # Writes briefing tasks' messages (tasks/briefing.py).
        self.briefer: Briefer | None = briefer
        self.confirmations: ConfirmationManager | None = confirmations
        confirmations.internal[INTERNAL_CREATE] = self._async_confirmed_create
        confirmations.internal[INTERNAL_CANCEL] = self._async_confirmed_cancel
        # Open tasks by id, as last stored.
        self.tasks: dict[int, Task] = {}
        self._unsubs: list[CALLBACK_TYPE] = []
        self._running: set[asyncio.Task[None]] = set()
        self._listeners: list[Callable[[], None]] = []
        self._active = False
        self._quiet = False
        # Set once the stored tasks are loaded and armed.
        self.ready = asyncio.Event()
        # The parts read the gateway and the briefer when they need them.
        self.timeline = Timeline(hass, self._async_due)
        self.watches = Watches(
            hass,
            tasks=self.tasks,
            timeline=self.timeline,
            on_fire=self._fire_on_state,
            on_gone=self._fail_watch,
        )
        self.teller = Teller(hass, lambda: self.gateway)
        self.firer = Firer(
            hass,
            database,
            tasks=self.tasks,
            timeline=self.timeline,
            teller=self.teller,
            acting=Acting(
                hass,
                database,
                policy=policy,
                teller=self.teller,
                gateway=lambda: self.gateway,
            ),
            briefer=lambda: self.briefer,
            keep=self._keep,
            disarm=self._disarm,
            forget=self._forget,
            spawn=self._spawn,
            on_stop=self._unsubs.append,
        )
        self.recovery = Recovery(
            hass,
            database,
            tasks=self.tasks,
            confirmation_timeout=confirmation_timeout,
            watches=self.watches,
            teller=self.teller,
            firer=self.firer,
            keep=self._keep,
        )

    # ------------------------------------------------------------ wiring

    @callback
    def async_start(self) -> None:
        """Arm the stored tasks once Home Assistant has started."""
        self._active = True
        self._unsubs.append(async_at_started(self.hass, self._async_started))

    @callback
    def _async_started(self, _hass: HomeAssistant) -> None:
        # Only now: the entities a watch needs and telegram_bot are set up.
        self._spawn(self._async_load_all(), "tasks load")

    async def _async_load_all(self) -> None:
        try:
            await self._async_load()
        except sqlite3.Error as err:
            LOGGER.warning("Could not load the scheduled tasks: %s", err)
            self._unsubs.append(
                async_track_point_in_utc_time(
                    self.hass, self._async_retry_load, dt_util.utcnow() + RETRY_DELAY
                )
            )
            return
        self._unsubs.append(
            async_listen_entity_updates(
                self.hass, ASSISTANT, self.watches.async_exposure
            )
        )
        self.ready.set()

    async def _async_load(self) -> None:
        # One update of the to-do list for the whole load, not one per task.
        self._quiet = True
        try:
            await self.recovery.async_load()
        finally:
            self._quiet = False
        self._notify()

    @callback
    def _async_retry_load(self, _now: datetime) -> None:
        self._spawn(self._async_load_all(), "tasks load")

    async def async_stop(self) -> None:
        """Disarm everything and end firings in progress (unload or stop)."""
        while self._unsubs:
            self._unsubs.pop()()
        self.timeline.clear()
        self.watches.clear()
        running = list(self._running)
        for task in running:
            task.cancel()
        if running:
            await asyncio.wait(running)
        self._active = False

    @callback
    def async_add_listener(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` whenever the open tasks change (the to-do entity)."""
        self._listeners.append(listener)

        @callback
        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove

    @callback
    def _notify(self) -> None:
        if self._quiet:
            return
        for listener in list(self._listeners):
            listener()

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = self.entry.async_create_background_task(
            self.hass, coro, f"ha_personal_assistant {name}"
        )
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    # ------------------------------------------------------------ reading

    def open_tasks(self, owner: str | None = None) -> list[Task]:
        """Return the open tasks (of ``owner``), oldest first."""
        return [
            task
            for task in sorted(self.tasks.values(), key=lambda t: t.id)
            if owner is None or task.owner == owner
        ]

    async def async_is_admin(self, person: str, ha_user_id: str | None) -> bool:
        """Tell whether a person may list and cancel everyone's tasks.

        An HA administrator (their own HA user, or the one their Telegram
        account is mapped to), or one of the assistant's admins in the options.
        """
        if self.confirmations is not None and person in self.confirmations.admins:
            return True
        user_id = ha_user_id or (
            person.removeprefix("ha:") if person.startswith("ha:") else None
        )
        if not user_id:
            return False
        user = await self.hass.auth.async_get_user(user_id)
        return bool(user is not None and user.is_active and user.is_admin)

    # ------------------------------------------------------------ changes

    async def async_create(self, new: NewTask, *, suspended: bool) -> Task:
        """Store a task and arm it, or keep it suspended until its Confirm."""
        status = TaskStatus.SUSPENDED if suspended else TaskStatus.PENDING
        task = await self.database.async_run(
            lambda conn: store.insert(
                conn, new, status=status, now=time.time(), cap=MAX_OPEN_TASKS
            )
        )
        if task is None:
            msg = (
                f"the user already has {MAX_OPEN_TASKS} open tasks, the most "
                "allowed; nothing was scheduled. They can cancel one first "
                "(list_tasks, cancel_task, or /tasks in Telegram)"
            )
            raise TaskRefusedError(msg)
        self._keep(task)
        return task

    async def async_cancel(
        self, task_id: int, *, person: str, ha_user_id: str | None
    ) -> Task:
        """Cancel an open task for its maker or an admin; raise TaskRefusedError."""
        task = await self.async_owned(task_id, person=person, ha_user_id=ha_user_id)
        return await self._async_cancel(task, by=person)

    async def async_owned(
        self, task_id: int, *, person: str, ha_user_id: str | None
    ) -> Task:
        """Return an open task the person may see and cancel."""
        task = self.tasks.get(task_id)
        if task is None:
            raise TaskRefusedError(TASK_NOT_FOUND.format(task_id=task_id))
        if task.owner != person and not await self.async_is_admin(person, ha_user_id):
            # The same answer as for a task that does not exist: others' tasks
            # are not confirmed to exist.
            raise TaskRefusedError(TASK_NOT_FOUND.format(task_id=task_id))
        return task

    async def _async_cancel(self, task: Task, *, by: str) -> Task:
        cancelled = await self.database.async_run(
            lambda conn: store.set_status(
                conn,
                task.id,
                status=TaskStatus.CANCELLED,
                now=time.time(),
                outcome=f"cancelled by {by}",
            )
        )
        if cancelled is None:
            raise TaskRefusedError(TASK_NOT_FOUND.format(task_id=task.id))
        self._keep(cancelled)
        return cancelled

    async def async_cancel_from_ha(self, uids: Sequence[str], context: Context) -> None:
        """Cancel tasks removed from the to-do list, for their maker or an admin."""
        user_id = context.user_id
        tasks = []
        for uid in uids:
            task = self.tasks.get(int(uid)) if uid.isdigit() else None
            if task is None:
                continue
            if user_id is not None and not await self._ha_user_may_cancel(
                user_id, task
            ):
                raise TaskRefusedError(NOT_YOURS)
            tasks.append(task)
        for task in tasks:
            await self._async_cancel(task, by=f"ha:{user_id}" if user_id else "ha")

    async def _ha_user_may_cancel(self, user_id: str, task: Task) -> bool:
        user = await self.hass.auth.async_get_user(user_id)
        if user is None or not user.is_active:
            return False
        if user.is_admin or task.owner == f"ha:{user_id}":
            return True
        telegram_id = telegram_user(task.owner)
        mapping = self.gateway.user_mapping if self.gateway is not None else {}
        return telegram_id is not None and mapping.get(str(telegram_id)) == user_id

    # ------------------------------------------------------------ arming

    @callback
    def _keep(self, task: Task) -> None:
        """Mirror a stored task: (re)arm it while open, forget it once settled."""
        self._disarm(task.id)
        if task.is_open:
            self.tasks[task.id] = task
            if self._active:
                self._arm(task)
        else:
            self.tasks.pop(task.id, None)
        self._notify()

    @callback
    def _forget(self, task_id: int) -> None:
        """Drop a task that is no longer stored as open."""
        self.tasks.pop(task_id, None)
        self._disarm(task_id)
        self._notify()

    @callback
    def _disarm(self, task_id: int) -> None:
        armed = self.timeline.armed.pop(task_id, None)
        if armed is not None and armed.entity_id is not None:
            self.watches.unwatch(armed.entity_id, armed.condition, task_id)

    @callback
    def _arm(self, task: Task) -> None:
        armed = self.timeline.armed[task.id] = Armed()
        if task.status == TaskStatus.SUSPENDED:
            expiry = task.created_at + self.confirmation_timeout
            self.timeline.at(armed, task.id, Due.EXPIRE, expiry)
            return
        if task.status != TaskStatus.PENDING:
            return
        if task.fire_at is not None:
            self.timeline.at(armed, task.id, Due.FIRE, task.fire_at)
            return
        # A watch on a state.
        self.watches.arm(task, armed)

    @callback
    def _async_due(self, task_id: int, what: Due, armed: Armed) -> None:
        """Do what a task's time came for (the timeline calls this)."""
        firer = self.firer
        if what is Due.FIRE:
            self._spawn(firer.async_fire(task_id), "task")
        elif what is Due.HOLD:
            self._spawn(firer.async_fire(task_id, trigger="hold"), "task")
        elif what is Due.LIMIT:
            self._spawn(firer.async_give_up(task_id), "task limit")
        elif what is Due.EXPIRE:
            self._spawn(firer.async_expire_suspended(task_id), "task expiry")
        else:
            trigger = armed.retry_trigger
            self._spawn(firer.async_fire(task_id, trigger=trigger, late=True), "task")

    @callback
    def _fire_on_state(self, task_id: int, trigger: str) -> None:
        self._spawn(self.firer.async_fire(task_id, trigger=trigger), "task")

    @callback
    def _fail_watch(self, task_id: int) -> None:
        self._spawn(self.firer.async_fail_watch(task_id), "task failed")

    # ------------------------------------------------------------ confirmed

    async def _async_confirmed_create(
        self, action: PendingAction, call: ResolvedCall
    ) -> None:
        """Arm a task its maker confirmed (made while outside text was read)."""
        task_id = int(call.data.get("task", 0))
        task = self.tasks.get(task_id)
        if task is None or task.owner != action.requester:
            msg = "the task is no longer waiting (it expired or was cancelled)"
            raise ToolError(msg)
        armed = await self.database.async_run(
            lambda conn: store.set_status(
                conn,
                task_id,
                status=TaskStatus.PENDING,
                now=time.time(),
                outcome="confirmed",
                expected=(TaskStatus.SUSPENDED,),
            )
        )
        if armed is None:
            msg = "the task is no longer waiting (it expired or was cancelled)"
            raise ToolError(msg)
        self._keep(armed)

    async def _async_confirmed_cancel(
        self, action: PendingAction, call: ResolvedCall
    ) -> None:
        """Cancel a task as confirmed (asked for while outside text was read)."""
        task_id = int(call.data.get("task", 0))
        task = await self.async_owned(
            task_id, person=action.requester, ha_user_id=action.ha_user_id
        )
        await self._async_cancel(task, by=action.requester)
