"""The vector store: every engine finds the same neighbours, within its memory bound."""

from __future__ import annotations

import itertools
import sys
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import sqlite_vec

from custom_components.ha_personal_assistant.documents.chunking import chunk_text
from custom_components.ha_personal_assistant.executor import BlockingExecutor
from custom_components.ha_personal_assistant.store.database import Database
from custom_components.ha_personal_assistant.store.vector_math import Engine
from custom_components.ha_personal_assistant.store.vectors import VectorStore

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import AsyncGenerator, Callable
    from pathlib import Path

DIM = 64
MODEL = "embed"


@pytest.fixture
async def database(tmp_path: Path) -> AsyncGenerator[Database]:
    """An opened assistant database with one document of 3,000 empty chunks."""
    executor = BlockingExecutor()
    db = Database(tmp_path / "assistant.db", executor)
    await db.async_open()

    def _chunks(conn: sqlite3.Connection) -> None:
        conn.execute(
            "INSERT INTO rag_documents (title, source, content_hash, created_at,"
            " updated_at) VALUES ('t', 'document', 'h', 0, 0)"
        )
        conn.executemany(
            "INSERT INTO rag_chunks (id, document_id, ordinal, text)"
            " VALUES (?, 1, ?, '')",
            [(i, i) for i in range(1, 3001)],
        )

    await db.async_run(_chunks)
    try:
        yield db
    finally:
        await db.async_close()
        executor.shutdown()


def clustered(n: int, seed: int = 7, dim: int = DIM) -> np.ndarray:
    """Embedding-like vectors: a shared direction, 30 topics, noise."""
    rng = np.random.default_rng(seed)
    common = rng.normal(size=dim)
    centers = rng.normal(size=(30, dim))
    topic = rng.integers(0, 30, n)
    return (1.5 * common + centers[topic] + 0.8 * rng.normal(size=(n, dim))).astype(
        np.float32
    )


def queries(data: np.ndarray, count: int = 40) -> np.ndarray:
    """Queries that paraphrase stored vectors."""
    rng = np.random.default_rng(3)
    picks = rng.integers(0, len(data), count)
    return data[picks] + rng.normal(size=(count, data.shape[1])).astype(np.float32)


async def fill(database: Database, data: np.ndarray, **kwargs: object) -> VectorStore:
    """Load an empty store and add the vectors in batches of 16, as indexing does."""
    store = VectorStore(database, database._executor, **kwargs)  # type: ignore[arg-type]
    await store.async_load(MODEL)
    for start in range(0, len(data), 16):
        await store.async_add(
            [
                (start + i + 1, row.tolist())
                for i, row in enumerate(data[start : start + 16])
            ]
        )
    await store.async_choose_engine()
    return store


def exact_top(data: np.ndarray, query: np.ndarray, k: int = 5) -> list[int]:
    """Brute-force cosine top-k ids (1-based, as the chunks are)."""
    unit = data / np.linalg.norm(data, axis=1, keepdims=True)
    scores = unit @ (query / np.linalg.norm(query))
    return [int(i) + 1 for i in np.argsort(-scores)[:k]]


async def search(
    database: Database, store: VectorStore, query: np.ndarray, engine: Engine
) -> list[int]:
    """Return the top-5 ids of one engine."""
    hits = await database.async_run(
        lambda conn: store.search(conn, query, 5, engine=engine)
    )
    return [chunk_id for chunk_id, _ in hits]


async def test_vec0_and_numpy_give_the_same_top_k(database: Database) -> None:
    """sqlite-vec, numpy exact and numpy without the extension agree, with scores."""
    data = clustered(1000)
    store = await fill(database, data)
    assert store.extension_loaded
    assert set(store.engines()) == {Engine.EXACT, Engine.VEC0}
    for query in queries(data):
        expected = exact_top(data, query)
        assert await search(database, store, query, Engine.EXACT) == expected
        assert await search(database, store, query, Engine.VEC0) == expected
        numpy_hits = await store.async_search(query.tolist(), 5)
        vec_hits = await database.async_run(
            lambda conn, q=query: store.search(conn, q, 5, engine=Engine.VEC0)
        )
        for (_, a), (_, b) in zip(numpy_hits, vec_hits, strict=True):
            assert a == pytest.approx(b, abs=1e-4)
    # The same data without sqlite-vec: numpy alone, same answers.
    fallback = VectorStore(database, database._executor, use_extension=False)
    await fallback.async_load(MODEL)
    assert fallback.engines() == [Engine.EXACT]
    for query in queries(data, 10):
        assert [c for c, _ in await fallback.async_search(query.tolist(), 5)] == (
            exact_top(data, query)
        )


