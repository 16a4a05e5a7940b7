"""Watches on entity states: one state subscription per watched entity.

Every watched entity has one ``async_track_state_change_event``
subscription, shared by its watches, which are grouped by what they wait
for. An exposure change re-checks the watches once. A watch that must hold
"for N minutes" waits for its hold on the timeline.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from homeassistant.components.homeassistant.exposed_entities import (
    async_should_expose,
)
from homeassistant.core import callback
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers.event import async_track_state_change_event

from ..const import LOGGER
from ..policy.visibility import ASSISTANT, is_visible
from .store import Task, TaskKind, TaskStatus
from .timeline import Armed, Due, Timeline
from .when import Condition, WhenError, parse_condition

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from datetime import datetime

    from homeassistant.core import (
        CALLBACK_TYPE,
        Event,
        EventStateChangedData,
        HomeAssistant,
        State,
    )


def _key(condition: Condition) -> str:
    """Return what a condition waits for, as a key (equal conditions, one key)."""
    return f"{condition.compare}|{condition.value}|{condition.number}"


class Watches:
    """Listens to the watched entities and fires the watches they meet."""

    def __init__(
        self,
        hass: HomeAssistant,
        *,
        tasks: Mapping[int, Task],
        timeline: Timeline,
        on_fire: Callable[[int, str], None],
        on_gone: Callable[[int], None],
    ) -> None:
        """Read the open ``tasks``; fire through ``on_fire(task_id, trigger)``.

        ``on_gone(task_id)`` ends a watch whose entity was removed or hidden.
        """
        self.hass = hass
        self._tasks = tasks
        self._timeline = timeline
        self._on_fire = on_fire
        self._on_gone = on_gone
        # Watched entities: one state subscription each, for all its watches,
        # which are grouped by what they wait for (condition key: the
        # condition and the tasks waiting for it).
        self._watchers: dict[str, dict[str, tuple[Condition, set[int]]]] = {}
        self._entity_unsubs: dict[str, CALLBACK_TYPE] = {}

    @callback
    def arm(self, task: Task, armed: Armed) -> None:
        """Listen for a pending watch: its entity, time limit and hold."""
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
            self._timeline.at(armed, task.id, Due.LIMIT, task.until)
        if (
            task.for_minutes
            and (state := self.hass.states.get(entity_id)) is not None
            and armed.condition.matches(state.state)
        ):
            self._hold(task, armed, state.last_changed)

    @callback
    def clear(self) -> None:
        """Stop listening to every entity."""
        for unsub in self._entity_unsubs.values():
            unsub()
        self._entity_unsubs.clear()
        self._watchers.clear()

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
    def unwatch(
        self, entity_id: str, condition: Condition | None, task_id: int
    ) -> None:
        """Stop a watch listening; the entity's subscription ends with its last."""
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
    def _hold(self, task: Task, armed: Armed, since: datetime) -> None:
        """Fire once the condition has held ``for_minutes`` since ``since``."""
        if Due.HOLD in armed.tokens:
            return
        due = since.timestamp() + 60.0 * float(task.for_minutes or 0)
        self._timeline.at(armed, task.id, Due.HOLD, max(due, time.time()))

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
        armed_of, tasks = self._timeline.armed, self._tasks
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
        armed: Armed,
        condition: Condition,
        new: State | None,
        old: State | None,
    ) -> None:
        if new is None:
            if self.gone(task.entity_id or ""):
                self._on_gone(task.id)
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
        self._on_fire(task.id, "state")

    @callback
    def async_exposure(self) -> None:
        """Fail the watches on entities hidden since (an exposure changed)."""
        for task in list(self._tasks.values()):
            if (
                task.kind == TaskKind.WATCH
                and task.status == TaskStatus.PENDING
                and self.unwatchable(task.entity_id or "")
            ):
                self._on_gone(task.id)

    def unwatchable(self, entity_id: str, *, thorough: bool = True) -> bool:
        """Tell whether a watched entity was removed or is hidden from the assistant.

        One that is registered but not set up yet (Home Assistant is starting,
        or its integration reloads) only needs to stay exposed. Not
        ``thorough`` (at start, for many watches at once), a group's members
        are not walked: the firing checks them.
        """
        if self.gone(entity_id):
            return True
        if not thorough or self.hass.states.get(entity_id) is None:
            return not async_should_expose(self.hass, ASSISTANT, entity_id)
        return not is_visible(self.hass, entity_id)

    def gone(self, entity_id: str) -> bool:
        """Tell whether an entity was removed (not merely reloading)."""
        return (
            self.hass.states.get(entity_id) is None
            and er.async_get(self.hass).async_get(entity_id) is None
        )
