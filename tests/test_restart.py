"""A full restart: Home Assistant stops and a new one starts on the same folder.

Nothing lost, nothing twice: a pending confirmation still works and runs
once, queued learning is learned once, a half-embedded document is finished
and searchable once, and a message whose answer the stop interrupted is
reported to its sender.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from contextlib import closing
from typing import TYPE_CHECKING, Any

import pytest

from custom_components.ha_personal_assistant import services as services_module
from custom_components.ha_personal_assistant.memory import learner as learner_module
from custom_components.ha_personal_assistant.store.database import Database
from custom_components.ha_personal_assistant.telegram.queue import ChatQueues

from .common import (
    async_setup_assistant,
    async_setup_house,
    fixed_text,
    last_user_content,
    tool_results,
    wait_until,
)
from .fake_ollama import hang_reply
from .telegram_harness import ALICE_ID
from .test_documents import add_document, async_setup_documents, index_of

if TYPE_CHECKING:
    from homeassistant.core import Event, HomeAssistant
    from pytest_homeassistant_custom_component.common import (  # type: ignore[import-untyped]
        MockConfigEntry,
    )

    from custom_components.ha_personal_assistant.store.inbox import InFlight

    from .fake_ollama import FakeOllama
    from .restart import Restarter
    from .telegram_harness import TelegramHarness

UNLOCK = {"domain": "lock", "service": "unlock", "entity_id": "lock.front_door"}


@pytest.fixture(autouse=True)
def fast_demo_locks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the demo locks move at once instead of after two seconds."""
    monkeypatch.setattr("homeassistant.components.demo.lock.LOCK_UNLOCK_DELAY", 0)


async def test_a_pending_confirmation_survives_a_restart_and_runs_once(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    restarter: Restarter,
) -> None:
    """Asked before the stop, confirmed after the start: unlocked exactly once."""
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama)
    fake_ollama.tool_call("call_service", UNLOCK).reply("Please confirm.")
    await telegram.send_text("Unlock the front door")
    sent = await telegram.wait_for_sent(2, chat_id=ALICE_ID)
    request = sent[-1]
    assert request["text"].startswith("Please confirm")

    hass, telegram, entry = await restarter.restart(hass, telegram, entry)
    unlocks: list[Event[Any]] = []
    hass.bus.async_listen("ha_personal_assistant_action_executed", unlocks.append)
    assert hass.states.get("lock.front_door").state == "locked"
    buttons = request["reply_markup"]["inline_keyboard"][0]
    confirm = buttons[0]["callback_data"]
    # The button of the message sent before the stop, then /confirm as well.
    await telegram.press_button(confirm)
    await telegram.wait_for_calls("answerCallbackQuery", 1)
    await telegram.send_command("/confirm")
    before = len(sent)
    after = await telegram.wait_for_sent(before + 1, chat_id=ALICE_ID)
    assert after[-1]["text"] == "Nothing is waiting for your confirmation."
    await hass.async_block_till_done()
    assert hass.states.get("lock.front_door").state == "unlocked"
    assert len(unlocks) == 1


def _rows(entry: MockConfigEntry, sql: str) -> list[tuple[Any, ...]]:
    """Read assistant.db with a connection of the test's own."""
    path = entry.runtime_data.assistant.database.path
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(sql).fetchall()


async def test_messages_a_stop_interrupted_are_reported_once_after_start(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    restarter: Restarter,
) -> None:
    """One turn in the model, one waiting behind it: the sender hears of both."""
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama, request_timeout=300)
    fake_ollama.hang()
    await telegram.send_text("What's the weather like?")
    await fake_ollama.wait_for_chat_requests(1)
    await telegram.send_text("And tomorrow?")
    await wait_until(
        lambda: len(_rows(entry, "SELECT id FROM telegram_in_flight")) == 2
    )
    assert telegram.sent_messages(ALICE_ID) == []

    hass, telegram, entry = await restarter.restart(hass, telegram, entry)
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert [m["text"] for m in sent] == [
        (
            "I was restarted while answering your messages "
            '"What\'s the weather like?" and "And tomorrow?". '
            "If you did not get an answer, please send them again."
        )
    ]
    assert _rows(entry, "SELECT id FROM telegram_in_flight") == []
    # Sent again, it is answered; an answered message is not reported later.
    fake_ollama.reply("Sunny.")
    await telegram.send_text("What's the weather like?")
    sent = await telegram.wait_for_sent(2, chat_id=ALICE_ID)
    assert sent[-1]["text"] == "Sunny."
    await asyncio.sleep(0.1)
    assert _rows(entry, "SELECT id FROM telegram_in_flight") == []
    hass, telegram, entry = await restarter.restart(hass, telegram, entry)
    await asyncio.sleep(0.5)
    await hass.async_block_till_done()
    assert len(telegram.sent_messages(ALICE_ID)) == 2


