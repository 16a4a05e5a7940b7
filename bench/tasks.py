"""Tasks: what 1,000 open reminders and watches cost Home Assistant's event loop.

Runs the real stack (Home Assistant, telegram_bot, the integration, the fake
Ollama) through pytest's ``hass`` fixture, with 1,000 open tasks stored for
50 people: 500 reminders and timers spread over the next 30 days, and 500
watches (``above 100``) on 50 sensors, ten per sensor.

- **Event-loop time per minute.** Scheduled tasks are timers in the loop's
  heap: idle, they cost nothing. What costs is a watched entity changing. A
  busy household minute is replayed: each of the 50 watched sensors changes
  twice (none meets its condition) and 20 other sensors change 10 times each
  (300 state changes). The time the loop spends on it is measured with the
  1,000 tasks armed and, as the baseline, with none; the difference is the
  tasks' cost. Idle cost: the loop's CPU time over 5 s with and without.
- **Setup.** The entry is set up (until its tasks are loaded and armed) with
  no tasks and with the 1,000, five times each.

Targets (issue #18): under 1 ms of event-loop time per minute for 1,000 open
tasks; setup within 1.2x of setup with no tasks.

Run: .venv/bin/python bench/tasks.py
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ha_bench import machine, quiet_logs, run_pytest

if __name__ == "__main__":
    # pytest imports this file again, after its plugins, for the fixtures.
    sys.exit(run_pytest(str(Path(__file__).resolve())))

# ruff: noqa: I001, F811 -- import order loads this integration; fixtures are imported
import custom_components  # noqa: F401
from homeassistant.components.homeassistant.exposed_entities import (
    async_expose_entity,
)

from custom_components.ha_personal_assistant.tasks import store
from custom_components.ha_personal_assistant.tasks.store import (
    NewTask,
    TaskKind,
    TaskStatus,
)
from tests.common import async_setup_assistant, async_setup_house
from tests.conftest import auto_enable_custom_integrations, hass_config_dir  # noqa: F401
from tests.fake_ollama import fake_ollama  # noqa: F401
from tests.telegram_harness import telegram, telegram_api  # noqa: F401

if TYPE_CHECKING:
    import sqlite3

    from homeassistant.core import HomeAssistant
    from pytest_homeassistant_custom_component.common import MockConfigEntry

    from custom_components.ha_personal_assistant.tasks.manager import TaskManager
    from tests.fake_ollama import FakeOllama
    from tests.telegram_harness import TelegramHarness

PEOPLE = 50
TIMERS = 500
WATCHES = 500
WATCHED = 50
OTHERS = 20
MINUTES = 20
SETUPS = 5
LOOP_TARGET_MS = 1.0
SETUP_TARGET = 1.2


def _manager(entry: MockConfigEntry) -> TaskManager:
    manager = entry.runtime_data.tasks
    assert manager is not None
    return manager


def _sensors(hass: HomeAssistant) -> tuple[list[str], list[str]]:
    watched = [f"sensor.bench_watched_{n}" for n in range(WATCHED)]
    others = [f"sensor.bench_other_{n}" for n in range(OTHERS)]
    for entity_id in (*watched, *others):
        hass.states.async_set(entity_id, "0", {"unit_of_measurement": "W"})
        async_expose_entity(hass, "conversation", entity_id, should_expose=True)
    return watched, others


def _insert(watched: list[str]) -> object:
    now = time.time()
    rng = random.Random(18)  # noqa: S311 - a benchmark's spread, not a secret

    def insert(conn: sqlite3.Connection) -> None:
        for n in range(TIMERS + WATCHES):
            owner = f"telegram:{900000000 + n % PEOPLE}"
            common = {
                "owner": owner,
                "owner_name": f"Person {n % PEOPLE}",
                "ha_user_id": None,
                "conversation_key": None,
                "bot_entry_id": None,
                "chat_id": None,
                "message": f"Task {n}",
                "action": None,
            }
            if n < TIMERS:
                new = NewTask(
                    kind=TaskKind.SCHEDULE,
                    fire_at=now + rng.uniform(3600, 30 * 86400),
                    **common,  # type: ignore[arg-type]
                )
            else:
                new = NewTask(
                    kind=TaskKind.WATCH,
                    fire_at=None,
                    entity_id=watched[n % WATCHED],
                    condition="above 100",
                    **common,  # type: ignore[arg-type]
                )
            store.insert(conn, new, status=TaskStatus.PENDING, now=now, cap=10**6)

    return insert


async def _setup_time(hass: HomeAssistant, entry: MockConfigEntry) -> float:
    """Unload the entry, then time its setup until the tasks are armed."""
    assert await hass.config_entries.async_unload(entry.entry_id)
    await hass.async_block_till_done()
    started = time.perf_counter()
    assert await hass.config_entries.async_setup(entry.entry_id)
    await _manager(entry).ready.wait()
    await hass.async_block_till_done()
    return time.perf_counter() - started


async def _busy_minute(
    hass: HomeAssistant, watched: list[str], others: list[str], rng: random.Random
) -> float:
    """Replay a minute of state changes; return the loop time they took."""
    changes = [(e, rng.randint(0, 99)) for e in watched for _ in range(2)]
    changes += [(e, rng.randint(0, 99)) for e in others for _ in range(10)]
    rng.shuffle(changes)
    spent = 0.0
    for entity_id, value in changes:
        started = time.perf_counter()
        hass.states.async_set(entity_id, str(value), {"unit_of_measurement": "W"})
        await hass.async_block_till_done()
        spent += time.perf_counter() - started
    return spent


async def _minutes(
    hass: HomeAssistant, watched: list[str], others: list[str]
) -> list[float]:
    rng = random.Random(7)  # noqa: S311 - a benchmark's spread, not a secret
    await _busy_minute(hass, watched, others, rng)  # warm-up
    return [await _busy_minute(hass, watched, others, rng) for _ in range(MINUTES)]


async def _idle_cpu(seconds: float = 5.0) -> float:
    """Return the loop thread's CPU time over ``seconds`` of idling."""
    started = time.thread_time()
    await asyncio.sleep(seconds)
    return time.thread_time() - started


