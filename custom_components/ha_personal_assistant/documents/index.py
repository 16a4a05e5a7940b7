"""The document index: stores, embeds (in the background) and searches documents."""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from ..const import EMBED_TIMEOUT, LOGGER, QUERY_CACHE_SIZE, SEARCH_RESULTS
from ..model_server import ModelServerError
from ..repairs import async_log_vector_engine
from ..store import documents as records
from ..store.documents import SOURCE_FILE, SOURCE_HA, AddResult, Indexing, SyncResult
from ..store.vectors import MAINTENANCE_TIMEOUT
from .embedder import Embedder
from .folder import read_folder
from .ha_watch import HaKnowledgeWatch
from .knowledge import ha_knowledge, still_known

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from homeassistant.config_entries import ConfigEntry
    from homeassistant.core import HomeAssistant

    from ..model_server import ModelBackend
    from ..store.database import Database
    from ..store.vectors import VectorStore

# Document hits at or above this similarity may enter the context on their own.
AUTO_CONTEXT_MIN_SCORE: Final = 0.45


@dataclass(frozen=True, slots=True)
class DocumentHit:
    """A chunk that matched a query."""

    title: str
    content: str
    score: float  # cosine similarity
    source: str  # "document" (add_document), "file" (documents folder), "ha"
    trusted: bool  # True only for text we generated from HA's registries


class DocumentsUnavailable(Exception):  # noqa: N818 - reads as a state, like HA's
    """The query could not be embedded (Ollama or the model is unavailable)."""


