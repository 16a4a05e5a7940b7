"""Streaming replies: time to the first visible words against time to the full reply.

A fake Ollama (tests/fake_ollama.py, on 127.0.0.1) writes a 60-word answer
the way a small model on a Raspberry Pi does: a pause before the first token
(prompt evaluation), then a word every so often. The same turn runs through
the real agent graph and ChatOllama twice per round:

- baseline: no ``on_text`` (the model's answer is awaited whole, as before
  streaming): the user sees nothing until the full reply;
- streaming: ``on_text`` receives the partial text; the first Telegram draft
  goes out on the ReplyStream's first tick at or after the first words.

Run: ``.venv/bin/python bench/streaming.py``
"""

from __future__ import annotations

import asyncio
import math
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from langchain_core.messages import HumanMessage  # noqa: E402
from langchain_ollama import ChatOllama  # noqa: E402

from custom_components.ha_personal_assistant.agent.graph import (  # noqa: E402
    TurnRuntime,
    bind_model,
    build_graph,
    new_turn_id,
)
from custom_components.ha_personal_assistant.telegram.stream import (  # noqa: E402
    DRAFT_FIRST_SECONDS,
    DRAFT_INTERVAL_SECONDS,
)
from custom_components.ha_personal_assistant.tools.ha import HA_TOOLS  # noqa: E402
from custom_components.ha_personal_assistant.tools.registry import (  # noqa: E402
    ToolContext,
    ToolRegistry,
)
from tests.fake_ollama import FakeOllama, text_reply  # noqa: E402

MODEL = "qwen3:4b"
WORDS = 60
FIRST_TOKEN_SECONDS = 0.8  # prompt evaluation before the first word
WORD_SECONDS = 0.06  # about 16 words a second
ROUNDS = 5


def _answer() -> tuple[str, tuple[str, ...]]:
    words = tuple(f"word{i} " for i in range(WORDS))
    return "".join(words), words


async def _turn(
    fake: FakeOllama, model: Any, *, stream: bool
) -> tuple[float, float, int]:
    """Run one turn; return (first visible words, full reply, partial updates)."""
    text, pieces = _answer()
    fake.enqueue(
        text_reply(
            text,
            text_chunks=pieces,
            delay=FIRST_TOKEN_SECONDS,
            chunk_delay=WORD_SECONDS,
        )
    )
    registry = ToolRegistry(HA_TOOLS)
    first: list[float] = []
    updates = 0
    started = time.perf_counter()

    def on_text(_text: str) -> None:
        nonlocal updates
        updates += 1
        if not first:
            first.append(time.perf_counter() - started)

    runtime = TurnRuntime(
        model=model,
        registry=registry,
        tools=ToolContext(hass=cast("Any", None), database=None, person="bench"),
        model_slots=asyncio.Semaphore(1),
        request_timeout=60,
        on_text=on_text if stream else None,
    )
    turn_id = new_turn_id()
    await build_graph(None).ainvoke(
        {"messages": [HumanMessage(content="How is the house?", id=turn_id)]},
        {"configurable": {"thread_id": "bench"}},
        context=runtime,
    )
    total = time.perf_counter() - started
    return (first[0] if first else total), total, updates


def _first_draft(first_words: float) -> float:
    """Return when the ReplyStream shows its first draft for these first words."""
    if first_words <= DRAFT_FIRST_SECONDS:
        return DRAFT_FIRST_SECONDS
    ticks = math.ceil((first_words - DRAFT_FIRST_SECONDS) / DRAFT_INTERVAL_SECONDS)
    return DRAFT_FIRST_SECONDS + ticks * DRAFT_INTERVAL_SECONDS


async def main() -> None:
    """Measure both ways, interleaved, and print medians and ratios."""
    fake = FakeOllama()
    await fake.start()
    try:
        chat = ChatOllama(model=MODEL, base_url=fake.url, reasoning=False)
        model = bind_model(chat, ToolRegistry(HA_TOOLS).schemas())
        await _turn(fake, model, stream=True)  # warm-up
        base_full: list[float] = []
        stream_first: list[float] = []
        stream_full: list[float] = []
        updates: list[int] = []
        for _ in range(ROUNDS):
            _, full, _ = await _turn(fake, model, stream=False)
            base_full.append(full)
            first, full, count = await _turn(fake, model, stream=True)
            stream_first.append(first)
            stream_full.append(full)
            updates.append(count)
    finally:
        await fake.stop()

    def med(values: list[float]) -> float:
        return statistics.median(values)

    def spread(values: list[float]) -> str:
        return f"{min(values):.2f}-{max(values):.2f} s"

    base = med(base_full)
    first = med(stream_first)
    draft = _first_draft(first)
    print(f"Python {platform.python_version()} on {platform.machine()}")
    print(
        f"fake model: {FIRST_TOKEN_SECONDS} s to the first word, "
        f"{WORDS} words {WORD_SECONDS} s apart; {ROUNDS} rounds, medians"
    )
    print(f"baseline (no streaming): first words = full reply {base:.2f} s")
    print(f"  spread {spread(base_full)}")
    print(f"streaming: first words available {first:.2f} s ({spread(stream_first)})")
    print(f"streaming: first Telegram draft at {draft:.2f} s (1 s ticks)")
    print(f"streaming: full reply {med(stream_full):.2f} s ({spread(stream_full)})")
    print(f"partial updates per turn: {statistics.median(updates):.0f}")
    print(f"first words: {first / base:.2f}x the baseline's wait")
    print(f"first draft: {draft / base:.2f}x the baseline's wait")
    print(f"full reply with streaming: {med(stream_full) / base:.2f}x the baseline")


if __name__ == "__main__":
    asyncio.run(main())