async def test_sign_bits_with_rescore_keep_recall_above_95_percent(
    database: Database,
) -> None:
    """Over the memory budget, the quantized path finds >= 95 % of the exact top 5."""
    data = clustered(3000)
    # 3,000 x 64 float32 is 768 kB: a 100 kB budget forces the sign bits.
    store = await fill(database, data, memory_budget=100_000, use_extension=False)
    assert store.engines() == [Engine.BINARY]
    assert store.engine is Engine.BINARY
    assert store.binary_recall is not None
    assert store.binary_recall >= 0.95
    found = 0
    qs = queries(data, 60)
    for query in qs:
        hits = [c for c, _ in await store.async_search(query.tolist(), 5)]
        found += len(set(hits) & set(exact_top(data, query)))
    assert found / (5 * len(qs)) >= 0.95


async def test_the_store_switches_to_sign_bits_when_it_outgrows_ram(
    database: Database,
) -> None:
    """Growing past the budget trades floats for bits; reloading agrees."""
    data = clustered(2000)
    store = await fill(database, data[:200], memory_budget=300 * DIM * 4)
    assert Engine.EXACT in store.engines()
    for start in range(200, 2000, 16):
        await store.async_add(
            [
                (start + i + 1, row.tolist())
                for i, row in enumerate(data[start : start + 16])
            ]
        )
    assert Engine.EXACT not in store.engines()
    assert Engine.BINARY in store.engines()
    assert store.engine is not Engine.EXACT
    assert len(store) == 2000
    probe = queries(data, 1)[0]
    found = [c for c, _ in await store.async_search(probe.tolist(), 5)]
    assert found[0] == exact_top(data, probe)[0]
    reloaded = VectorStore(database, database._executor, memory_budget=300 * DIM * 4)
    await reloaded.async_load(MODEL)
    assert len(reloaded) == 2000
    assert Engine.BINARY in reloaded.engines()
    query = queries(data, 1)[0]
    assert (await search(database, reloaded, query, Engine.BINARY))[0] == exact_top(
        data, query
    )[0]


async def test_removed_chunks_are_never_returned(database: Database) -> None:
    """After a chunk is gone, no engine returns it."""
    data = clustered(500)
    store = await fill(database, data)
    query = data[41]
    assert (await search(database, store, query, Engine.EXACT))[0] == 42

    def _drop(conn: sqlite3.Connection) -> None:
        store.remove(conn, [42])
        conn.execute("DELETE FROM rag_chunks WHERE id = 42")

    await database.async_run(_drop)
    for engine in store.engines():
        assert 42 not in await search(database, store, query, engine)
    assert len(store) == 499


def _no_extension_support(monkeypatch: pytest.MonkeyPatch) -> None:
    # As on a Python whose sqlite3 was built without extension loading.
    monkeypatch.setattr(sqlite_vec, "load", lambda conn: conn.load_extension_missing())


@pytest.mark.parametrize(
    ("break_it", "reason"),
    [
        (
            lambda mp: mp.setitem(sys.modules, "sqlite_vec", None),
            "sqlite-vec is not installed",
        ),
        (
            lambda mp: mp.setattr(
                sqlite_vec, "loadable_path", lambda: "/nonexistent/vec0"
            ),
            "sqlite-vec did not load",
        ),
        (_no_extension_support, "this Python's sqlite3 cannot load extensions"),
    ],
    ids=["not-installed", "does-not-load", "no-extension-support"],
)
async def test_without_sqlite_vec_numpy_answers_and_the_log_says_why_once(
    database: Database,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    break_it: Callable[[pytest.MonkeyPatch], None],
    reason: str,
) -> None:
    """No sqlite-vec (missing, broken, or no extension support): same answers."""
    break_it(monkeypatch)
    data = clustered(300)
    store = await fill(database, data)
    assert not store.extension_loaded
    assert store.engines() == [Engine.EXACT]
    for query in queries(data, 5):
        hits = await store.async_search(query.tolist(), 5)
        assert [c for c, _ in hits] == exact_top(data, query)
    # Loading again (another model) does not repeat the warning.
    await store.async_load(MODEL)
    warnings = [
        r.getMessage() for r in caplog.records if "uses numpy" in r.getMessage()
    ]
    assert len(warnings) == 1
    assert reason in warnings[0]


