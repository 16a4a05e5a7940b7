"""Pending actions and the action audit log, in the assistant database.

Every function takes a connection inside one transaction (``Database.async_run``),
so a state change and its audit row are committed together or not at all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from ..policy.verdict import ResolvedCall

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Sequence


class Status:
    """Where a pending action is in its life."""

    PENDING = "pending"
    EXECUTING = "executing"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    INTERRUPTED = "interrupted"


@dataclass(frozen=True, slots=True)
class PendingAction:
    """One confirmation request and the calls it would run."""

    id: int
    token: str
    conversation_key: str
    bot_entry_id: str | None
    chat_id: int | None
    requester: str
    ha_user_id: str | None
    calls: tuple[ResolvedCall, ...]
    summary: str
    created_at: float
    expires_at: float
    status: str
    message_id: int | None
    outcome: str | None
    # Why outside text made this ask, in the integration's words (or None).
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class AuditRow:
    """One decision about an action; never the message text."""

    ts: float
    telegram_user: str | None
    chat_id: int | None
    ha_user_id: str | None
    entities: Sequence[str]
    service: str
    policy: str
    confirmation: str
    outcome: str
    latency_ms: float | None = None
    action_id: int | None = None


class AuditSummary(TypedDict):
    """An audit row as /actions shows it."""

    ts: float
    service: str
    entities: list[str]
    policy: str
    confirmation: str
    outcome: str


def encode_calls(calls: Sequence[ResolvedCall]) -> str:
    """Serialize resolved calls for storage."""
    return json.dumps(
        [
            {
                "domain": c.domain,
                "service": c.service,
                "entity_ids": list(c.entity_ids),
                "data": dict(c.data),
            }
            for c in calls
        ],
        default=str,
    )


def decode_calls(text: str) -> tuple[ResolvedCall, ...]:
    """Read resolved calls back."""
    return tuple(
        ResolvedCall(
            domain=item["domain"],
            service=item["service"],
            entity_ids=tuple(item["entity_ids"]),
            data=item.get("data") or {},
        )
        for item in json.loads(text)
    )


_COLUMNS = (
    "id, token, conversation_key, bot_entry_id, chat_id, requester, ha_user_id,"
    " calls, summary, created_at, expires_at, status, message_id, outcome, reason"
)


def _row_to_action(row: Sequence[Any]) -> PendingAction:
    return PendingAction(
        id=row[0],
        token=row[1],
        conversation_key=row[2],
        bot_entry_id=row[3],
        chat_id=row[4],
        requester=row[5],
        ha_user_id=row[6],
        calls=decode_calls(row[7]),
        summary=row[8],
        created_at=row[9],
        expires_at=row[10],
        status=row[11],
        message_id=row[12],
        outcome=row[13],
        reason=row[14],
    )


def add_audit(conn: sqlite3.Connection, row: AuditRow) -> None:
    """Append a row to ``action_audit_log``."""
    conn.execute(
        "INSERT INTO action_audit_log (ts, telegram_user, chat_id, ha_user_id,"
        " entities, service, policy, confirmation, outcome, latency_ms, action_id)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            row.ts,
            row.telegram_user,
            row.chat_id,
            row.ha_user_id,
            json.dumps(list(row.entities)),
            row.service,
            row.policy,
            row.confirmation,
            row.outcome,
            row.latency_ms,
            row.action_id,
        ),
    )


def insert_action(  # noqa: PLR0913 - one column each
    conn: sqlite3.Connection,
    *,
    token: str,
    conversation_key: str,
    bot_entry_id: str | None,
    chat_id: int | None,
    requester: str,
    ha_user_id: str | None,
    calls: Sequence[ResolvedCall],
    summary: str,
    now: float,
    expires_at: float,
    reason: str | None = None,
) -> PendingAction:
    """Store a new pending action and its 'confirmation requested' audit row."""
    cur = conn.execute(
        "INSERT INTO pending_actions (token, conversation_key, bot_entry_id,"
        " chat_id, requester, ha_user_id, calls, summary, created_at, expires_at,"
        " status, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            token,
            conversation_key,
            bot_entry_id,
            chat_id,
            requester,
            ha_user_id,
            encode_calls(calls),
            summary,
            now,
            expires_at,
            Status.PENDING,
            reason,
        ),
    )
    action_id = int(cur.lastrowid or 0)
    add_audit(
        conn,
        AuditRow(
            ts=now,
            telegram_user=requester,
            chat_id=chat_id,
            ha_user_id=ha_user_id,
            entities=_entities(calls),
            service=_services(calls),
            policy="confirm",
            confirmation="requested",
            outcome=Status.PENDING,
            action_id=action_id,
        ),
    )
    action = get_action(conn, action_id)
    assert action is not None  # noqa: S101 - just inserted
    return action


def _entities(calls: Sequence[ResolvedCall]) -> list[str]:
    return list(dict.fromkeys(e for c in calls for e in c.entity_ids))


def _services(calls: Sequence[ResolvedCall]) -> str:
    return ", ".join(dict.fromkeys(f"{c.domain}.{c.service}" for c in calls))


def _action_audit(
    action: PendingAction,
    *,
    now: float,
    confirmation: str,
    outcome: str,
    latency_ms: float | None = None,
) -> AuditRow:
    """Describe a decision about a stored action for the audit log."""
    return AuditRow(
        ts=now,
        telegram_user=action.requester,
        chat_id=action.chat_id,
        ha_user_id=action.ha_user_id,
        entities=_entities(action.calls),
        service=_services(action.calls),
        policy="confirm",
        confirmation=confirmation,
        outcome=outcome,
        latency_ms=latency_ms,
        action_id=action.id,
    )


def get_action(conn: sqlite3.Connection, action_id: int) -> PendingAction | None:
    """Return an action by id."""
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM pending_actions WHERE id = ?",  # noqa: S608
        (action_id,),
    ).fetchone()
    return _row_to_action(row) if row else None


def get_by_token(conn: sqlite3.Connection, token: str) -> PendingAction | None:
    """Return the action a button refers to."""
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM pending_actions WHERE token = ?",  # noqa: S608
        (token,),
    ).fetchone()
    return _row_to_action(row) if row else None


def newest_pending(
    conn: sqlite3.Connection, conversation_key: str, requester: str
) -> PendingAction | None:
    """Return the sender's newest pending action in this chat."""
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM pending_actions"  # noqa: S608
        " WHERE conversation_key = ? AND requester = ? AND status = ?"
        " ORDER BY id DESC LIMIT 1",
        (conversation_key, requester, Status.PENDING),
    ).fetchone()
    return _row_to_action(row) if row else None


