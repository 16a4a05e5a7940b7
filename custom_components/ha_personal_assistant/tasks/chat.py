"""/tasks in Telegram: the sender's tasks, each with a Cancel button.

Answered by the integration, never by the model. The buttons carry
``/taskcancel_<id>``; a press is obeyed only from the task's maker or an
admin, and only from someone the assistant knows.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

from ..security.people import NOT_KNOWN_DECISION
from .describe import summary_line, task_icon
from .manager import TaskRefusedError

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant

    from .manager import TaskManager

CMD_TASKS: Final = "/tasks"
CMD_TASK_CANCEL: Final = "/taskcancel"
# Telegram allows 100 buttons per message; a person has at most 20 tasks.
MAX_LISTED: Final = 50
NO_TASKS: Final = (
    'You have no reminders, timers or watches. Ask me, e.g. "remind me at 19:00 '
    'to put out the bins" or "tell me when the washing machine is done".'
)

type Keyboard = list[list[list[str]]]


async def async_listing(
    hass: HomeAssistant,
    manager: TaskManager | None,
    *,
    person: str,
    ha_user_id: str | None,
    everyone: bool = False,
) -> tuple[str, Keyboard]:
    """Return the /tasks text and its Cancel buttons (``everyone``: admins only)."""
    if manager is None:
        return NO_TASKS, []
    manager = manager.current
    admin = everyone and await manager.async_is_admin(person, ha_user_id)
    tasks = manager.open_tasks(None if admin else person)
    if not tasks:
        return NO_TASKS, []
    now = time.time()
    lines = ["Everyone's tasks:" if admin else "Your tasks:"]
    keyboard: Keyboard = []
    for task in tasks[:MAX_LISTED]:
        who = f" ({task.owner_name or task.owner})" if admin else ""
        lines.append(
            f"{task_icon(task)} #{task.id}{who} {summary_line(hass, task, now)}"
        )
        keyboard.append([[f"Cancel #{task.id}", f"{CMD_TASK_CANCEL}_{task.id}"]])
    if len(tasks) > MAX_LISTED:
        lines.append(f"and {len(tasks) - MAX_LISTED} more")
    return "\n".join(lines), keyboard


async def async_cancel_press(
    manager: TaskManager | None,
    token: str,
    *,
    person: str,
    ha_user_id: str | None,
    may_act: bool,
) -> str:
    """Cancel the task a button names; return what the press answers."""
    if not may_act:
        return NOT_KNOWN_DECISION
    if manager is None or not token.isdigit():
        return "This task is no longer open."
    try:
        task = await manager.current.async_cancel(
            int(token), person=person, ha_user_id=ha_user_id
        )
    except TaskRefusedError:
        return "This task is no longer open, or it is not yours to cancel."
    return f"Cancelled task {task.id}."
