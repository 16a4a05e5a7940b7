"""Setting the integration up, unloading, reloading, and what it keeps on disk."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from homeassistant.config_entries import ConfigEntryState
from homeassistant.const import EVENT_HOMEASSISTANT_STOP
from pytest_homeassistant_custom_component.common import (  # type: ignore[import-untyped]
    MockConfigEntry,
)

import custom_components.ha_personal_assistant as package
from custom_components.ha_personal_assistant.const import (
    CHECKPOINT_FILE,
    CONF_MODEL,
    CONF_OLLAMA_URL,
    DATABASE_FILE,
    DOMAIN,
    STORAGE_DIR,
)
from custom_components.ha_personal_assistant.executor import ExecutorShutDownError
from custom_components.ha_personal_assistant.security.confirmations import (
    ConfirmationManager,
)

from .common import (
    async_setup_assistant,
    async_setup_house,
    errors_logged,
    last_user_content,
    wait_until,
)

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant

    from custom_components.ha_personal_assistant.store.checkpoints import (
        CheckpointStore,
    )
    from custom_components.ha_personal_assistant.store.database import Database

    from .fake_ollama import FakeOllama
    from .telegram_harness import TelegramHarness


def _worker_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(DOMAIN)]


async def test_ollama_unreachable_at_setup_retries_later(
    hass: HomeAssistant, fake_ollama: FakeOllama, caplog: pytest.LogCaptureFixture
) -> None:
    """Setup waits for Ollama instead of failing for good."""
    await async_setup_house(hass)
    port = int(fake_ollama.url.rsplit(":", 1)[1])
    await fake_ollama.stop()
    entry = MockConfigEntry(
        domain=DOMAIN,
        data={
            CONF_OLLAMA_URL: f"http://user:secret@127.0.0.1:{port}",
            CONF_MODEL: "qwen3:4b",
        },
    )
    entry.add_to_hass(hass)
    await hass.config_entries.async_setup(entry.entry_id)
    assert entry.state is ConfigEntryState.SETUP_RETRY
    assert "Cannot reach the model server at http://127.0.0.1" in caplog.text
    assert "secret" not in caplog.text
    await hass.config_entries.async_unload(entry.entry_id)


async def test_setup_creates_both_databases_and_unload_closes_everything(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """Unloading stops listening, ends the worker threads and closes the files."""
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama)
    assert entry.state is ConfigEntryState.LOADED
    directory = Path(hass.config.path(STORAGE_DIR))
    assert (directory / DATABASE_FILE).is_file()
    assert (directory / CHECKPOINT_FILE).is_file()
    fake_ollama.reply("Hi")
    await telegram.send_text("Hello")
    await telegram.wait_for_sent(1)
    assert _worker_threads()

    assert await hass.config_entries.async_unload(entry.entry_id)
    assert entry.state is ConfigEntryState.NOT_LOADED
    assert _worker_threads() == []
    await telegram.send_text("Anyone there?")
    await asyncio.sleep(0.3)
    await hass.async_block_till_done()
    assert len(telegram.sent_messages()) == 1
    assert len(fake_ollama.chat_requests) == 1


async def test_unload_cancels_a_turn_in_flight(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """A turn waiting on a hanging model does not hold up the unload."""
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama)
    fake_ollama.hang()
    await telegram.send_text("Hello")
    await fake_ollama.wait_for_chat_requests(1)
    async with asyncio.timeout(5):
        assert await hass.config_entries.async_unload(entry.entry_id)
    assert entry.state is ConfigEntryState.NOT_LOADED


def _our_tasks() -> list[asyncio.Task[object]]:
    """Return the integration's tasks that have not finished."""
    return [
        task
        for task in asyncio.all_tasks()
        if not task.done()
        and (
            task.get_name().startswith("ha_personal_assistant")
            or "ha_personal_assistant" in str(task.get_coro())
        )
    ]


