"""LangGraph checkpoints in SQLite, kept to the latest checkpoint per thread."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, override

import aiosqlite
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from ..const import LOGGER
from . import database as db
from . import sqlite_file
from .faults import (
    FaultGate,
    StorageUnavailableError,
    is_corruption,
    is_storage_fault,
)
from .sqlite_file import WAL_PRAGMAS, worth_vacuum

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Coroutine, Sequence

    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
    )

# Every turn writes a new checkpoint; only the newest of a thread is ever read
# (to continue the conversation or resume an interrupted one), so older ones
# are deleted after the reply went out.
_PRUNE_SQL = (
    "DELETE FROM {table} WHERE thread_id = ?1 AND checkpoint_id < ("
    " SELECT MAX(checkpoint_id) FROM checkpoints"
    " WHERE thread_id = ?1 AND checkpoint_ns = '')"
)


async def _scalar(conn: aiosqlite.Connection, sql: str) -> int:
    async with conn.execute(sql) as cur:
        row = await cur.fetchone()
    return int(row[0]) if row else 0


def _raise_if_damaged(rows: list[Any]) -> None:
    if [tuple(row) for row in rows] != [("ok",)]:
        raise sqlite3.DatabaseError("; ".join(str(row[0]) for row in rows[:3]))


def _thread_of(config: RunnableConfig) -> str | None:
    thread = config.get("configurable", {}).get("thread_id")
    return str(thread) if thread is not None else None


class ResilientSaver(BaseCheckpointSaver[str]):
    """The SQLite saver with deadlines; a failing file never fails a turn.

    When a thread cannot be loaded the turn runs as a new conversation, and
    nothing of that turn is saved: a later save would otherwise replace the
    thread's real (intact) history with the one-turn stand-in.
    """

    def __init__(self, inner: AsyncSqliteSaver, gate: FaultGate) -> None:
        """Wrap ``inner``; ``gate`` skips the file for a while after a fault."""
        super().__init__(serde=inner.serde)
        self.inner = inner
        self.gate = gate
        self._unsaved: set[str] = set()

    def skip_saving(self, thread_id: str) -> None:
        """Run the thread's next turn without saving it."""
        self._unsaved.add(thread_id)

    def turn_ended(self, thread_id: str) -> None:
        """Forget the thread's mark once a turn ended, saved or not (it failed)."""
        self._unsaved.discard(thread_id)

    async def _guard[T](self, call: Coroutine[Any, Any, T]) -> T:
        try:
            self.gate.check()
        except StorageUnavailableError:
            # Skipped: the call never starts (closed, not left unawaited).
            call.close()
            raise
        try:
            # SQLite's busy timeout (db.DB_TIMEOUT) normally answers first.
            async with asyncio.timeout(db.DB_TIMEOUT + 1):
                result = await call
        except TimeoutError as err:
            self.gate.failed(f"no answer within {db.DB_TIMEOUT:g} s")
            raise StorageUnavailableError(str(self.gate.last_error)) from err
        except sqlite3.Error as err:
            if is_storage_fault(err):
                self.gate.failed(str(err))
            raise
        self.gate.succeeded()
        return result

    @override
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        thread = _thread_of(config)
        if thread in self._unsaved:
            return None
        try:
            return await self._guard(self.inner.aget_tuple(config))
        except sqlite3.Error as err:
            LOGGER.debug("Conversation %s not loaded: %s", thread, err)
            if thread is not None:
                self._unsaved.add(thread)
            return None
        except (ValueError, TypeError, KeyError, AttributeError, ImportError) as err:
            # The file answered, but the saved state does not decode (a
            # damaged row, or a format an older LangGraph cannot read). It
            # will never load: the conversation starts afresh and this turn
            # is saved in its place, instead of every turn failing until /new.
            LOGGER.warning(
                "The saved conversation %s cannot be read (%s: %s); it starts afresh",
                thread,
                type(err).__name__,
                err,
            )
            return None

    @override
    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        thread = _thread_of(config)
        if thread in self._unsaved:
            # The turn is over (durability "exit" saves once, at the end).
            self._unsaved.discard(thread)
            return config
        try:
            return await self._guard(
                self.inner.aput(config, checkpoint, metadata, new_versions)
            )
        except sqlite3.Error as err:
            LOGGER.debug("Conversation %s not saved: %s", thread, err)
            return config

    @override
    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        if _thread_of(config) in self._unsaved:
            return
        try:
            await self._guard(
                self.inner.aput_writes(config, writes, task_id, task_path)
            )
        except sqlite3.Error as err:
            LOGGER.debug("Pending writes not saved: %s", err)

    @override
    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        async for item in self.inner.alist(
            config, filter=filter, before=before, limit=limit
        ):
            yield item

    @override
    async def adelete_thread(self, thread_id: str) -> None:
        await self._guard(self.inner.adelete_thread(thread_id))

    @override
    def get_next_version(self, current: str | None, channel: None) -> str:
        return self.inner.get_next_version(current, channel)


