"""Load: 5 users x 20 messages at once against one user alone, same run.

Fake Ollama answers every chat request after a fixed latency (MODEL_LATENCY).
For each message the gateway handles, the bench takes the wall time from the
start of handling to the reply sent, and subtracts the model's time (inside
the request) and the wait for a model slot (the integration allows two model
calls at once, as a home Ollama server would queue them anyway). What is left
is the integration's own overhead: database, context, graph, tools, Telegram.

A ticker task measures how late HA's event loop wakes a 10 ms sleep.

Baseline: one user writing the same number of messages one after the other.
Targets (issue #8): overhead p95 <= 200 ms under load; loop lag p99 <= 10 ms.

Run: .venv/bin/python bench/load.py
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ha_bench import (
    LoopLag,
    instrument,
    machine,
    percentile,
    quiet_logs,
    run_pytest,
    summary,
)

if __name__ == "__main__":
    # pytest imports this file again, after its plugins, for the fixtures.
    sys.exit(run_pytest(str(Path(__file__).resolve())))

# ruff: noqa: I001, F811 -- import order loads this integration; fixtures are imported
import custom_components  # noqa: F401
import pytest

from tests.common import async_setup_assistant, async_setup_house, last_user_content
from tests.conftest import auto_enable_custom_integrations, hass_config_dir  # noqa: F401
from tests.fake_ollama import fake_ollama, text_reply  # noqa: F401
from tests.telegram_harness import telegram, telegram_api  # noqa: F401

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant

    from tests.fake_ollama import FakeOllama
    from tests.telegram_harness import TelegramHarness

MODEL_LATENCY = 0.2  # seconds per model request
USERS = [111111111, 222222222, 333333333, 444444444, 555555555]
MESSAGES = 20
OVERHEAD_TARGET = 0.2
LAG_TARGET = 0.01


@pytest.fixture
def telegram_chat_ids() -> list[int]:
    """Five private chats."""
    return list(USERS)


async def _single_user(telegram: TelegramHarness, user: int) -> None:
    for number in range(MESSAGES):
        before = len(telegram.sent_messages(user))
        await telegram.send_text(f"baseline {number}", chat_id=user)
        await telegram.wait_for_sent(before + 1, chat_id=user, timeout=60)


async def _everyone(telegram: TelegramHarness) -> None:
    async def user_writes(user: int) -> None:
        for number in range(MESSAGES):
            await telegram.send_text(f"u{user} m{number}", chat_id=user)

    before = len(telegram.sent_messages())
    await asyncio.gather(*(user_writes(user) for user in USERS))
    await telegram.wait_for_sent(before + len(USERS) * MESSAGES, timeout=600)


async def test_load(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """Measure and print; asserts only that every message was answered in order."""
    quiet_logs()

    def answer(request: dict[str, Any]) -> Any:
        return text_reply(
            f"Echo: {last_user_content(request).splitlines()[0]}",
            delay=MODEL_LATENCY,
        )

    fake_ollama.default = answer
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama)
    timings = instrument(entry)
    lag = LoopLag()

    # Warm-up: imports, first session, prompt caches.
    await _single_user(telegram, USERS[0])
    timings.clear()

    lag.start()
    await _single_user(telegram, USERS[1])
    idle_lag = await lag.stop()
    idle = [t.overhead for t in timings]
    timings.clear()

    lag.start()
    await _everyone(telegram)
    load_lag = await lag.stop()
    loaded = [t.overhead for t in timings]
    waits = [sum(t.slot_wait) for t in timings]

    for user in USERS[2:]:
        texts = [m["text"] for m in telegram.sent_messages(user)]
        assert texts == [f"Echo: u{user} m{n}" for n in range(MESSAGES)], user

    p95_idle, p95_load = percentile(idle, 0.95), percentile(loaded, 0.95)
    lag_idle, lag_load = percentile(idle_lag, 0.99), percentile(load_lag, 0.99)
    print()
    print(f"bench/load.py  {machine()}")
    print(
        f"fake Ollama latency {MODEL_LATENCY * 1000:.0f} ms per request; model slots 2"
    )
    print(f"overhead outside the model, 1 user alone:   {summary(idle)}")
    print(f"overhead outside the model, 5 x 20 at once: {summary(loaded)}")
    print(f"wait for a model slot under load:           {summary(waits)}")
    print(f"event-loop lag (10 ms ticker), idle:        {summary(idle_lag)}")
    print(f"event-loop lag (10 ms ticker), under load:  {summary(load_lag)}")
    print(
        f"overhead p95 under load {p95_load * 1000:.1f} ms = "
        f"{p95_load / p95_idle:.2f}x the single-user p95 "
        f"(target <= {OVERHEAD_TARGET * 1000:.0f} ms: "
        f"{'met' if p95_load <= OVERHEAD_TARGET else 'NOT met'})"
    )
    print(
        f"loop lag p99 under load {lag_load * 1000:.1f} ms = "
        f"{lag_load / max(lag_idle, 1e-6):.2f}x idle "
        f"(target <= {LAG_TARGET * 1000:.0f} ms: "
        f"{'met' if lag_load <= LAG_TARGET else 'NOT met'})"
    )
