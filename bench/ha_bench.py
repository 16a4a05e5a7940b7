"""Shared pieces of the whole-system benchmarks (load.py, long_run.py).

They run the real stack the test suite runs: Home Assistant (from
pytest-homeassistant-custom-component), HA's own telegram_bot with webhooks,
the integration, and the fake Ollama HTTP server with a fixed latency. pytest
only provides the ``hass`` fixture; the benchmarks are started by hand
(``.venv/bin/python bench/load.py``) and never run in CI.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def run_pytest(bench_file: str) -> int:
    """Run the benchmark module's single ``test_*`` function under pytest."""
    import pytest  # noqa: PLC0415 - only when run as a script

    return int(
        pytest.main(
            [
                bench_file,
                "-q",
                "-s",
                "-p",
                "no:randomly",
                "-p",
                "no:cacheprovider",
                "--timeout=1800",
                "-o",
                "addopts=",
                "-W",
                "ignore::DeprecationWarning",
                "--rootdir",
                str(ROOT),
                "-c",
                str(ROOT / "setup.cfg"),
            ]
        )
    )


def forget_recordings(telegram: Any, fake_ollama: Any) -> None:
    """Drop what the fakes recorded (every request); it is not the integration's."""
    telegram.api.calls.clear()
    telegram.api.messages.clear()
    telegram.api.router.reset()
    fake_ollama.requests.clear()
    fake_ollama.chat_requests.clear()
    # aiohttp's TestClient keeps every response it returned until it closes.
    client = getattr(telegram, "_client", None)
    if client is not None and isinstance(getattr(client, "_responses", None), list):
        client._responses.clear()  # noqa: SLF001


def quiet_logs() -> None:
    """Run like production: no asyncio debug mode, warnings-only logging.

    The test plugin turns both on; they would be measured as our overhead.
    """
    asyncio.get_running_loop().set_debug(False)
    logging.getLogger().setLevel(logging.WARNING)
    for name in ("homeassistant", "httpx", "aiohttp", "custom_components", "telegram"):
        logging.getLogger(name).setLevel(logging.WARNING)


def machine() -> str:
    """Describe where the figures were measured."""
    return (
        f"Python {platform.python_version()} on {platform.machine()}, "
        f"{platform.system()} {platform.release()}"
    )


def percentile(values: list[float], share: float) -> float:
    """Return the ``share`` (0..1) percentile, nearest rank."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))
    return ordered[index]


def summary(values: list[float]) -> str:
    """Median, p95, p99 and max in milliseconds."""
    ms = [v * 1000 for v in values]
    return (
        f"median {statistics.median(ms):7.1f} ms  p95 {percentile(ms, 0.95):7.1f} ms"
        f"  p99 {percentile(ms, 0.99):7.1f} ms  max {max(ms):7.1f} ms  (n={len(ms)})"
    )


class LoopLag:
    """A ticker task: how late the event loop wakes a 10 ms sleep."""

    def __init__(self, interval: float = 0.01) -> None:
        """Prepare the ticker; ``start`` runs it."""
        self.interval = interval
        self.lags: list[float] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start ticking on the running loop."""
        self.lags = []
        self._task = asyncio.get_running_loop().create_task(self._tick())

    async def stop(self) -> list[float]:
        """Stop ticking and return the lags in seconds."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        return self.lags

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(self.interval)
            self.lags.append(max(0.0, loop.time() - before - self.interval))


@dataclass
class TurnTiming:
    """One message's time in the gateway, split into model and the rest."""

    started: float = 0.0
    handled: float = 0.0
    model: float = 0.0
    slot_wait: list[float] = field(default_factory=list)

    @property
    def overhead(self) -> float:
        """Time that was neither the model answering nor waiting for it."""
        return self.handled - self.model - sum(self.slot_wait)


_CURRENT: contextvars.ContextVar[TurnTiming | None] = contextvars.ContextVar(
    "bench_turn", default=None
)


def _time_slot_waits(slots: asyncio.Semaphore) -> None:
    """Record how long each turn waits for a model slot (same semaphore)."""
    acquire = slots.acquire

    async def timed_acquire() -> bool:
        started = time.perf_counter()
        result = await acquire()
        if (timing := _CURRENT.get()) is not None:
            timing.slot_wait.append(time.perf_counter() - started)
        return result

    slots.acquire = timed_acquire  # type: ignore[method-assign]


def instrument(entry: Any) -> list[TurnTiming]:
    """Time every message the entry's gateway handles; return the live list.

    Wraps the gateway's per-message handler, the assistant's turn and the
    model slots' acquire: the bench measures the integration, it changes
    nothing it does.
    """
    data = entry.runtime_data
    gateway, assistant = data.gateway, data.assistant
    timings: list[TurnTiming] = []
    _time_slot_waits(assistant.model_slots)
    # The chat queues call the gateway's per-message handler.
    queues = gateway._queues  # noqa: SLF001
    handle, turn = queues._handle, assistant.async_turn  # noqa: SLF001

    async def timed_handle(*args: Any) -> None:
        timing = TurnTiming(started=time.perf_counter())
        token = _CURRENT.set(timing)
        try:
            await handle(*args)
        finally:
            _CURRENT.reset(token)
            timing.handled = time.perf_counter() - timing.started
            timings.append(timing)

    async def timed_turn(*args: Any, **kwargs: Any) -> Any:
        result = await turn(*args, **kwargs)
        if (timing := _CURRENT.get()) is not None:
            timing.model += result.model_seconds
        return result

    queues._handle = timed_handle  # noqa: SLF001
    assistant.async_turn = timed_turn
    return timings