class CheckpointStore:
    """One AsyncSqliteSaver on one file."""

    def __init__(self, path: Path) -> None:
        """Remember the file; ``async_open`` connects."""
        self.path = path
        self._conn: aiosqlite.Connection | None = None
        self.saver: ResilientSaver | None = None
        self.gate = FaultGate("conversation checkpoint file")
        self.recreated_from: Path | None = None

    async def async_open(self) -> ResilientSaver:
        """Connect and create the tables; a damaged file is moved aside."""
        try:
            conn, inner = await self._async_connect()
        except sqlite3.DatabaseError as err:
            if not is_corruption(err):
                raise
            aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
            LOGGER.warning(
                "The checkpoint file %s is damaged (%s); it was moved to %s and"
                " recreated",
                self.path,
                err,
                aside,
            )
            self._move_aside(aside)
            self.recreated_from = aside
            conn, inner = await self._async_connect()
        self._conn = conn
        self.saver = ResilientSaver(inner, self.gate)
        return self.saver

    def _move_aside(self, aside: Path) -> None:
        # Called once at startup, before anything uses the file.
        self.path.replace(aside)
        for suffix in ("-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    async def _async_connect(self) -> tuple[aiosqlite.Connection, AsyncSqliteSaver]:
        conn = await aiosqlite.connect(self.path, timeout=sqlite_file.OPEN_TIMEOUT)
        try:
            for pragma in WAL_PRAGMAS:
                await conn.execute(pragma)
            async with conn.execute("PRAGMA quick_check") as cur:
                _raise_if_damaged(list(await cur.fetchall()))
            saver = AsyncSqliteSaver(conn)
            await saver.setup()
            # Turns wait at most db.DB_TIMEOUT for the file, not ten seconds.
            await conn.execute(f"PRAGMA busy_timeout={int(db.DB_TIMEOUT * 1000)}")
        except BaseException:
            await conn.close()
            raise
        return conn, saver

    def skip_saving(self, thread_id: str) -> None:
        """Run the thread's next turn as a new conversation, without saving."""
        if self.saver is not None:
            self.saver.skip_saving(thread_id)

    def turn_ended(self, thread_id: str) -> None:
        """Let the thread's next turn load and save normally again."""
        if self.saver is not None:
            self.saver.turn_ended(thread_id)

    async def async_prune(self, thread_id: str) -> None:
        """Delete every checkpoint of the thread but the newest."""
        wrapper = self.saver
        if wrapper is None or wrapper.gate.failing:
            return
        saver = wrapper.inner
        try:
            async with saver.lock:
                for table in ("writes", "checkpoints"):
                    await saver.conn.execute(
                        _PRUNE_SQL.format(table=table), (thread_id,)
                    )
                await saver.conn.commit()
        except (sqlite3.Error, TimeoutError) as err:
            LOGGER.debug("Could not prune checkpoints: %s", err)

    async def async_threads(self) -> set[str]:
        """Return every thread that has a checkpoint."""
        if self.saver is None:
            return set()
        saver = self.saver.inner
        async with (
            saver.lock,
            saver.conn.execute("SELECT DISTINCT thread_id FROM checkpoints") as cur,
        ):
            return {str(row[0]) for row in await cur.fetchall()}

    async def async_delete_threads(self, thread_ids: set[str]) -> None:
        """Forget many threads in one transaction (scheduled pruning)."""
        if self.saver is None or not thread_ids:
            return
        saver = self.saver.inner
        ids = sorted(thread_ids)
        async with saver.lock:
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for table in ("writes", "checkpoints"):
                    await saver.conn.execute(
                        f"DELETE FROM {table} WHERE thread_id IN ({marks})",  # noqa: S608
                        chunk,
                    )
            await saver.conn.commit()

    async def async_vacuum_if_worth_it(self) -> bool:
        """Give freed space back to the disk when much of the file is free."""
        if self.saver is None:
            return False
        saver = self.saver.inner
        async with saver.lock:
            pages = await _scalar(saver.conn, "PRAGMA page_count")
            free = await _scalar(saver.conn, "PRAGMA freelist_count")
            if not worth_vacuum(pages, free):
                return False
            await saver.conn.execute("VACUUM")
            await saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return True

    async def async_delete_thread(self, thread_id: str) -> None:
        """Forget a conversation thread."""
        if self.saver is not None:
            await self.saver.adelete_thread(thread_id)

    async def async_close(self) -> None:
        """Close the connection (and its thread)."""
        if self._conn is not None:
            conn, self._conn, self.saver = self._conn, None, None
            await conn.close()
