"""get_history over 10,000 state changes: event-loop time, recorder time apart.

Real Home Assistant with its real recorder on a SQLite file (as at home),
10,000 recorded changes of a motion sensor (on/off) and of a temperature
sensor (numbers) within the last 24 hours. Each get_history call goes through
the tool registry, as the agent makes it, and is split into:

* event-loop time: our code on HA's loop, before the recorder job is
  submitted and after its result is back (wall time of those two segments,
  and the loop thread's CPU time over the whole call as a cross-check);
* recorder query: HA's history API (``get_significant_states``) in the
  recorder's executor, timed inside the job;
* reduction: our summary of the rows, in the same executor job.

Baselines in the same run:

* get_state on the same entity: the floor of any tool call;
* the naive design: the rows read the same way, but reduced and formatted on
  the event loop instead of the executor.

Target (issue #21): at most 50 ms of event-loop time per call.

Run: .venv/bin/python bench/history.py
"""

from __future__ import annotations

import logging
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ha_bench import machine, quiet_logs, run_pytest

if __name__ == "__main__":
    # pytest imports this file again, after its plugins, for the fixtures.
    sys.exit(run_pytest(str(Path(__file__).resolve())))

# ruff: noqa: I001 -- import order loads this integration; fixtures are imported
import custom_components  # noqa: F401
import pytest
from homeassistant.components.homeassistant.exposed_entities import (
    async_expose_entity,
)
from homeassistant.helpers.recorder import get_instance
from homeassistant.setup import async_setup_component
from pytest_homeassistant_custom_component.components.recorder.common import (
    async_wait_recording_done,
)

from custom_components.ha_personal_assistant.tokens import estimate_tokens
from custom_components.ha_personal_assistant.tools import recorder as recorder_tool
from custom_components.ha_personal_assistant.tools.ha import HA_TOOLS
from custom_components.ha_personal_assistant.tools.registry import (
    ToolContext,
    ToolRegistry,
)
from tests.conftest import auto_enable_custom_integrations, hass_config_dir  # noqa: F401

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant

CHANGES = 10_000
STEP = 8.0  # seconds between changes: 10,000 changes in 22.2 hours
ROUNDS = 20
WARMUP = 3
LOOP_TARGET = 0.050
MOTION = "binary_sensor.hall_motion"
TEMPERATURE = "sensor.living_room_temperature"


@pytest.fixture
def persistent_database() -> bool:
    """Use a SQLite file, as a real installation has, not an in-memory database."""
    return True


@pytest.fixture
def recorder_config() -> dict[str, Any]:
    """HA's default commit interval (the tests' default commits every event)."""
    return {"commit_interval": 5}


@pytest.fixture(autouse=True)
def mock_recorder_before_hass(async_test_recorder: Any) -> None:
    """Prepare the recorder's database before hass starts."""


class Probe:
    """Times one call's segments: on the loop, in the recorder's executor."""

    def __init__(self, hass: HomeAssistant) -> None:
        """Wrap the recorder's executor submit and the history reader."""
        self.submitted = 0.0
        self.resumed = 0.0
        self.summary: Any = None
        instance = get_instance(hass)
        submit = instance.async_add_executor_job
        read = recorder_tool.read_history

        def timed_submit(target: Any, *args: Any) -> Any:
            self.submitted = time.perf_counter()
            future = submit(target, *args)

            def done(_: Any) -> None:
                self.resumed = time.perf_counter()

            future.add_done_callback(done)
            return future

        def timed_read(*args: Any) -> Any:
            self.summary = read(*args)
            return self.summary

        instance.async_add_executor_job = timed_submit  # type: ignore[method-assign]
        recorder_tool.read_history = timed_read  # type: ignore[assignment]


async def _write(hass: HomeAssistant) -> None:
    now = time.time()
    for index in range(CHANGES):
        when = now - (CHANGES - index) * STEP
        hass.states.async_set(MOTION, "on" if index % 2 == 0 else "off", timestamp=when)
        hass.states.async_set(
            TEMPERATURE,
            f"{20 + 3 * ((index % 200) / 200):.2f}",
            {"unit_of_measurement": "°C", "state_class": "measurement"},
            timestamp=when + 1,
        )
        if index % 1000 == 999:  # noqa: PLR2004
            await async_wait_recording_done(hass)
    await async_wait_recording_done(hass)


async def _timed_history(
    hass: HomeAssistant, registry: ToolRegistry, probe: Probe, entity_id: str
) -> dict[str, float]:
    ctx = ToolContext(hass=hass, database=None, person="bench")
    cpu = time.thread_time()
    started = time.perf_counter()
    outcome = await registry.async_call(ctx, "get_history", {"entity_id": entity_id})
    ended = time.perf_counter()
    cpu = time.thread_time() - cpu
    assert outcome.ok, outcome.content
    summary = probe.summary
    return {
        "loop": (probe.submitted - started) + (ended - probe.resumed),
        "before": probe.submitted - started,
        "after": ended - probe.resumed,
        "loop_cpu": cpu,
        "query": summary.query_seconds,
        "reduce": summary.reduce_seconds,
        "total": ended - started,
        "tokens": float(estimate_tokens(outcome.content)),
        "runs": float(len(summary.runs)),
    }


