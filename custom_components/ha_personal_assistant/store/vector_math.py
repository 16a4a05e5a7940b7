"""Vector search building blocks: the engines, sqlite-vec loading, numpy helpers."""

from __future__ import annotations

import sqlite3
from enum import StrEnum
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray


class Engine(StrEnum):
    """How a query is answered."""

    # Exact cosine over the normalized float32 matrix in RAM.
    EXACT = "numpy_exact"
    # Hamming distance on sign bits in RAM, then an exact rescore from SQLite.
    BINARY = "binary_rescore"
    # sqlite-vec's vec0 table (exact, brute force inside SQLite).
    VEC0 = "sqlite_vec"


def load_extension(conn: sqlite3.Connection) -> str | None:
    """Load sqlite-vec into the connection; return why not, or None when loaded."""
    try:
        import sqlite_vec  # noqa: PLC0415 - no musl wheel: may be missing

        conn.enable_load_extension(True)  # noqa: FBT003 - sqlite3's signature
        try:
            sqlite_vec.load(conn)
        finally:
            conn.enable_load_extension(False)  # noqa: FBT003
    except ImportError as err:
        return f"sqlite-vec is not installed ({err})"
    except AttributeError:
        return "this Python's sqlite3 cannot load extensions"
    except sqlite3.Error as err:
        return f"sqlite-vec did not load ({err})"
    return None


def normalize(vectors: NDArray[np.float32]) -> NDArray[np.float32]:
    """Return the rows scaled to unit length (zero rows stay zero)."""
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    norms[norms == 0] = 1.0
    result: NDArray[np.float32] = (vectors / norms).astype(np.float32, copy=False)
    return result


def pack(
    vectors: NDArray[np.float32], center: NDArray[np.float32]
) -> NDArray[np.uint64]:
    """Return the sign bits of ``vectors - center``, 64 to a word."""
    bits = np.packbits(vectors > center, axis=-1)
    pad = (-bits.shape[-1]) % 8
    if pad:
        bits = np.pad(bits, [(0, 0)] * (bits.ndim - 1) + [(0, pad)])
    words: NDArray[np.uint64] = np.ascontiguousarray(bits).view(np.uint64)
    return words


def top(scores: NDArray[np.floating], k: int) -> NDArray[np.intp]:
    """Return the indices of the ``k`` highest scores, best first."""
    if k >= len(scores):
        return np.argsort(-scores, kind="stable")
    part = np.argpartition(-scores, k - 1)[:k]
    order: NDArray[np.intp] = part[np.argsort(-scores[part], kind="stable")]
    return order


def grow[A: np.generic](array: NDArray[A], capacity: int) -> NDArray[A]:
    """Return ``array`` copied into zeros of ``capacity`` rows."""
    grown = np.zeros((capacity, *array.shape[1:]), array.dtype)
    grown[: len(array)] = array
    return grown
