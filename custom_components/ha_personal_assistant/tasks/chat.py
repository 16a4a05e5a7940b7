"""/tasks in Telegram: the sender's tasks, each with a Cancel button.

Answered by the integration, never by the model. The buttons carry
``/taskcancel_<id>``; a press is obeyed only from the task's maker or an
admin, and only from someone the assistant knows.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

from .describe import summary_line, task_icon
from .manager import TaskRefusedError

if TYPE_CHECKING:
    from ..i18n import Texts
    from .manager import TaskManager

CMD_TASKS: Final = "/tasks"
CMD_TASK_CANCEL: Final = "/taskcancel"
# Telegram allows 100 buttons per message; a person has at most 20 tasks.
MAX_LISTED: Final = 50

type Keyboard = list[list[list[str]]]


async def async_listing(
    manager: TaskManager | None,
    texts: Texts,
    *,
    person: str,
    ha_user_id: str | None,
    everyone: bool = False,
) -> tuple[str, Keyboard]:
    """Return the /tasks text and its Cancel buttons (``everyone``: admins only)."""
    if manager is None:
        return texts("tasks_none"), []
    admin = everyone and await manager.async_is_admin(person, ha_user_id)
    tasks = manager.open_tasks(None if admin else person)
    if not tasks:
        return texts("tasks_none"), []
    now = time.time()
    lines = [texts("tasks_title_everyone" if admin else "tasks_title")]
    keyboard: Keyboard = []
    for task in tasks[:MAX_LISTED]:
        who = f" ({task.owner_name or task.owner})" if admin else ""
        lines.append(
            f"{task_icon(task)} #{task.id}{who} "
            + summary_line(manager.hass, task, texts, now)
        )
        button = texts("tasks_button_cancel", task=task.id)
        keyboard.append([[button, f"{CMD_TASK_CANCEL}_{task.id}"]])
    if len(tasks) > MAX_LISTED:
        lines.append(texts("and_more", count=len(tasks) - MAX_LISTED))
    return "\n".join(lines), keyboard


async def async_cancel_press(
    manager: TaskManager | None,
    token: str,
    texts: Texts,
    *,
    person: str,
    ha_user_id: str | None,
) -> tuple[bool, str]:
    """Cancel the task a button names; return whether it did, and the answer.

    The gateway lets only people the assistant knows get this far.
    """
    if manager is None or not token.isdigit():
        return False, texts("task_press_gone")
    try:
        task = await manager.async_cancel(
            int(token), person=person, ha_user_id=ha_user_id
        )
    except TaskRefusedError:
        return False, texts("task_press_refused")
    return True, texts("task_cancelled", task=task.id)
