"""Long run: 1,000 turns across 10 chats; memory, tasks and storage per turn.

After a warm-up (50 turns) the bench takes its baseline: traced Python memory
(tracemalloc, started then), RSS and the number of asyncio tasks. Then 1,000
turns go through the real stack, ten chats at a time, each chat starting a
new conversation (/new) every 20 turns. At the end it reports what memory and
tasks are left above the baseline and how many bytes the two database files
grew per turn. Finally every session is aged past the retention (31 days) and
the scheduled prune runs: the files must shrink.

Targets (issue #8): memory and task count back to baseline; at most 20 KB of
storage per turn; the file shrinks after pruning.

Run: .venv/bin/python bench/long_run.py
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
import tracemalloc
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ha_bench import forget_recordings, machine, quiet_logs, run_pytest

if __name__ == "__main__":
    # pytest imports this file again, after its plugins, for the fixtures.
    sys.exit(run_pytest(str(Path(__file__).resolve())))

# ruff: noqa: I001, F811 -- import order loads this integration; fixtures are imported
import custom_components  # noqa: F401
import pytest

from custom_components.ha_personal_assistant.const import (
    CHECKPOINT_FILE,
    DATABASE_FILE,
    STORAGE_DIR,
)
from custom_components.ha_personal_assistant.store import retention
from tests.common import async_setup_assistant, async_setup_house, last_user_content
from tests.conftest import auto_enable_custom_integrations, hass_config_dir  # noqa: F401
from tests.fake_ollama import fake_ollama  # noqa: F401
from tests.telegram_harness import telegram, telegram_api  # noqa: F401

if TYPE_CHECKING:
    import sqlite3

    from homeassistant.core import HomeAssistant

    from tests.fake_ollama import FakeOllama
    from tests.telegram_harness import TelegramHarness

CHATS = [100000001 + n for n in range(10)]
TURNS = 1000
WARMUP_ROUNDS = 5
NEW_EVERY = 20
TARGET_BYTES_PER_TURN = 20 * 1024
# Where the integration's own memory would show; the rest is HA and the fakes.
OUR_STACK = (
    "custom_components",
    "langgraph",
    "langchain",
    "ollama",
    "httpx",
    "httpcore",
    "aiosqlite",
    "pydantic",
)


@pytest.fixture
def telegram_chat_ids() -> list[int]:
    """Ten private chats."""
    return list(CHATS)


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _files(hass: HomeAssistant) -> dict[str, int]:
    folder = Path(hass.config.path(STORAGE_DIR))
    sizes: dict[str, int] = {}
    for name in (DATABASE_FILE, CHECKPOINT_FILE):
        sizes[name] = sum(
            p.stat().st_size
            for p in (folder / name, folder / f"{name}-wal")
            if p.exists()
        )
    return sizes


async def _checkpoint_wal(entry: Any) -> None:
    """Write the WALs back so file sizes compare."""
    storage = entry.runtime_data.storage
    await storage.database.async_run(
        lambda conn: conn.execute("PRAGMA wal_checkpoint(TRUNCATE)"), timeout=60
    )
    saver = storage.checkpoints.saver.inner
    async with saver.lock:
        await saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


async def _round(
    telegram: TelegramHarness, fake_ollama: FakeOllama, number: int
) -> None:
    """One message in every chat at once; wait for all ten replies."""
    texts = {
        chat: f"Round {number}: how warm is the living room? Chat {chat}"
        for chat in CHATS
    }
    await asyncio.gather(
        *(telegram.send_text(texts[chat], chat_id=chat) for chat in CHATS)
    )
    for chat in CHATS:
        await telegram.wait_for_sent(1, chat_id=chat, timeout=120)
    # What the fakes recorded is not the integration's memory.
    forget_recordings(telegram, fake_ollama)


async def _new_conversations(
    telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    for chat in CHATS:
        await telegram.send_command("/new", chat_id=chat)
    for chat in CHATS:
        await telegram.wait_for_sent(1, chat_id=chat, timeout=60)
    forget_recordings(telegram, fake_ollama)


async def _idle(hass: HomeAssistant) -> None:
    await asyncio.sleep(0.5)
    await hass.async_block_till_done()
    gc.collect()


async def test_long_run(  # noqa: PLR0915 - one measured story
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """Measure and print; asserts only that every turn was answered."""
    quiet_logs()
    fake_ollama.default = lambda request: (
        f"It is 21 degrees. ({last_user_content(request).splitlines()[0][:40]})"
    )
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama)

    for number in range(WARMUP_ROUNDS):
        await _round(telegram, fake_ollama, number)
    await _idle(hass)
    await _checkpoint_wal(entry)
    files_before = _files(hass)
    tasks_before = len(asyncio.all_tasks())
    rss_before = _rss_kib()
    tracemalloc.start()
    snapshot_before = tracemalloc.take_snapshot()
    traced_before, _ = tracemalloc.get_traced_memory()

    started = time.monotonic()
    answered = 0
    rounds = TURNS // len(CHATS)
    for number in range(rounds):
        if number and number % NEW_EVERY == 0:
            await _new_conversations(telegram, fake_ollama)
        await _round(telegram, fake_ollama, WARMUP_ROUNDS + number)
        answered += len(CHATS)
    elapsed = time.monotonic() - started

    await _idle(hass)
    traced_after, traced_peak = tracemalloc.get_traced_memory()
    diff = tracemalloc.take_snapshot().compare_to(snapshot_before, "filename")
    grown = diff[:5]
    ours = sum(
        stat.size_diff
        for stat in diff
        if any(part in stat.traceback[0].filename for part in OUR_STACK)
    )
    tracemalloc.stop()
    tasks_after = len(asyncio.all_tasks())
    rss_after = _rss_kib()
    await _checkpoint_wal(entry)
    files_after = _files(hass)

    # Months later: everything is older than the retention; the schedule prunes.
    def age(conn: sqlite3.Connection) -> None:
        old = time.time() - 31 * retention.DAY
        conn.execute(
            "UPDATE conversation_sessions SET last_activity = ?, started_at = ?",
            (old, old),
        )

    storage = entry.runtime_data.storage
    await storage.database.async_run(age)
    report = await retention.async_prune(
        storage.database,
        storage.checkpoints,
        session_timeout=entry.runtime_data.assistant.session_timeout,
    )
    await _checkpoint_wal(entry)
    files_pruned = _files(hass)

    turns = rounds * len(CHATS)
    growth = {name: files_after[name] - files_before[name] for name in files_after}
    per_turn = sum(growth.values()) / turns
    print()
    print(f"bench/long_run.py  {machine()}")
    print(
        f"{turns} turns across {len(CHATS)} chats in {elapsed:.1f} s "
        f"({elapsed / turns * 1000:.1f} ms per turn, 10 chats at a time)"
    )
    print(
        f"asyncio tasks: {tasks_before} at baseline, {tasks_after} after "
        f"({tasks_after - tasks_before:+d})"
    )
    print(
        f"traced Python memory left above baseline: "
        f"{(traced_after - traced_before) / 1024:.0f} KiB "
        f"(peak during the run {traced_peak / 1024:.0f} KiB); largest by file:"
    )
    for stat in grown:
        print(f"    {stat}")
    print(
        f"of which the integration and its libraries ({', '.join(OUR_STACK)}): "
        f"{ours / 1024:+.0f} KiB"
    )
    print(
        f"RSS: {rss_before / 1024:.1f} MiB at baseline, {rss_after / 1024:.1f} MiB "
        f"after ({(rss_after - rss_before) / 1024:+.1f} MiB)"
    )
    for name in files_after:
        print(
            f"{name}: {files_before[name] / 1024:.0f} KiB -> "
            f"{files_after[name] / 1024:.0f} KiB "
            f"({growth[name] / turns:.0f} bytes per turn)"
        )
    print(
        f"storage growth: {per_turn / 1024:.2f} KiB per turn "
        f"(target <= {TARGET_BYTES_PER_TURN / 1024:.0f} KiB: "
        f"{'met' if per_turn <= TARGET_BYTES_PER_TURN else 'NOT met'})"
    )
    print(f"after pruning everything older than 30 days: {report}")
    for name in files_pruned:
        print(
            f"{name}: {files_after[name] / 1024:.0f} KiB -> "
            f"{files_pruned[name] / 1024:.0f} KiB "
            f"({files_pruned[name] / max(files_after[name], 1):.2f}x)"
        )
    assert answered == TURNS
