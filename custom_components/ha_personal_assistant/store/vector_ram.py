"""The vectors held in RAM: a normalized float32 matrix, or sign bits when too big."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..const import LOGGER
from .vector_math import grow, pack, top

if TYPE_CHECKING:
    from numpy.typing import NDArray


class RamVectors:
    """Chunk ids with their float32 rows or their sign bits, grown by doubling.

    Not thread-safe on its own: the :class:`VectorStore` lock guards it.
    """

    def __init__(self, memory_budget: int) -> None:
        """Start empty; floats are kept while ``memory_budget`` bytes allow."""
        self.memory_budget = memory_budget
        self.ids: NDArray[np.int64] = np.zeros(0, np.int64)
        self.count = 0
        self.matrix: NDArray[np.float32] | None = None
        # Sign bits, one row per 64-bit word and one column per vector: the
        # Hamming sum then adds a dozen long rows (3-4x faster than per vector).
        self.bits: NDArray[np.uint64] | None = None
        self.center: NDArray[np.float32] | None = None

    def reset(self) -> None:
        """Forget every vector."""
        self.ids = np.zeros(0, np.int64)
        self.count = 0
        self.matrix = None
        self.bits = None
        self.center = None

    def fits(self, count: int, dim: int) -> bool:
        """Tell whether ``count`` float32 vectors of ``dim`` fit the budget."""
        return count * dim * 4 <= self.memory_budget

    def append(
        self, ids: NDArray[np.int64], block: NDArray[np.float32], *, keep_floats: bool
    ) -> bool:
        """Add normalized rows; True when the floats just gave way to sign bits."""
        switched = False
        needed = self.count + len(ids)
        if len(self.ids) < needed:
            capacity = max(needed, 2 * len(self.ids), 1024)
            self.ids = grow(self.ids, capacity)
            if self.matrix is not None:
                self.matrix = grow(self.matrix, capacity)
            if self.bits is not None:
                self.bits = np.ascontiguousarray(grow(self.bits.T, capacity).T)
        if keep_floats and self.matrix is None and self.bits is None:
            self.matrix = np.zeros((len(self.ids), block.shape[1]), np.float32)
        if not keep_floats and self.matrix is not None:
            self._to_bits(self.matrix)
            switched = True
        if not keep_floats and self.bits is None:
            if self.center is None:
                self.center = block.mean(axis=0).astype(np.float32)
            words = pack(block[:1], self.center).shape[1]
            self.bits = np.zeros((words, len(self.ids)), np.uint64)
        start = self.count
        self.ids[start:needed] = ids
        if self.matrix is not None:
            self.matrix[start:needed] = block
        if self.bits is not None and self.center is not None:
            self.bits[:, start:needed] = pack(block, self.center).T
        self.count = needed
        return switched

    def _to_bits(self, matrix: NDArray[np.float32]) -> None:
        """Trade the float matrix for sign bits once it outgrows the budget."""
        live = matrix[: self.count]
        self.center = live.mean(axis=0).astype(np.float32)
        packed = pack(live, self.center)
        self.bits = np.zeros((packed.shape[1], len(self.ids)), np.uint64)
        self.bits[:, : self.count] = packed.T
        self.matrix = None
        LOGGER.debug("%s vectors no longer fit in RAM: sign bits", self.count)

    def drop(self, chunk_ids: set[int]) -> None:
        """Forget these chunks."""
        if not self.count or not chunk_ids:
            return
        live = self.ids[: self.count]
        keep = ~np.isin(live, np.fromiter(chunk_ids, np.int64, len(chunk_ids)))
        if keep.all():
            return
        kept = int(keep.sum())
        self.ids[:kept] = live[keep]
        if self.matrix is not None:
            self.matrix[:kept] = self.matrix[: self.count][keep]
        if self.bits is not None:
            self.bits[:, :kept] = self.bits[:, : self.count][:, keep]
        self.count = kept

    def exact(
        self, query: NDArray[np.float32], k: int, *, single_core: bool
    ) -> list[tuple[int, float]]:
        """Return the ``k`` most similar (chunk id, cosine) from the float matrix."""
        if self.matrix is None:
            return []
        live = self.matrix[: self.count]
        # einsum runs on one core; BLAS's threads lose on a busy host.
        scores = np.einsum("ij,j->i", live, query) if single_core else live @ query
        best = top(scores, k)
        return [(int(self.ids[i]), float(scores[i])) for i in best]

    def nearest_bits(self, query: NDArray[np.float32], pool: int) -> list[int]:
        """Return the chunk ids of the ``pool`` nearest sign-bit codes."""
        if self.bits is None or self.center is None:
            return []
        packed = pack(query[None, :], self.center)[0]
        live = self.bits[:, : self.count]
        distance = np.bitwise_count(live[0] ^ packed[0]).astype(np.uint16)
        for word in range(1, len(packed)):
            distance += np.bitwise_count(live[word] ^ packed[word])
        if pool < self.count:
            candidates = np.argpartition(distance, pool - 1)[:pool]
        else:
            candidates = np.arange(self.count)
        ids: list[int] = self.ids[candidates].tolist()
        return ids
