"""Opening the assistant's SQLite file: WAL settings, damage checks, VACUUM advice."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Final

from ..const import LOGGER
from .faults import is_corruption
from .schema import migrate

# Opening waits longer: migrations run then, and nothing works without them.
OPEN_TIMEOUT: Final = 10.0  # seconds

# WAL lets readers and the writer work at once. Without a size limit the WAL
# file keeps its high-water mark (megabytes) after every checkpoint.
WAL_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA busy_timeout=10000",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA wal_autocheckpoint=256",
    "PRAGMA journal_size_limit=1048576",
)

# VACUUM rewrites the whole file; worth it only when much of it is free.
VACUUM_FREE_SHARE: Final = 0.25
VACUUM_MIN_FREE_PAGES: Final = 64


def connect(path: Path) -> sqlite3.Connection:
    """Open ``path`` with the WAL settings and foreign keys on."""
    conn = sqlite3.connect(path, check_same_thread=False, timeout=OPEN_TIMEOUT)
    try:
        # The first statement is where a damaged or locked file fails.
        for pragma in WAL_PRAGMAS:
            conn.execute(pragma)
        conn.execute("PRAGMA foreign_keys=ON")
    except BaseException:
        conn.close()
        raise
    return conn


def check(conn: sqlite3.Connection) -> None:
    """Raise DatabaseError when SQLite finds the file damaged."""
    rows = conn.execute("PRAGMA quick_check").fetchall()
    if [tuple(row) for row in rows] != [("ok",)]:
        problem = "; ".join(str(row[0]) for row in rows[:3])
        raise sqlite3.DatabaseError(problem)


def open_database(path: Path) -> tuple[sqlite3.Connection, Path | None]:
    """Open and migrate ``path``, moving a damaged file aside first.

    Returns the connection and where a damaged file was moved (None when the
    file was fine). Blocking: runs in the storage executor.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    conn: sqlite3.Connection | None = None
    try:
        conn = connect(path)
        check(conn)
        migrate(conn)
    except sqlite3.DatabaseError as err:
        if conn is not None:
            conn.close()
        if not is_corruption(err):
            # Locked by another program or a full disk: the file is fine
            # and must not be replaced; setup is retried later.
            raise
        # A file that is not a database cannot be repaired here; keep it for
        # the user and start a fresh one so the assistant keeps working.
        aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
        LOGGER.warning(
            "The database %s is damaged (%s); it was moved to %s and recreated",
            path,
            err,
            aside,
        )
        path.replace(aside)
        for suffix in ("-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        conn = connect(path)
        try:
            migrate(conn)
        except BaseException:
            conn.close()
            raise
        return conn, aside
    return conn, None


def worth_vacuum(page_count: int, freelist: int) -> bool:
    """Tell whether VACUUM would give back a good part of the file."""
    return freelist >= VACUUM_MIN_FREE_PAGES and freelist >= page_count * (
        VACUUM_FREE_SHARE
    )
