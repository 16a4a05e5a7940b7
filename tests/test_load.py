"""Under load and over months: every reply in its chat, in order; old data pruned."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from homeassistant.util import dt as dt_util

from custom_components.ha_personal_assistant.const import (
    CHECKPOINT_FILE,
    DATABASE_FILE,
    MAX_CONCURRENT_MODEL_CALLS,
    STORAGE_DIR,
)
from custom_components.ha_personal_assistant.store import sqlite_file

from .common import (
    async_setup_assistant,
    async_setup_house,
    fire_time_changed,
    fixed_text,
    last_user_content,
)
from .fake_ollama import text_reply
from .telegram_harness import ALICE_ID, BOB_ID

if TYPE_CHECKING:
    import sqlite3

    from homeassistant.core import HomeAssistant
    from pytest_homeassistant_custom_component.common import MockConfigEntry

    from .fake_ollama import FakeOllama
    from .telegram_harness import TelegramHarness

USERS = [ALICE_ID, BOB_ID, 333333333, 444444444, 555555555]
MESSAGES = 20
DAY = 86400


@pytest.fixture
def telegram_chat_ids() -> list[int]:
    """Five people, each in their private chat."""
    return list(USERS)


def _echo(request: dict[str, Any]) -> str:
    return f"Echo: {last_user_content(request).splitlines()[0]}"


def _count_model_calls(fake_ollama: FakeOllama) -> dict[str, int]:
    """Wrap the fake's chat handler to record the peak of calls in flight."""
    counts = {"now": 0, "peak": 0}
    original = fake_ollama._handle_chat

    async def counting(request: Any) -> Any:
        counts["now"] += 1
        counts["peak"] = max(counts["peak"], counts["now"])
        try:
            # A little model time, so turns of different chats overlap.
            await asyncio.sleep(0.02)
            return await original(request)
        finally:
            counts["now"] -= 1

    fake_ollama._handle_chat = counting  # type: ignore[method-assign]
    return counts


