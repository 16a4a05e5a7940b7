"""Vector search over the document chunks: numpy in RAM, sign bits, or sqlite-vec."""

from __future__ import annotations

import contextlib
import math
import statistics
import threading
import time
from typing import TYPE_CHECKING, Final

import numpy as np

from ..const import LOGGER
from . import vector_rows as rows
from .vector_math import Engine, load_extension, normalize, top
from .vector_ram import RamVectors

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Iterable, Sequence

    from numpy.typing import NDArray

    from ..executor import BlockingExecutor
    from .database import Database

# Small hosts keep at most this much of float32 vectors in RAM; above it the
# sign bits (1/32 of the size) stand in for them until the exact rescore.
MAX_RAM_BYTES: Final = 64 * 1024 * 1024
# How many sign-bit candidates are rescored exactly from the float32 copies, at
# least; the pool doubles at load until recall@5 on probe queries reaches the
# target, up to a share of the collection (bench/retrieval.py has the figures).
RESCORE_CANDIDATES: Final = 400
MAX_POOL_SHARE: Final = 0.05
RECALL_TARGET: Final = 0.95
RECALL_PROBES: Final = 20
# Probe queries are stored chunks moved by this much noise (a paraphrase).
PROBE_NOISE: Final = 0.8
# Queries timed per engine when choosing the fastest one.
PROBE_QUERIES: Final = 9
# Loading and timing many vectors hold the connection longer than a turn's call.
MAINTENANCE_TIMEOUT: Final = 60.0
# The engine is chosen again when the collection grew or shrank this much.
REMEASURE_SHARE: Final = 0.25


class _NeedsDatabase(Exception):  # noqa: N818 - internal signal
    """The float matrix left RAM between choosing the path and searching."""


