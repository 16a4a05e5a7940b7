"""The conversation's turns and session summaries in the assistant database."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite3


@dataclass(frozen=True, slots=True)
class Turn:
    """One user message and the answer to it."""

    user_id: int
    assistant_id: int
    user: str
    assistant: str
    # The answer was written while untrusted text was in the prompt.
    tainted: bool = False
    turn_id: str | None = None


def append_turn(  # noqa: PLR0913 - one column each
    conn: sqlite3.Connection,
    *,
    session_id: int,
    conversation_key: str,
    person: str,
    user_text: str,
    reply: str,
    now: float,
    tainted: bool = False,
    turn_id: str | None = None,
) -> None:
    """Store a user message and its answer (once per turn id)."""
    if (
        turn_id is not None
        and conn.execute(
            "SELECT 1 FROM conversation_history WHERE turn_id = ? LIMIT 1", (turn_id,)
        ).fetchone()
        is not None
    ):
        return
    conn.executemany(
        "INSERT INTO conversation_history (session_id, conversation_key, person,"
        " role, content, created_at, turn_id, tainted) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (session_id, conversation_key, person, "user", user_text, now, turn_id, 0),
            (
                session_id,
                conversation_key,
                None,
                "assistant",
                reply,
                now,
                turn_id,
                int(tainted),
            ),
        ],
    )


def session_turns(conn: sqlite3.Connection, session_id: int) -> list[Turn]:
    """Return a session's turns, oldest first."""
    rows = conn.execute(
        "SELECT id, role, content, tainted, turn_id FROM conversation_history"
        " WHERE session_id = ? ORDER BY id",
        (session_id,),
    ).fetchall()
    turns: list[Turn] = []
    pending: tuple[int, str] | None = None
    for row_id, role, content, tainted, turn_id in rows:
        if role == "user":
            pending = (row_id, content)
        elif pending is not None:
            turns.append(
                Turn(
                    pending[0],
                    row_id,
                    pending[1],
                    content,
                    tainted=bool(tainted),
                    turn_id=turn_id,
                )
            )
            pending = None
    return turns


def summary_of_turn(
    conn: sqlite3.Connection, session_id: int
) -> tuple[str, str] | None:
    """Return a session's summary and the turn id it reaches, if it has one."""
    row = conn.execute(
        "SELECT summary, summary_turn FROM conversation_sessions WHERE id = ?",
        (session_id,),
    ).fetchone()
    if row is None or not row[0] or not row[1]:
        return None
    return str(row[0]), str(row[1])


def set_turn_summary(
    conn: sqlite3.Connection, session_id: int, summary: str, turn_id: str
) -> None:
    """Store a summary that reaches ``turn_id`` (and that turn's last row id)."""
    row = conn.execute(
        "SELECT MAX(id) FROM conversation_history WHERE turn_id = ?", (turn_id,)
    ).fetchone()
    upto = int(row[0]) if row and row[0] is not None else 0
    conn.execute(
        "UPDATE conversation_sessions SET summary = ?, summary_upto = ?,"
        " summary_turn = ? WHERE id = ? AND COALESCE(summary_upto, 0) <= ?",
        (summary, upto, turn_id, session_id, upto),
    )


def set_summary(
    conn: sqlite3.Connection, session_id: int, summary: str, upto: int
) -> None:
    """Store a session's summary, unless a newer one was stored meanwhile."""
    conn.execute(
        "UPDATE conversation_sessions SET summary = ?, summary_upto = ?"
        " WHERE id = ? AND COALESCE(summary_upto, 0) <= ?",
        (summary, upto, session_id, upto),
    )


def previous_summary(
    conn: sqlite3.Connection, conversation_key: str, session_id: int
) -> str | None:
    """Return the summary of the chat's session before this one."""
    row = conn.execute(
        "SELECT summary FROM conversation_sessions"
        " WHERE conversation_key = ? AND id < ? ORDER BY id DESC LIMIT 1",
        (conversation_key, session_id),
    ).fetchone()
    return row[0] if row and row[0] else None


def idle_sessions_to_summarize(
    conn: sqlite3.Connection, idle_before: float, min_turns: int
) -> list[int]:
    """Return ended or idle sessions whose turns are not all summarized."""
    rows = conn.execute(
        "SELECT s.id FROM conversation_sessions s"
        " WHERE (s.ended_at IS NOT NULL OR s.last_activity < ?)"
        " AND (SELECT COUNT(*) FROM conversation_history h"
        "      WHERE h.session_id = s.id AND h.role = 'user') >= ?"
        " AND EXISTS (SELECT 1 FROM conversation_history h"
        "      WHERE h.session_id = s.id AND h.id > COALESCE(s.summary_upto, 0))",
        (idle_before, min_turns),
    ).fetchall()
    return [int(r[0]) for r in rows]


def clear(conn: sqlite3.Connection, chat_id: int | None) -> list[str]:
    """Forget history (of one chat, or all); return the threads to delete."""
    if chat_id is None:
        keys = [
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT conversation_key FROM conversation_sessions"
            )
        ]
    else:
        keys = [
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT conversation_key FROM conversation_sessions"
                " WHERE conversation_key LIKE ?",
                (f"%:{chat_id}",),
            )
        ]
    threads: list[str] = []
    for key in keys:
        threads.extend(
            r[0]
            for r in conn.execute(
                "SELECT thread_id FROM conversation_sessions"
                " WHERE conversation_key = ?",
                (key,),
            )
        )
        conn.execute(
            "DELETE FROM conversation_history WHERE conversation_key = ?", (key,)
        )
        conn.execute(
            "DELETE FROM conversation_sessions WHERE conversation_key = ?", (key,)
        )
    return threads


def clear_interactions(conn: sqlite3.Connection, chat_id: int | None) -> None:
    """Forget the logged interactions of one chat (or all) for learning."""
    if chat_id is None:
        conn.execute("DELETE FROM interaction_log")
    else:
        conn.execute(
            "DELETE FROM interaction_log WHERE conversation_key LIKE ?",
            (f"%:{chat_id}",),
        )


def thread_of(conn: sqlite3.Connection, session_id: int) -> str | None:
    """Return the LangGraph thread of a session."""
    row = conn.execute(
        "SELECT thread_id FROM conversation_sessions WHERE id = ?", (session_id,)
    ).fetchone()
    return str(row[0]) if row and row[0] else None
