"""The document index: stores, embeds (in the background) and searches documents."""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from homeassistant.components.homeassistant.exposed_entities import (
    async_listen_entity_updates,
)
from homeassistant.const import EVENT_STATE_CHANGED
from homeassistant.core import Event, EventStateChangedData, HassJob, callback
from homeassistant.helpers import area_registry as ar
from homeassistant.helpers import device_registry as dr
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers import floor_registry as fr
from homeassistant.helpers.event import async_call_later

from ..const import (
    EMBED_BATCH,
    EMBED_TIMEOUT,
    LOGGER,
    QUERY_CACHE_SIZE,
    SEARCH_RESULTS,
)
from ..model_server import ModelServerError
from ..repairs import async_log_vector_engine
from ..security.permissions import ASSISTANT
from ..store.vectors import MAINTENANCE_TIMEOUT
from .chunking import chunk_text, content_hash
from .folder import read_folder
from .knowledge import ha_knowledge, still_known

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from pathlib import Path

    from homeassistant.config_entries import ConfigEntry
    from homeassistant.core import HomeAssistant

    from ..model_server import ModelBackend
    from ..store.database import Database
    from ..store.vectors import VectorStore

# search_documents names at most this many documents still being embedded.
INDEXING_LISTED: Final = 5
# Document hits at or above this similarity may enter the context on their own.
AUTO_CONTEXT_MIN_SCORE: Final = 0.45
# After what is exposed, named or placed changes, HA knowledge is rebuilt
# this many seconds later (one rebuild for a burst of changes).
HA_KNOWLEDGE_DEBOUNCE: Final = 30.0
# Registry changes that can change what HA knowledge says.
_REGISTRY_EVENTS: Final = (
    er.EVENT_ENTITY_REGISTRY_UPDATED,
    dr.EVENT_DEVICE_REGISTRY_UPDATED,
    ar.EVENT_AREA_REGISTRY_UPDATED,
    fr.EVENT_FLOOR_REGISTRY_UPDATED,
)

SOURCE_DOCUMENT: Final = "document"
SOURCE_FILE: Final = "file"
SOURCE_HA: Final = "ha"


@dataclass(frozen=True, slots=True)
class DocumentHit:
    """A chunk that matched a query."""

    title: str
    content: str
    score: float  # cosine similarity
    source: str  # "document" (add_document), "file" (documents folder), "ha"
    trusted: bool  # True only for text we generated from HA's registries


@dataclass(frozen=True, slots=True)
class AddResult:
    """What add_document did."""

    document_id: int
    chunks: int
    duplicate: bool
    # Chunks searchable when the call returned (all of them unless it is queued).
    embedded: int = 0

    @property
    def searchable(self) -> bool:
        """Tell whether every chunk of the document can be found."""
        return self.embedded >= self.chunks


@dataclass(frozen=True, slots=True)
class Indexing:
    """A document whose chunks are not all embedded yet."""

    title: str
    ready: int
    chunks: int


@dataclass(frozen=True, slots=True)
class SyncResult:
    """What a reindex of one source changed."""

    added: int = 0
    removed: int = 0
    unchanged: int = 0


class DocumentsUnavailable(Exception):  # noqa: N818 - reads as a state, like HA's
    """The query could not be embedded (Ollama or the model is unavailable)."""


@callback
def _renamed_or_new(event_data: EventStateChangedData) -> bool:
    """Tell whether a state change can change HA knowledge (name, existence)."""
    old = event_data["old_state"]
    new = event_data["new_state"]
    return old is None or new is None or old.name != new.name


def _insert(
    conn: sqlite3.Connection, title: str, text: str, source: str, now: float
) -> tuple[int, int] | None:
    """Insert a document and its chunks; None when the content is already there."""
    cur = conn.execute(
        "INSERT OR IGNORE INTO rag_documents"
        " (title, source, content_hash, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?)",
        (title, source, content_hash(text), now, now),
    )
    if cur.rowcount == 0:
        return None
    document_id = int(cur.lastrowid or 0)
    chunks = chunk_text(text)
    conn.executemany(
        "INSERT INTO rag_chunks (document_id, ordinal, text) VALUES (?, ?, ?)",
        [(document_id, ordinal, chunk) for ordinal, chunk in enumerate(chunks)],
    )
    return document_id, len(chunks)


