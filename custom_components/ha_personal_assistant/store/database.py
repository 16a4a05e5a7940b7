"""The assistant database: sessions, seen Telegram messages and the tool log."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ..const import LOGGER

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..executor import BlockingExecutor

# Each entry migrates the schema from the previous version to its own.
MIGRATIONS: dict[int, str] = {
    1: """
        CREATE TABLE conversation_sessions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            conversation_key TEXT NOT NULL,
            thread_id TEXT NOT NULL UNIQUE,
            started_at REAL NOT NULL,
            last_activity REAL NOT NULL,
            ended_at REAL
        );
        CREATE INDEX conversation_sessions_open
            ON conversation_sessions (conversation_key, ended_at);
        CREATE TABLE telegram_messages_seen (
            conversation_key TEXT NOT NULL,
            message_id INTEGER NOT NULL,
            seen_at REAL NOT NULL,
            PRIMARY KEY (conversation_key, message_id)
        ) WITHOUT ROWID;
        CREATE TABLE tool_call_log (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            ts REAL NOT NULL,
            tool TEXT NOT NULL,
            person TEXT,
            duration_ms REAL NOT NULL,
            outcome TEXT NOT NULL
        );
    """,
    2: """
        CREATE TABLE pending_actions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            token TEXT NOT NULL UNIQUE,
            conversation_key TEXT NOT NULL,
            bot_entry_id TEXT,
            chat_id INTEGER,
            requester TEXT NOT NULL,
            ha_user_id TEXT,
            calls TEXT NOT NULL,
            summary TEXT NOT NULL,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            status TEXT NOT NULL,
            message_id INTEGER,
            decided_by TEXT,
            decided_at REAL,
            idempotency_key TEXT UNIQUE,
            outcome TEXT
        );
        CREATE INDEX pending_actions_open
            ON pending_actions (conversation_key, requester, status);
        CREATE TABLE action_audit_log (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            ts REAL NOT NULL,
            telegram_user TEXT,
            chat_id INTEGER,
            ha_user_id TEXT,
            entities TEXT NOT NULL,
            service TEXT NOT NULL,
            policy TEXT NOT NULL,
            confirmation TEXT NOT NULL,
            outcome TEXT NOT NULL,
            latency_ms REAL,
            action_id INTEGER
        );
        CREATE INDEX action_audit_log_user ON action_audit_log (telegram_user, ts);
    """,
    3: """
        CREATE TABLE profile_entries (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            person TEXT NOT NULL,
            category TEXT NOT NULL,
            content TEXT NOT NULL,
            confidence REAL NOT NULL,
            source TEXT NOT NULL,
            sensitivity TEXT NOT NULL DEFAULT 'normal',
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            reinforced_at REAL NOT NULL,
            UNIQUE (person, content)
        );
        CREATE INDEX profile_entries_person ON profile_entries (person);
        CREATE TABLE conversation_history (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id INTEGER NOT NULL,
            conversation_key TEXT NOT NULL,
            person TEXT,
            role TEXT NOT NULL,
            content TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE INDEX conversation_history_session
            ON conversation_history (session_id, id);
        CREATE TABLE interaction_log (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            ts REAL NOT NULL,
            person TEXT,
            conversation_key TEXT,
            user_text TEXT NOT NULL,
            reply TEXT NOT NULL,
            tainted INTEGER NOT NULL DEFAULT 0,
            processed INTEGER NOT NULL DEFAULT 0
        );
        ALTER TABLE conversation_sessions ADD COLUMN summary TEXT;
        ALTER TABLE conversation_sessions ADD COLUMN summary_upto INTEGER;
    """,
    4: """
        CREATE TABLE search_audit_log (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            ts REAL NOT NULL,
            person TEXT,
            chat_id INTEGER,
            query TEXT NOT NULL,
            categories TEXT NOT NULL,
            outcome TEXT NOT NULL,
            results INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX search_audit_log_person ON search_audit_log (person, ts);
    """,
    # Documents, their chunks and the canonical float32 copy of each chunk's
    # embedding. The sqlite-vec index (rag_vec) is created at run time, when
    # the extension loads and the embedding dimension is known.
    5: """
        CREATE TABLE rag_documents (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            title TEXT NOT NULL,
            source TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            embedding_model TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            UNIQUE (source, content_hash)
        );
        CREATE INDEX rag_documents_title ON rag_documents (source, title);
        CREATE TABLE rag_chunks (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            document_id INTEGER NOT NULL
                REFERENCES rag_documents (id) ON DELETE CASCADE,
            ordinal INTEGER NOT NULL,
            text TEXT NOT NULL,
            UNIQUE (document_id, ordinal)
        );
        CREATE TABLE rag_vectors (
            chunk_id INTEGER PRIMARY KEY
                REFERENCES rag_chunks (id) ON DELETE CASCADE,
            model TEXT NOT NULL,
            dim INTEGER NOT NULL,
            vector BLOB NOT NULL
        );
        CREATE INDEX rag_vectors_model ON rag_vectors (model);
        CREATE TABLE rag_vec_state (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            model TEXT NOT NULL,
            dim INTEGER NOT NULL
        );
    """,
    # Why a pending action asks when outside text made it ask (the taint
    # rule), shown with the request; older rows have none.
    6: """
        ALTER TABLE pending_actions ADD COLUMN reason TEXT;
    """,
    # The append-only history: which turn a summary reaches (it replaces the
    # turns up to it at the next trim), and which answers read outside text.
    7: """
        ALTER TABLE conversation_sessions ADD COLUMN summary_turn TEXT;
        ALTER TABLE conversation_history ADD COLUMN turn_id TEXT;
        ALTER TABLE conversation_history ADD COLUMN tainted INTEGER NOT NULL DEFAULT 0;
    """,
    # Telegram messages received and not answered yet: a stop of Home
    # Assistant in between leaves them here, and the next start tells their
    # senders (nothing is dropped without a word).
    8: """
        CREATE TABLE telegram_in_flight (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            conversation_key TEXT NOT NULL,
            bot_entry_id TEXT NOT NULL,
            chat_id INTEGER NOT NULL,
            message_id INTEGER,
            text TEXT NOT NULL,
            received_at REAL NOT NULL
        );
    """,
    # Reminders, timers and watches (tasks/): durable across restarts, judged
    # when they fire as the person who made them.
    9: """
        CREATE TABLE tasks (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            kind TEXT NOT NULL,
            status TEXT NOT NULL,
            owner TEXT NOT NULL,
            owner_name TEXT,
            ha_user_id TEXT,
            conversation_key TEXT,
            bot_entry_id TEXT,
            chat_id INTEGER,
            message TEXT,
            action TEXT,
            fire_at REAL,
            repeat TEXT NOT NULL DEFAULT 'none',
            clock TEXT,
            entity_id TEXT,
            condition TEXT,
            for_minutes REAL,
            until REAL,
            tainted INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            fired_count INTEGER NOT NULL DEFAULT 0,
            last_fired_at REAL,
            outcome TEXT,
            language TEXT
        );
        CREATE INDEX tasks_status ON tasks (status);
        CREATE INDEX tasks_owner ON tasks (owner, status);
    """,
}
SCHEMA_VERSION = max(MIGRATIONS)

# A call that waits longer than this for a lock or the disk gives up: a turn
# answers without history rather than keep the user waiting. Long jobs
# (pruning, VACUUM) pass their own ``timeout``.
DB_TIMEOUT: Final = 3.0  # seconds
# After a fault the file is left alone for this long, so a locked or full
# database costs one timeout, not one per call.
FAULT_BACKOFF: Final = 15.0  # seconds
# Opening waits longer: migrations run then, and nothing works without them.
OPEN_TIMEOUT: Final = 10.0  # seconds


class StorageUnavailableError(sqlite3.OperationalError):
    """The file is locked, full, damaged or slow; skipped for a while."""


def is_storage_fault(err: BaseException) -> bool:
    """Tell a fault of the file (lock, disk, damage) from a bug in a query."""
    if isinstance(err, StorageUnavailableError | TimeoutError):
        return True
    if isinstance(err, sqlite3.OperationalError):
        text = str(err)
        return any(
            word in text
            for word in ("locked", "busy", "full", "disk", "I/O", "readonly", "open")
        )
    # Plain DatabaseError: "file is not a database", "disk image is malformed".
    return type(err) is sqlite3.DatabaseError


def is_corruption(err: BaseException) -> bool:
    """Tell a damaged file from one that is only locked or on a full disk."""
    if isinstance(err, sqlite3.OperationalError):
        return False
    return type(err) is sqlite3.DatabaseError


class FaultGate:
    """Skip a file for a while after a fault; report the change both ways."""

    def __init__(self, name: str) -> None:
        """Start out assuming the file works (it was opened)."""
        self.name = name
        self.skip_until = 0.0
        self.failing = False
        self.last_error: str | None = None
        # Called on the event loop with (working, reason); raises repairs.
        self.on_change: Callable[[bool, str], None] | None = None

    def check(self) -> None:
        """Raise while the file is being skipped."""
        if time.monotonic() < self.skip_until:
            msg = f"The {self.name} is unavailable: {self.last_error}"
            raise StorageUnavailableError(msg)

    def failed(self, reason: str) -> None:
        """Record a fault; log and report only the first of an outage."""
        self.skip_until = time.monotonic() + FAULT_BACKOFF
        self.last_error = reason
        if not self.failing:
            self.failing = True
            LOGGER.warning("The %s is unavailable: %s", self.name, reason)
            if self.on_change is not None:
                self.on_change(False, reason)  # noqa: FBT003

    def succeeded(self, *, wrote: bool = True) -> None:
        """Record a call that worked; report a recovery once a write worked.

        A file that can be read but not written (a full disk) answers reads:
        they end the skip but leave the outage (and its repair issue) standing.
        """
        if not self.failing:
            return
        self.skip_until = 0.0
        if not wrote:
            return
        self.failing = False
        LOGGER.info("The %s works again", self.name)
        if self.on_change is not None:
            self.on_change(True, "")  # noqa: FBT003


# WAL lets readers and the writer work at once. Without a size limit the WAL
# file keeps its high-water mark (megabytes) after every checkpoint.
WAL_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA busy_timeout=10000",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA wal_autocheckpoint=256",
    "PRAGMA journal_size_limit=1048576",
)


@dataclass(frozen=True, slots=True)
class InFlight:
    """A Telegram message received and not answered yet."""

    conversation_key: str
    bot_entry_id: str
    chat_id: int
    message_id: int | None
    text: str
    received_at: float


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

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, check_same_thread=False, timeout=OPEN_TIMEOUT)
        try:
            # The first statement is where a damaged or locked file fails.
            for pragma in WAL_PRAGMAS:
                conn.execute(pragma)
            conn.execute("PRAGMA foreign_keys=ON")
        except BaseException:
            conn.close()
            raise
        return conn

    @staticmethod
    def _check(conn: sqlite3.Connection) -> None:
        """Raise DatabaseError when SQLite finds the file damaged."""
        rows = conn.execute("PRAGMA quick_check").fetchall()
        if [tuple(row) for row in rows] != [("ok",)]:
            problem = "; ".join(str(row[0]) for row in rows[:3])
            raise sqlite3.DatabaseError(problem)

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn: sqlite3.Connection | None = None
        try:
            conn = self._connect()
            self._check(conn)
            self._migrate(conn)
        except sqlite3.DatabaseError as err:
            if conn is not None:
                conn.close()
            if not is_corruption(err):
                # Locked by another program or a full disk: the file is fine
                # and must not be replaced; setup is retried later.
                raise
            # A file that is not a database cannot be repaired here; keep it for
            # the user and start a fresh one so the assistant keeps working.
            aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
            LOGGER.warning(
                "The database %s is damaged (%s); it was moved to %s and recreated",
                self.path,
                err,
                aside,
            )
            self.path.replace(aside)
            for suffix in ("-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            self.recreated_from = aside
            conn = self._connect()
            try:
                self._migrate(conn)
            except BaseException:
                conn.close()
                raise
        self._conn = conn

    @staticmethod
    def _migrate(conn: sqlite3.Connection) -> None:
        version: int = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            msg = f"Database schema {version} is newer than this version knows"
            raise sqlite3.DatabaseError(msg)
        for target in range(version + 1, SCHEMA_VERSION + 1):
            with conn:
                conn.executescript(
                    f"BEGIN; {MIGRATIONS[target]} PRAGMA user_version = {target};"
                )
            LOGGER.debug("Migrated the assistant database to schema %s", target)

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

        def _mark(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                "INSERT OR IGNORE INTO telegram_messages_seen"
                " (conversation_key, message_id, seen_at) VALUES (?, ?, ?)",
                (key, message_id, now),
            )
            return cur.rowcount == 1

        return await self.async_run(_mark)

    async def async_receive(self, message: InFlight) -> tuple[bool, int | None]:
        """Record a Telegram message before it is answered.

        Returns whether it is new in its chat (an edit or a replayed update
        is not) and the id of its in-flight row (None when seen before).
        """

        def _receive(conn: sqlite3.Connection) -> tuple[bool, int | None]:
            if message.message_id is not None:
                cur = conn.execute(
                    "INSERT OR IGNORE INTO telegram_messages_seen"
                    " (conversation_key, message_id, seen_at) VALUES (?, ?, ?)",
                    (message.conversation_key, message.message_id, message.received_at),
                )
                if cur.rowcount != 1:
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

        return await self.async_run(_receive)

    async def async_answered(self, in_flight_id: int) -> None:
        """Forget a message's in-flight row: it was answered (or that failed)."""
        await self.async_run(
            lambda conn: conn.execute(
                "DELETE FROM telegram_in_flight WHERE id = ?", (in_flight_id,)
            )
        )

    async def async_take_in_flight(self) -> list[InFlight]:
        """Return and forget the messages a stop left unanswered, oldest first."""

        def _take(conn: sqlite3.Connection) -> list[InFlight]:
            rows = conn.execute(
                "SELECT conversation_key, bot_entry_id, chat_id, message_id, text,"
                " received_at FROM telegram_in_flight ORDER BY id"
            ).fetchall()
            conn.execute("DELETE FROM telegram_in_flight")
            return [InFlight(*row) for row in rows]

        return await self.async_run(_take)

    async def async_prune(self, seen_before: float) -> None:
        """Forget seen-message ids older than ``seen_before``."""

        def _prune(conn: sqlite3.Connection) -> None:
            conn.execute(
                "DELETE FROM telegram_messages_seen WHERE seen_at < ?", (seen_before,)
            )
            # Rows a failed delete left behind; a start reports the others.
            conn.execute(
                "DELETE FROM telegram_in_flight WHERE received_at < ?", (seen_before,)
            )

        await self.async_run(_prune)

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


# VACUUM rewrites the whole file; worth it only when much of it is free.
VACUUM_FREE_SHARE: Final = 0.25
VACUUM_MIN_FREE_PAGES: Final = 64


def worth_vacuum(page_count: int, freelist: int) -> bool:
    """Tell whether VACUUM would give back a good part of the file."""
    return freelist >= VACUUM_MIN_FREE_PAGES and freelist >= page_count * (
        VACUUM_FREE_SHARE
    )
