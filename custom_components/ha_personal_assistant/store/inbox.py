"""The Telegram inbox tables: message ids already seen, messages not answered yet.

Every function here is blocking and runs inside ``Database.async_run``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite3


@dataclass(frozen=True, slots=True)
class InFlight:
    """A Telegram message received and not answered yet."""

    conversation_key: str
    bot_entry_id: str
    chat_id: int
    message_id: int | None
    text: str
    received_at: float


def mark_seen(conn: sqlite3.Connection, key: str, message_id: int, now: float) -> bool:
    """Record a message id; False when it was seen before (edit or replay)."""
    cur = conn.execute(
        "INSERT OR IGNORE INTO telegram_messages_seen"
        " (conversation_key, message_id, seen_at) VALUES (?, ?, ?)",
        (key, message_id, now),
    )
    return cur.rowcount == 1


def receive(conn: sqlite3.Connection, message: InFlight) -> tuple[bool, int | None]:
    """Record a message before it is answered: (new in its chat, in-flight id)."""
    if message.message_id is not None and not mark_seen(
        conn, message.conversation_key, message.message_id, message.received_at
    ):
        return False, None
    cur = conn.execute(
        "INSERT INTO telegram_in_flight (conversation_key, bot_entry_id,"
        " chat_id, message_id, text, received_at) VALUES (?, ?, ?, ?, ?, ?)",
        (
            message.conversation_key,
            message.bot_entry_id,
            message.chat_id,
            message.message_id,
            message.text,
            message.received_at,
        ),
    )
    return True, int(cur.lastrowid or 0)


def answered(conn: sqlite3.Connection, in_flight_id: int) -> None:
    """Forget a message's in-flight row."""
    conn.execute("DELETE FROM telegram_in_flight WHERE id = ?", (in_flight_id,))


def take_in_flight(conn: sqlite3.Connection) -> list[InFlight]:
    """Return and forget the messages a stop left unanswered, oldest first."""
    rows = conn.execute(
        "SELECT conversation_key, bot_entry_id, chat_id, message_id, text,"
        " received_at FROM telegram_in_flight ORDER BY id"
    ).fetchall()
    conn.execute("DELETE FROM telegram_in_flight")
    return [InFlight(*row) for row in rows]


def prune(conn: sqlite3.Connection, seen_before: float) -> None:
    """Forget seen-message ids older than ``seen_before``."""
    conn.execute("DELETE FROM telegram_messages_seen WHERE seen_at < ?", (seen_before,))
    # Rows a failed delete left behind; a start reports the others.
    conn.execute("DELETE FROM telegram_in_flight WHERE received_at < ?", (seen_before,))
