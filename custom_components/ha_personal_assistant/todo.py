"""The assistant's tasks as a to-do list in Home Assistant: visible, removable.

Removing an item cancels its task, for the person who made it (their own HA
user, or the one their Telegram account is mapped to) or an administrator.
The list is not exposed to Assist by default: it holds everyone's reminders.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, override

from homeassistant.components.homeassistant.exposed_entities import (
    async_expose_entity,
    async_listen_entity_updates,
)
from homeassistant.components.todo.const import TodoItemStatus, TodoListEntityFeature
from homeassistant.components.todo.entity import TodoItem, TodoListEntity
from homeassistant.core import Context, callback
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers.entity import Entity

from .const import DOMAIN
from .entity import PersonalAssistantEntity
from .i18n import Texts, async_texts
from .security.permissions import ASSISTANT
from .tasks.describe import action_text, local, repeat_text, task_icon, watch_text
from .tasks.manager import TaskRefusedError
from .tasks.store import TaskKind, TaskStatus

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant
    from homeassistant.helpers.entity_platform import AddConfigEntryEntitiesCallback

    from .data import PersonalAssistantConfigEntry
    from .tasks.manager import TaskManager
    from .tasks.store import Task

PARALLEL_UPDATES: Final = 0


async def async_setup_entry(
    hass: HomeAssistant,  # noqa: ARG001
    entry: PersonalAssistantConfigEntry,
    async_add_entities: AddConfigEntryEntitiesCallback,
) -> None:
    """Add the entry's "Tasks" list (shown as "Personal Assistant Tasks")."""
    if entry.runtime_data.tasks is not None:
        async_add_entities([AssistantTasks(entry, entry.runtime_data.tasks)])


class AssistantTasks(PersonalAssistantEntity, TodoListEntity):
    """Every open reminder, timer and watch, with its due time."""

    _attr_translation_key = "tasks"
    _attr_supported_features = TodoListEntityFeature.DELETE_TODO_ITEM

    def __init__(
        self, entry: PersonalAssistantConfigEntry, manager: TaskManager
    ) -> None:
        """Show ``manager``'s tasks."""
        super().__init__(entry, "tasks")
        self.manager = manager
        # Each open task's item, kept while the task does not change.
        self._cache: dict[int, tuple[tuple[float, str], TodoItem]] = {}
        # The items as last described; None once the tasks changed since.
        self._items_now: list[TodoItem] | None = None
        # The list holds everyone's tasks: it reads in Home Assistant's language.
        self._texts = Texts()

    @override
    async def async_added_to_hass(self) -> None:
        """Follow the tasks; keep the list away from Assist unless chosen."""
        await super().async_added_to_hass()
        self._texts = await async_texts(self.hass)
        self.async_on_remove(self.manager.async_add_listener(self._async_changed))
        # An item names only entities the assistant may see: described
        # again when what it may see changes.
        self.async_on_remove(
            async_listen_entity_updates(self.hass, ASSISTANT, self._async_exposure)
        )
        registry = er.async_get(self.hass)
        entry = registry.async_get(self.entity_id)
        if entry is not None and "should_expose" not in entry.options.get(
            ASSISTANT, {}
        ):
            # To-do lists are exposed to Assist by default; this one holds
            # everyone's reminders, so the model must not read it.
            async_expose_entity(self.hass, ASSISTANT, self.entity_id, False)  # noqa: FBT003

    @property
    @override
    def todo_items(self) -> list[TodoItem]:
        """Return the open tasks as to-do items, described when first read.

        Described once per change of the tasks, and only when something reads
        them: at start, 1,000 tasks are armed without describing 1,000 items
        nobody may look at (about 6 ms of the event loop).
        """
        if self._items_now is None:
            self._items_now = self._items()
        return self._items_now

    @property
    @override
    def state(self) -> int:
        """Return how many items need doing: one per open task, all of them."""
        return len(self.manager.tasks)

    @callback
    @override
    def _async_write_ha_state(self) -> None:
        # TodoListEntity's own attributes: if a release renames them, the
        # items are simply sent at every change again, as HA does.
        if getattr(self, "_update_listeners", True) or not hasattr(
            self, "_last_broadcast_items"
        ):
            # Followed (the to-do card, a to-do trigger): sent the new items.
            super()._async_write_ha_state()
            return
        # Followed by no one: the state (the count) is written, the items wait
        # for a reader. What was last sent is forgotten, so the next follower
        # is sent the items at the next change even if they equal it.
        Entity._async_write_ha_state(self)  # noqa: SLF001 - skips only the sending
        self._last_broadcast_items = None

    @callback
    def _async_exposure(self) -> None:
        self._cache.clear()
        self._async_changed()

    @callback
    def _async_changed(self) -> None:
        # Described again at the next read, not at every change.
        self._items_now = None
        self.async_write_ha_state()

    def _items(self) -> list[TodoItem]:
        """Return the open tasks as to-do items, soonest first."""
        tasks = sorted(
            self.manager.tasks.values(),
            key=lambda t: (t.fire_at if t.fire_at is not None else float("inf"), t.id),
        )
        cache: dict[int, tuple[tuple[float, str], TodoItem]] = {}
        items = []
        for task in tasks:
            key = (task.updated_at, task.status)
            cached = self._cache.get(task.id)
            item = cached[1] if cached is not None and cached[0] == key else None
            if item is None:
                item = self._item(task)
            cache[task.id] = (key, item)
            items.append(item)
        # Only a changed task is described again.
        self._cache = cache
        return items

    def _item(self, task: Task) -> TodoItem:
        hass = self.hass
        texts = self._texts
        details: list[str] = []
        action = action_text(hass, task.action, texts)
        if task.kind == TaskKind.WATCH:
            what = texts("todo_when", watch=watch_text(hass, task, texts))
            summary = task.message or what
            if task.message:
                details.append(what)
            due = task.fire_at if task.fire_at is not None else task.until
        else:
            summary = task.message or action or texts("todo_reminder")
            if task.kind == TaskKind.BRIEFING:
                summary = texts("briefing_task", time=(task.clock or "")[:5])
            due = task.fire_at
            if repeat := repeat_text(texts, task.repeat):
                details.append(texts("todo_repeats", repeat=repeat))
        if action is not None and task.message:
            details.append(texts("todo_then", action=action))
        details.append(texts("todo_made_by", name=task.owner_name or task.owner))
        if task.status == TaskStatus.SUSPENDED:
            details.append(texts("todo_waiting"))
        return TodoItem(
            summary=f"{task_icon(task)} {summary}",
            uid=str(task.id),
            status=TodoItemStatus.NEEDS_ACTION,
            due=local(due) if due is not None else None,
            description=". ".join(details),
        )

    @override
    async def async_delete_todo_items(self, uids: list[str]) -> None:
        """Cancel the removed tasks (their maker's HA user, or an admin)."""
        try:
            await self.manager.async_cancel_from_ha(uids, self._context_user())
        except TaskRefusedError as err:
            raise HomeAssistantError(
                translation_domain=DOMAIN, translation_key="task_not_yours"
            ) from err

    def _context_user(self) -> Context:
        return self._context or Context()
