"""The assistant database: sessions, seen Telegram messages and the tool log."""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from . import inbox
from .faults import FaultGate, StorageUnavailableError, is_storage_fault
from .sqlite_file import open_database

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from ..executor import BlockingExecutor
    from .inbox import InFlight

# A call that waits longer than this for a lock or the disk gives up: a turn
# answers without history rather than keep the user waiting. Long jobs
# (pruning, VACUUM) pass their own ``timeout``.
DB_TIMEOUT: Final = 3.0  # seconds


@dataclass(frozen=True, slots=True)
class Session:
    """The conversation thread a chat is in."""

    thread_id: str
    started_at: float
    is_new: bool
    id: int = 0


class Database:
    """Blocking SQLite access, used only through the dedicated executor."""

    def __init__(self, path: Path, executor: BlockingExecutor) -> None:
        """Remember where the file lives; nothing is opened yet."""
        self.path = path
        self._executor = executor
        self._conn: sqlite3.Connection | None = None
        # One connection is shared by the pool's threads; SQLite serializes
        # writers anyway, and the lock keeps cursors from interleaving.
        self._lock = threading.Lock()
        # The call whose statements run on the connection now; an interrupt
        # (after the loop gave up on a call) must only ever hit that call.
        self._running: object | None = None
        self._running_lock = threading.Lock()
        self.recreated_from: Path | None = None
        self.gate = FaultGate("assistant database")

    async def async_open(self) -> None:
        """Open the file, moving a corrupt one aside, and migrate the schema."""
        await self._executor.run(self._open)

    async def async_close(self) -> None:
        """Close the connection."""
        await self._executor.run(self._close)

    def _open(self) -> None:
        conn, aside = open_database(self.path)
        if aside is not None:
            self.recreated_from = aside
        self._conn = conn

    def _close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    async def async_run[T](
        self,
        func: Callable[[sqlite3.Connection], T],
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - the worker's deadline
    ) -> T:
        """Run ``func`` on the connection in one transaction, off the loop.

        Gives up after ``timeout`` seconds (default ``DB_TIMEOUT``); after a
        lock, a full disk or damage the file is skipped for ``FAULT_BACKOFF``
        seconds. Both raise ``StorageUnavailableError`` (an sqlite3 error).
        """
        self.gate.check()
        limit = DB_TIMEOUT if timeout is None else timeout
        deadline = time.monotonic() + limit
        call = object()
        try:
            # The worker gives up by itself at the deadline (busy timeout);
            # the loop waits a little longer so that answer is the one seen.
            async with asyncio.timeout(limit + 1):
                result, wrote = await self._executor.run(
                    self._run, func, deadline, call
                )
        except TimeoutError as err:
            self._interrupt(call)
            self.gate.failed(f"no answer within {limit:g} s")
            raise StorageUnavailableError(str(self.gate.last_error)) from err
        except sqlite3.Error as err:
            if not is_storage_fault(err):
                raise
            self.gate.failed(str(err))
            raise StorageUnavailableError(str(err)) from err
        self.gate.succeeded(wrote=wrote)
        return result

    def _interrupt(self, call: object) -> None:
        """Abort ``call`` if it still runs, so it cannot commit late.

        The connection is shared: a call that timed out while it waited for
        the connection must not abort the call that holds it.
        """
        with self._running_lock:
            if self._running is call and (conn := self._conn) is not None:
                conn.interrupt()

    def _run[T](
        self, func: Callable[[sqlite3.Connection], T], deadline: float, call: object
    ) -> tuple[T, bool]:
        """Run ``func`` in a transaction; return its result and whether it wrote."""
        # A job that waited in the pool past its deadline must not run: the
        # caller was already told it failed.
        if not self._lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            msg = "database is busy: another call holds the connection"
            raise sqlite3.OperationalError(msg)
        with self._running_lock:
            self._running = call
        try:
            if self._conn is None:
                msg = "The assistant database is closed"
                raise sqlite3.ProgrammingError(msg)
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if remaining_ms <= 0:
                msg = "database is busy: the call waited too long"
                raise sqlite3.OperationalError(msg)
            self._conn.execute(f"PRAGMA busy_timeout={remaining_ms}")
            changes = self._conn.total_changes
            with self._conn:
                result = func(self._conn)
            return result, self._conn.total_changes != changes
        finally:
            with self._running_lock:
                self._running = None
            self._lock.release()

    async def async_current_session(
        self, key: str, now: float, idle_limit: float
    ) -> Session:
        """Return the chat's open session, or a new one after ``idle_limit`` s idle."""

        def _current(conn: sqlite3.Connection) -> Session:
            row = conn.execute(
                "SELECT id, thread_id, started_at, last_activity"
                " FROM conversation_sessions"
                " WHERE conversation_key = ? AND ended_at IS NULL"
                " ORDER BY id DESC LIMIT 1",
                (key,),
            ).fetchone()
            if row is not None and now - row[3] <= idle_limit:
                conn.execute(
                    "UPDATE conversation_sessions SET last_activity = ? WHERE id = ?",
                    (now, row[0]),
                )
                return Session(
                    thread_id=row[1], started_at=row[2], is_new=False, id=row[0]
                )
            return self._start_session(conn, key, now)

        return await self.async_run(_current)

    async def async_new_session(self, key: str, now: float) -> Session:
        """End the chat's open session and start a new one."""
        return await self.async_run(lambda conn: self._start_session(conn, key, now))

    @staticmethod
    def _start_session(conn: sqlite3.Connection, key: str, now: float) -> Session:
        conn.execute(
            "UPDATE conversation_sessions SET ended_at = ?"
            " WHERE conversation_key = ? AND ended_at IS NULL",
            (now, key),
        )
        thread_id = f"{key}:{uuid.uuid4().hex}"
        cur = conn.execute(
            "INSERT INTO conversation_sessions"
            " (conversation_key, thread_id, started_at, last_activity)"
            " VALUES (?, ?, ?, ?)",
            (key, thread_id, now, now),
        )
        return Session(
            thread_id=thread_id, started_at=now, is_new=True, id=int(cur.lastrowid or 0)
        )

    async def async_mark_seen(self, key: str, message_id: int, now: float) -> bool:
        """Record a Telegram message; False when it was seen before (edit or replay)."""
        return await self.async_run(
            functools.partial(inbox.mark_seen, key=key, message_id=message_id, now=now)
        )

    async def async_receive(self, message: InFlight) -> tuple[bool, int | None]:
        """Record a Telegram message before it is answered.

        Returns whether it is new in its chat (an edit or a replayed update
        is not) and the id of its in-flight row (None when seen before).
        """
        return await self.async_run(functools.partial(inbox.receive, message=message))

    async def async_answered(self, in_flight_id: int) -> None:
        """Forget a message's in-flight row: it was answered (or that failed)."""
        await self.async_run(
            functools.partial(inbox.answered, in_flight_id=in_flight_id)
        )

    async def async_take_in_flight(self) -> list[InFlight]:
        """Return and forget the messages a stop left unanswered, oldest first."""
        return await self.async_run(inbox.take_in_flight)

    async def async_prune(self, seen_before: float) -> None:
        """Forget seen-message ids older than ``seen_before``."""
        await self.async_run(functools.partial(inbox.prune, seen_before=seen_before))

    async def async_log_tool_call(
        self, tool: str, person: str | None, duration_ms: float, outcome: str
    ) -> None:
        """Append one row to ``tool_call_log``; arguments are never stored."""
        await self.async_run(
            lambda conn: conn.execute(
                "INSERT INTO tool_call_log (ts, tool, person, duration_ms, outcome)"
                " VALUES (?, ?, ?, ?, ?)",
                (time.time(), tool, person, duration_ms, outcome),
            ),
        )
