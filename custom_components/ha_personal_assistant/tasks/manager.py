"""Tasks at run time: armed with HA's event helpers, fired once, judged when they fire.

Nothing polls. Every time a task waits for (its firing, the end of a "stays
for N minutes" hold, a watch's time limit, the expiry of a task waiting for
its Confirm, a retry) is an entry of one heap, behind one
``async_track_point_in_utc_time`` timer set for the soonest. Every watched
entity has one ``async_track_state_change_event`` subscription, shared by
its watches. An exposure change re-checks the watches once. With 1,000 open
tasks the event loop does nothing until one of them is due or one of the
watched entities changes.

When a task fires, its action is judged at that moment by the permission
layer (``evaluate_call``) against the exposure and policy of that moment, as
the person who made it: their mapped HA user, else the integration's acting
user. A restricted action never runs unattended: the maker gets the usual
Confirm message with the usual expiry. A task made while outside text was in
the prompt waits, suspended, for the maker's Confirm before it is armed.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import sqlite3
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from datetime import time as dt_time
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final, Protocol

from homeassistant.components import persistent_notification
from homeassistant.components.homeassistant.exposed_entities import (
    async_listen_entity_updates,
    async_should_expose,
)
from homeassistant.core import Context, callback
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers.event import (
    async_track_point_in_utc_time,
    async_track_state_change_event,
)
from homeassistant.helpers.start import async_at_started
from homeassistant.util import dt as dt_util
from homeassistant.util.hass_dict import HassKey

from ..const import DOMAIN, LOGGER
from ..i18n import async_texts
from ..security.confirmations import async_summarize, entity_label, one_line
from ..security.people import is_known
from ..security.permissions import (
    ASSISTANT,
    Decision,
    ResolvedCall,
    Verdict,
    evaluate_call,
    is_visible,
)
from ..store.actions import AuditRow, add_audit
from ..tools.ha import async_run_calls
from ..tools.registry import ToolError
from . import store
from .describe import (
    action_call,
    made_text,
    summary_line,
    watch_text,
    when_text,
)
from .store import NewTask, Task, TaskKind, TaskStatus
from .when import Condition, Repeat, WhenError, next_occurrence, parse_condition

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Mapping, Sequence

    from homeassistant.config_entries import ConfigEntry
    from homeassistant.core import (
        CALLBACK_TYPE,
        Event,
        EventStateChangedData,
        HomeAssistant,
        State,
    )

    from ..i18n import Texts
    from ..security.confirmations import ConfirmationManager
    from ..security.permissions import Policy
    from ..store.actions import PendingAction
    from ..store.database import Database
    from .briefing import Briefer

# A task whose time passed while Home Assistant was down fires once at start
# if it is at most this late; otherwise its maker is told it was missed.
GRACE: Final = timedelta(minutes=15)
# Open tasks (armed, or waiting for their Confirm) one person may have.
MAX_OPEN_TASKS: Final = 20
# Firing found the database locked or full: tried again this much later.
RETRY_DELAY: Final = timedelta(seconds=30)
EVENT_TASK_FIRED: Final = f"{DOMAIN}_task_fired"
# What the event says happened; every other ending is "failed".
EVENT_OUTCOMES: Final = frozenset(
    {"told", "done", "asked to confirm", "refused", "missed"}
)
# Pending actions that are not HA service calls: the maker's Confirm of a task
# made while outside text was in the prompt, and of a cancellation then.
INTERNAL_CREATE: Final = (DOMAIN, "create_task")
INTERNAL_CANCEL: Final = (DOMAIN, "cancel_task")
# The one manager that arms and fires tasks (should entries of an older version
# be two, they share the database).
DATA_TASKS: HassKey[TaskManager] = HassKey(f"{DOMAIN}_tasks")

NOT_YOURS: Final = (
    "Only the person who made this task, or an administrator, can see or cancel it."
)
TASK_NOT_FOUND: Final = "There is no open task {task_id} of yours."


class TaskRefusedError(ToolError):
    """A task operation refused; the message is for the person or the model."""


class Due(StrEnum):
    """What an entry of the timer heap does when its time comes."""

    FIRE = "fire"
    HOLD = "hold"
    LIMIT = "limit"
    EXPIRE = "expire"
    RETRY = "retry"


@dataclass(slots=True)
class _Armed:
    """What keeps one task listening.

    Its times are entries of the manager's one timer heap; an entry counts
    only while its token is here (cancelling is forgetting the token).
    """

    tokens: dict[Due, int] = field(default_factory=dict)
    condition: Condition | None = None
    entity_id: str | None = None
    # How a retried firing was triggered (a claim that found the file busy).
    retry_trigger: str = "time"


@dataclass(frozen=True, slots=True)
class Firing:
    """How a firing went, for the stored outcome and the event."""

    status: str
    outcome: str
    # Told the maker, ran the action, or asked to confirm (fires the event).
    fired: bool = True


class TaskGateway(Protocol):
    """What tasks need of the Telegram gateway (``telegram.TelegramGateway``).

    A protocol, so that the tasks and the gateway (which lists them in
    /tasks) do not import each other.
    """

    @property
    def allowed_user_ids(self) -> frozenset[int]:
        """Telegram users the assistant's options let in (empty: all)."""
        ...

    @property
    def user_mapping(self) -> Mapping[str, str]:
        """Telegram user id -> the HA user id they act as."""
        ...

    def language_of(self, user_id: int) -> str | None:
        """Return a Telegram user's language_code, if their messages told it."""
        ...

    async def async_send_text(self, bot_entry_id: str, chat_id: int, text: str) -> None:
        """Send a message the integration wrote."""

    async def async_request_confirmation(  # noqa: PLR0913 - keyword-only
        self,
        *,
        bot_entry_id: str,
        chat_id: int,
        person: str,
        ha_user_id: str | None,
        proposals: Sequence[Verdict],
        language: str | None = None,
    ) -> None:
        """Ask ``person`` to confirm the restricted calls in ``proposals``."""