class VectorStore:
    """The embeddings of one model: canonical float32 BLOBs plus a search engine.

    Every method that touches numpy or SQLite is blocking and runs in the
    integration's executor; the async wrappers do that.
    """

    def __init__(
        self,
        database: Database,
        executor: BlockingExecutor,
        *,
        memory_budget: int = MAX_RAM_BYTES,
        use_extension: bool = True,
    ) -> None:
        """Create an empty store; :meth:`async_load` fills it."""
        self._database = database
        self.executor = executor
        self._use_extension = use_extension
        self._lock = threading.RLock()
        self.model: str | None = None
        self.dim: int | None = None
        # None: not tried yet; "": loaded; otherwise why it could not load.
        self.extension_error: str | None = None
        self.engine = Engine.EXACT
        self._ram = RamVectors(memory_budget)
        self._vec_ready = False
        self.pool = RESCORE_CANDIDATES
        # Exact search on one core (einsum) rather than threaded BLAS (matmul).
        self.single_core = True
        self._chosen_at = 0
        # Recall@5 of the sign-bit path on probe queries, when measured.
        self.binary_recall: float | None = None

    # ----------------------------------------------------------------- status

    @property
    def extension_loaded(self) -> bool:
        """Return True when sqlite-vec is available on the connection."""
        return self.extension_error == ""

    def __len__(self) -> int:
        """Return how many vectors of the current model are searchable."""
        return self._ram.count

    # ------------------------------------------------------------------ async

    async def async_load(self, model: str) -> None:
        """Load the extension (once) and the vectors of ``model``; pick an engine."""
        await self._database.async_run(
            lambda conn: self.load(conn, model), timeout=MAINTENANCE_TIMEOUT
        )

    async def async_add(self, items: Sequence[tuple[int, Sequence[float]]]) -> None:
        """Store and index vectors (chunk id, embedding) of the current model."""
        await self._database.async_run(lambda conn: self.add(conn, items))

    async def async_remove(self, chunk_ids: Iterable[int]) -> None:
        """Drop the vectors of these chunks from the indexes (rows cascade)."""
        ids = list(chunk_ids)
        await self._database.async_run(lambda conn: self.remove(conn, ids))

    async def async_search(
        self, query: Sequence[float], k: int
    ) -> list[tuple[int, float]]:
        """Return up to ``k`` (chunk id, cosine similarity), most similar first."""
        vector = np.asarray(query, dtype=np.float32)
        if self.engine is Engine.EXACT and self._ram.matrix is not None:
            # RAM only: no need to hold the database connection.
            with contextlib.suppress(_NeedsDatabase):
                return await self.executor.run(self.search, None, vector, k)
        return await self._database.async_run(lambda conn: self.search(conn, vector, k))

    async def async_choose_engine(self, *, force: bool = True) -> Engine:
        """Time each usable engine on stored vectors and keep the fastest.

        Without ``force``, only when the collection changed size by a quarter
        since the last choice (timing sqlite-vec on 100k vectors takes seconds).
        """
        if not force and (
            abs(self._ram.count - self._chosen_at) <= REMEASURE_SHARE * self._chosen_at
        ):
            return self.engine
        return await self._database.async_run(
            self.choose_engine, timeout=MAINTENANCE_TIMEOUT
        )

    # --------------------------------------------------------------- blocking

    def load(self, conn: sqlite3.Connection, model: str) -> None:
        """Read the vectors of ``model`` into RAM and sync the vec0 table."""
        with self._lock:
            if self.extension_error is None:
                self.extension_error = (
                    load_extension(conn) if self._use_extension else "switched off"
                ) or ""
                if self.extension_error:
                    LOGGER.warning("Vector search uses numpy: %s", self.extension_error)
            self.model = model
            row = conn.execute(
                "SELECT dim, COUNT(*) FROM rag_vectors WHERE model = ?"
                " GROUP BY dim ORDER BY COUNT(*) DESC LIMIT 1",
                (model,),
            ).fetchone()
            self.dim = int(row[0]) if row else None
            self._ram.reset()
            if self.dim is not None:
                self._load_ram(conn)
            self._vec_ready = False
            if self.extension_loaded and self.dim is not None:
                self._sync_vec0(conn)
            self.choose_engine(conn)

    def _load_ram(self, conn: sqlite3.Connection) -> None:
        """Stream the BLOBs into the matrix, or into sign bits when too big."""
        dim = self.dim or 0
        total = rows.count(conn, self.model, dim)
        keep_floats = self._ram.fits(total, dim)
        if not keep_floats:
            # The sign threshold is the mean vector: embeddings share a large
            # common direction that would otherwise set most bits alike.
            self._ram.center = rows.mean(conn, self.model, dim, total)
        for ids, block in rows.blocks(conn, self.model, dim):
            self._append(ids, block, keep_floats=keep_floats)

    def _append(
        self, ids: NDArray[np.int64], block: NDArray[np.float32], *, keep_floats: bool
    ) -> None:
        """Add normalized rows to RAM; a switch to sign bits changes the engine."""
        if self._ram.append(ids, block, keep_floats=keep_floats):
            # Until the engines are timed again: the one that needs no floats.
            self.engine = Engine.VEC0 if self._vec_ready else Engine.BINARY

    def _sync_vec0(self, conn: sqlite3.Connection) -> None:
        """Make rag_vec hold exactly the current model's vectors."""
        rows.sync_vec0(conn, self.model, self.dim or 0, self._ram.count)
        self._vec_ready = True

    def add(
        self, conn: sqlite3.Connection, items: Sequence[tuple[int, Sequence[float]]]
    ) -> None:
        """Write the canonical BLOBs, the vec0 rows and the RAM index."""
        if not items or self.model is None:
            return
        with self._lock:
            block = np.asarray([vector for _, vector in items], dtype=np.float32)
            dim = block.shape[1]
            if self.dim != dim:
                # A new model (or the first vectors): start the indexes afresh.
                self.dim = dim
                self._ram.reset()
                self._vec_ready = False
            ids = np.asarray([chunk_id for chunk_id, _ in items], np.int64)
            rows.write(conn, self.model, ids, block)
            self._ram.drop(set(ids.tolist()))
            self._append(
                ids,
                normalize(block),
                keep_floats=self._ram.fits(self._ram.count + len(ids), dim),
            )
            if self.extension_loaded:
                if not self._vec_ready:
                    self._sync_vec0(conn)
                else:
                    rows.vec0_replace(conn, ids, block)

    def remove(self, conn: sqlite3.Connection, chunk_ids: Sequence[int]) -> None:
        """Forget these chunks in RAM and in vec0 (their BLOB rows cascade)."""
        if not chunk_ids:
            return
        with self._lock:
            self._ram.drop(set(chunk_ids))
            if self.extension_loaded and self._vec_ready:
                rows.vec0_delete(conn, chunk_ids)

    def engines(self) -> list[Engine]:
        """Return the engines that can answer now."""
        usable: list[Engine] = []
        if self._ram.matrix is not None:
            usable.append(Engine.EXACT)
        if self._ram.bits is not None:
            usable.append(Engine.BINARY)
        if self.extension_loaded and self._vec_ready:
            usable.append(Engine.VEC0)
        return usable

    def choose_engine(self, conn: sqlite3.Connection) -> Engine:
        """Time each usable engine on stored vectors and keep the fastest."""
        with self._lock:
            usable = self.engines()
            self._chosen_at = self._ram.count
            if not usable or self._ram.count == 0:
                self.engine = Engine.EXACT
                return self.engine
            rng = np.random.default_rng(0)
            picks = rng.choice(
                self._ram.count, min(PROBE_QUERIES, self._ram.count), replace=False
            )
            queries = self._probe_vectors(conn, picks)
            if (
                Engine.BINARY in usable
                and not self._calibrate(conn, rng)
                and len(usable) > 1
            ):
                # Approximate below the recall target: exact vec0 instead.
                usable.remove(Engine.BINARY)
            timings: dict[Engine, float] = {}
            if Engine.EXACT in usable:
                # Threaded BLAS or one core: whichever is faster on this host now.
                per_mode: dict[bool, float] = {}
                for single in (True, False):
                    self.single_core = single
                    per_mode[single] = self._time(conn, queries, Engine.EXACT)
                self.single_core = per_mode[True] <= per_mode[False]
            # RAM engines first: sqlite-vec holds the connection (seconds at
            # 100k) and gives up once it has clearly lost.
            for engine in sorted(usable, key=lambda e: e is Engine.VEC0):
                best = min(timings.values(), default=math.inf)
                timings[engine] = self._time(
                    conn, queries, engine, give_up_after=best * 2 * len(queries)
                )
            self.engine = min(timings, key=lambda e: timings[e])
            LOGGER.debug(
                "Vector engine %s for %s vectors (median ms: %s)",
                self.engine,
                self._ram.count,
                {str(e): round(t * 1000, 2) for e, t in timings.items()},
            )
            return self.engine

    def _time(
        self,
        conn: sqlite3.Connection,
        queries: Sequence[NDArray[np.float32]],
        engine: Engine,
        *,
        give_up_after: float = math.inf,
    ) -> float:
        """Return the median seconds of a k=5 query on ``engine``.

        Infinite when the queries together took longer than ``give_up_after``.
        """
        spent: list[float] = []
        for query in queries:
            start = time.perf_counter()
            self.search(conn, query, 5, engine=engine)
            spent.append(time.perf_counter() - start)
            if sum(spent) > give_up_after:
                return math.inf
        return statistics.median(spent)

    def _calibrate(self, conn: sqlite3.Connection, rng: np.random.Generator) -> bool:
        """Size the rescore pool for recall@5 >= the target on probe queries."""
        count = min(RECALL_PROBES, self._ram.count)
        picks = rng.choice(self._ram.count, count, replace=False)
        stored = np.stack(self._probe_vectors(conn, picks))
        noise = rng.normal(size=stored.shape).astype(np.float32)
        noise *= PROBE_NOISE / np.sqrt(stored.shape[1])
        probes = normalize(stored + noise)
        truth = rows.exact_top(conn, self.model, self.dim or 0, probes, 5)
        cap = max(RESCORE_CANDIDATES, int(self._ram.count * MAX_POOL_SHARE))
        self.pool = RESCORE_CANDIDATES
        while True:
            found = [
                {chunk_id for chunk_id, _ in self._search_bits(conn, probe, 5)}
                for probe in probes
            ]
            self.binary_recall = statistics.fmean(
                len(f & t) / max(len(t), 1) for f, t in zip(found, truth, strict=True)
            )
            if self.binary_recall >= RECALL_TARGET or self.pool >= cap:
                return self.binary_recall >= RECALL_TARGET
            self.pool = min(self.pool * 2, cap)

    def _probe_vectors(
        self, conn: sqlite3.Connection, picks: NDArray[np.int64]
    ) -> list[NDArray[np.float32]]:
        if (floats := self._ram.matrix) is not None:
            return [floats[i].copy() for i in picks]
        _, matrix = rows.fetch(conn, self._ram.ids[picks].tolist(), self.dim or 0)
        return list(matrix)

    def search(
        self,
        conn: sqlite3.Connection | None,
        query: NDArray[np.float32],
        k: int,
        *,
        engine: Engine | None = None,
    ) -> list[tuple[int, float]]:
        """Return up to ``k`` (chunk id, cosine similarity), most similar first."""
        with self._lock:
            engine = engine or self.engine
            if self._ram.count == 0 or k <= 0 or query.shape[-1] != self.dim:
                return []
            query = normalize(query.astype(np.float32, copy=False))
            if engine is Engine.EXACT and self._ram.matrix is not None:
                return self._ram.exact(query, k, single_core=self.single_core)
            if conn is None:
                raise _NeedsDatabase
            if engine is Engine.VEC0 and self._vec_ready:
                return rows.vec0_search(conn, query, k)
            return self._search_bits(conn, query, k)

    def _search_bits(
        self, conn: sqlite3.Connection, query: NDArray[np.float32], k: int
    ) -> list[tuple[int, float]]:
        """Hamming prefilter on sign bits, then exact cosine on the candidates."""
        if self._ram.bits is None or self._ram.center is None:
            # The matrix is in RAM: exact search is both exact and faster.
            return self.search(conn, query, k, engine=Engine.EXACT)
        pool = min(self._ram.count, max(self.pool, k))
        candidates = self._ram.nearest_bits(query, pool)
        found, vectors = rows.fetch(conn, candidates, self.dim or 0)
        if not found:
            return []
        scores = np.einsum("ij,j->i", vectors, query)
        return [(found[i], float(scores[i])) for i in top(scores, k)]