class DocumentIndex:
    """Chunks, embeds and searches documents; embedding runs in the background."""

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
        self._worker: asyncio.Task[None] | None = None
        self._starter: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stopped = False
        self._again = False
        self._loaded = asyncio.Event()
        self._started = asyncio.Event()
        self._sync_lock = asyncio.Lock()
        # Logged once when embedding fails and once when it works again.
        self.embed_error: str | None = None
        # The pending rebuild of HA knowledge after a change (debounced).
        self._ha_timer: Callable[[], None] | None = None
        self._ha_job = HassJob(
            self._async_ha_timer_fired,
            "ha_personal_assistant HA knowledge changed",
            cancel_on_shutdown=True,
        )

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
        on_unload = self.entry.async_on_unload
        on_unload(
            async_listen_entity_updates(self.hass, ASSISTANT, self._async_ha_changed)
        )
        for event_type in _REGISTRY_EVENTS:
            on_unload(self.hass.bus.async_listen(event_type, self._async_ha_changed))
        on_unload(
            self.hass.bus.async_listen(
                EVENT_STATE_CHANGED,
                self._async_ha_changed,
                event_filter=_renamed_or_new,
            )
        )
        on_unload(self._async_cancel_ha_timer)

    @callback
    def _async_ha_changed(self, _event: Event[Any] | None = None) -> None:
        """Rebuild HA knowledge a little later; one rebuild per burst of changes.

        Until then, searches check each HA passage against the house as it is
        now (see :func:`still_known`), so a hidden entity is never shown.
        """
        if self._stopped or self._ha_timer is not None:
            return
        self._ha_timer = async_call_later(
            self.hass, HA_KNOWLEDGE_DEBOUNCE, self._ha_job
        )

    @callback
    def _async_ha_timer_fired(self, _now: Any) -> None:
        self._ha_timer = None
        self.refresh_ha()

    @callback
    def _async_cancel_ha_timer(self) -> None:
        if self._ha_timer is not None:
            self._ha_timer()
            self._ha_timer = None

    async def async_stop(self) -> None:
        """Stop indexing and embedding; call it before the database closes."""
        self._stopped = True
        tasks = [t for t in (self._starter, self._worker, *self._tasks) if t]
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
        self._kick()
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
        self._kick()
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
        while self._worker is not None and not self._worker.done():
            await asyncio.shield(self._worker)

    # ------------------------------------------------------------------ write

    async def async_add(
        self, title: str, content: str, *, wait: float = 0.0
    ) -> AddResult:
        """Add a document; the same title is replaced, the same content kept once.

        Waits up to ``wait`` seconds for its chunks to be embedded (searchable);
        the result says how many were.
        """
        now = time.time()

        def _add(conn: sqlite3.Connection) -> AddResult:
            row = conn.execute(
                "SELECT id, (SELECT COUNT(*) FROM rag_chunks WHERE document_id = d.id)"
                " FROM rag_documents d WHERE source = ? AND content_hash = ?",
                (SOURCE_DOCUMENT, content_hash(content)),
            ).fetchone()
            if row is not None:
                return AddResult(int(row[0]), int(row[1]), duplicate=True)
            old = [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM rag_documents WHERE source = ? AND title = ?",
                    (SOURCE_DOCUMENT, title),
                )
            ]
            self._delete(conn, old)
            inserted = _insert(conn, title, content, SOURCE_DOCUMENT, now)
            if inserted is None:  # the content check above ran in this transaction
                msg = "The document was stored twice"
                raise sqlite3.IntegrityError(msg)
            return AddResult(inserted[0], inserted[1], duplicate=False)

        async with self._sync_lock:
            result = await self.database.async_run(_add, timeout=MAINTENANCE_TIMEOUT)
        # A duplicate may still wait for its vectors (Ollama was down).
        self._kick()
        embedded = await self.async_wait_embedded(result.document_id, wait)
        return replace(result, embedded=embedded)

    async def async_wait_embedded(self, document_id: int, timeout: float) -> int:  # noqa: ASYNC109 - a bound, not a cancel scope
        """Wait up to ``timeout`` s until a document's chunks are searchable.

        Returns how many are. Ends early when embedding fails (Ollama or the
        model is unavailable): the chunks stay queued for the next attempt.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            ready, total = await self.database.async_run(
                functools.partial(self._embedded_of, document_id=document_id)
            )
            if ready >= total or self._stopped:
                return ready
            left = deadline - loop.time()
            worker = self._worker
            if left <= 0 or worker is None:
                return ready
            if worker.done():
                if self.embed_error is not None:
                    return ready
                # Finished just before this document's chunks were added.
                self._kick()
                continue
            # Not cancelled with this call: the embedder goes on in the background.
            await asyncio.wait([worker], timeout=left)

    def _embedded_of(
        self, conn: sqlite3.Connection, *, document_id: int
    ) -> tuple[int, int]:
        """Return how many of a document's chunks have a vector, and how many exist."""
        row = conn.execute(
            "SELECT COUNT(v.chunk_id), COUNT(c.id) FROM rag_chunks c"
            " LEFT JOIN rag_vectors v ON v.chunk_id = c.id AND v.model = ?"
            " WHERE c.document_id = ?",
            (self.model, document_id),
        ).fetchone()
        return int(row[0]), int(row[1])

    async def async_indexing(self) -> list[Indexing]:
        """Return the documents and files not fully searchable yet (oldest first)."""
        busy = any(
            task is not None and not task.done()
            for task in (self._starter, self._worker)
        )
        if not busy and self.embed_error is None:
            # The embedder ran to the end and nothing was added since.
            return []

        def _read(conn: sqlite3.Connection) -> list[Indexing]:
            return [
                Indexing(title=row[0], ready=int(row[1]), chunks=int(row[2]))
                for row in conn.execute(
                    "SELECT d.title, COUNT(v.chunk_id), COUNT(c.id)"
                    " FROM rag_documents d JOIN rag_chunks c ON c.document_id = d.id"
                    " LEFT JOIN rag_vectors v ON v.chunk_id = c.id AND v.model = ?"
                    " WHERE d.source != ? GROUP BY d.id"
                    " HAVING COUNT(v.chunk_id) < COUNT(c.id) ORDER BY d.id LIMIT ?",
                    (self.model, SOURCE_HA, INDEXING_LISTED),
                )
            ]

        return await self.database.async_run(_read)

    def _delete(self, conn: sqlite3.Connection, document_ids: Iterable[int]) -> None:
        ids = list(document_ids)
        if not ids:
            return
        marks = ",".join("?" * len(ids))
        chunk_ids = [
            r[0]
            for r in conn.execute(
                f"SELECT id FROM rag_chunks WHERE document_id IN ({marks})",  # noqa: S608
                ids,
            )
        ]
        self.vectors.remove(conn, chunk_ids)
        conn.execute(f"DELETE FROM rag_documents WHERE id IN ({marks})", ids)  # noqa: S608

    async def _async_sync(self, source: str, docs: Mapping[str, str]) -> SyncResult:
        """Make the documents of ``source`` match ``docs`` (title -> text)."""
        now = time.time()

        def _sync(conn: sqlite3.Connection) -> SyncResult:
            existing = {
                (title, digest): doc_id
                for doc_id, title, digest in conn.execute(
                    "SELECT id, title, content_hash FROM rag_documents"
                    " WHERE source = ?",
                    (source,),
                )
            }
            wanted = {(title, content_hash(text)): text for title, text in docs.items()}
            stale = [doc_id for key, doc_id in existing.items() if key not in wanted]
            self._delete(conn, stale)
            added = 0
            for (title, _digest), text in wanted.items():
                if (title, _digest) in existing:
                    continue
                if _insert(conn, title, text, source, now) is not None:
                    added += 1
            return SyncResult(
                added=added, removed=len(stale), unchanged=len(wanted) - added
            )

        async with self._sync_lock:
            return await self.database.async_run(_sync, timeout=MAINTENANCE_TIMEOUT)

    # ------------------------------------------------------------- embedding

    def _kick(self) -> None:
        """Make sure the background embedder runs (again) soon."""
        if self._stopped:
            return
        if self._worker is not None and not self._worker.done():
            self._again = True
            return
        self._worker = self.entry.async_create_background_task(
            self.hass, self._async_embed_pending(), "ha_personal_assistant embeddings"
        )

    async def _async_embed_pending(self) -> None:
        """Embed chunks that lack a vector of the current model, 16 at a time."""
        await self._loaded.wait()
        embedded = 0
        last_id = 0
        while True:
            self._again = False
            batch = await self.database.async_run(
                functools.partial(self._pending, after=last_id)
            )
            if not batch:
                if self._again:
                    # Something was added meanwhile: look from the start again.
                    last_id = 0
                    continue
                break
            try:
                vectors = await self.backend.async_embed(
                    self.model,
                    [f"{title}\n{text}" for _, title, text in batch],
                    EMBED_TIMEOUT,
                )
            except ModelServerError as err:
                self._embed_failed(str(err))
                return
            self._embed_worked()
            items = [
                (row[0], vector) for row, vector in zip(batch, vectors, strict=True)
            ]
            await self.database.async_run(
                functools.partial(self._store_vectors, items=items)
            )
            last_id = batch[-1][0]
            embedded += len(batch)
        if embedded:
            await self.database.async_run(self._mark_embedded)
            # The collection changed size: the fastest engine may have changed.
            await self.vectors.async_choose_engine(force=False)
            LOGGER.debug("Embedded %s chunks with %s", embedded, self.model)

    def _store_vectors(
        self, conn: sqlite3.Connection, *, items: list[tuple[int, list[float]]]
    ) -> None:
        """Store the vectors of chunks that still exist (a reindex may drop some)."""
        marks = ",".join("?" * len(items))
        live = {
            row[0]
            for row in conn.execute(
                f"SELECT id FROM rag_chunks WHERE id IN ({marks})",  # noqa: S608
                [chunk_id for chunk_id, _ in items],
            )
        }
        self.vectors.add(conn, [item for item in items if item[0] in live])

    def _pending(
        self, conn: sqlite3.Connection, *, after: int
    ) -> list[tuple[int, str, str]]:
        """Return the next chunks (id, title, text) without a current vector."""
        return conn.execute(
            "SELECT c.id, d.title, c.text FROM rag_chunks c"
            " JOIN rag_documents d ON d.id = c.document_id"
            " LEFT JOIN rag_vectors v ON v.chunk_id = c.id AND v.model = ?"
            " WHERE v.chunk_id IS NULL AND c.id > ? ORDER BY c.id LIMIT ?",
            (self.model, after, EMBED_BATCH),
        ).fetchall()

    def _mark_embedded(self, conn: sqlite3.Connection) -> None:
        conn.execute(
            "UPDATE rag_documents SET embedding_model = ?, updated_at = ?"
            " WHERE id NOT IN (SELECT c.document_id FROM rag_chunks c"
            " LEFT JOIN rag_vectors v ON v.chunk_id = c.id AND v.model = ?"
            " WHERE v.chunk_id IS NULL)",
            (self.model, time.time(), self.model),
        )

    def _embed_failed(self, reason: str) -> None:
        if self.embed_error is None:
            LOGGER.warning(
                "Documents cannot be embedded with %s at %s: %s",
                self.model,
                self.backend.where,
                reason,
            )
        self.embed_error = reason

    def _embed_worked(self) -> None:
        if self.embed_error is not None:
            LOGGER.info("Documents can be embedded again with %s", self.model)
        self.embed_error = None

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
            self._embed_failed(str(err))
            raise DocumentsUnavailable(str(err)) from err
        if self.embed_error is not None:
            # Ollama is back: embed what was left when it went away.
            self._kick()
        self._embed_worked()
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

        def _read(conn: sqlite3.Connection) -> dict[int, tuple[str, str, str]]:
            marks = ",".join("?" * len(ids))
            return {
                row[0]: (row[1], row[2], row[3])
                for row in conn.execute(
                    "SELECT c.id, d.title, c.text, d.source FROM rag_chunks c"  # noqa: S608
                    " JOIN rag_documents d ON d.id = c.document_id"
                    f" WHERE c.id IN ({marks})",
                    ids,
                )
            }

        rows = await self.database.async_run(_read)
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