def _key(condition: Condition) -> str:
    """Return what a condition waits for, as a key (equal conditions, one key)."""
    return f"{condition.compare}|{condition.value}|{condition.number}"


def _is_group(task: Task) -> bool:
    return task.chat_id is not None and task.chat_id < 0


def _telegram_user(owner: str) -> int | None:
    kind, _, ident = owner.partition(":")
    if kind != "telegram" or not ident.lstrip("-").isdigit():
        return None
    return int(ident)


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
        self._armed: dict[int, _Armed] = {}
        # Every time a task waits for, soonest first: (when, token, task, what).
        # One HA timer is armed for the first; stale entries are skipped.
        self._heap: list[tuple[float, int, int, Due]] = []
        self._tokens = itertools.count(1)
        self._timer_unsub: CALLBACK_TYPE | None = None
        self._timer_at: float | None = None
        # Watched entities: one state subscription each, for all its watches,
        # which are grouped by what they wait for (condition key: the
        # condition and the tasks waiting for it).
        self._watchers: dict[str, dict[str, tuple[Condition, set[int]]]] = {}
        self._entity_unsubs: dict[str, CALLBACK_TYPE] = {}
        self._unsubs: list[CALLBACK_TYPE] = []
        self._running: set[asyncio.Task[None]] = set()
        # Tasks this process is firing right now.
        self._firing: set[int] = set()
        self._listeners: list[Callable[[], None]] = []
        self._active = False
        self._quiet = False
        # Set once the stored tasks are loaded and armed.
        self.ready = asyncio.Event()

    # ------------------------------------------------------------ wiring

    @property
    def current(self) -> TaskManager:
        """Return the manager that runs the tasks (this one, or another entry's)."""
        return self.hass.data.get(DATA_TASKS) or self

    @callback
    def async_start(self) -> None:
        """Arm the stored tasks once Home Assistant has started."""
        if DATA_TASKS in self.hass.data:
            # Another entry runs them; this one hands its tools over to it.
            self.ready.set()
            return
        self.hass.data[DATA_TASKS] = self
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
            async_listen_entity_updates(self.hass, ASSISTANT, self._async_exposure)
        )
        self.ready.set()

    @callback
    def _async_retry_load(self, _now: datetime) -> None:
        self._spawn(self._async_load_all(), "tasks load")

    async def async_stop(self) -> None:
        """Disarm everything and end firings in progress (unload or stop)."""
        while self._unsubs:
            self._unsubs.pop()()
        self._armed.clear()
        self._heap.clear()
        if self._timer_unsub is not None:
            self._timer_unsub()
            self._timer_unsub = self._timer_at = None
        for unsub in self._entity_unsubs.values():
            unsub()
        self._entity_unsubs.clear()
        self._watchers.clear()
        running = list(self._running)
        for task in running:
            task.cancel()
        if running:
            await asyncio.wait(running)
        if self._active and self.hass.data.get(DATA_TASKS) is self:
            del self.hass.data[DATA_TASKS]
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
        telegram_id = _telegram_user(task.owner)
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
    def _disarm(self, task_id: int) -> None:
        armed = self._armed.pop(task_id, None)
        if armed is not None and armed.entity_id is not None:
            self._unwatch(armed.entity_id, armed.condition, task_id)

    def _timer(self, when: float, action: Callable[[], None]) -> CALLBACK_TYPE:
        """Arm an HA timer of its own (rare: a record stored again)."""

        @callback
        def _due(_now: datetime) -> None:
            action()

        return async_track_point_in_utc_time(
            self.hass, _due, dt_util.utc_from_timestamp(when)
        )

    @callback
    def _at(self, armed: _Armed, task_id: int, what: Due, when: float) -> None:
        """Make ``task_id`` do ``what`` at ``when`` (replacing an earlier one)."""
        token = next(self._tokens)
        armed.tokens[what] = token
        heapq.heappush(self._heap, (when, token, task_id, what))
        self._compact()
        if self._timer_at is None or when < self._timer_at:
            self._set_timer(when)

    @callback
    def _compact(self) -> None:
        """Drop the entries of cancelled times once they outnumber the live ones.

        A cancelled time stays in the heap until it comes up; made and
        cancelled often, far ahead, they would pile up.
        """
        if len(self._heap) > 2 * len(self._armed) + 64:
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
        armed = self._armed.get(task_id)
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
            armed = self._armed[task_id]
            del armed.tokens[what]
            self._dispatch(task_id, what, armed)
        while heap and not self._live(heap[0]):
            heapq.heappop(heap)
        self._compact()
        if self._heap:
            self._set_timer(self._heap[0][0])

    @callback
    def _dispatch(self, task_id: int, what: Due, armed: _Armed) -> None:
        if what is Due.FIRE:
            self._spawn(self._async_fire(task_id), "task")
        elif what is Due.HOLD:
            self._spawn(self._async_fire(task_id, trigger="hold"), "task")
        elif what is Due.LIMIT:
            self._spawn(self._async_give_up(task_id), "task limit")
        elif what is Due.EXPIRE:
            self._spawn(self._async_expire_suspended(task_id), "task expiry")
        else:
            trigger = armed.retry_trigger
            self._spawn(self._async_fire(task_id, trigger=trigger, late=True), "task")

    @callback
    def _watch(self, entity_id: str, condition: Condition, task_id: int) -> None:
        # No group is made only to be thrown away (every watch, at every start).
        if (groups := self._watchers.get(entity_id)) is None:
            groups = self._watchers[entity_id] = {}
            self._entity_unsubs[entity_id] = async_track_state_change_event(
                self.hass, entity_id, self._async_entity_changed
            )
        key = _key(condition)
        if (group := groups.get(key)) is None:
            group = groups[key] = (condition, set())
        group[1].add(task_id)

    @callback
    def _unwatch(
        self, entity_id: str, condition: Condition | None, task_id: int
    ) -> None:
        groups = self._watchers.get(entity_id)
        if groups is None or condition is None:
            return
        key = _key(condition)
        if (group := groups.get(key)) is not None:
            group[1].discard(task_id)
            if not group[1]:
                del groups[key]
        if not groups:
            del self._watchers[entity_id]
            if (unsub := self._entity_unsubs.pop(entity_id, None)) is not None:
                unsub()

    @callback
    def _arm(self, task: Task) -> None:
        armed = _Armed()
        self._armed[task.id] = armed
        if task.status == TaskStatus.SUSPENDED:
            expiry = task.created_at + self.confirmation_timeout
            self._at(armed, task.id, Due.EXPIRE, expiry)
            return
        if task.status != TaskStatus.PENDING:
            return
        if task.fire_at is not None:
            self._at(armed, task.id, Due.FIRE, task.fire_at)
            return
        # A watch on a state.
        entity_id = task.entity_id or ""
        try:
            armed.condition = parse_condition(
                task.condition or "", entity_id.partition(".")[0]
            )
        except WhenError:
            LOGGER.warning("Task %s has a condition that cannot be read", task.id)
            return
        armed.entity_id = entity_id
        self._watch(entity_id, armed.condition, task.id)
        if task.until is not None:
            self._at(armed, task.id, Due.LIMIT, task.until)
        if (
            task.for_minutes
            and (state := self.hass.states.get(entity_id)) is not None
            and armed.condition.matches(state.state)
        ):
            self._hold(task, armed, state.last_changed)

    @callback
    def _hold(self, task: Task, armed: _Armed, since: datetime) -> None:
        """Fire once the condition has held ``for_minutes`` since ``since``."""
        if Due.HOLD in armed.tokens:
            return
        due = since.timestamp() + 60.0 * float(task.for_minutes or 0)
        self._at(armed, task.id, Due.HOLD, max(due, time.time()))

    @callback
    def _async_entity_changed(self, event: Event[EventStateChangedData]) -> None:
        """Check the watches of one entity against its new state.

        Called for every change of a watched entity: each condition is
        checked once, and its watches only when it was met before or is now
        (the bench counts this).
        """
        groups = self._watchers.get(event.data["entity_id"])
        if not groups:
            return
        new, old = event.data["new_state"], event.data["old_state"]
        if new is not None and old is not None and new.state == old.state:
            # Only attributes changed: no watch can change its mind.
            return
        armed_of, tasks = self._armed, self.tasks
        for condition, task_ids in list(groups.values()):
            if (
                new is not None
                and old is not None
                and not condition.matches(new.state)
                and not condition.matches(old.state)
            ):
                # Neither before nor now: nothing to fire, and no hold to
                # end (a hold exists only while the condition is met).
                continue
            for task_id in list(task_ids):
                task = tasks.get(task_id)
                armed = armed_of.get(task_id)
                if task is None or armed is None or armed.condition is None:
                    continue
                self._async_state_changed(task, armed, armed.condition, new, old)

    @callback
    def _async_state_changed(
        self,
        task: Task,
        armed: _Armed,
        condition: Condition,
        new: State | None,
        old: State | None,
    ) -> None:
        if new is None:
            if self._gone(task.entity_id or ""):
                self._spawn(self._async_fail_watch(task.id), "task failed")
            return
        if not condition.matches(new.state):
            armed.tokens.pop(Due.HOLD, None)
            return
        if task.for_minutes:
            self._hold(task, armed, new.last_changed)
            return
        if old is None or condition.matches(old.state):
            # Still in the state (an attribute changed), or the entity came
            # back after a reload: not a change into the state.
            return
        self._spawn(self._async_fire(task.id, trigger="state"), "task")

    @callback
    def _async_exposure(self) -> None:
        """Fail the watches on entities hidden since (an exposure changed)."""
        for task in list(self.tasks.values()):
            if (
                task.kind == TaskKind.WATCH
                and task.status == TaskStatus.PENDING
                and self._unwatchable(task.entity_id or "")
            ):
                self._spawn(self._async_fail_watch(task.id), "task failed")

    def _unwatchable(self, entity_id: str, *, thorough: bool = True) -> bool:
        """Tell whether a watched entity was removed or is hidden from the assistant.

        One that is registered but not set up yet (Home Assistant is starting,
        or its integration reloads) only needs to stay exposed. Not
        ``thorough`` (at start, for many watches at once), a group's members
        are not walked: the firing checks them.
        """
        if self._gone(entity_id):
            return True
        if not thorough or self.hass.states.get(entity_id) is None:
            return not async_should_expose(self.hass, ASSISTANT, entity_id)
        return not is_visible(self.hass, entity_id)

    def _gone(self, entity_id: str) -> bool:
        """Tell whether an entity was removed (not merely reloading)."""
        return (
            self.hass.states.get(entity_id) is None
            and er.async_get(self.hass).async_get(entity_id) is None
        )

    # ------------------------------------------------------------ startup

    async def _async_load(self) -> None:
        """Arm what was stored; settle what a stop interrupted or made late."""
        now = time.time()
        tasks = await self.database.async_run(store.open_tasks)
        # One update of the to-do list for the whole load, not one per task.
        self._quiet = True
        try:
            later = []
            # Whether a watched entity is gone or hidden: asked once for all
            # its watches (nothing can change it during this loop).
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
        finally:
            self._quiet = False
        self._notify()

    def _as_stored(self, task: Task, now: float, unwatchable: dict[str, bool]) -> bool:
        """Tell whether a stored task is simply armed again (the usual case).

        ``unwatchable`` keeps, by entity, what ``_unwatchable`` said of it.
        """
        if task.status == TaskStatus.SUSPENDED:
            return task.created_at + self.confirmation_timeout > now
        if task.status != TaskStatus.PENDING:
            return False
        if task.fire_at is not None:
            return task.fire_at > now
        if task.until is not None and task.until <= now:
            return False
        entity_id = task.entity_id or ""
        if (gone := unwatchable.get(entity_id)) is None:
            gone = unwatchable[entity_id] = self._unwatchable(entity_id, thorough=False)
        return not gone

    async def _async_recover(self, task: Task, now: float) -> None:
        if task.status == TaskStatus.RUNNING:
            await self._async_interrupted(task, now)
            return
        if task.status == TaskStatus.SUSPENDED:
            # Not kept by _as_stored (at the same ``now``): its Confirm expired.
            await self._async_settle(task, TaskStatus.EXPIRED, "never confirmed")
            return
        # Not armed before these: a past-due timer would fire it as well.
        if task.kind == TaskKind.WATCH and task.until is not None and task.until <= now:
            self.tasks[task.id] = task
            await self._async_give_up(task.id)
            return
        if task.kind == TaskKind.WATCH and self._unwatchable(
            task.entity_id or "", thorough=False
        ):
            self.tasks[task.id] = task
            await self._async_fail_watch(task.id)
            return
        if task.fire_at is not None and task.fire_at <= now:
            if now - task.fire_at <= GRACE.total_seconds():
                # Late, but within the grace window: once, now.
                self.tasks[task.id] = task
                await self._async_fire(task.id, late=True)
            else:
                await self._async_missed(task, now)
            return
        self._keep(task)

    async def _async_interrupted(self, task: Task, now: float) -> None:
        """Settle a task a stop caught firing: it may have run; never twice."""
        texts = await self._async_texts(task)
        text = texts("task_interrupted", task=task.id)
        if task.repeat != Repeat.NONE and task.kind != TaskKind.WATCH:
            upcoming = self._next(task, now)
            updated = await self.database.async_run(
                lambda conn: store.reschedule(
                    conn, task.id, fire_at=upcoming, now=now, outcome="interrupted"
                )
            )
            if updated is not None:
                self._keep(updated)
        else:
            await self._async_settle(task, TaskStatus.FAILED, "interrupted")
        await self._async_tell(task, text)

    async def _async_missed(self, task: Task, now: float) -> None:
        """Beyond the grace window: the maker is told; a repeat goes on."""
        assert task.fire_at is not None  # noqa: S101 - only timed tasks are missed
        texts = await self._async_texts(task)
        due = when_text(texts, task.fire_at, now)
        what = (
            f'"{task.message}"'
            if task.message
            else summary_line(self.hass, task, texts)
        )
        lines = [texts("task_missed", what=what, time=due)]
        if task.repeat != Repeat.NONE and task.kind != TaskKind.WATCH:
            upcoming = self._next(task, now)
            updated = await self.database.async_run(
                lambda conn: store.reschedule(
                    conn, task.id, fire_at=upcoming, now=now, outcome="missed"
                )
            )
            if updated is not None:
                self._keep(updated)
            lines.append(texts("task_next_due", time=when_text(texts, upcoming, now)))
        else:
            await self._async_settle(task, TaskStatus.MISSED, "missed")
        lines.append(made_text(task, texts, group=_is_group(task)))
        await self._async_tell(task, "\n".join(lines))
        self._event(task, "missed", late=True)

    def _next(self, task: Task, after: float) -> float:
        clock = dt_time.fromisoformat(task.clock or "00:00:00")
        previous = dt_util.as_local(dt_util.utc_from_timestamp(task.fire_at or after))
        return next_occurrence(
            Repeat(task.repeat),
            clock,
            previous,
            dt_util.as_local(dt_util.utc_from_timestamp(after)),
        ).timestamp()

    async def _async_settle(self, task: Task, status: str, outcome: str) -> None:
        settled = await self.database.async_run(
            lambda conn: store.set_status(
                conn, task.id, status=status, now=time.time(), outcome=outcome
            )
        )
        if settled is not None:
            self._keep(settled)
        else:
            self.tasks.pop(task.id, None)
            self._disarm(task.id)
            self._notify()

    # ------------------------------------------------------------ firing

    async def _async_fire(
        self, task_id: int, *, trigger: str = "time", late: bool = False
    ) -> None:
        """Fire a task once: claim it, judge and run it, store how it went."""
        task = self.tasks.get(task_id)
        if task is None or task_id in self._firing:
            # Settled, or a second trigger while it fires.
            return
        if trigger == "hold" and not self._still_holds(task):
            if (armed := self._armed.get(task_id)) is None or armed.entity_id is None:
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
            self.tasks[task_id] = claimed
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
            armed = _Armed(retry_trigger=trigger)
            self._armed[task_id] = armed
            self._at(armed, task_id, Due.RETRY, now + RETRY_DELAY.total_seconds())
            return None
        return claimed

    def _still_holds(self, task: Task) -> bool:
        """Tell whether a watch's condition holds now (its hold timer came)."""
        state = self.hass.states.get(task.entity_id or "")
        if state is None:
            return False
        armed = self._armed.get(task.id)
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
        upcoming = self._next(task, max(now, task.fire_at or now)) if repeats else None
        if firing.fired and announce:
            self._event(task, firing.outcome, late=late)
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
            self._unsubs.append(
                self._timer(
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
        texts = await self._async_texts(task)
        if task.kind == TaskKind.WATCH:
            entity_id = task.entity_id or ""
            state = self.hass.states.get(entity_id)
            if state is None or not is_visible(self.hass, entity_id):
                await self._async_tell(task, self._gone_text(task, texts))
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
        footer = made_text(task, texts, group=_is_group(task))
        if not task.action:
            await self._async_tell(task, "\n".join([*header, footer]))
            return Firing(TaskStatus.DONE, "told")
        return await self._async_act(task, texts, header, footer)

    async def _async_brief(self, task: Task, texts: Texts) -> Firing:
        """Send a briefing (tasks/briefing.py writes it)."""
        if self.briefer is None:
            return Firing(TaskStatus.FAILED, "no briefer")
        text, _by_model = await self.briefer.async_write(
            task, texts, list(self.tasks.values())
        )
        await self._async_tell(task, text)
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

    async def _async_act(
        self, task: Task, texts: Texts, header: list[str], footer: str
    ) -> Firing:
        """Judge the action now, as its maker, and run it, ask, or refuse."""
        assert task.action is not None  # noqa: S101 - checked by the caller
        may_act, ha_user_id = await self._maker(task)
        if not may_act:
            refused = texts("task_maker_may_not_act", task=task.id)
            await self._async_tell(task, *header, refused, footer)
            return Firing(TaskStatus.FAILED, "maker may no longer act")
        domain, service, data = action_call(task.action)
        verdict = evaluate_call(self.hass, domain, service, data, policy=self.policy)
        name = f"{domain}.{service}"
        if verdict.decision is Decision.BLOCK:
            await self._async_audit(task, verdict, name, ha_user_id, "refused")
            refused = texts(
                "task_action_refused",
                task=task.id,
                reason=one_line(verdict.reason, 200),
            )
            await self._async_tell(task, *header, refused, footer)
            return Firing(TaskStatus.FAILED, "refused")
        if verdict.decision is Decision.CONFIRM:
            return await self._async_ask(task, verdict, header, footer, ha_user_id)
        summary = await async_summarize(self.hass, verdict.calls, texts)
        try:
            await async_run_calls(self.hass, verdict.calls, ha_user_id, task.owner)
        except ToolError as err:
            await self._async_audit(task, verdict, name, ha_user_id, "failed")
            failed = texts("failed", summary=summary, error=one_line(str(err), 300))
            await self._async_tell(task, *header, failed, footer)
            return Firing(TaskStatus.FAILED, "failed")
        await self._async_audit(task, verdict, name, ha_user_id, "executed")
        await self._async_tell(task, *header, texts("done", summary=summary), footer)
        return Firing(TaskStatus.DONE, "done")

    async def _async_ask(
        self,
        task: Task,
        verdict: Verdict,
        header: list[str],
        footer: str,
        ha_user_id: str | None,
    ) -> Firing:
        """Ask the maker to confirm a restricted action: it never runs unattended."""
        texts = await self._async_texts(task)
        gateway = self.gateway
        if gateway is None or task.bot_entry_id is None or task.chat_id is None:
            refused = texts("task_needs_telegram", task=task.id)
            await self._async_tell(task, *header, refused, footer)
            return Firing(TaskStatus.FAILED, "needs a confirmation")
        due = texts("task_due_confirm", task=task.id)
        await self._async_tell(task, *header, due, footer)
        await gateway.async_request_confirmation(
            bot_entry_id=task.bot_entry_id,
            chat_id=task.chat_id,
            person=task.owner,
            ha_user_id=ha_user_id,
            proposals=[verdict],
            language=texts.language,
        )
        return Firing(TaskStatus.DONE, "asked to confirm")

    async def _maker(self, task: Task) -> tuple[bool, str | None]:
        """Tell whether the maker may still act, and as which HA user (now)."""
        telegram_id = _telegram_user(task.owner)
        if telegram_id is not None:
            gateway = self.gateway
            if gateway is None:
                return False, None
            if gateway.allowed_user_ids and telegram_id not in gateway.allowed_user_ids:
                return False, None
            known = is_known(
                self.hass,
                bot_entry_id=task.bot_entry_id or "",
                user_id=telegram_id,
                allowed_user_ids=gateway.allowed_user_ids,
                user_mapping=gateway.user_mapping,
            )
            return known, gateway.user_mapping.get(str(telegram_id)) or None
        if task.owner.startswith("ha:"):
            user_id = task.owner.removeprefix("ha:")
            user = await self.hass.auth.async_get_user(user_id)
            return bool(user is not None and user.is_active), user_id
        # A voice satellite without a user acts as the integration's own user.
        return True, None

    async def _async_audit(
        self,
        task: Task,
        verdict: Verdict,
        name: str,
        ha_user_id: str | None,
        outcome: str,
    ) -> None:
        row = AuditRow(
            ts=time.time(),
            telegram_user=task.owner,
            chat_id=task.chat_id,
            ha_user_id=ha_user_id,
            entities=verdict.targets,
            service=name,
            policy=str(verdict.decision),
            confirmation="scheduled",
            outcome=outcome,
        )
        try:
            await self.database.async_run(lambda conn: add_audit(conn, row))
        except sqlite3.Error as err:
            LOGGER.warning("Could not write the action audit log: %s", err)

    def _gone_text(self, task: Task, texts: Texts) -> str:
        if task.message:
            ended = texts("task_gone_message", task=task.id, message=task.message)
        else:
            ended = texts("task_gone", task=task.id)
        return ended + "\n" + made_text(task, texts, group=_is_group(task))

    async def _async_end_pending(
        self, task_id: int, status: str, outcome: str
    ) -> Task | None:
        """Settle a still-pending task; return it as it was, None if it was not."""
        task = self.tasks.get(task_id)
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

    async def _async_fail_watch(self, task_id: int) -> None:
        task = await self._async_end_pending(
            task_id, TaskStatus.FAILED, "entity gone or hidden"
        )
        if task is None:
            return
        texts = await self._async_texts(task)
        await self._async_tell(task, self._gone_text(task, texts))
        self._event(task, "failed", late=False)

    async def _async_give_up(self, task_id: int) -> None:
        """End a watch at its time limit, and tell its maker."""
        task = await self._async_end_pending(
            task_id, TaskStatus.EXPIRED, "time limit reached"
        )
        if task is None:
            return
        texts = await self._async_texts(task)
        watched = watch_text(self.hass, task, texts)
        stopped = (
            texts("task_watch_ended", watch=watched, time=when_text(texts, task.until))
            if task.until is not None
            else texts("task_watch_ended_limit", watch=watched)
        )
        await self._async_tell(
            task, stopped, made_text(task, texts, group=_is_group(task))
        )

    async def _async_expire_suspended(self, task_id: int) -> None:
        task = self.tasks.get(task_id)
        if task is None or task.status != TaskStatus.SUSPENDED:
            return
        await self._async_settle(task, TaskStatus.EXPIRED, "never confirmed")

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

    # ------------------------------------------------------------ telling

    async def _async_texts(self, task: Task) -> Texts:
        """Return the maker's texts: their Telegram language now, else the task's.

        A task keeps the language its maker read when it was made; HA's
        language when neither is known.
        """
        language = task.language
        telegram_id = _telegram_user(task.owner)
        if self.gateway is not None and telegram_id is not None:
            language = self.gateway.language_of(telegram_id) or language
        return await async_texts(self.hass, language)

    async def _async_tell(self, task: Task, *lines: str) -> None:
        """Tell the maker, in the chat the task was made in."""
        text = "\n".join(lines)
        if (
            self.gateway is not None
            and task.bot_entry_id is not None
            and task.chat_id is not None
        ):
            await self.gateway.async_send_text(task.bot_entry_id, task.chat_id, text)
            return
        # Made through Assist: a notification in Home Assistant.
        persistent_notification.async_create(
            self.hass,
            text,
            title="Personal Assistant",
            notification_id=f"{DOMAIN}_task_{task.id}_{task.fired_count}",
        )

    @callback
    def _event(self, task: Task, outcome: str, *, late: bool) -> None:
        outcome = outcome if outcome in EVENT_OUTCOMES else "failed"
        domain, service, data = (
            action_call(task.action) if task.action else ("", "", {})
        )
        self.hass.bus.async_fire(
            EVENT_TASK_FIRED,
            {
                "task_id": task.id,
                "kind": task.kind,
                "owner": task.owner,
                "message": task.message,
                "entity_id": task.entity_id,
                "action": f"{domain}.{service}" if task.action else None,
                "entity_ids": data.get("entity_id", []),
                "repeat": task.repeat,
                "outcome": outcome,
                "late": late,
            },
            context=Context(),
        )