async def _timed_get_state(
    hass: HomeAssistant, registry: ToolRegistry, entity_id: str
) -> float:
    ctx = ToolContext(hass=hass, database=None, person="bench")
    started = time.perf_counter()
    outcome = await registry.async_call(ctx, "get_state", {"entity_id": entity_id})
    assert outcome.ok
    return time.perf_counter() - started


async def _timed_naive(hass: HomeAssistant, entity_id: str) -> float:
    """Read the same rows, but reduce and format them on the loop (the naive way)."""
    from homeassistant.util import dt as dt_util  # noqa: PLC0415

    end = dt_util.utcnow()
    start = end - timedelta(hours=recorder_tool.DEFAULT_HOURS)
    rows = await get_instance(hass).async_add_executor_job(
        recorder_tool.query_rows, hass, entity_id, start
    )
    started = time.perf_counter()
    state = hass.states.get(entity_id)
    assert state is not None
    summary = recorder_tool.summarize(
        rows,
        start.timestamp(),
        end.timestamp(),
        (state.state, state.last_changed_timestamp),
    )
    ctx = ToolContext(hass=hass, database=None, person="bench")
    answer = recorder_tool._Answer(ctx, state, recorder_tool.DEFAULT_HOURS)  # noqa: SLF001
    answer.history(summary, start.timestamp(), None)
    return time.perf_counter() - started


def _ms(values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    return (
        f"median {statistics.median(ms):8.3f} ms  min {ms[0]:8.3f}  max {ms[-1]:8.3f}"
    )


@pytest.mark.usefixtures("recorder_mock")
async def test_history_bench(hass: HomeAssistant) -> None:
    """Measure and print; asserts only that each answer is complete and capped."""
    quiet_logs()
    # The test plugin logs every SQL statement; that would be measured too.
    logging.getLogger("sqlalchemy.engine").setLevel(logging.WARNING)
    hass.states.async_set(
        "sensor.history_start", "0", timestamp=time.time() - 2 * 86400
    )
    await async_wait_recording_done(hass)
    assert await async_setup_component(hass, "homeassistant", {})
    written = time.perf_counter()
    await _write(hass)
    written = time.perf_counter() - written
    for entity_id in (MOTION, TEMPERATURE):
        async_expose_entity(hass, "conversation", entity_id, should_expose=True)
    registry = ToolRegistry([*HA_TOOLS, *recorder_tool.RECORDER_TOOLS])
    probe = Probe(hass)

    print()
    print(f"bench/history.py  {machine()}")
    print(
        f"{CHANGES:,} recorded changes per entity in the last 24 h, SQLite file; "
        f"written and recorded in {written:.1f} s"
    )
    for entity_id, kind in ((MOTION, "on/off"), (TEMPERATURE, "numbers")):
        for _ in range(WARMUP):
            await _timed_history(hass, registry, probe, entity_id)
            await _timed_naive(hass, entity_id)
        rounds = [
            await _timed_history(hass, registry, probe, entity_id)
            for _ in range(ROUNDS)
        ]
        naive = [await _timed_naive(hass, entity_id) for _ in range(ROUNDS)]
        floor = [
            await _timed_get_state(hass, registry, entity_id) for _ in range(ROUNDS)
        ]

        def column(key: str, rounds: list[dict[str, float]] = rounds) -> list[float]:
            return [r[key] for r in rounds]

        loop = statistics.median(column("loop"))
        assert max(column("tokens")) <= recorder_tool.MAX_RESULT_TOKENS
        print(f"\n{entity_id} ({kind}, {int(rounds[0]['runs']):,} runs read):")
        print(f"  event loop, our code:      {_ms(column('loop'))}")
        print(f"    before the recorder job: {_ms(column('before'))}")
        print(f"    after it (formatting):   {_ms(column('after'))}")
        print(f"  loop thread CPU, whole call: {_ms(column('loop_cpu'))}")
        print(f"  recorder query (executor): {_ms(column('query'))}")
        print(f"  our reduction (executor):  {_ms(column('reduce'))}")
        print(f"  whole call, wall:          {_ms(column('total'))}")
        cap = recorder_tool.MAX_RESULT_TOKENS
        print(f"  answer: {int(max(column('tokens')))} tokens (cap {cap})")
        print(f"  baseline get_state:        {_ms(floor)}")
        print(f"  baseline naive (on loop):  {_ms(naive)}")
        print(
            f"  loop time = {loop / statistics.median(floor):.1f}x get_state, "
            f"{loop / statistics.median(naive):.2f}x the naive design; "
            f"target <= {LOOP_TARGET * 1000:.0f} ms: "
            f"{'met' if loop <= LOOP_TARGET else 'NOT met'}"
        )
