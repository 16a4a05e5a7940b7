"""How tasks read: in /tasks, in list_tasks, in the HA to-do list and when they fire.

Every text here is written by the integration from the stored task, in the
reader's language (``Texts``; the model reads the English ones). The only
words the model wrote are the task's ``message``, shown as the person's
reminder, on bounded lines. An entity the assistant can no longer see is
never named (the same words for hidden and removed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from homeassistant.const import ATTR_ENTITY_ID
from homeassistant.util import dt as dt_util

from ..policy.verdict import ResolvedCall
from ..policy.visibility import is_visible
from ..security.confirm_text import describe_call, entity_label, one_line
from .store import Task, TaskKind, TaskStatus
from .when import Compare, Condition, Repeat, WhenError, parse_condition

if TYPE_CHECKING:
    from datetime import datetime

    from homeassistant.core import HomeAssistant

    from ..i18n import Texts

MAX_MESSAGE_CHARS: Final = 500
MAX_LINE_CHARS: Final = 120
# Text keys of the repeats, as the person reads them.
REPEAT_KEYS: Final = {
    Repeat.DAILY: "task_repeat_daily",
    Repeat.WEEKDAYS: "task_repeat_weekdays",
    Repeat.WEEKLY: "task_repeat_weekly",
}
_COMPARE_KEYS: Final = {
    Compare.ABOVE: "task_state_above",
    Compare.BELOW: "task_state_below",
    Compare.NOT_EQUAL: "task_state_not",
}
_WEEKDAYS: Final = 7
_MONTHS: Final = 12


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


def day_text(texts: Texts, moment: datetime) -> str:
    """Say a day briefly in the reader's language, e.g. "Fri 28 Mar"."""
    weekdays = texts("task_weekdays").split()
    months = texts("task_months").split()
    if len(weekdays) != _WEEKDAYS or len(months) != _MONTHS:
        # No texts loaded (a unit test without Home Assistant).
        return f"{moment:%Y-%m-%d}"
    return texts(
        "task_day",
        weekday=weekdays[moment.weekday()],
        day=moment.day,
        month=months[moment.month - 1],
    )


def when_text(texts: Texts, timestamp: float, now: float | None = None) -> str:
    """Say a time briefly: "19:00" today, else "Fri 28 Mar 19:00"."""
    moment = local(timestamp)
    today = local(now).date() if now is not None else dt_util.now().date()
    if moment.date() == today:
        return f"{moment:%H:%M}"
    return texts("task_day_time", day=day_text(texts, moment), time=f"{moment:%H:%M}")


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


def action_text(
    hass: HomeAssistant,
    action: dict[str, Any] | None,
    texts: Texts,
    *,
    for_model: bool = False,
) -> str | None:
    """Describe an action on one line, from HA's names (hidden ones not named).

    ``for_model``: names a device chose are left out (security/names.py).
    """
    if not action:
        return None
    domain, service, data = action_call(action)
    entities = tuple(data.pop(ATTR_ENTITY_ID, []))
    if any(not is_visible(hass, entity_id) for entity_id in entities):
        return texts("task_action_gone", service=service.replace("_", " "))
    first = describe_call(
        hass,
        ResolvedCall(domain, service, entities, data),
        texts,
        for_model=for_model,
    )
    return one_line(first.split("\n", 1)[0], MAX_LINE_CHARS)


def condition_text(texts: Texts, condition: Condition) -> str:
    """Say what a watch waits for ("above 25", "no longer on")."""
    if (key := _COMPARE_KEYS.get(condition.compare)) is None:
        return condition.value
    return texts(key, value=condition.value)


