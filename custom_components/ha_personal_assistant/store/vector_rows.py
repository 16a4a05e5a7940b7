"""The canonical float32 vectors in rag_vectors, and the sqlite-vec table beside them.

Every function here is blocking and runs on the database connection.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

import numpy as np

from .vector_math import normalize

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Iterator, Sequence

    from numpy.typing import NDArray

VEC_TABLE: Final = "rag_vec"
_DIM_RE: Final = re.compile(r"float\[(\d+)\]")


def count(conn: sqlite3.Connection, model: str | None, dim: int) -> int:
    """Return how many vectors of ``model`` and ``dim`` are stored."""
    total: int = conn.execute(
        "SELECT COUNT(*) FROM rag_vectors WHERE model = ? AND dim = ?",
        (model, dim),
    ).fetchone()[0]
    return total


def blocks(
    conn: sqlite3.Connection,
    model: str | None,
    dim: int,
    *,
    size: int = 4096,
    ordered: bool = True,
) -> Iterator[tuple[NDArray[np.int64], NDArray[np.float32]]]:
    """Yield (chunk ids, normalized vectors) of ``model``, ``size`` rows at a time."""
    order = " ORDER BY chunk_id" if ordered else ""
    cursor = conn.execute(
        "SELECT chunk_id, vector FROM rag_vectors"  # noqa: S608 - a constant clause
        f" WHERE model = ? AND dim = ?{order}",
        (model, dim),
    )
    while rows := cursor.fetchmany(size):
        ids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
        block = normalize(
            np.frombuffer(b"".join(r[1] for r in rows), np.float32).reshape(
                len(rows), dim
            )
        )
        yield ids, block


def mean(
    conn: sqlite3.Connection, model: str | None, dim: int, total: int
) -> NDArray[np.float32]:
    """Return the mean of the normalized vectors of ``model``."""
    acc = np.zeros(dim, np.float64)
    cursor = conn.execute(
        "SELECT vector FROM rag_vectors WHERE model = ? AND dim = ?",
        (model, dim),
    )
    while rows := cursor.fetchmany(4096):
        block = np.frombuffer(b"".join(r[0] for r in rows), np.float32)
        acc += normalize(block.reshape(len(rows), dim)).sum(axis=0)
    return (acc / max(total, 1)).astype(np.float32)


def fetch(
    conn: sqlite3.Connection, chunk_ids: Sequence[int], dim: int
) -> tuple[list[int], NDArray[np.float32]]:
    """Return the ids found and their normalized float32 vectors."""
    found: list[int] = []
    blobs: list[bytes] = []
    # SQLite allows 32766 variables; stay well below.
    for start in range(0, len(chunk_ids), 900):
        part = chunk_ids[start : start + 900]
        marks = ",".join("?" * len(part))
        for chunk_id, blob in conn.execute(
            f"SELECT chunk_id, vector FROM rag_vectors WHERE chunk_id IN ({marks})",  # noqa: S608
            part,
        ):
            found.append(chunk_id)
            blobs.append(blob)
    matrix = np.frombuffer(b"".join(blobs), np.float32).reshape(len(found), dim)
    return found, normalize(matrix)


def exact_top(
    conn: sqlite3.Connection,
    model: str | None,
    dim: int,
    probes: NDArray[np.float32],
    k: int,
) -> list[set[int]]:
    """Return the exact top-k ids of each probe, streaming every BLOB once."""
    best_ids = np.zeros((len(probes), 0), np.int64)
    best_scores = np.zeros((len(probes), 0), np.float32)
    for ids, block in blocks(conn, model, dim, size=8192, ordered=False):
        scores = np.concatenate([best_scores, probes @ block.T], axis=1)
        all_ids = np.concatenate(
            [best_ids, np.broadcast_to(ids, (len(probes), len(ids)))], axis=1
        )
        keep = np.argsort(-scores, axis=1)[:, :k]
        best_scores = np.take_along_axis(scores, keep, axis=1)
        best_ids = np.take_along_axis(all_ids, keep, axis=1)
    return [set(row.tolist()) for row in best_ids]


def write(
    conn: sqlite3.Connection,
    model: str,
    ids: NDArray[np.int64],
    block: NDArray[np.float32],
) -> None:
    """Store the canonical BLOBs (raw, not normalized) of these chunks."""
    dim = block.shape[1]
    conn.executemany(
        "INSERT OR REPLACE INTO rag_vectors (chunk_id, model, dim, vector)"
        " VALUES (?, ?, ?, ?)",
        [
            (int(chunk_id), model, dim, row.tobytes())
            for chunk_id, row in zip(ids, block, strict=True)
        ],
    )


# ------------------------------------------------------------------- vec0


def _vec_dim(conn: sqlite3.Connection) -> int | None:
    row = conn.execute(
        "SELECT sql FROM sqlite_master WHERE name = ?", (VEC_TABLE,)
    ).fetchone()
    if row is None:
        return None
    match = _DIM_RE.search(row[0] or "")
    return int(match.group(1)) if match else -1


def sync_vec0(
    conn: sqlite3.Connection, model: str | None, dim: int, expected: int
) -> None:
    """Make rag_vec hold exactly the ``expected`` vectors of ``model``."""
    current = _vec_dim(conn)
    state = conn.execute("SELECT model, dim FROM rag_vec_state").fetchone()
    # The table must hold this model's vectors, all of them: another model
    # may have filled it, or vectors may have been written without it.
    rebuild = current != dim or state != (model, dim)
    if not rebuild:
        have: int = conn.execute(f"SELECT COUNT(*) FROM {VEC_TABLE}").fetchone()[0]  # noqa: S608
        rebuild = have != expected
    if rebuild:
        if current is not None:
            conn.execute(f"DROP TABLE {VEC_TABLE}")
        conn.execute(
            f"CREATE VIRTUAL TABLE {VEC_TABLE} USING vec0("
            f"embedding float[{dim}] distance_metric=cosine)"
        )
        conn.execute(
            f"INSERT INTO {VEC_TABLE} (rowid, embedding)"  # noqa: S608
            " SELECT chunk_id, vector FROM rag_vectors WHERE model = ? AND dim = ?",
            (model, dim),
        )
        conn.execute(
            "INSERT OR REPLACE INTO rag_vec_state (id, model, dim) VALUES (1, ?, ?)",
            (model, dim),
        )


def vec0_replace(
    conn: sqlite3.Connection, ids: NDArray[np.int64], block: NDArray[np.float32]
) -> None:
    """Replace these chunks' rows in the vec0 table."""
    vec0_delete(conn, ids.tolist())
    conn.executemany(
        f"INSERT INTO {VEC_TABLE} (rowid, embedding) VALUES (?, ?)",  # noqa: S608
        [(int(i), row.tobytes()) for i, row in zip(ids, block, strict=True)],
    )


def vec0_delete(conn: sqlite3.Connection, chunk_ids: Sequence[int]) -> None:
    """Delete these chunks' rows from the vec0 table."""
    conn.executemany(
        f"DELETE FROM {VEC_TABLE} WHERE rowid = ?",  # noqa: S608
        [(int(i),) for i in chunk_ids],
    )


def vec0_search(
    conn: sqlite3.Connection, query: NDArray[np.float32], k: int
) -> list[tuple[int, float]]:
    """Return up to ``k`` (chunk id, cosine similarity) from the vec0 table."""
    rows = conn.execute(
        f"SELECT rowid, distance FROM {VEC_TABLE}"  # noqa: S608
        " WHERE embedding MATCH ? AND k = ? ORDER BY distance",
        (query.tobytes(), k),
    ).fetchall()
    return [(int(r[0]), 1.0 - float(r[1])) for r in rows]