class DocumentIndex:
    """Chunks and searches documents; an :class:`Embedder` embeds in the background."""

    def __init__(  # noqa: PLR0913 - keyword-only wiring
        self,
        hass: HomeAssistant,
        entry: ConfigEntry[Any],
        database: Database,
        vectors: VectorStore,
        *,
        backend: ModelBackend,
        model: str,
        folder: Path,
    ) -> None:
        """Keep the wiring; nothing is read until :meth:`async_start`."""
        self.hass = hass
        self.entry = entry
        self.database = database
        self.vectors = vectors
        self.backend = backend
        self.model = model
        self.folder = folder
        self._query_cache: OrderedDict[str, list[float]] = OrderedDict()
        self._starter: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stopped = False
        self._loaded = asyncio.Event()
        self._started = asyncio.Event()
        self._sync_lock = asyncio.Lock()
        self.embedder = Embedder(
            hass,
            entry,
            database,
            vectors,
            backend=backend,
            model=model,
            loaded=self._loaded,
        )
        self._watch = HaKnowledgeWatch(hass, entry, self.refresh_ha)

    @property
    def embed_error(self) -> str | None:
        """Return why embedding last failed; None while it works."""
        return self.embedder.embed_error

    # ------------------------------------------------------------- lifecycle

    async def async_start(self) -> None:
        """Load the vectors, then pick up files and HA knowledge; background."""
        try:
            try:
                await self.vectors.async_load(self.model)
            finally:
                self._loaded.set()
                # numpy searching instead of sqlite-vec is no fault the user
                # must fix (HA OS has no sqlite-vec): a log line and
                # diagnostics say so, not a repair.
                async_log_vector_engine(self.hass, self.vectors.extension_error)
            await self.async_reindex()
        finally:
            self._started.set()

    def start(self) -> None:
        """Start :meth:`async_start` as a background task of the entry.

        From then on, changes to what is exposed to Assist, to the registries
        and to entity names rebuild HA knowledge (debounced).
        """
        self._starter = self.entry.async_create_background_task(
            self.hass, self.async_start(), "ha_personal_assistant documents"
        )
        self._watch.start()

    async def async_stop(self) -> None:
        """Stop indexing and embedding; call it before the database closes."""
        self._stopped = True
        self.embedder.stop()
        self._watch.stop()
        tasks = [t for t in (self._starter, self.embedder.worker, *self._tasks) if t]
        for task in tasks:
            task.cancel()
        if tasks:
            # A task that had already failed (a full disk) must not fail the
            # unload: the storage still has to be released after this.
            await asyncio.wait(tasks)
        for task in tasks:
            if not task.cancelled() and (err := task.exception()) is not None:
                LOGGER.debug("Document indexing had stopped: %s", err)
        self._started.set()
        self._loaded.set()

    async def async_reindex(self) -> dict[str, SyncResult]:
        """Re-read the documents folder and HA knowledge; embed what changed."""
        files = await self._async_read_folder()
        results = {
            SOURCE_FILE: await self._async_sync(SOURCE_FILE, files),
            SOURCE_HA: await self._async_sync(SOURCE_HA, ha_knowledge(self.hass)),
        }
        self.embedder.kick()
        return results

    def refresh_ha(self) -> None:
        """Start :meth:`async_refresh_ha` as a background task of the entry."""
        if self._stopped:
            return
        task = self.entry.async_create_background_task(
            self.hass, self.async_refresh_ha(), "ha_personal_assistant HA knowledge"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def async_refresh_ha(self) -> SyncResult:
        """Rebuild the HA knowledge documents (daily)."""
        result = await self._async_sync(SOURCE_HA, ha_knowledge(self.hass))
        self.embedder.kick()
        return result

    async def _async_read_folder(self) -> dict[str, str]:
        try:
            return await self.vectors.executor.run(read_folder, self.folder)
        except OSError as err:
            LOGGER.warning(
                "Could not read the documents folder %s: %s", self.folder, err
            )
            return {}

    async def async_wait_idle(self) -> None:
        """Wait until every chunk has been embedded (or embedding gave up)."""
        await self._started.wait()
        while self._tasks:
            await asyncio.wait(list(self._tasks))
        while (worker := self.embedder.worker) is not None and not worker.done():
            await asyncio.shield(worker)

    # ------------------------------------------------------------------ write

    async def async_add(
        self, title: str, content: str, *, wait: float = 0.0
    ) -> AddResult:
        """Add a document; the same title is replaced, the same content kept once.

        Waits up to ``wait`` seconds for its chunks to be embedded (searchable);
        the result says how many were.
        """
        now = time.time()
        add = functools.partial(
            records.add, vectors=self.vectors, title=title, content=content, now=now
        )
        async with self._sync_lock:
            result = await self.database.async_run(add, timeout=MAINTENANCE_TIMEOUT)
        # A duplicate may still wait for its vectors (Ollama was down).
        self.embedder.kick()
        embedded = await self.async_wait_embedded(result.document_id, wait)
        return replace(result, embedded=embedded)

    async def async_wait_embedded(self, document_id: int, timeout: float) -> int:  # noqa: ASYNC109 - a bound, not a cancel scope
        """Wait up to ``timeout`` s until a document's chunks are searchable.

        Returns how many are. Ends early when embedding fails (Ollama or the
        model is unavailable): the chunks stay queued for the next attempt.
        """
        return await self.embedder.async_wait_embedded(document_id, timeout)

    async def async_indexing(self) -> list[Indexing]:
        """Return the documents and files not fully searchable yet (oldest first)."""
        busy = self.embedder.busy or (
            self._starter is not None and not self._starter.done()
        )
        if not busy and self.embed_error is None:
            # The embedder ran to the end and nothing was added since.
            return []
        return await self.database.async_run(
            functools.partial(records.indexing, model=self.model)
        )

    async def _async_sync(self, source: str, docs: Mapping[str, str]) -> SyncResult:
        """Make the documents of ``source`` match ``docs`` (title -> text)."""
        sync = functools.partial(
            records.sync,
            vectors=self.vectors,
            source=source,
            docs=docs,
            now=time.time(),
        )
        async with self._sync_lock:
            return await self.database.async_run(sync, timeout=MAINTENANCE_TIMEOUT)

    # ----------------------------------------------------------------- search

    async def _async_query_vector(self, query: str) -> list[float]:
        key = " ".join(query.split()).casefold()
        if (cached := self._query_cache.get(key)) is not None:
            self._query_cache.move_to_end(key)
            return cached
        try:
            vector = (
                await self.backend.async_embed(self.model, [query], EMBED_TIMEOUT)
            )[0]
        except ModelServerError as err:
            self.embedder.failed(str(err))
            raise DocumentsUnavailable(str(err)) from err
        if self.embed_error is not None:
            # Ollama is back: embed what was left when it went away.
            self.embedder.kick()
        self.embedder.worked()
        self._query_cache[key] = vector
        while len(self._query_cache) > QUERY_CACHE_SIZE:
            self._query_cache.popitem(last=False)
        return vector

    async def async_query(
        self, query: str, k: int = SEARCH_RESULTS
    ) -> list[DocumentHit]:
        """Return the ``k`` chunks most similar to ``query``.

        Raise DocumentsUnavailable when the query cannot be embedded.
        """
        await self._loaded.wait()
        if not query.strip() or len(self.vectors) == 0:
            return []
        vector = await self._async_query_vector(query)
        # A few more than asked for: stale HA passages are dropped below.
        pairs = await self.vectors.async_search(vector, 2 * k)
        if not pairs:
            return []
        ids = [chunk_id for chunk_id, _ in pairs]
        rows = await self.database.async_run(
            functools.partial(records.read_chunks, ids=ids)
        )
        hits: list[DocumentHit] = []
        knowledge: dict[str, str] | None = None
        for chunk_id, score in pairs:
            if chunk_id not in rows:
                continue
            title, content, source = rows[chunk_id]
            if source == SOURCE_HA:
                # Checked against the house as it is now, not as it was
                # indexed: what was hidden since is never shown.
                if knowledge is None:
                    knowledge = ha_knowledge(self.hass)
                content = still_known(title, content, knowledge)
                if not content:
                    continue
            hits.append(
                DocumentHit(
                    title=title,
                    content=content,
                    score=score,
                    source=source,
                    trusted=source == SOURCE_HA,
                )
            )
            if len(hits) == k:
                break
        return hits

    async def async_search(
        self, query: str, k: int = SEARCH_RESULTS
    ) -> list[DocumentHit]:
        """Return the ``k`` most similar chunks; nothing when search is unavailable.

        For the automatic context: a failure here must never cost a reply.
        """
        try:
            return await self.async_query(query, k)
        except (DocumentsUnavailable, sqlite3.Error) as err:
            LOGGER.debug("Document search failed: %s", err)
            return []