def watch_text(
    hass: HomeAssistant, task: Task, texts: Texts, *, for_model: bool = False
) -> str:
    """Describe what a watch waits for, e.g. "Garage Door is open for 10 min"."""
    entity_id = task.entity_id or ""
    name = (
        entity_label(hass, entity_id, for_model=for_model)
        if is_visible(hass, entity_id)
        else texts("task_gone_device")
    )
    try:
        condition = parse_condition(task.condition or "", entity_id.partition(".")[0])
        wanted = condition_text(texts, condition)
    except WhenError:
        wanted = one_line(task.condition, 40)
    if task.for_minutes:
        return texts(
            "task_watch_for", name=name, state=wanted, minutes=f"{task.for_minutes:g}"
        )
    return texts("task_watch", name=name, state=wanted)


def repeat_text(texts: Texts, repeat: str) -> str:
    """Say how a task repeats ("every day"); empty when it does not."""
    try:
        key = REPEAT_KEYS.get(Repeat(repeat))
    except ValueError:
        return ""
    return texts(key) if key is not None else ""


def summary_line(
    hass: HomeAssistant, task: Task, texts: Texts, now: float | None = None
) -> str:
    """Describe a task on one line, as /tasks and the Confirm message show it."""
    parts: list[str] = []
    if task.kind == TaskKind.WATCH:
        watched = watch_text(hass, task, texts)
        if task.fire_at is not None:
            at = when_text(texts, task.fire_at, now)
            parts.append(texts("task_summary_check", time=at, watch=watched))
        else:
            parts.append(texts("task_summary_when", watch=watched))
            if task.until is not None:
                until = when_text(texts, task.until, now)
                parts.append(texts("task_summary_until", time=until))
    elif task.kind == TaskKind.BRIEFING:
        parts.append(texts("briefing_task", time=(task.clock or "")[:5]))
    elif task.fire_at is not None:
        moment = when_text(texts, task.fire_at, now)
        repeat = repeat_text(texts, task.repeat)
        parts.append(
            texts("task_summary_repeat", time=moment, repeat=repeat)
            if repeat
            else moment
        )
    if task.message:
        parts.append(f'"{one_line(task.message, 80)}"')
    if (action := action_text(hass, task.action, texts)) is not None:
        parts.append(
            texts("task_summary_then", action=action) if task.message else action
        )
    if task.status == TaskStatus.SUSPENDED:
        parts.append(texts("task_summary_waiting"))
    return one_line(" ".join(parts), 2 * MAX_LINE_CHARS)


def task_icon(task: Task) -> str:
    """Return the mark a task's line starts with."""
    if task.kind == TaskKind.WATCH:
        return "👀"
    if task.kind == TaskKind.BRIEFING:
        return "📰"
    return "🔁" if task.repeat != Repeat.NONE else "⏰"


def made_text(task: Task, texts: Texts, *, group: bool) -> str:
    """Say when, and in a group by whom, a task was made."""
    made = local(task.created_at)
    day = day_text(texts, made)
    time = f"{made:%H:%M}"
    if group and task.owner_name:
        name = one_line(task.owner_name, 40)
        return texts("task_made_by", task=task.id, name=name, day=day, time=time)
    return texts("task_made", task=task.id, day=day, time=time)


def model_view(hass: HomeAssistant, task: Task, english: Texts) -> dict[str, Any]:
    """Describe a task for the model (list_tasks), in ``english`` texts."""
    info: dict[str, Any] = {"task_id": task.id, "kind": task.kind}
    if task.kind == TaskKind.WATCH:
        info["watch"] = watch_text(hass, task, english, for_model=True)
        if task.fire_at is not None:
            info["checks_at"] = f"{local(task.fire_at):%Y-%m-%d %H:%M}"
        if task.until is not None:
            info["until"] = f"{local(task.until):%Y-%m-%d %H:%M}"
    elif task.fire_at is not None:
        info["at"] = f"{local(task.fire_at):%Y-%m-%d %H:%M}"
        info["repeat"] = task.repeat
    if task.message:
        info["message"] = task.message
    if (action := action_text(hass, task.action, english, for_model=True)) is not None:
        info["action"] = action
    if task.status == TaskStatus.SUSPENDED:
        info["status"] = "waiting for the user's Confirm"
    return info