async def test_tasks(
    hass: HomeAssistant,
    telegram: TelegramHarness,  # noqa: ARG001 - the bot the entry sends through
    fake_ollama: FakeOllama,
) -> None:
    """Measure and print; asserts only that the tasks were armed."""
    quiet_logs()
    await async_setup_house(hass)
    watched, others = _sensors(hass)
    entry = await async_setup_assistant(hass, fake_ollama)
    await _manager(entry).ready.wait()

    base_setup = [await _setup_time(hass, entry) for _ in range(SETUPS)]
    base_minutes = await _minutes(hass, watched, others)
    base_idle = await _idle_cpu()

    await entry.runtime_data.storage.database.async_run(_insert(watched))
    task_setup = [await _setup_time(hass, entry) for _ in range(SETUPS)]
    manager = _manager(entry)
    assert len(manager.open_tasks()) == TIMERS + WATCHES
    assert len(manager._armed) == TIMERS + WATCHES  # noqa: SLF001
    task_minutes = await _minutes(hass, watched, others)
    task_idle = await _idle_cpu()
    # Nothing fired: no condition was met, no time came.
    assert len(manager.open_tasks()) == TIMERS + WATCHES

    base_ms = statistics.median(base_minutes) * 1000
    task_ms = statistics.median(task_minutes) * 1000
    cost = task_ms - base_ms
    setup_base = statistics.median(base_setup)
    setup_tasks = statistics.median(task_setup)
    ratio = setup_tasks / setup_base
    print()
    print(f"bench/tasks.py  {machine()}")
    print(
        f"{TIMERS} timers and {WATCHES} watches on {WATCHED} sensors, for "
        f"{PEOPLE} people; a busy minute: {WATCHED * 2 + OTHERS * 10} state changes"
    )
    print(
        f"loop time for a busy minute, no tasks (baseline): median {base_ms:.2f} ms"
        f" (min {min(base_minutes) * 1000:.2f}, max {max(base_minutes) * 1000:.2f})"
    )
    print(
        f"loop time for a busy minute, 1,000 open tasks:    median {task_ms:.2f} ms"
        f" (min {min(task_minutes) * 1000:.2f}, max {max(task_minutes) * 1000:.2f})"
    )
    print(
        f"cost of the tasks: {cost:.3f} ms per minute "
        f"({task_ms / base_ms:.2f}x the baseline; target < {LOOP_TARGET_MS:g} ms: "
        f"{'met' if cost < LOOP_TARGET_MS else 'NOT met'})"
    )
    print(
        f"idle loop CPU over 5 s: {base_idle * 1000:.2f} ms without tasks, "
        f"{task_idle * 1000:.2f} ms with 1,000 "
        f"(per minute: {(task_idle - base_idle) * 12 * 1000:+.2f} ms)"
    )
    verdict = "met" if ratio <= SETUP_TARGET else "NOT met"
    print(
        f"entry setup until tasks are armed: no tasks median {setup_base * 1000:.1f}"
        f" ms, 1,000 tasks median {setup_tasks * 1000:.1f} ms = {ratio:.2f}x "
        f"(target <= {SETUP_TARGET:g}x: {verdict})"
    )
