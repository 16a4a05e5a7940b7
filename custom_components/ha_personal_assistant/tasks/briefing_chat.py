"""/briefing in Telegram: a person's daily briefing, stored as one of their tasks.

``/briefing 07:30`` sets it (replacing the person's earlier one), ``/briefing
off`` ends it, ``/briefing`` alone says when it comes. Answered by the
integration, never by the model; only people the assistant knows get one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from homeassistant.util import dt as dt_util

from .manager import TaskRefusedError
from .store import NewTask, TaskKind
from .when import Repeat, WhenError, parse_at

if TYPE_CHECKING:
    from ..i18n import Texts
    from .manager import TaskManager
    from .store import Task

CMD_BRIEFING: Final = "/briefing"
OFF_WORDS: Final = frozenset({"off", "stop", "cancel", "0"})


@dataclass(frozen=True, slots=True)
class Asker:
    """Who sent /briefing, and from where."""

    person: str
    name: str | None
    ha_user_id: str | None
    conversation_key: str
    bot_entry_id: str
    chat_id: int
    language: str


def briefings(manager: TaskManager, person: str) -> list[Task]:
    """Return the person's open briefing tasks."""
    return [t for t in manager.open_tasks(person) if t.kind == TaskKind.BRIEFING]


async def async_briefing_command(
    manager: TaskManager | None, texts: Texts, asker: Asker, argument: str
) -> str:
    """Set, end or show the asker's daily briefing; return the reply."""
    if manager is None:
        return texts("briefing_usage")
    argument = argument.strip().lower()
    current = briefings(manager, asker.person)
    if argument in OFF_WORDS:
        if not current:
            return texts("briefing_none")
        await _async_cancel(manager, current, asker)
        return texts("briefing_off")
    if not argument:
        if not current:
            return texts("briefing_usage")
        return texts("briefing_is_set", time=(current[0].clock or "")[:5])
    return await _async_set(manager, texts, asker, argument, current)


async def _async_set(
    manager: TaskManager,
    texts: Texts,
    asker: Asker,
    argument: str,
    current: list[Task],
) -> str:
    """Store the asker's briefing at the time ``argument`` names."""
    try:
        when = parse_at(argument, dt_util.now())
    except WhenError:
        when = None
    if when is None or when.clock is None:
        # Unreadable, or a delay ("20m"): no time of day.
        return texts("briefing_usage")
    clock = when.clock.replace(second=0, microsecond=0, tzinfo=None)
    new = NewTask(
        kind=TaskKind.BRIEFING,
        owner=asker.person,
        owner_name=asker.name,
        ha_user_id=asker.ha_user_id,
        conversation_key=asker.conversation_key,
        bot_entry_id=asker.bot_entry_id,
        chat_id=asker.chat_id,
        message=None,
        action=None,
        fire_at=when.at.timestamp(),
        repeat=str(Repeat.DAILY),
        clock=clock.isoformat(),
        language=asker.language,
    )
    try:
        await manager.async_create(new, suspended=False)
    except TaskRefusedError:
        return texts("briefing_too_many")
    # One briefing a person: the new one replaces the old.
    await _async_cancel(manager, current, asker)
    return texts("briefing_set", time=f"{clock:%H:%M}")


async def _async_cancel(manager: TaskManager, tasks: list[Task], asker: Asker) -> None:
    for task in tasks:
        try:
            await manager.async_cancel(
                task.id, person=asker.person, ha_user_id=asker.ha_user_id
            )
        except TaskRefusedError:
            # Settled meanwhile: nothing left to cancel.
            continue