async def test_embeddings_of_any_size_work_as_sign_bits(database: Database) -> None:
    """A 100-dimension model over the memory budget from its first batch."""
    dim = 100
    data = clustered(3000, dim=dim)
    # What tells the chunks apart is past the first 64 dimensions (one word
    # of sign bits): the sign bits of the last 36 must count too.
    data[:, :64] = 0.0
    # Not even the first batch of 16 fits: sign bits from the start.
    store = await fill(database, data, memory_budget=1000, use_extension=False)
    assert store.engines() == [Engine.BINARY]
    assert len(store) == 3000
    found = 0
    qs = queries(data, 40)
    qs[:, :64] = 0.0
    for query in qs:
        hits = [c for c, _ in await store.async_search(query.tolist(), 5)]
        found += len(set(hits) & set(exact_top(data, query)))
    assert found / (5 * len(qs)) >= 0.95


async def test_removed_chunks_go_and_a_small_change_is_not_timed_again(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """async_remove forgets chunks; the engines are re-timed after big changes only."""
    data = clustered(1100)
    store = await fill(database, data)
    assert len(store) == 1100
    timed: list[Engine] = []
    original = store._time

    def spy(*args: Any, **kwargs: Any) -> float:
        timed.append(args[2])
        return original(*args, **kwargs)

    monkeypatch.setattr(store, "_time", spy)
    await store.async_remove([])
    await store.async_remove(range(1, 101))
    assert len(store) == 1000
    query = data[0]
    for engine in store.engines():
        assert 1 not in await search(database, store, query, engine)
    # A tenth fewer: the choice stands (timing sqlite-vec can take seconds).
    assert await store.async_choose_engine(force=False) is store.engine
    assert timed == []
    await store.async_remove(range(101, 501))
    await store.async_choose_engine(force=False)
    assert timed


async def test_a_new_embedding_model_replaces_the_sqlite_vec_index(
    database: Database,
) -> None:
    """Reindexed with a 32-dimension model: sqlite-vec answers in the new space."""
    await fill(database, clustered(300))
    new = clustered(300, seed=11, dim=32)
    store = VectorStore(database, database._executor)  # type: ignore[arg-type]
    await store.async_load("new-embed")
    assert len(store) == 0
    for start in range(0, len(new), 16):
        await store.async_add(
            [
                (start + i + 1, row.tolist())
                for i, row in enumerate(new[start : start + 16])
            ]
        )
    assert Engine.VEC0 in store.engines()
    for query in queries(new, 10):
        assert await search(database, store, query, Engine.VEC0) == exact_top(
            new, query
        )


def test_chunks_follow_paragraphs_and_overlap() -> None:
    """Paragraphs stay whole when they fit; long ones split at sentences."""
    short = "First paragraph.\n\nSecond paragraph."
    assert chunk_text(short) == ["First paragraph.\n\nSecond paragraph."]
    sentences = [f"Sentence {i} is about item {i}." for i in range(200)]
    chunks = chunk_text(" ".join(sentences))
    assert len(chunks) > 5
    assert all(len(c) <= 1000 for c in chunks)
    for before, after in itertools.pairwise(chunks):
        # The next chunk starts with the last sentences of this one.
        shared = max(n for n in range(len(after) + 1) if before.endswith(after[:n]))
        assert 20 < shared <= 200
    # Sentences of one paragraph stay in one line.
    assert "\n" not in chunks[0]
    # Every sentence is in some chunk, in order.
    joined = " ".join(chunks)
    assert all(s in joined for s in sentences)
    # A word longer than a chunk is cut rather than lost.
    assert "".join(chunk_text("x" * 2500)) == "x" * 2500
    assert chunk_text("   ") == []