async def test_unload_ends_after_reply_work_and_a_pending_summary_cleanly(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An after-reply task and a summary waiting for quiet: unload, nothing left."""
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama)
    assistant = entry.runtime_data.assistant
    # Background calls wait for a quiet minute: the summary stays pending.
    assistant.model_queue.quiet_seconds = 3600
    started = asyncio.Event()

    async def slow_after_reply(_interaction: object) -> None:
        # After-reply work still running (a slow write, say) at the unload.
        started.set()
        await asyncio.Event().wait()

    assistant.after_reply.append(slow_after_reply)
    for number in range(3):
        fake_ollama.reply(f"Answer {number}")
        await telegram.send_text(f"Question {number}")
        await telegram.wait_for_sent(number + 1)
    await started.wait()
    # /new ends the session: its summary waits for the quiet period.
    await telegram.send_command("/new")
    await telegram.wait_for_sent(4)
    await asyncio.sleep(0.1)
    pending = _our_tasks()
    names = {task.get_name() for task in pending}
    assert "ha_personal_assistant after reply" in names
    assert "ha_personal_assistant summaries" in names
    assert "ha_personal_assistant learning" in names

    async with asyncio.timeout(10):
        assert await hass.config_entries.async_unload(entry.entry_id)
    await hass.async_block_till_done()
    assert entry.state is ConfigEntryState.NOT_LOADED
    assert _our_tasks() == []
    assert all(task.cancelled() for task in pending)
    assert _worker_threads() == []
    assert errors_logged(caplog) == []
    assert "did not complete in time" not in caplog.text
    assert "Task was destroyed" not in caplog.text
    assert not [
        r
        for r in fake_ollama.chat_requests
        if r["messages"][-1]["content"].startswith("[Summary request")
    ]


async def test_the_conversation_survives_a_reload(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """After a reload the model still sees the earlier turns of the session."""
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama)
    fake_ollama.reply("Nice to meet you, Tom's owner.")
    await telegram.send_text("My cat is called Tom")
    await telegram.wait_for_sent(1)

    assert await hass.config_entries.async_reload(entry.entry_id)
    await hass.async_block_till_done()
    assert entry.state is ConfigEntryState.LOADED

    fake_ollama.reply("Tom.")
    await telegram.send_text("What is my cat called?")
    await telegram.wait_for_sent(2)
    messages = fake_ollama.chat_requests[-1]["messages"]
    contents = [m["content"] for m in messages]
    seen = [(m["role"], m["content"][-80:]) for m in messages[1:]]
    assert any(c.startswith("My cat is called Tom") for c in contents), seen
    assert "Nice to meet you, Tom's owner." in contents, seen


async def test_a_missing_model_still_loads_and_explains_itself(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The entry loads so it recovers once the model is pulled."""
    await async_setup_house(hass)
    fake_ollama.remove_model("qwen3:4b")
    entry = await async_setup_assistant(hass, fake_ollama)
    assert entry.state is ConfigEntryState.LOADED
    assert "The model qwen3:4b is not installed" in caplog.text
    await telegram.send_text("Hello")
    sent = await telegram.wait_for_sent(1)
    assert "ollama pull qwen3:4b" in sent[0]["text"]


async def _checkpoint_bytes(checkpoints: CheckpointStore) -> int:
    """Return the bytes the checkpoint tables hold."""
    assert checkpoints.saver is not None
    conn = checkpoints.saver.inner.conn
    total = 0
    for sql in (
        (
            "SELECT COALESCE(SUM(COALESCE(LENGTH(checkpoint), 0)"
            " + COALESCE(LENGTH(metadata), 0)), 0) FROM checkpoints"
        ),
        "SELECT COALESCE(SUM(COALESCE(LENGTH(value), 0)), 0) FROM writes",
    ):
        async with conn.execute(sql) as cur:
            row = await cur.fetchone()
        total += int(row[0]) if row else 0
    return total


async def test_two_hundred_turns_keep_checkpoints_small(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """Checkpoint storage stays bounded: at most 20 KB per turn over 200 turns."""
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama)
    assistant = entry.runtime_data.assistant
    # Long, but not a loop (the assistant would cut one).
    fake_ollama.default = lambda _request: " ".join(
        f"Part {n} of a reasonably long answer." for n in range(20)
    )
    speaker_module = __import__(
        "custom_components.ha_personal_assistant.assistant", fromlist=["Speaker"]
    )
    speaker = speaker_module.Speaker(person="telegram:1", name="Alice", ha_user_id=None)
    turns = 200
    # asyncio's debug mode (on in HA's tests) records a traceback for every
    # callback: most of 200 turns' time. The code under test does not care.
    loop = asyncio.get_running_loop()
    debug = loop.get_debug()
    loop.set_debug(False)
    try:
        for index in range(turns):
            if index % 10 == 0:
                fake_ollama.tool_call(
                    "get_state", {"entity_id": "light.kitchen_lights"}
                )
            result = await assistant.async_turn(
                "chat", f"Question number {index}", speaker
            )
            assert result.ok
        await hass.async_block_till_done()
    finally:
        loop.set_debug(debug)
    path = Path(hass.config.path(STORAGE_DIR)) / CHECKPOINT_FILE
    on_disk = sum(
        p.stat().st_size for p in path.parent.glob(f"{CHECKPOINT_FILE}*") if p.is_file()
    )
    stored = await _checkpoint_bytes(assistant.checkpoints)
    assert stored / turns <= 20 * 1024
    assert on_disk / turns <= 20 * 1024
    # The history stays within its room: trimmed in large steps, it never
    # holds all 200 turns, and the request stays within the budget.
    last = fake_ollama.chat_requests[-1]["messages"]
    users = sum(m["role"] == "user" for m in last)
    assert 2 <= users < 40
    assert result.context_tokens <= assistant.budget.limit


async def test_a_second_entry_does_not_answer_telegram_twice(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two entries made by an older version: each message gets one answer."""
    await async_setup_house(hass)
    first = await async_setup_assistant(hass, fake_ollama)
    second = MockConfigEntry(
        domain=DOMAIN,
        title="second",
        unique_id="second",
        data={CONF_OLLAMA_URL: fake_ollama.url + "/", CONF_MODEL: "qwen3:4b"},
    )
    second.add_to_hass(hass)
    assert not await hass.config_entries.async_setup(second.entry_id)
    assert second.state is ConfigEntryState.SETUP_ERROR
    assert (
        "Another Personal Assistant entry is already running; delete the one you "
        "do not use" in caplog.text
    )
    fake_ollama.reply("Only once.")
    await telegram.send_text("Hello")
    await telegram.wait_for_sent(1)
    await asyncio.sleep(0.3)
    assert [m["text"] for m in telegram.sent_messages()] == ["Only once."]
    assert len(fake_ollama.chat_requests) == 1
    assert await hass.config_entries.async_unload(second.entry_id)
    assert first.state is ConfigEntryState.LOADED


async def test_a_corrupt_database_is_replaced_and_reported(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """A damaged assistant.db is kept aside, a new one works, a repair explains."""
    from homeassistant.helpers import issue_registry as ir

    await async_setup_house(hass)
    directory = Path(hass.config.path(STORAGE_DIR))

    def damage() -> None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / DATABASE_FILE).write_bytes(b"garbage" * 1000)

    await hass.async_add_executor_job(damage)
    entry = await async_setup_assistant(hass, fake_ollama)
    assert entry.state is ConfigEntryState.LOADED
    issue = ir.async_get(hass).async_get_issue(DOMAIN, "database_recreated")
    assert issue is not None
    assert issue.translation_placeholders["path"].startswith(
        str(directory / DATABASE_FILE) + ".corrupt-"
    )
    fake_ollama.reply("Still here.")
    await telegram.send_text("Hello")
    assert (await telegram.wait_for_sent(1))[0]["text"] == "Still here."


async def test_removing_the_last_entry_deletes_its_data_but_not_the_documents(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """The databases go with the last entry; the household's own files stay."""
    await async_setup_house(hass)
    first = await async_setup_assistant(hass, fake_ollama)
    folder = Path(hass.config.path(STORAGE_DIR))
    documents = folder / "documents"

    def add_document() -> None:
        documents.mkdir(exist_ok=True)
        (documents / "manual.md").write_text("The boiler manual.", encoding="utf-8")

    await hass.async_add_executor_job(add_document)
    second = MockConfigEntry(
        domain=DOMAIN,
        title="second",
        unique_id="http://192.0.2.1:11434",
        data=dict(first.data),
        options=dict(first.options),
    )
    second.add_to_hass(hass)
    fake_ollama.reply("Hi.")
    await telegram.send_text("Hello")
    await telegram.wait_for_sent(1)

    def names() -> set[str]:
        return {path.name for path in folder.iterdir()} if folder.exists() else set()

    # Another entry remains: nothing is deleted.
    assert await hass.config_entries.async_remove(second.entry_id)
    assert {DATABASE_FILE, CHECKPOINT_FILE} <= await hass.async_add_executor_job(names)
    assert await hass.config_entries.async_remove(first.entry_id)
    await hass.async_block_till_done()
    left = await hass.async_add_executor_job(names)
    assert left == {"documents"}
    assert await hass.async_add_executor_job(
        (documents / "manual.md").read_text, "utf-8"
    ) == ("The boiler manual.")


async def test_removing_an_entry_that_never_loaded_deletes_nothing(
    hass: HomeAssistant, fake_ollama: FakeOllama, caplog: pytest.LogCaptureFixture
) -> None:
    """Added while the model server was down, then removed: a clean no-op."""
    await async_setup_house(hass)
    await fake_ollama.stop()
    entry = MockConfigEntry(
        domain=DOMAIN,
        data={CONF_OLLAMA_URL: fake_ollama.url, CONF_MODEL: "qwen3:4b"},
    )
    entry.add_to_hass(hass)
    await hass.config_entries.async_setup(entry.entry_id)
    assert entry.state is ConfigEntryState.SETUP_RETRY
    folder = Path(hass.config.path(STORAGE_DIR))
    assert not await hass.async_add_executor_job(folder.exists)

    assert await hass.config_entries.async_remove(entry.entry_id)
    await hass.async_block_till_done()
    assert "Removed the assistant's data: none" in caplog.text
    assert not await hass.async_add_executor_job(folder.exists)
    assert errors_logged(caplog) == []


async def test_a_setup_that_fails_midway_releases_the_storage(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A failure after the files were opened closes them; the next try loads."""
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama)
    assert await hass.config_entries.async_unload(entry.entry_id)

    opened: list[Database] = []

    async def broken(self: ConfirmationManager) -> list[object]:
        opened.append(self.database)
        msg = "reading the pending confirmations failed"
        raise RuntimeError(msg)

    with monkeypatch.context() as patch:
        patch.setattr(ConfirmationManager, "async_recover", broken)
        assert not await hass.config_entries.async_setup(entry.entry_id)
        assert entry.state is ConfigEntryState.SETUP_ERROR
    # Nothing of the failed setup is left running or holding the files.
    assert _worker_threads() == []
    with pytest.raises(ExecutorShutDownError):
        await opened[0].async_run(lambda conn: conn.execute("SELECT 1"))

    assert await hass.config_entries.async_reload(entry.entry_id)
    await hass.async_block_till_done()
    assert entry.state is ConfigEntryState.LOADED
    fake_ollama.reply("Back.")
    await telegram.send_text("Hello")
    assert (await telegram.wait_for_sent(1))[-1]["text"] == "Back."


async def test_a_slow_stop_is_cut_short_and_the_unload_still_closes_all(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """HA's stop is not held up past the limit; closing is finished at unload."""
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama, request_timeout=300)
    fake_ollama.hang()
    await telegram.send_text("Hello")
    await fake_ollama.wait_for_chat_requests(1)
    # The turn in flight takes longer to end than the stop may last.
    monkeypatch.setattr(package, "SHUTDOWN_TIMEOUT", 0)
    hass.bus.async_fire(EVENT_HOMEASSISTANT_STOP)
    # The stop listener runs as a task of its own, outside block_till_done.
    await wait_until(lambda: "Stopping took longer than 0 s" in caplog.text, 5)

    async with asyncio.timeout(10):
        assert await hass.config_entries.async_unload(entry.entry_id)
    assert entry.state is ConfigEntryState.NOT_LOADED
    assert _worker_threads() == []


async def test_messages_that_come_while_the_assistant_starts_are_answered(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """telegram_bot is up first; what it delivers meanwhile is answered in order.

    At a start, Telegram delivers at once what was written while Home
    Assistant was down, while the assistant still asks its model server.
    """
    await async_setup_house(hass)
    fake_ollama.tags_delay = 0.5
    setup = asyncio.ensure_future(async_setup_assistant(hass, fake_ollama))
    await wait_until(lambda: any(r.path == "/api/tags" for r in fake_ollama.requests))
    fake_ollama.reply("It is locked.").reply("It is closed.")
    await telegram.send_text("Is the front door locked?")
    await telegram.send_text("And the garage?")
    assert not setup.done()
    assert telegram.sent_messages() == []

    await setup
    sent = await telegram.wait_for_sent(2)
    assert [m["text"] for m in sent] == ["It is locked.", "It is closed."]
    asked = [last_user_content(r) for r in fake_ollama.chat_requests]
    assert "Is the front door locked?" in asked[0]
    assert "And the garage?" in asked[1]
    # Answered, so nothing is reported as interrupted at the next start.
    await hass.async_block_till_done()
    assert len(telegram.sent_messages()) == 2
