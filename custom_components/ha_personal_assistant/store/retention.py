"""Retention: old conversations, checkpoints and logs are pruned on a schedule.

Runs in the background every few hours, never in the response path. After a
prune that freed a good part of a file, VACUUM gives the space back so the
file really shrinks (a plain DELETE only marks pages free).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ..const import LOGGER
from ..tasks.store import prune as prune_tasks
from .sqlite_file import worth_vacuum

if TYPE_CHECKING:
    import sqlite3

    from .checkpoints import CheckpointStore
    from .database import Database

DAY: Final = 86400.0
# Sessions, with their history and summary, are kept this long after their
# last message; the profile (what the assistant learned) is kept apart.
SESSION_RETENTION_DAYS: Final = 30
# The tool log is for troubleshooting; three months is plenty.
TOOL_LOG_RETENTION_DAYS: Final = 90
# The action audit says who unlocked what: kept a year, like a paper log.
ACTION_AUDIT_RETENTION_DAYS: Final = 365
# Settled confirmation requests (done, cancelled, expired); pending ones stay.
SETTLED_ACTION_RETENTION_DAYS: Final = 30
# Settled tasks (done, failed, cancelled, expired, missed); open ones stay.
SETTLED_TASK_RETENTION_DAYS: Final = 30
# Pruning and VACUUM may take a while on an SD card: their own deadline.
LONG_TIMEOUT: Final = 120.0  # seconds


@dataclass(frozen=True, slots=True)
class PruneReport:
    """What one prune removed and whether the files were compacted."""

    threads: int
    sessions: int
    log_rows: int
    vacuumed: tuple[str, ...]


def _prune_database(conn: sqlite3.Connection, now: float) -> tuple[int, int]:
    """Delete old sessions with their history, and old log rows."""
    cutoff = now - SESSION_RETENTION_DAYS * DAY
    old = [
        row[0]
        for row in conn.execute(
            "SELECT id FROM conversation_sessions WHERE last_activity < ?", (cutoff,)
        )
    ]
    for start in range(0, len(old), 500):
        ids = old[start : start + 500]
        marks = ",".join("?" * len(ids))
        conn.execute(
            f"DELETE FROM conversation_history WHERE session_id IN ({marks})",  # noqa: S608
            ids,
        )
        conn.execute(
            f"DELETE FROM conversation_sessions WHERE id IN ({marks})",  # noqa: S608
            ids,
        )
    rows = conn.execute(
        "DELETE FROM tool_call_log WHERE ts < ?",
        (now - TOOL_LOG_RETENTION_DAYS * DAY,),
    ).rowcount
    rows += conn.execute(
        "DELETE FROM action_audit_log WHERE ts < ?",
        (now - ACTION_AUDIT_RETENTION_DAYS * DAY,),
    ).rowcount
    rows += conn.execute(
        "DELETE FROM pending_actions WHERE status NOT IN ('pending', 'executing')"
        " AND created_at < ?",
        (now - SETTLED_ACTION_RETENTION_DAYS * DAY,),
    ).rowcount
    rows += prune_tasks(conn, now - SETTLED_TASK_RETENTION_DAYS * DAY)
    return len(old), rows


def _active_threads(conn: sqlite3.Connection, now: float, idle: float) -> set[str]:
    """Return the threads a next message could still continue."""
    return {
        row[0]
        for row in conn.execute(
            "SELECT thread_id FROM conversation_sessions"
            " WHERE ended_at IS NULL AND last_activity >= ?",
            (now - idle,),
        )
    }


def _vacuum_if_worth_it(conn: sqlite3.Connection) -> bool:
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    if not worth_vacuum(pages, free):
        return False
    conn.execute("VACUUM")
    # In WAL mode the file shrinks only once the WAL is written back.
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return True


async def async_prune(
    database: Database,
    checkpoints: CheckpointStore,
    *,
    session_timeout: float,
    now: float | None = None,
) -> PruneReport:
    """Prune both files; raises sqlite3.Error when a file is unavailable."""
    now = time.time() if now is None else now
    sessions, log_rows = await database.async_run(
        lambda conn: _prune_database(conn, now), timeout=LONG_TIMEOUT
    )
    # A checkpoint is only read to continue its thread: once the session
    # ended (/new, or idle past the session timeout) it is dead weight.
    active = await database.async_run(
        lambda conn: _active_threads(conn, now, session_timeout)
    )
    stale = await checkpoints.async_threads() - active
    await checkpoints.async_delete_threads(stale)
    vacuumed: list[str] = []
    if await database.async_run(_vacuum_if_worth_it, timeout=LONG_TIMEOUT):
        vacuumed.append("database")
    if await checkpoints.async_vacuum_if_worth_it():
        vacuumed.append("checkpoints")
    report = PruneReport(len(stale), sessions, log_rows, tuple(vacuumed))
    LOGGER.debug("Pruned storage: %s", report)
    return report
