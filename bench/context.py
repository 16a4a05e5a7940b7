"""A whole turn except the model call: context, retrieval, checkpoint save and load.

A real Home Assistant core (pytest-homeassistant-custom-component's test
instance, no network) with 2,000 exposed entities in 40 areas on 3 floors, a
document index of 10,000 chunks of 768 dimensions, and a conversation of 200
turns checkpointed in SQLite by LangGraph; a tenth of the states change
between two messages, as sensors do. The model answers instantly
(a local runnable), so what is timed is our code: the session lookup, the
summary read, entity ranking, the profile, retrieval, the token budget, the
graph run with its checkpoint load and save.

Retrieval goes through the integration's own DocumentIndex and VectorStore
over the shared ``assistant.db``: 10,000 stored chunks of 768 dimensions, plus
the HA knowledge documents the index writes about the 2,000 entities (embedded
at start by the fake). Most chunks carry synthetic embedding-like vectors (as
in bench/retrieval.py); 200 "FAQ" chunks repeat one of the messages, with the
vector the fake gives their text, so document hits pass the automatic
context's score and go through the firewall, as relevant ones would. The
query embedding is a real ``/api/embed`` request over loopback to
tests/fake_ollama.py, which serves from its own thread and event loop (as
Ollama is its own process) and answers at once; the index's query cache is
emptied before every turn, so each turn pays that request, as a new message
does. The engine is the one VectorStore chose by timing at load.

Baselines, measured in the same run:
- a bare turn: the same assistant in an empty house, no documents, a fresh
  conversation (what a turn costs before any context);
- a naive context: every exposed entity as a line, chars/4 as the token count
  (no ranking, no budget), timed on its own next to our assembly.

Run: ``.venv/bin/python bench/context.py``
"""

from __future__ import annotations

import asyncio
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from unittest.mock import patch

import numpy as np
from aiohttp.resolver import ThreadedResolver

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from homeassistant.components.homeassistant.exposed_entities import (  # noqa: E402
    async_expose_entity,
)
from homeassistant.helpers import area_registry as ar  # noqa: E402
from homeassistant.helpers import entity_registry as er  # noqa: E402
from homeassistant.helpers import floor_registry as fr  # noqa: E402
from homeassistant.helpers.aiohttp_client import async_get_clientsession  # noqa: E402
from homeassistant.setup import async_setup_component  # noqa: E402
from langchain_core.messages import AIMessageChunk  # noqa: E402
from langchain_core.runnables import RunnableLambda  # noqa: E402
from pytest_homeassistant_custom_component.common import (  # type: ignore[import-untyped]  # noqa: E402
    MockConfigEntry,
    async_test_home_assistant,
)
from retrieval import synthetic  # noqa: E402

import custom_components  # noqa: E402, F401
from custom_components.ha_personal_assistant.agent.entity_index import (  # noqa: E402
    EntityIndex,
    rank_entities,
)
from custom_components.ha_personal_assistant.agent.graph import (  # noqa: E402
    build_graph,
)
from custom_components.ha_personal_assistant.agent.home import (  # noqa: E402
    describe_moment,
)
from custom_components.ha_personal_assistant.assistant import (  # noqa: E402
    Assistant,
)
from custom_components.ha_personal_assistant.backends import (  # noqa: E402
    OllamaBackend,
)
from custom_components.ha_personal_assistant.const import (  # noqa: E402
    DOMAIN,
    EMBED_TIMEOUT,
)
from custom_components.ha_personal_assistant.documents.index import (  # noqa: E402
    AUTO_CONTEXT_MIN_SCORE,
    DocumentIndex,
)
from custom_components.ha_personal_assistant.models import (  # noqa: E402
    Speaker,
)
from custom_components.ha_personal_assistant.ollama_api import (  # noqa: E402
    async_embed,
)
from custom_components.ha_personal_assistant.store.shared import (  # noqa: E402
    async_acquire_storage,
    async_release_storage,
)
from custom_components.ha_personal_assistant.store.vectors import (  # noqa: E402
    MAINTENANCE_TIMEOUT,
    VectorStore,
)
from custom_components.ha_personal_assistant.tools.ha import (  # noqa: E402
    HA_TOOLS,
    exposed_states,
)
from custom_components.ha_personal_assistant.tools.registry import (  # noqa: E402
    ToolRegistry,
)
from tests.fake_ollama import FakeOllama  # noqa: E402

if TYPE_CHECKING:
    import sqlite3

