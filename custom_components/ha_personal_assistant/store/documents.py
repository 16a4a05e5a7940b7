"""The document tables: documents, their chunks and which chunks have a vector.

Every function here is blocking and runs inside ``Database.async_run``.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ..const import EMBED_BATCH
from ..documents.chunking import chunk_text, content_hash

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from .vectors import VectorStore

# search_documents names at most this many documents still being embedded.
INDEXING_LISTED: Final = 5

SOURCE_DOCUMENT: Final = "document"
SOURCE_FILE: Final = "file"
SOURCE_HA: Final = "ha"


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


def insert(
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


def delete(
    conn: sqlite3.Connection, vectors: VectorStore, document_ids: Iterable[int]
) -> None:
    """Delete documents, their chunks and their vectors."""
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
    vectors.remove(conn, chunk_ids)
    conn.execute(f"DELETE FROM rag_documents WHERE id IN ({marks})", ids)  # noqa: S608


def add(
    conn: sqlite3.Connection,
    vectors: VectorStore,
    title: str,
    content: str,
    now: float,
) -> AddResult:
    """Add a document; the same title is replaced, the same content kept once."""
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
    delete(conn, vectors, old)
    inserted = insert(conn, title, content, SOURCE_DOCUMENT, now)
    if inserted is None:  # the content check above ran in this transaction
        msg = "The document was stored twice"
        raise sqlite3.IntegrityError(msg)
    return AddResult(inserted[0], inserted[1], duplicate=False)


def sync(
    conn: sqlite3.Connection,
    vectors: VectorStore,
    source: str,
    docs: Mapping[str, str],
    now: float,
) -> SyncResult:
    """Make the documents of ``source`` match ``docs`` (title -> text)."""
    existing = {
        (title, digest): doc_id
        for doc_id, title, digest in conn.execute(
            "SELECT id, title, content_hash FROM rag_documents WHERE source = ?",
            (source,),
        )
    }
    wanted = {(title, content_hash(text)): text for title, text in docs.items()}
    stale = [doc_id for key, doc_id in existing.items() if key not in wanted]
    delete(conn, vectors, stale)
    added = 0
    for (title, _digest), text in wanted.items():
        if (title, _digest) in existing:
            continue
        if insert(conn, title, text, source, now) is not None:
            added += 1
    return SyncResult(added=added, removed=len(stale), unchanged=len(wanted) - added)


def embedded_of(
    conn: sqlite3.Connection, *, model: str, document_id: int
) -> tuple[int, int]:
    """Return how many of a document's chunks have a vector, and how many exist."""
    row = conn.execute(
        "SELECT COUNT(v.chunk_id), COUNT(c.id) FROM rag_chunks c"
        " LEFT JOIN rag_vectors v ON v.chunk_id = c.id AND v.model = ?"
        " WHERE c.document_id = ?",
        (model, document_id),
    ).fetchone()
    return int(row[0]), int(row[1])


def indexing(conn: sqlite3.Connection, *, model: str) -> list[Indexing]:
    """Return the documents and files not fully embedded yet (oldest first)."""
    return [
        Indexing(title=row[0], ready=int(row[1]), chunks=int(row[2]))
        for row in conn.execute(
            "SELECT d.title, COUNT(v.chunk_id), COUNT(c.id)"
            " FROM rag_documents d JOIN rag_chunks c ON c.document_id = d.id"
            " LEFT JOIN rag_vectors v ON v.chunk_id = c.id AND v.model = ?"
            " WHERE d.source != ? GROUP BY d.id"
            " HAVING COUNT(v.chunk_id) < COUNT(c.id) ORDER BY d.id LIMIT ?",
            (model, SOURCE_HA, INDEXING_LISTED),
        )
    ]


def pending(
    conn: sqlite3.Connection, *, model: str, after: int
) -> list[tuple[int, str, str]]:
    """Return the next chunks (id, title, text) without a vector of ``model``."""
    return conn.execute(
        "SELECT c.id, d.title, c.text FROM rag_chunks c"
        " JOIN rag_documents d ON d.id = c.document_id"
        " LEFT JOIN rag_vectors v ON v.chunk_id = c.id AND v.model = ?"
        " WHERE v.chunk_id IS NULL AND c.id > ? ORDER BY c.id LIMIT ?",
        (model, after, EMBED_BATCH),
    ).fetchall()


def store_vectors(
    conn: sqlite3.Connection,
    *,
    vectors: VectorStore,
    items: list[tuple[int, list[float]]],
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
    vectors.add(conn, [item for item in items if item[0] in live])


def mark_embedded(conn: sqlite3.Connection, *, model: str) -> None:
    """Record ``model`` on every document whose chunks all have its vectors."""
    conn.execute(
        "UPDATE rag_documents SET embedding_model = ?, updated_at = ?"
        " WHERE id NOT IN (SELECT c.document_id FROM rag_chunks c"
        " LEFT JOIN rag_vectors v ON v.chunk_id = c.id AND v.model = ?"
        " WHERE v.chunk_id IS NULL)",
        (model, time.time(), model),
    )


def read_chunks(
    conn: sqlite3.Connection, ids: list[int]
) -> dict[int, tuple[str, str, str]]:
    """Return each chunk's (document title, text, source) by chunk id."""
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