def set_message_id(conn: sqlite3.Connection, action_id: int, message_id: int) -> None:
    """Remember which Telegram message holds the buttons."""
    conn.execute(
        "UPDATE pending_actions SET message_id = ? WHERE id = ?",
        (message_id, action_id),
    )


def close_pending(  # noqa: PLR0913 - the decision and who made it
    conn: sqlite3.Connection,
    action: PendingAction,
    *,
    status: str,
    decided_by: str,
    now: float,
    confirmation: str,
) -> bool:
    """Move a pending action to cancelled or expired, with its audit row."""
    cur = conn.execute(
        "UPDATE pending_actions SET status = ?, decided_by = ?, decided_at = ?,"
        " outcome = ? WHERE id = ? AND status = ?",
        (status, decided_by, now, status, action.id, Status.PENDING),
    )
    if cur.rowcount != 1:
        return False
    add_audit(
        conn, _action_audit(action, now=now, confirmation=confirmation, outcome=status)
    )
    return True


def claim(
    conn: sqlite3.Connection,
    action: PendingAction,
    *,
    decided_by: str,
    now: float,
    idempotency_key: str,
) -> bool:
    """Take a pending action for execution; only one caller can ever win."""
    cur = conn.execute(
        "UPDATE pending_actions SET status = ?, decided_by = ?, decided_at = ?,"
        " idempotency_key = ? WHERE id = ? AND status = ? AND expires_at >= ?",
        (
            Status.EXECUTING,
            decided_by,
            now,
            idempotency_key,
            action.id,
            Status.PENDING,
            now,
        ),
    )
    return cur.rowcount == 1


def finish(  # noqa: PLR0913 - the outcome and its measurements
    conn: sqlite3.Connection,
    action: PendingAction,
    *,
    ok: bool,
    outcome: str,
    now: float,
    latency_ms: float,
) -> None:
    """Record how an executed action ended, with its audit row."""
    status = Status.DONE if ok else Status.FAILED
    cur = conn.execute(
        "UPDATE pending_actions SET status = ?, outcome = ?"
        " WHERE id = ? AND status = ?",
        (status, outcome, action.id, Status.EXECUTING),
    )
    if cur.rowcount != 1:
        return
    add_audit(
        conn,
        _action_audit(
            action,
            now=now,
            confirmation="confirmed",
            outcome="executed" if ok else "failed",
            latency_ms=latency_ms,
        ),
    )


def recover(conn: sqlite3.Connection, now: float) -> list[PendingAction]:
    """After a restart: settle actions a crash left behind, never re-running them.

    An action caught between its claim and its outcome may or may not have
    run; running it again could unlock a door twice, so it is marked
    interrupted and audited. Pending actions past their time expire.
    """
    settled: list[PendingAction] = []
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM pending_actions"  # noqa: S608
        " WHERE status = ? OR (status = ? AND expires_at < ?)",
        (Status.EXECUTING, Status.PENDING, now),
    ).fetchall()
    for row in rows:
        action = _row_to_action(row)
        new_status = (
            Status.INTERRUPTED if action.status == Status.EXECUTING else Status.EXPIRED
        )
        conn.execute(
            "UPDATE pending_actions SET status = ?, outcome = ? WHERE id = ?",
            (new_status, new_status, action.id),
        )
        add_audit(
            conn,
            _action_audit(
                action,
                now=now,
                confirmation=(
                    "confirmed" if action.status == Status.EXECUTING else "expired"
                ),
                outcome=new_status,
            ),
        )
        settled.append(action)
    return settled


def recent_audit(
    conn: sqlite3.Connection, telegram_user: str, limit: int
) -> list[AuditSummary]:
    """Return the user's latest audit rows, newest first."""
    rows = conn.execute(
        "SELECT ts, service, entities, policy, confirmation, outcome"
        " FROM action_audit_log WHERE telegram_user = ? ORDER BY id DESC LIMIT ?",
        (telegram_user, limit),
    ).fetchall()
    return [
        AuditSummary(
            ts=float(r[0]),
            service=str(r[1]),
            entities=[str(e) for e in json.loads(r[2])],
            policy=str(r[3]),
            confirmation=str(r[4]),
            outcome=str(r[5]),
        )
        for r in rows
    ]


def count_pending(conn: sqlite3.Connection, now: float) -> int:
    """Return how many actions wait for a decision and have not expired."""
    row = conn.execute(
        "SELECT COUNT(*) FROM pending_actions WHERE status = ? AND expires_at >= ?",
        (Status.PENDING, now),
    ).fetchone()
    return int(row[0])