async def test_a_long_message_a_stop_interrupted_is_quoted_short(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    restarter: Restarter,
) -> None:
    """The notice quotes the first 59 characters and an ellipsis, on one line."""
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama, request_timeout=300)
    fake_ollama.hang()
    await telegram.send_text(
        "Please check every window in the house\nand tell me which ones "
        "are still open before the storm arrives tonight"
    )
    await fake_ollama.wait_for_chat_requests(1)
    hass, telegram, entry = await restarter.restart(hass, telegram, entry)
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert [m["text"] for m in sent] == [
        fixed_text(
            "interrupted_one",
            message='"Please check every window in the house and tell me which on…"',
        )
    ]


LEARNED = {
    "category": "preference",
    "content": "Likes the bedroom at 19 degrees",
    "confidence": 0.5,
}


def _is_learning(request: dict[str, Any]) -> bool:
    return last_user_content(request).startswith("[Learning request")


async def test_learning_interrupted_by_a_stop_is_done_once_after_start(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    restarter: Restarter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A learning call in flight at the stop: re-queued at start, learned once."""
    monkeypatch.setattr(learner_module, "LEARNING_INTERVAL_SECONDS", 0.0)
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama)
    entry.runtime_data.assistant.model_queue.quiet_seconds = 0.2
    # Turns are answered; the learning call hangs until Home Assistant stops.
    fake_ollama.default = lambda r: hang_reply() if _is_learning(r) else "Noted."
    await telegram.send_text("I like the bedroom at 19 degrees")
    await telegram.send_text("I like the kitchen lights dimmed")
    await telegram.wait_for_sent(2, chat_id=ALICE_ID)
    await wait_until(lambda: any(_is_learning(r) for r in fake_ollama.chat_requests))
    assert _rows(entry, "SELECT processed FROM interaction_log") == [(0,), (0,)]

    fake_ollama.default = lambda r: json.dumps(LEARNED) if _is_learning(r) else "OK"
    hass, telegram, entry = await restarter.restart(hass, telegram, entry, setup=False)
    # The next start learns at once (its quiet period is short here).
    monkeypatch.setattr(
        "custom_components.ha_personal_assistant.model_queue.QUIET_SECONDS", 0.2
    )
    asked = len(fake_ollama.chat_requests)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    await wait_until(
        lambda: _rows(entry, "SELECT processed FROM interaction_log") == [(1,), (1,)]
    )
    learning = [r for r in fake_ollama.chat_requests[asked:] if _is_learning(r)]
    assert len(learning) == 1
    assert "User: I like the bedroom at 19 degrees" in last_user_content(learning[0])
    assert "User: I like the kitchen lights dimmed" in last_user_content(learning[0])
    assert _rows(entry, "SELECT content, source FROM profile_entries") == [
        ("Likes the bedroom at 19 degrees", "inferred")
    ]
    # Nothing is left to learn: another restart asks nothing.
    hass, telegram, entry = await restarter.restart(hass, telegram, entry)
    asked = len(fake_ollama.chat_requests)
    await asyncio.sleep(0.6)
    assert fake_ollama.chat_requests[asked:] == []
    assert len(_rows(entry, "SELECT id FROM profile_entries")) == 1


def _drawers(count: int) -> str:
    words = ["hammer", "stapler", "torch", "candle", "passport", "charger"]
    return " ".join(
        f"Fact number {i} says the {words[i % 6]} is kept in drawer {i}."
        for i in range(count)
    )


async def test_a_half_embedded_document_is_finished_after_start_once(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    restarter: Restarter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stop comes after the first batch: the rest is embedded at start, once."""
    monkeypatch.setattr(services_module, "ADD_DOCUMENT_WAIT", 1.0)
    await async_setup_house(hass)
    entry = await async_setup_documents(hass, fake_ollama)
    batches: list[int] = []

    def slow_after_the_first_batch(inputs: list[str]) -> float:
        if "Drawers" not in inputs[0]:
            return 0.0
        batches.append(len(inputs))
        return 0.0 if len(batches) == 1 else 3600.0

    fake_ollama.embed_delay = slow_after_the_first_batch
    response = await add_document(hass, "Drawers", _drawers(600))
    chunks = response["chunks"]
    assert chunks > 32
    assert response["status"] == "queued"
    assert response["searchable_chunks"] == 16

    fake_ollama.embed_delay = 0.0
    hass, telegram, entry = await restarter.restart(hass, telegram, entry)
    await index_of(entry).async_wait_idle()
    assert _rows(
        entry, "SELECT COUNT(*) FROM rag_documents WHERE title = 'Drawers'"
    ) == [(1,)]
    assert _rows(
        entry,
        "SELECT COUNT(*) FROM rag_chunks c JOIN rag_documents d"
        " ON d.id = c.document_id WHERE d.title = 'Drawers'",
    ) == [(chunks,)]
    assert _rows(
        entry,
        "SELECT COUNT(*), COUNT(DISTINCT v.chunk_id) FROM rag_vectors v"
        " JOIN rag_chunks c ON c.id = v.chunk_id JOIN rag_documents d"
        " ON d.id = c.document_id WHERE d.title = 'Drawers'",
    ) == [(chunks, chunks)]
    # Each passage was embedded once: the first batch before, the rest after.
    embedded = [
        text
        for request in fake_ollama.embed_requests
        for text in request["input"]
        if text.startswith("Drawers\n")
    ]
    assert len(embedded) == chunks + 16  # the batch cut off by the stop, again
    # Adding it again is a duplicate, searchable at once.
    again = await add_document(hass, "Drawers", _drawers(600))
    assert again["duplicate"] is True
    assert again["status"] == "searchable"
    # The last passages are found through Telegram.
    fake_ollama.tool_call("search_documents", {"query": "passport drawer 598"}).reply(
        "In drawer 598."
    )
    await telegram.send_text("Where is the passport of fact 598?")
    await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    # The fence joins words with a random mark.
    result = tool_results(fake_ollama.chat_requests[-1])[-1]
    assert re.search(r"drawer\D598\.", result)


async def test_a_stop_right_after_the_answer_reports_nothing(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    restarter: Restarter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The answer is out, its message is being crossed off when HA stops: no note."""
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama)
    crossing_off = asyncio.Event()
    forget = ChatQueues._async_forget

    async def slow_forget(queues: ChatQueues, in_flight: int) -> None:
        crossing_off.set()
        await asyncio.sleep(0.3)
        await forget(queues, in_flight)

    monkeypatch.setattr(ChatQueues, "_async_forget", slow_forget)
    fake_ollama.reply("Sunny.")
    await telegram.send_text("What's the weather like?")
    await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    await crossing_off.wait()
    hass, telegram, entry = await restarter.restart(hass, telegram, entry)
    await asyncio.sleep(0.5)
    await hass.async_block_till_done()
    assert [m["text"] for m in telegram.sent_messages(ALICE_ID)] == ["Sunny."]
    assert _rows(entry, "SELECT id FROM telegram_in_flight") == []


async def test_a_message_right_after_the_start_is_answered_not_reported(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    restarter: Restarter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only what the stop interrupted is reported; what comes after is answered.

    Telegram delivers what was written while Home Assistant was down as soon
    as it is back. Reading the interrupted messages is made slow here (a busy
    disk): a message that comes in meanwhile must not be taken for one of
    them (a clean-clone CI run told a sender "I was restarted while answering
    your message" about the message it was answering).
    """
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama, request_timeout=300)
    fake_ollama.hang()
    await telegram.send_text("What's the weather like?")
    await fake_ollama.wait_for_chat_requests(1)

    take = Database.async_take_in_flight
    taken = asyncio.Event()

    async def slow_take(database: Database) -> list[InFlight]:
        await asyncio.sleep(0.3)
        try:
            return await take(database)
        finally:
            taken.set()

    monkeypatch.setattr(Database, "async_take_in_flight", slow_take)
    hass, telegram, entry = await restarter.restart(hass, telegram, entry)
    # Still being answered when the interrupted messages are read.
    fake_ollama.reply("Sunny tomorrow.", delay=1.0)
    await telegram.send_text("And tomorrow?")
    await taken.wait()
    sent = await telegram.wait_for_sent(2, chat_id=ALICE_ID)
    await hass.async_block_till_done()
    assert [m["text"] for m in sent] == [
        (
            "I was restarted while answering your message "
            '"What\'s the weather like?". '
            "If you did not get an answer, please send it again."
        ),
        "Sunny tomorrow.",
    ]
    assert _rows(entry, "SELECT id FROM telegram_in_flight") == []
