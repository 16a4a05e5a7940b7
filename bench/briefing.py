"""Gathering a briefing in a 2,000-entity house: event-loop time, recorder apart.

Real Home Assistant with its real recorder on a SQLite file, 2,000 entities
(doors, windows, locks, covers, leak sensors, lights, sensors; most exposed
to Assist), and 24 hours of recorded changes of every watched entity. Each
round gathers one briefing's facts (tasks/briefing.py ``async_gather``: the
watched entities, what is still open, the night's changes from the recorder)
and is split into:

* event-loop time: our code on HA's loop, before the recorder job is
  submitted and after its result is back (wall time of those segments), and
  the loop thread's CPU time over the whole call as a cross-check;
* the recorder job: HA's history query and our reduction, in the recorder's
  executor (not on the loop).

Baselines in the same run:

* one pass over the state machine reading each state's device class (the
  floor of any scan of the house);
* the naive design: the same recorder job run on the event loop.

Target (issue #34): at most 50 ms of event-loop time per briefing.

Run: .venv/bin/python bench/briefing.py
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
from homeassistant.util import dt as dt_util
from pytest_homeassistant_custom_component.components.recorder.common import (
    async_wait_recording_done,
)

from custom_components.ha_personal_assistant.tasks import briefing
from custom_components.ha_personal_assistant.tasks.store import Task, TaskKind
from tests.conftest import auto_enable_custom_integrations, hass_config_dir  # noqa: F401

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant

ROUNDS = 20
WARMUP = 3
LOOP_TARGET = 0.050
# (domain, device class, how many, states it moves between)
HOUSE = (
    ("binary_sensor", "door", 120, ("off", "on")),
    ("binary_sensor", "window", 180, ("off", "on")),
    ("binary_sensor", "garage_door", 10, ("off", "on")),
    ("binary_sensor", "moisture", 40, ("off", "on")),
    ("binary_sensor", "motion", 150, ("off", "on")),
    ("lock", None, 30, ("locked", "unlocked")),
    ("cover", None, 120, ("closed", "open")),
    ("light", None, 600, ("off", "on")),
    ("switch", None, 250, ("off", "on")),
    ("sensor", "temperature", 500, ("20.5", "21.0")),
)
# Changes of each watched entity in the 24 hours (a busy door: 24 a day).
CHANGES_PER_ENTITY = 24


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
    """Times the recorder job's submit and return around one gathering."""

    def __init__(self, hass: HomeAssistant) -> None:
        """Wrap the recorder's executor submit."""
        self.submitted = 0.0
        self.resumed = 0.0
        self.job = 0.0
        instance = get_instance(hass)
        submit = instance.async_add_executor_job

        def timed_submit(target: Any, *args: Any) -> Any:
            def timed(*inner: Any) -> Any:
                started = time.perf_counter()
                try:
                    return target(*inner)
                finally:
                    self.job = time.perf_counter() - started

            self.submitted = time.perf_counter()
            future = submit(timed, *args)

            def done(_: Any) -> None:
                self.resumed = time.perf_counter()

            future.add_done_callback(done)
            return future

        instance.async_add_executor_job = timed_submit  # type: ignore[method-assign]


async def _build(hass: HomeAssistant) -> tuple[int, int]:
    """Write the house and its 24 hours; return (entities, recorded changes)."""
    now = time.time()
    entities = 0
    changes = 0
    for domain, device_class, count, states in HOUSE:
        for index in range(count):
            entity_id = f"{domain}.{device_class or domain}_{index}"
            attributes = {"friendly_name": f"{device_class or domain} {index}"}
            if device_class:
                attributes["device_class"] = device_class
            watched = domain in ("lock", "cover") or device_class in (
                "door",
                "window",
                "garage_door",
                "moisture",
            )
            steps = CHANGES_PER_ENTITY if watched else 2
            for step in range(steps):
                when = now - 86400 + (step + index / count) * 86400 / steps
                hass.states.async_set(
                    entity_id, states[step % 2], attributes, timestamp=when
                )
                changes += 1
            # Most of the house is exposed; a tenth is not.
            async_expose_entity(hass, "conversation", entity_id, index % 10 != 0)
            entities += 1
        await async_wait_recording_done(hass)
    return entities, changes


