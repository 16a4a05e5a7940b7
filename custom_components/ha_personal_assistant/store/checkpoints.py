"""LangGraph checkpoints in SQLite, kept to the latest checkpoint per thread."""

from __future__ import annotations

from typing import TYPE_CHECKING

import aiosqlite
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from ..const import LOGGER
from .database import WAL_PRAGMAS

if TYPE_CHECKING:
    from pathlib import Path

# Every turn writes a new checkpoint; only the newest of a thread is ever read
# (to continue the conversation or resume an interrupted one), so older ones
# are deleted after the reply went out.
_PRUNE_SQL = (
    "DELETE FROM {table} WHERE thread_id = ?1 AND checkpoint_id < ("
    " SELECT MAX(checkpoint_id) FROM checkpoints"
    " WHERE thread_id = ?1 AND checkpoint_ns = '')"
)


class CheckpointStore:
    """One AsyncSqliteSaver on one file, shared by every config entry."""

    def __init__(self, path: Path) -> None:
        """Remember the file; ``async_open`` connects."""
        self.path = path
        self._conn: aiosqlite.Connection | None = None
        self.saver: AsyncSqliteSaver | None = None

    async def async_open(self) -> AsyncSqliteSaver:
        """Connect and create the tables."""
        conn = await aiosqlite.connect(self.path, timeout=10)
        try:
            for pragma in WAL_PRAGMAS:
                await conn.execute(pragma)
            saver = AsyncSqliteSaver(conn)
            await saver.setup()
        except BaseException:
            await conn.close()
            raise
        self._conn = conn
        self.saver = saver
        return saver

    async def async_prune(self, thread_id: str) -> None:
        """Delete every checkpoint of the thread but the newest."""
        saver = self.saver
        if saver is None:
            return
        try:
            async with saver.lock:
                for table in ("writes", "checkpoints"):
                    await saver.conn.execute(
                        _PRUNE_SQL.format(table=table), (thread_id,)
                    )
                await saver.conn.commit()
        except aiosqlite.Error as err:
            LOGGER.debug("Could not prune checkpoints: %s", err)

    async def async_delete_thread(self, thread_id: str) -> None:
        """Forget a conversation thread."""
        if self.saver is not None:
            await self.saver.adelete_thread(thread_id)

    async def async_size(self) -> int:
        """Return the bytes the checkpoint tables hold (for tests and diagnostics)."""
        if self._conn is None:
            return 0
        total = 0
        for table, columns in (
            ("checkpoints", "checkpoint, metadata"),
            ("writes", "value"),
        ):
            parts = " + ".join(
                f"COALESCE(LENGTH({c.strip()}), 0)" for c in columns.split(",")
            )
            async with self._conn.execute(
                f"SELECT COALESCE(SUM({parts}), 0) FROM {table}"  # noqa: S608
            ) as cur:
                row = await cur.fetchone()
            total += int(row[0]) if row else 0
        return total

    async def async_close(self) -> None:
        """Close the connection (and its thread)."""
        if self._conn is not None:
            conn, self._conn, self.saver = self._conn, None, None
            await conn.close()