ENTITIES = 2000
CHUNKS = 10_000
DIM = 768
TURNS = 200
MEASURED = 100
# Chunks whose text repeats a message: the relevant hits of every turn.
FAQ_CHUNKS = 200
CHUNKS_PER_DOCUMENT = 100
EMBED_MODEL = "nomic-embed-text"
DOMAINS = ("light", "switch", "sensor", "binary_sensor", "cover", "climate", "fan")
ROOMS = (
    "Kitchen", "Living Room", "Bedroom", "Bathroom", "Office", "Hallway", "Garage",
    "Garden", "Attic", "Basement",
)  # fmt: skip
MESSAGES = (
    "Is the kitchen light on? And what is the temperature in the living room?",
    "Turn off all the lights in the office please, I'm leaving for the day.",
    "Schalte das Licht in der Küche aus und sag mir, ob das Fenster offen ist.",
    "Какая температура в спальне? Включи вентилятор, если жарко.",
)


class FakeOllamaThread:
    """tests/fake_ollama.py serving from its own thread and event loop."""

    def __init__(self) -> None:
        """Create the server and its loop; :meth:`async_start` serves."""
        self.fake = FakeOllama(embedding_dim=DIM)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    async def async_start(self) -> str:
        """Serve on 127.0.0.1; return the URL."""
        self.thread.start()
        await asyncio.wrap_future(
            asyncio.run_coroutine_threadsafe(self.fake.start(), self.loop)
        )
        return self.fake.url

    async def async_stop(self) -> None:
        """Stop serving and end the thread."""
        await asyncio.wrap_future(
            asyncio.run_coroutine_threadsafe(self.fake.stop(), self.loop)
        )
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


def _faq_text(index: int) -> tuple[str, str]:
    message = MESSAGES[index % len(MESSAGES)]
    return (
        f"FAQ {index // CHUNKS_PER_DOCUMENT}",
        f"{message} Answer {index}: check the device, then hold its button.",
    )


