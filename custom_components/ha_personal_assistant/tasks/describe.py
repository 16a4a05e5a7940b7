"""How tasks read: in /tasks, in list_tasks, in the HA to-do list and when they fire.

Every text here is written by the integration from the stored task. The only
words the model wrote are the task's ``message``, shown as the person's
reminder, on bounded lines. An entity the assistant can no longer see is
never named (the same words for hidden and removed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from homeassistant.const import ATTR_ENTITY_ID
from homeassistant.util import dt as dt_util

from ..security.confirmations import describe_call, entity_label, one_line
from ..security.permissions import ResolvedCall, is_visible
from .store import Task, TaskKind, TaskStatus
from .when import Repeat, WhenError, parse_condition

if TYPE_CHECKING:
    from datetime import datetime

    from homeassistant.core import HomeAssistant

MAX_MESSAGE_CHARS: Final = 500
MAX_LINE_CHARS: Final = 120
GONE: Final = "a device the assistant can no longer see"
REPEAT_WORDS: Final = {
    Repeat.DAILY: "every day",
    Repeat.WEEKDAYS: "every weekday",
    Repeat.WEEKLY: "every week",
}


def clean_message(text: str | None) -> str | None:
    """Keep a reminder's text as lines of plain text, bounded."""
    if text is None:
        return None
    lines = [one_line(line, MAX_MESSAGE_CHARS) for line in str(text).splitlines()]
    cleaned = "\n".join(line for line in lines if line).strip()
    if len(cleaned) > MAX_MESSAGE_CHARS:
        cleaned = cleaned[: MAX_MESSAGE_CHARS - 1].rstrip() + "…"
    return cleaned or None


def local(timestamp: float) -> datetime:
    """Return a stored UTC timestamp in the home's time zone."""
    return dt_util.as_local(dt_util.utc_from_timestamp(timestamp))


def when_text(timestamp: float, now: float | None = None) -> str:
    """Say a time briefly: "19:00" today, else "Fri 28 Mar 19:00"."""
    moment = local(timestamp)
    today = local(now).date() if now is not None else dt_util.now().date()
    if moment.date() == today:
        return f"{moment:%H:%M}"
    return f"{moment:%a %d %b %H:%M}"


def action_entities(action: dict[str, Any] | None) -> list[str]:
    """Return the entity ids an action names."""
    if not action:
        return []
    found: list[str] = []
    for value in (action.get("entity_id"), (action.get("data") or {}).get("entity_id")):
        if isinstance(value, str):
            found += [p.strip().lower() for p in value.split(",") if p.strip()]
        elif isinstance(value, (list, tuple)):
            found += [str(p).strip().lower() for p in value if str(p).strip()]
    return list(dict.fromkeys(found))


def action_call(action: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """Return an action's domain, service and service data (targets inside)."""
    domain = str(action.get("domain") or "").strip().lower()
    service = str(action.get("service") or "").strip().lower()
    if "." in service and not domain:
        domain, service = service.split(".", 1)
    data = dict(action.get("data") or {})
    data.pop(ATTR_ENTITY_ID, None)
    if entities := action_entities(action):
        data[ATTR_ENTITY_ID] = entities
    return domain, service, data


def action_text(hass: HomeAssistant, action: dict[str, Any] | None) -> str | None:
    """Describe an action on one line, from HA's names (hidden ones not named)."""
    if not action:
        return None
    domain, service, data = action_call(action)
    entities = tuple(data.pop(ATTR_ENTITY_ID, []))
    if any(not is_visible(hass, entity_id) for entity_id in entities):
        return f"{service.replace('_', ' ')} on {GONE}"
    first = describe_call(hass, ResolvedCall(domain, service, entities, data))
    return one_line(first.split("\n", 1)[0], MAX_LINE_CHARS)


def watch_text(hass: HomeAssistant, task: Task) -> str:
    """Describe what a watch waits for, e.g. "Garage Door is open for 10 min"."""
    entity_id = task.entity_id or ""
    name = entity_label(hass, entity_id) if is_visible(hass, entity_id) else GONE
    try:
        condition = parse_condition(task.condition or "", entity_id.partition(".")[0])
        wanted = condition.describe()
    except WhenError:
        wanted = one_line(task.condition, 40)
    text = f"{name} is {wanted}"
    if task.for_minutes:
        text += f" for {task.for_minutes:g} min"
    return text


def _repeat_text(task: Task) -> str:
    try:
        repeat = Repeat(task.repeat)
    except ValueError:
        return ""
    return REPEAT_WORDS.get(repeat, "")


def summary_line(hass: HomeAssistant, task: Task, now: float | None = None) -> str:
    """Describe a task on one line, as /tasks and the Confirm message show it."""
    parts: list[str] = []
    if task.kind == TaskKind.WATCH:
        if task.fire_at is not None:
            parts.append(
                f"at {when_text(task.fire_at, now)}, if {watch_text(hass, task)}"
            )
        else:
            parts.append(f"when {watch_text(hass, task)}")
            if task.until is not None:
                parts.append(f"until {when_text(task.until, now)}")
    elif task.fire_at is not None:
        moment = when_text(task.fire_at, now)
        repeat = _repeat_text(task)
        parts.append(f"{moment}, then {repeat}" if repeat else moment)
    if task.message:
        parts.append(f'"{one_line(task.message, 80)}"')
    if (action := action_text(hass, task.action)) is not None:
        parts.append(f"then {action}" if task.message else action)
    if task.status == TaskStatus.SUSPENDED:
        parts.append("(waiting for your Confirm)")
    return one_line(" ".join(parts), 2 * MAX_LINE_CHARS)


def task_icon(task: Task) -> str:
    """Return the mark a task's line starts with."""
    if task.kind == TaskKind.WATCH:
        return "👀"
    return "🔁" if task.repeat != Repeat.NONE else "⏰"


def made_text(task: Task, *, group: bool) -> str:
    """Say when, and in a group by whom, a task was made."""
    made = local(task.created_at)
    who = f" by {one_line(task.owner_name, 40)}" if group and task.owner_name else ""
    return f"(task {task.id}, set{who} on {made:%a %d %b} at {made:%H:%M})"


def model_view(hass: HomeAssistant, task: Task) -> dict[str, Any]:
    """Describe a task for the model (list_tasks)."""
    info: dict[str, Any] = {"task_id": task.id, "kind": task.kind}
    if task.kind == TaskKind.WATCH:
        info["watch"] = watch_text(hass, task)
        if task.fire_at is not None:
            info["checks_at"] = f"{local(task.fire_at):%Y-%m-%d %H:%M}"
        if task.until is not None:
            info["until"] = f"{local(task.until):%Y-%m-%d %H:%M}"
    elif task.fire_at is not None:
        info["at"] = f"{local(task.fire_at):%Y-%m-%d %H:%M}"
        info["repeat"] = task.repeat
    if task.message:
        info["message"] = task.message
    if (action := action_text(hass, task.action)) is not None:
        info["action"] = action
    if task.status == TaskStatus.SUSPENDED:
        info["status"] = "waiting for the user's Confirm"
    return info