async def test_five_users_at_once_each_get_their_replies_in_order(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """5 users x 20 messages at once: right chat, per-chat order, bounded model."""
    counts = _count_model_calls(fake_ollama)
    # The router captured the bound handler at start: restart to use the wrapper.
    port = int(fake_ollama.url.rsplit(":", 1)[1])
    await fake_ollama.stop()
    await fake_ollama.start(port)
    fake_ollama.default = _echo
    await async_setup_house(hass)
    await async_setup_assistant(hass, fake_ollama)

    async def user_writes(user: int) -> None:
        # Back to back, without waiting for replies: a user's next message
        # arrives while the previous one is still being answered.
        for number in range(MESSAGES):
            await telegram.send_text(f"u{user} m{number}", chat_id=user)

    # asyncio's debug mode (on in HA's tests) records a traceback for every
    # callback: most of 100 turns' time. The code under test does not care.
    loop = asyncio.get_running_loop()
    debug = loop.get_debug()
    loop.set_debug(False)
    try:
        await asyncio.gather(*(user_writes(user) for user in USERS))
        await telegram.wait_for_sent(len(USERS) * MESSAGES, timeout=240)
    finally:
        loop.set_debug(debug)
    await asyncio.sleep(0.2)
    for user in USERS:
        texts = [m["text"] for m in telegram.sent_messages(user)]
        assert texts == [f"Echo: u{user} m{n}" for n in range(MESSAGES)]
    everything = [m["text"] for m in telegram.sent_messages()]
    assert len(everything) == len(USERS) * MESSAGES
    assert fixed_text("internal_error") not in everything
    assert fixed_text("storage_unavailable") not in everything
    assert not any("locked" in text for text in everything)
    assert "database is locked" not in caplog.text
    assert not [
        r
        for r in caplog.records
        if r.name.startswith("custom_components.ha_personal_assistant")
        and r.levelno >= logging.WARNING
    ]
    assert 1 < counts["peak"] <= MAX_CONCURRENT_MODEL_CALLS


SLOW = 2.0  # seconds a model request takes
CAROL_ID = USERS[2]


async def test_one_chat_in_order_and_other_chats_in_parallel_within_two_slots(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """Alice writes twice 100 ms apart while Bob and Carol write: a slow model.

    Alice's second message is answered after her first, and the model sees
    the first turn with it; Bob's turn runs beside Alice's first, Carol's
    waits for one of the two model slots. One after the other, the four
    model requests would start a model time apart; here they start in two
    pairs.
    """
    counts = _count_model_calls(fake_ollama)
    port = int(fake_ollama.url.rsplit(":", 1)[1])
    await fake_ollama.stop()
    await fake_ollama.start(port)
    started: dict[str, float] = {}

    def slow_echo(request: dict[str, Any]) -> Any:
        first = last_user_content(request).splitlines()[0]
        started[first] = time.monotonic()
        return text_reply(f"Echo: {first}", delay=SLOW)

    fake_ollama.default = slow_echo
    await async_setup_house(hass)
    await async_setup_assistant(hass, fake_ollama)

    begin = time.monotonic()
    await asyncio.gather(
        telegram.send_text("alice one", chat_id=ALICE_ID),
        telegram.send_text("bob one", chat_id=BOB_ID),
        telegram.send_text("carol one", chat_id=CAROL_ID),
    )
    await asyncio.sleep(0.1)
    await telegram.send_text("alice two", chat_id=ALICE_ID)
    await telegram.wait_for_sent(4, timeout=30)
    elapsed = time.monotonic() - begin

    assert [m["text"] for m in telegram.sent_messages(ALICE_ID)] == [
        "Echo: alice one",
        "Echo: alice two",
    ]
    # The second turn started after the first reply went out, and the model
    # was sent the first turn with it.
    replied = next(
        call.at
        for call in telegram.api.calls
        if call.method == "sendMessage" and call.params["text"] == "Echo: alice one"
    )
    assert started["alice two"] >= replied
    second = next(
        r
        for r in fake_ollama.chat_requests
        if last_user_content(r).startswith("alice two")
    )
    contents = [m["content"] for m in second["messages"]]
    assert any(c.startswith("alice one") for c in contents)
    assert "Echo: alice one" in contents
    # Different chats in parallel, never more than two model requests at once.
    assert counts["peak"] == MAX_CONCURRENT_MODEL_CALLS == 2
    first_two = sorted(started[k] for k in ("alice one", "bob one", "carol one"))[:2]
    assert first_two[1] - first_two[0] < SLOW / 2
    # The other two waited for a slot, and started together one model time
    # later; one after the other they would start three model times apart.
    starts = sorted(started.values())
    assert starts[2] - starts[0] >= SLOW
    # Two model times plus slack for a loaded machine; one after the other
    # would be three.
    assert starts[3] - starts[0] < 2.5 * SLOW
    assert elapsed >= 2 * SLOW


def _file_size(hass: HomeAssistant, name: str = CHECKPOINT_FILE) -> int:
    path = Path(hass.config.path(STORAGE_DIR)) / name
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


async def _wait_for(predicate: Any, seconds: float = 20.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if await predicate():
            return
        await asyncio.sleep(0.05)
    msg = "condition not met in time"
    raise AssertionError(msg)


async def test_old_sessions_and_checkpoints_are_pruned_and_the_file_shrinks(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On the schedule: ended threads, month-old sessions and old logs go."""
    monkeypatch.setattr(sqlite_file, "VACUUM_MIN_FREE_PAGES", 4)
    fake_ollama.default = _echo
    await async_setup_house(hass)
    entry: MockConfigEntry = await async_setup_assistant(hass, fake_ollama)
    storage = entry.runtime_data.storage
    database = storage.database
    # Alice has several conversations, each ended with /new.
    sent = 0
    for session in range(8):
        for turn in range(2):
            await telegram.send_text(f"s{session} t{turn} " + "words " * 500)
            sent += 1
            await telegram.wait_for_sent(sent + session)
        await telegram.send_command("/new")
        await telegram.wait_for_sent(sent + session + 1)
    # Her current conversation, and Bob's from a month ago.
    await telegram.send_text("The current one")
    await telegram.send_text("Long ago", chat_id=BOB_ID)
    await telegram.wait_for_sent(1, chat_id=BOB_ID)
    await telegram.wait_for_sent(sent + 8 + 1, chat_id=ALICE_ID)
    await hass.async_block_till_done()

    def age(conn: sqlite3.Connection) -> None:
        old = time.time() - 31 * DAY
        conn.execute(
            "UPDATE conversation_sessions SET last_activity = ?, started_at = ?"
            " WHERE conversation_key LIKE ?",
            (old, old, f"%:{BOB_ID}"),
        )
        conn.execute(
            "INSERT INTO tool_call_log (ts, tool, person, duration_ms, outcome)"
            " VALUES (?, 'get_state', NULL, 1, 'ok'), (?, 'get_state', NULL, 1, 'ok')",
            (time.time() - 91 * DAY, time.time()),
        )

    await database.async_run(age)
    threads_before = await storage.checkpoints.async_threads()
    assert len(threads_before) == 10
    size_before = await hass.async_add_executor_job(_file_size, hass)

    fire_time_changed(hass, dt_util.utcnow() + timedelta(hours=7))

    async def pruned() -> bool:
        return len(await storage.checkpoints.async_threads()) == 1

    await _wait_for(pruned)
    await hass.async_block_till_done()
    (kept,) = await storage.checkpoints.async_threads()
    assert f":{ALICE_ID}:" in kept

    def remaining(conn: sqlite3.Connection) -> tuple[int, int, int]:
        bob = f"%:{BOB_ID}"
        sessions = conn.execute(
            "SELECT COUNT(*) FROM conversation_sessions WHERE conversation_key LIKE ?",
            (bob,),
        ).fetchone()[0]
        history = conn.execute(
            "SELECT COUNT(*) FROM conversation_history WHERE conversation_key LIKE ?",
            (bob,),
        ).fetchone()[0]
        logs = conn.execute("SELECT COUNT(*) FROM tool_call_log").fetchone()[0]
        return sessions, history, logs

    async def settled() -> bool:
        return await database.async_run(remaining) == (0, 0, 1)

    await _wait_for(settled)
    size_after = await hass.async_add_executor_job(_file_size, hass)
    assert size_after < size_before
    # Alice's current conversation goes on with its history.
    before = len(telegram.sent_messages(ALICE_ID))
    await telegram.send_text("Still there?")
    await telegram.wait_for_sent(before + 1, chat_id=ALICE_ID)
    prompt = "\n".join(
        str(m.get("content", "")) for m in fake_ollama.chat_requests[-1]["messages"]
    )
    assert "The current one" in prompt
    assert "s7 t1" not in prompt


async def test_a_month_old_conversation_is_pruned_and_the_database_shrinks(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """assistant.db gives the space of a pruned conversation back to the disk."""
    monkeypatch.setattr(sqlite_file, "VACUUM_MIN_FREE_PAGES", 4)
    fake_ollama.default = _echo
    await async_setup_house(hass)
    entry: MockConfigEntry = await async_setup_assistant(hass, fake_ollama)
    database = entry.runtime_data.storage.database
    # Bob told a long story a month ago; Alice talks today.
    for turn in range(6):
        await telegram.send_text(f"b{turn} " + "story " * 3000, chat_id=BOB_ID)
        await telegram.wait_for_sent(turn + 1, chat_id=BOB_ID)
    await telegram.send_text("Today's question")
    await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    await hass.async_block_till_done()

    def age(conn: sqlite3.Connection) -> None:
        old = time.time() - 31 * DAY
        conn.execute(
            "UPDATE conversation_sessions SET last_activity = ?, started_at = ?"
            " WHERE conversation_key LIKE ?",
            (old, old, f"%:{BOB_ID}"),
        )

    await database.async_run(age)
    size_before = await hass.async_add_executor_job(_file_size, hass, DATABASE_FILE)

    fire_time_changed(hass, dt_util.utcnow() + timedelta(hours=7))

    async def shrunk() -> bool:
        size = await hass.async_add_executor_job(_file_size, hass, DATABASE_FILE)
        return size < size_before / 2

    await _wait_for(shrunk)
    await hass.async_block_till_done()
    # Bob's story is gone; Alice's conversation goes on.
    before = len(telegram.sent_messages(ALICE_ID))
    await telegram.send_text("Still there?")
    await telegram.wait_for_sent(before + 1, chat_id=ALICE_ID)
    prompt = "\n".join(
        str(m.get("content", "")) for m in fake_ollama.chat_requests[-1]["messages"]
    )
    assert "Today's question" in prompt
    before = len(telegram.sent_messages(BOB_ID))
    await telegram.send_text("Where were we?", chat_id=BOB_ID)
    await telegram.wait_for_sent(before + 1, chat_id=BOB_ID)
    prompt = "\n".join(
        str(m.get("content", "")) for m in fake_ollama.chat_requests[-1]["messages"]
    )
    assert "story" not in prompt


async def test_pruning_is_not_in_the_response_path(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """A reply never waits for pruning: it runs on the schedule only."""
    fake_ollama.default = _echo
    await async_setup_house(hass)
    entry: MockConfigEntry = await async_setup_assistant(hass, fake_ollama)
    storage = entry.runtime_data.storage
    await telegram.send_text("one")
    await telegram.wait_for_sent(1)
    await telegram.send_command("/new")
    await telegram.send_text("two")
    await telegram.wait_for_sent(3)
    await hass.async_block_till_done()
    # The ended conversation's checkpoint is still there: no prune ran.
    assert len(await storage.checkpoints.async_threads()) == 2