def _task() -> Task:
    now = time.time()
    return Task(
        id=1,
        kind=TaskKind.BRIEFING,
        status="running",
        owner="telegram:1",
        owner_name="Bench",
        ha_user_id=None,
        conversation_key=None,
        bot_entry_id=None,
        chat_id=None,
        message=None,
        action=None,
        fire_at=now,
        repeat="daily",
        clock="07:30:00",
        entity_id=None,
        condition=None,
        for_minutes=None,
        until=None,
        tainted=False,
        created_at=now,
        updated_at=now,
        fired_count=0,
        last_fired_at=None,
        outcome=None,
    )


async def _timed(hass: HomeAssistant, probe: Probe) -> dict[str, float]:
    task = _task()
    cpu = time.thread_time()
    started = time.perf_counter()
    facts = await briefing.async_gather(hass, task, [], time.time())
    ended = time.perf_counter()
    cpu = time.thread_time() - cpu
    return {
        "loop": (probe.submitted - started) + (ended - probe.resumed),
        "before": probe.submitted - started,
        "after": ended - probe.resumed,
        "loop_cpu": cpu,
        "job": probe.job,
        "total": ended - started,
        "changes": float(len(facts.changes)),
        "still": float(len(facts.still)),
        "watched": float(len(facts.names)),
    }


def _timed_scan(hass: HomeAssistant) -> float:
    started = time.perf_counter()
    for state in hass.states.async_all():
        state.attributes.get("device_class")
    return time.perf_counter() - started


def _timed_naive(hass: HomeAssistant) -> float:
    """Time the recorder job alone (what it would cost the loop if run there)."""
    kinds = briefing.watched(hass)
    end = dt_util.utcnow()
    started = time.perf_counter()
    briefing.read_changes(hass, list(kinds), end - timedelta(hours=24), end)
    return time.perf_counter() - started


def _ms(values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    return (
        f"median {statistics.median(ms):8.3f} ms  min {ms[0]:8.3f}  max {ms[-1]:8.3f}"
    )


@pytest.mark.usefixtures("recorder_mock")
async def test_briefing_bench(hass: HomeAssistant) -> None:
    """Measure and print; asserts only that the facts were found."""
    quiet_logs()
    logging.getLogger("sqlalchemy.engine").setLevel(logging.WARNING)
    assert await async_setup_component(hass, "homeassistant", {})
    written = time.perf_counter()
    entities, changes = await _build(hass)
    written = time.perf_counter() - written
    probe = Probe(hass)
    for _ in range(WARMUP):
        await _timed(hass, probe)
    rounds = [await _timed(hass, probe) for _ in range(ROUNDS)]
    floor = [_timed_scan(hass) for _ in range(ROUNDS)]
    # Run where the recorder allows database access; it would block the loop
    # this long if it ran there.
    naive = [
        await get_instance(hass).async_add_executor_job(_timed_naive, hass)
        for _ in range(3)
    ]

    def column(key: str) -> list[float]:
        return [r[key] for r in rounds]

    assert rounds[0]["changes"] > 0
    loop = statistics.median(column("loop"))
    print()
    print(f"bench/briefing.py  {machine()}")
    print(
        f"{entities:,} entities, {changes:,} recorded changes in the last 24 h, "
        f"SQLite file; written and recorded in {written:.1f} s"
    )
    print(
        f"watched and exposed: {int(rounds[0]['watched'])}; "
        f"changes kept: {int(rounds[0]['changes'])}; "
        f"still open: {int(rounds[0]['still'])}"
    )
    print(f"  event loop, our code:        {_ms(column('loop'))}")
    print(f"    before the recorder job:   {_ms(column('before'))}")
    print(f"    after it:                  {_ms(column('after'))}")
    print(f"  loop thread CPU, whole call: {_ms(column('loop_cpu'))}")
    print(f"  recorder job (executor):     {_ms(column('job'))}")
    print(f"  whole gathering, wall:       {_ms(column('total'))}")
    print(f"  baseline: one state scan:    {_ms(floor)}")
    print(f"  baseline: the job on a loop: {_ms(naive)}")
    print(
        f"  loop time = {loop / statistics.median(floor):.1f}x a state scan, "
        f"{loop / statistics.median(naive):.2f}x the naive design; "
        f"target <= {LOOP_TARGET * 1000:.0f} ms: "
        f"{'met' if loop <= LOOP_TARGET else 'NOT met'}"
    )
