"""The tasks table of the assistant database (schema 9).

Every function takes a connection inside one transaction
(``Database.async_run``). A task fires at most once per occurrence: firing
starts with a conditional UPDATE from pending to running, and only the caller
whose UPDATE changed the row goes on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Sequence


class TaskStatus:
    """Where a task is in its life."""

    # Made while outside text was in the prompt: waits for the maker's Confirm
    # before it is armed; expires with the confirmation request.
    SUSPENDED = "suspended"
    # Armed: waits for its time or its condition.
    PENDING = "pending"
    # Firing right now (claimed); found after a restart, it is not run again.
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    # A watch that reached its time limit, or a suspended task never confirmed.
    EXPIRED = "expired"
    # Its time passed while Home Assistant was down, beyond the grace window.
    MISSED = "missed"


OPEN_STATUSES: Final = (TaskStatus.SUSPENDED, TaskStatus.PENDING, TaskStatus.RUNNING)


class TaskKind:
    """What a task does."""

    SCHEDULE = "schedule"
    WATCH = "watch"
    # A daily briefing (tasks/briefing.py): fires like a repeating schedule.
    BRIEFING = "briefing"


@dataclass(slots=True)
class Task:
    """One reminder, timer or watch, as stored.

    Treated as immutable (a change is a new row read back); not frozen only
    because a frozen dataclass is six times slower to build, and 1,000 are
    read at every start.
    """

    id: int
    kind: str
    status: str
    owner: str
    owner_name: str | None
    ha_user_id: str | None
    conversation_key: str | None
    bot_entry_id: str | None
    chat_id: int | None
    message: str | None
    # call_service's arguments (domain, service, entity_id, data), or None.
    action: dict[str, Any] | None
    # The next time it fires (schedule), or checks once (watch with at).
    fire_at: float | None
    repeat: str
    # The local wall-clock time of a repeating task, "HH:MM:SS".
    clock: str | None
    entity_id: str | None
    # The watch's ``state`` as given (parsed again when armed).
    condition: str | None
    for_minutes: float | None
    # A watch gives up at this time.
    until: float | None
    # Made while outside text was in the prompt (confirmed by the maker).
    tainted: bool
    created_at: float
    updated_at: float
    fired_count: int
    last_fired_at: float | None
    outcome: str | None
    # The language of its maker's fixed texts when it was made (i18n).
    language: str | None = None

    @property
    def is_open(self) -> bool:
        """Tell whether the task may still fire (or waits to be confirmed)."""
        return self.status in OPEN_STATUSES


_COLUMNS: Final = (
    "id, kind, status, owner, owner_name, ha_user_id, conversation_key,"
    " bot_entry_id, chat_id, message, action, fire_at, repeat, clock, entity_id,"
    " condition, for_minutes, until, tainted, created_at, updated_at,"
    " fired_count, last_fired_at, outcome, language"
)


def _row(row: Sequence[Any]) -> Task:
    """Build a task from a row of ``_COLUMNS`` (the fields, in their order)."""
    task = Task(*row)
    # The action is stored as JSON, the taint flag as 0 or 1.
    task.action = json.loads(row[10]) if row[10] else None
    task.tainted = bool(row[18])
    return task


@dataclass(frozen=True, slots=True)
class NewTask:
    """What a tool asks to store."""

    kind: str
    owner: str
    owner_name: str | None
    ha_user_id: str | None
    conversation_key: str | None
    bot_entry_id: str | None
    chat_id: int | None
    message: str | None
    action: dict[str, Any] | None
    fire_at: float | None
    repeat: str = "none"
    clock: str | None = None
    entity_id: str | None = None
    condition: str | None = None
    for_minutes: float | None = None
    until: float | None = None
    tainted: bool = False
    language: str | None = None


def count_open(conn: sqlite3.Connection, owner: str) -> int:
    """Return how many open tasks a person has (suspended ones count)."""
    marks = ",".join("?" * len(OPEN_STATUSES))
    row = conn.execute(
        f"SELECT COUNT(*) FROM tasks WHERE owner = ? AND status IN ({marks})",  # noqa: S608
        (owner, *OPEN_STATUSES),
    ).fetchone()
    return int(row[0])


def insert(
    conn: sqlite3.Connection, new: NewTask, *, status: str, now: float, cap: int
) -> Task | None:
    """Store a task; None when its owner already has ``cap`` open tasks.

    The count and the insert share one transaction, so two tools racing
    cannot both pass the cap.
    """
    if count_open(conn, new.owner) >= cap:
        return None
    cur = conn.execute(
        "INSERT INTO tasks (kind, status, owner, owner_name, ha_user_id,"
        " conversation_key, bot_entry_id, chat_id, message, action, fire_at,"
        " repeat, clock, entity_id, condition, for_minutes, until, tainted,"
        " created_at, updated_at, language) VALUES"
        " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            new.kind,
            status,
            new.owner,
            new.owner_name,
            new.ha_user_id,
            new.conversation_key,
            new.bot_entry_id,
            new.chat_id,
            new.message,
            json.dumps(new.action, default=str) if new.action else None,
            new.fire_at,
            new.repeat,
            new.clock,
            new.entity_id,
            new.condition,
            new.for_minutes,
            new.until,
            int(new.tainted),
            now,
            now,
            new.language,
        ),
    )
    task = get(conn, int(cur.lastrowid or 0))
    assert task is not None  # noqa: S101 - just inserted
    return task


def get(conn: sqlite3.Connection, task_id: int) -> Task | None:
    """Return a task by id."""
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM tasks WHERE id = ?",  # noqa: S608
        (task_id,),
    ).fetchone()
    return _row(row) if row else None


def open_tasks(conn: sqlite3.Connection) -> list[Task]:
    """Return every open task, oldest first."""
    marks = ",".join("?" * len(OPEN_STATUSES))
    # Row by row: each row's tuple is freed once its task is built (1,000
    # held at once are enough to start a garbage collection). Sorted here, not
    # by SQLite, which would copy every whole row into a sorter (the status
    # index gives them by status): about 0.3 ms less for 1,000 open tasks.
    tasks = [
        _row(row)
        for row in conn.execute(
            f"SELECT {_COLUMNS} FROM tasks WHERE status IN ({marks})",  # noqa: S608
            OPEN_STATUSES,
        )
    ]
    tasks.sort(key=attrgetter("id"))
    return tasks


def set_status(  # noqa: PLR0913 - the change and its reason
    conn: sqlite3.Connection,
    task_id: int,
    *,
    status: str,
    now: float,
    outcome: str | None = None,
    expected: Sequence[str] = OPEN_STATUSES,
) -> Task | None:
    """Move a task to ``status`` if it is in one of ``expected``; return it."""
    marks = ",".join("?" * len(expected))
    cur = conn.execute(
        f"UPDATE tasks SET status = ?, updated_at = ?, outcome = COALESCE(?, outcome)"  # noqa: S608
        f" WHERE id = ? AND status IN ({marks})",
        (status, now, outcome, task_id, *expected),
    )
    if cur.rowcount != 1:
        return None
    return get(conn, task_id)


def claim(conn: sqlite3.Connection, task_id: int, now: float) -> Task | None:
    """Take a pending task for firing; only one caller can ever win."""
    return set_status(
        conn,
        task_id,
        status=TaskStatus.RUNNING,
        now=now,
        expected=(TaskStatus.PENDING,),
    )


def finish(  # noqa: PLR0913 - the outcome and the next occurrence
    conn: sqlite3.Connection,
    task_id: int,
    *,
    status: str,
    outcome: str,
    now: float,
    fired: bool,
    next_fire_at: float | None = None,
) -> Task | None:
    """Record how a firing ended: settled, or pending again at ``next_fire_at``."""
    cur = conn.execute(
        "UPDATE tasks SET status = ?, outcome = ?, updated_at = ?,"
        " fire_at = COALESCE(?, fire_at),"
        " fired_count = fired_count + ?,"
        " last_fired_at = CASE WHEN ? THEN ? ELSE last_fired_at END"
        " WHERE id = ? AND status = ?",
        (
            status,
            outcome,
            now,
            next_fire_at,
            int(fired),
            int(fired),
            now,
            task_id,
            TaskStatus.RUNNING,
        ),
    )
    if cur.rowcount != 1:
        return None
    return get(conn, task_id)


def reschedule(
    conn: sqlite3.Connection, task_id: int, *, fire_at: float, now: float, outcome: str
) -> Task | None:
    """Move a pending or running repeating task to its next occurrence."""
    cur = conn.execute(
        "UPDATE tasks SET status = ?, fire_at = ?, updated_at = ?, outcome = ?"
        " WHERE id = ? AND status IN (?, ?)",
        (
            TaskStatus.PENDING,
            fire_at,
            now,
            outcome,
            task_id,
            TaskStatus.PENDING,
            TaskStatus.RUNNING,
        ),
    )
    if cur.rowcount != 1:
        return None
    return get(conn, task_id)


def prune(conn: sqlite3.Connection, before: float) -> int:
    """Delete settled tasks last changed before ``before``; return how many."""
    marks = ",".join("?" * len(OPEN_STATUSES))
    return conn.execute(
        f"DELETE FROM tasks WHERE status NOT IN ({marks}) AND updated_at < ?",  # noqa: S608
        (*OPEN_STATUSES, before),
    ).rowcount