def _fill(conn: sqlite3.Connection, vectors: np.ndarray, faq: list[bytes]) -> None:
    """Store the chunks and their vectors as the embedder would."""
    documents = CHUNKS // CHUNKS_PER_DOCUMENT
    faq_documents = FAQ_CHUNKS // CHUNKS_PER_DOCUMENT
    conn.executemany(
        "INSERT INTO rag_documents (id, title, source, content_hash,"
        " embedding_model, created_at, updated_at)"
        " VALUES (?, ?, 'document', ?, ?, 0, 0)",
        [
            (
                d + 1,
                f"FAQ {d}" if d < faq_documents else f"Manual {d}",
                f"bench{d}",
                EMBED_MODEL,
            )
            for d in range(documents)
        ],
    )
    rows = []
    for i in range(CHUNKS):
        if i < FAQ_CHUNKS:
            text = _faq_text(i)[1]
        else:
            text = f"Manual page {i}: the device resets after holding the button." * 3
        rows.append(
            (i + 1, i // CHUNKS_PER_DOCUMENT + 1, i % CHUNKS_PER_DOCUMENT, text)
        )
    conn.executemany(
        "INSERT INTO rag_chunks (id, document_id, ordinal, text) VALUES (?, ?, ?, ?)",
        rows,
    )
    conn.executemany(
        "INSERT INTO rag_vectors (chunk_id, model, dim, vector) VALUES (?, ?, ?, ?)",
        (
            (i + 1, EMBED_MODEL, DIM, faq[i] if i < FAQ_CHUNKS else row.tobytes())
            for i, row in enumerate(vectors)
        ),
    )


async def _document_index(
    hass: Any, storage: Any, fake: FakeOllama, url: str, folder: Path
) -> tuple[DocumentIndex, float]:
    """Fill assistant.db, start the real index on it; return it and the start time."""
    vectors = synthetic(CHUNKS, topics=CHUNKS // 100, rng=np.random.default_rng(5))
    faq = [
        np.asarray(
            fake.embedding_for("\n".join(_faq_text(i)), DIM), np.float32
        ).tobytes()
        for i in range(FAQ_CHUNKS)
    ]
    await storage.database.async_run(
        lambda conn: _fill(conn, vectors, faq), timeout=MAINTENANCE_TIMEOUT
    )
    entry = MockConfigEntry(domain=DOMAIN, data={})
    entry.add_to_hass(hass)
    index = DocumentIndex(
        hass,
        entry,
        storage.database,
        VectorStore(storage.database, storage.executor),
        backend=OllamaBackend(hass, url),
        model=EMBED_MODEL,
        folder=folder,
    )
    started = time.perf_counter()
    # Load the vectors, choose the engine, index and embed the HA knowledge.
    await index.async_start()
    await index.async_wait_idle()
    assert len(index.vectors) > CHUNKS, f"HA knowledge unembedded: {index.embed_error}"
    return index, time.perf_counter() - started


async def _house(hass: Any, count: int) -> None:
    floors = fr.async_get(hass)
    areas = ar.async_get(hass)
    registry = er.async_get(hass)
    floor_ids = [floors.async_create(f"Floor {i}").floor_id for i in range(3)]
    area_ids = [
        areas.async_create(f"{ROOMS[i % len(ROOMS)]} {i // len(ROOMS)}",
                           floor_id=floor_ids[i % 3]).id
        for i in range(40)
    ]  # fmt: skip
    for index in range(count):
        domain = DOMAINS[index % len(DOMAINS)]
        entry = registry.async_get_or_create(
            domain, "bench", f"e{index}", suggested_object_id=f"device_{index}"
        )
        registry.async_update_entity(
            entry.entity_id, area_id=area_ids[index % len(area_ids)]
        )
        hass.states.async_set(
            entry.entity_id,
            "on" if index % 3 else "21.5",
            {"friendly_name": f"{ROOMS[index % len(ROOMS)]} {domain} {index}"},
        )
        async_expose_entity(hass, "conversation", entry.entity_id, should_expose=True)
    await hass.async_block_till_done()


def _assistant(hass: Any, storage: Any) -> Assistant:
    registry = ToolRegistry(HA_TOOLS)

    # A chunk: the graph streams the answer and takes only message chunks.
    def instant(_messages: Any) -> AIMessageChunk:
        return AIMessageChunk(
            content="The kitchen light is on, it is 21.5 degrees.",
            usage_metadata={"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
        )

    return Assistant(
        hass,
        graph=build_graph(storage.checkpoints.saver),
        model=RunnableLambda(instant),
        registry=registry,
        database=storage.database,
        checkpoints=storage.checkpoints,
        model_name="bench",
        ollama_url="http://127.0.0.1:1",
        num_ctx=8192,
        session_timeout=3600,
        request_timeout=30,
        model_slots=storage.model_slots,
        executor=storage.executor,
    )


def _churn(hass: Any, turn: int) -> None:
    """Change a tenth of the states between messages, as sensors do."""
    states = hass.states.async_all()
    for state in states[turn % 10 :: 10]:
        hass.states.async_set(
            state.entity_id, f"{turn}.{len(state.entity_id)}", state.attributes
        )


def _forget_queries(index: DocumentIndex) -> None:
    """Empty the query cache: the next search embeds its query again."""
    index._query_cache.clear()  # noqa: SLF001 - a new message each turn


async def _turns(assistant: Assistant, key: str, count: int) -> list[float]:
    speaker = Speaker(person="telegram:1", name="Alice", ha_user_id=None, chat_id=1)
    times = []
    for turn in range(count):
        text = MESSAGES[turn % len(MESSAGES)]
        _churn(assistant.hass, turn)
        if isinstance(assistant.documents, DocumentIndex):
            _forget_queries(assistant.documents)
        started = time.perf_counter()
        result = await assistant.async_turn(key, text, speaker)
        times.append((time.perf_counter() - started) * 1000)
        assert result.ok, result.reply
        # Let the background pruning of old checkpoints run, as between messages.
        await asyncio.sleep(0)
        await assistant.hass.async_block_till_done()
    return times


def _naive_context(hass: Any) -> str:
    lines = [f"{s.entity_id} | {s.name} | {s.state}" for s in exposed_states(hass)]
    text = "\n".join(lines)
    _tokens = len(text) // 4
    return text


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def _row(name: str, values: list[float], base: float | None = None) -> str:
    p50, p95 = statistics.median(values), _p(values, 0.95)
    ratio = f"  {p95 / base:5.2f}x baseline p95" if base else ""
    return f"{name:<44} p50 {p50:7.1f} ms   p95 {p95:7.1f} ms{ratio}"


async def _retrieval(
    index: DocumentIndex, session: Any, url: str
) -> tuple[list[float], list[float], list[float]]:
    """Time a search with a new query, one with a cached one, and the embed call."""
    fresh, cached, embed = [], [], []
    for turn in range(MEASURED):
        text = MESSAGES[turn % len(MESSAGES)]
        _forget_queries(index)
        started = time.perf_counter()
        await index.async_search(text, 5)
        fresh.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        await index.async_search(text, 5)
        cached.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        await async_embed(session, url, EMBED_MODEL, [text], EMBED_TIMEOUT)
        embed.append((time.perf_counter() - started) * 1000)
    return fresh, cached, embed


def _resolver() -> ThreadedResolver:
    """Return a plain resolver; the fake is on 127.0.0.1 anyway."""
    resolver = ThreadedResolver()
    resolver.real_close = resolver.close  # type: ignore[attr-defined]
    return resolver


async def main() -> None:  # noqa: PLR0915 - one run, printed in order
    """Run the benchmark and print its figures."""
    ollama = FakeOllamaThread()
    url = await ollama.async_start()
    try:
        with (
            tempfile.TemporaryDirectory() as config_dir,
            # As the test plugin does: HA's DNS resolver would start zeroconf.
            patch(
                "homeassistant.helpers.aiohttp_client._async_make_resolver",
                return_value=_resolver(),
            ),
        ):
            async with async_test_home_assistant(config_dir=config_dir) as hass:
                assert await async_setup_component(hass, "homeassistant", {})
                storage = await async_acquire_storage(hass)
                documents: DocumentIndex | None = None
                try:
                    # Baseline: a bare turn, empty house, no documents.
                    bare = _assistant(hass, storage)
                    bare_times = (await _turns(bare, "bare", MEASURED + 20))[20:]
                    await _house(hass, ENTITIES)
                    documents, start_s = await _document_index(
                        hass, storage, ollama.fake, url, Path(config_dir) / "documents"
                    )
                    vectors = documents.vectors
                    assistant = _assistant(hass, storage)
                    assistant.documents = documents
                    times = await _turns(assistant, "full", TURNS)
                    measured = times[-MEASURED:]
                    # Context assembly alone, against listing everything naively.
                    cold = []
                    rank = []
                    naive = []
                    index = EntityIndex()
                    for turn in range(MEASURED):
                        text = MESSAGES[turn % len(MESSAGES)]
                        started = time.perf_counter()
                        rank_entities(hass, text)
                        cold.append((time.perf_counter() - started) * 1000)
                        started = time.perf_counter()
                        index.rank(hass, text)
                        describe_moment(hass, "Alice")
                        rank.append((time.perf_counter() - started) * 1000)
                        started = time.perf_counter()
                        _naive_context(hass)
                        naive.append((time.perf_counter() - started) * 1000)
                    session = async_get_clientsession(hass)
                    fresh, cached, embed = await _retrieval(documents, session, url)
                    hits = await documents.async_search(MESSAGES[0], 5)
                    assert hits, documents.embed_error
                    _forget_queries(documents)
                    result = await assistant.async_turn(
                        "full",
                        MESSAGES[0],
                        Speaker(person="telegram:1", name="Alice", ha_user_id=None),
                    )
                finally:
                    if documents is not None:
                        await documents.async_stop()
                    await async_release_storage(hass)

    finally:
        await ollama.async_stop()
    print(f"Python {platform.python_version()} on {platform.machine()}, "
          f"{platform.system()}; {ENTITIES} entities, {CHUNKS} chunks x {DIM} dims, "
          f"{TURNS}-turn conversation (last {MEASURED} turns timed)")  # fmt: skip
    print(
        f"retrieval: the real DocumentIndex/VectorStore on assistant.db, "
        f"{len(vectors):,} vectors ({CHUNKS:,} stored chunks + HA knowledge), "
        f"engine chosen at load: {vectors.engine}"
        f"{' (one core)' if vectors.single_core else ' (threaded BLAS)'}, "
        f"sqlite-vec {'loaded' if vectors.extension_loaded else 'not loaded'}; "
        f"start (load, choose, index and embed HA knowledge) {start_s:.1f} s"
    )
    print(
        "query embedding: a real /api/embed request per turn over loopback to "
        "tests/fake_ollama.py (own thread, answers at once; query cache emptied)"
    )
    kinds = ", ".join(f"{h.score:.2f} {'HA' if h.trusted else 'doc'}" for h in hits[:5])
    passing = sum(h.score >= AUTO_CONTEXT_MIN_SCORE for h in hits)
    print(
        f"top 5 for the first message (score, source): {kinds}; "
        f"{passing} pass the automatic context's {AUTO_CONTEXT_MIN_SCORE}"
    )
    base = _p(bare_times, 0.95)
    print(_row("baseline: bare turn (empty house, no docs)", bare_times))
    print(_row("whole turn except the model call", measured, base))
    print(_row("  of which entity ranking + header", rank))
    print(_row("  entity ranking, index built from scratch", cold))
    print(_row("  naive context (all lines, chars/4)", naive))
    print(_row("  of which retrieval, new query (k=5)", fresh))
    print(_row("    retrieval, cached query embedding", cached))
    print(_row("    /api/embed round trip alone (loopback)", embed))
    print(f"context tokens of the last turn (estimated): {result.context_tokens}")
    verdict = "met" if _p(measured, 0.95) <= 150 else "MISSED"  # noqa: PLR2004
    print(f"target: whole turn p95 <= 150 ms: {verdict}")


if __name__ == "__main__":
    asyncio.run(main())
