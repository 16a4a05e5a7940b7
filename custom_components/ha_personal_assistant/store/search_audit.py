"""Rows of search_audit_log: every web query, as sanitized, and what came of it.

Only the sanitized query and the names of the removed categories are stored;
the removed values never reach the database.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Iterable

# How a search ended.
OUTCOME_SENT: Final = "sent"
OUTCOME_NOT_SENT: Final = "not_sent_pii"
OUTCOME_SANITIZER_ERROR: Final = "sanitizer_error"
OUTCOME_FAILED: Final = "failed"
OUTCOME_TIMEOUT: Final = "timeout"
# Audit rows are kept this long.
SEARCH_AUDIT_RETENTION_DAYS: Final = 90


@dataclass(frozen=True, slots=True)
class SearchAuditRow:
    """One web search as the audit keeps it."""

    ts: float
    person: str | None
    chat_id: int | None
    query: str
    categories: tuple[str, ...]
    outcome: str
    results: int = 0


def add(conn: sqlite3.Connection, row: SearchAuditRow) -> int:
    """Insert a row, drop rows past the retention, and return the new id."""
    conn.execute(
        "DELETE FROM search_audit_log WHERE ts < ?",
        (row.ts - SEARCH_AUDIT_RETENTION_DAYS * 86400,),
    )
    cursor = conn.execute(
        "INSERT INTO search_audit_log"
        " (ts, person, chat_id, query, categories, outcome, results)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            row.ts,
            row.person,
            row.chat_id,
            row.query,
            ",".join(row.categories),
            row.outcome,
            row.results,
        ),
    )
    return int(cursor.lastrowid or 0)


def _row(values: Iterable[object]) -> SearchAuditRow:
    ts, person, chat_id, query, categories, outcome, results = tuple(values)
    return SearchAuditRow(
        ts=float(str(ts)),
        person=None if person is None else str(person),
        chat_id=None if chat_id is None else int(str(chat_id)),
        query=str(query),
        categories=tuple(c for c in str(categories).split(",") if c),
        outcome=str(outcome),
        results=int(str(results)),
    )


def recent(conn: sqlite3.Connection, person: str, limit: int) -> list[SearchAuditRow]:
    """Return the person's latest searches, newest first."""
    rows = conn.execute(
        "SELECT ts, person, chat_id, query, categories, outcome, results"
        " FROM search_audit_log WHERE person = ? ORDER BY id DESC LIMIT ?",
        (person, limit),
    ).fetchall()
    return [_row(r) for r in rows]
