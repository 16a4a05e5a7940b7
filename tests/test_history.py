"""Conversations are kept; what leaves the prompt is summarized in the background."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from custom_components.ha_personal_assistant.agent.prompts import SUMMARY_HEADER
from custom_components.ha_personal_assistant.const import KEPT_TURNS
from custom_components.ha_personal_assistant.history import (
    SUMMARY_BATCH,
    SUMMARY_PROMPT,
)

from .common import async_setup_assistant, async_setup_house, last_user_content

if TYPE_CHECKING:
    import sqlite3

    from homeassistant.core import HomeAssistant

    from .fake_ollama import FakeOllama
    from .telegram_harness import TelegramHarness


def _is_summary_request(request: dict[str, Any]) -> bool:
    return request["messages"][0]["content"] == SUMMARY_PROMPT


def _script(fake_ollama: FakeOllama, log: list[str]) -> None:
    """Answer turns with an echo and summaries with a recognizable text."""

    def answer(request: dict[str, Any]) -> str:
        if _is_summary_request(request):
            log.append("summary call")
            covered = request["messages"][1]["content"].count("User: ")
            return f"SUMMARY of {covered} turns"
        log.append("turn call")
        return f"Echo: {last_user_content(request).splitlines()[0]}"

    fake_ollama.default = answer


async def _talk(telegram: TelegramHarness, start: int, count: int) -> None:
    for index in range(start, start + count):
        before = len(telegram.sent_messages())
        await telegram.send_text(f"question {index}")
        await telegram.wait_for_sent(before + 1)


async def _wait_for(predicate: Any, seconds: float = 5.0) -> None:
    for _ in range(int(seconds / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
    msg = "condition not met in time"
    raise AssertionError(msg)


async def test_a_long_conversation_is_summarized_after_the_reply(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """Old turns give way to a summary, written only after the reply was sent."""
    await async_setup_house(hass)
    await async_setup_assistant(hass, fake_ollama)
    log: list[str] = []
    _script(fake_ollama, log)
    hass.bus.async_listen("telegram_sent", lambda _event: log.append("reply sent"))
    turns = KEPT_TURNS + SUMMARY_BATCH
    await _talk(telegram, 0, turns)
    await _wait_for(lambda: "summary call" in log)
    # The summary was asked for after the last reply went out, never before.
    first_summary = log.index("summary call")
    assert log[:first_summary].count("reply sent") == turns
    assert log[first_summary - 1] == "reply sent"

    await _talk(telegram, turns, 1)
    request = [r for r in fake_ollama.chat_requests if not _is_summary_request(r)][-1]
    contents = [m["content"] for m in request["messages"]]
    # After the cached prefix: in the last user turn, never in a system message.
    assert f"{SUMMARY_HEADER}\nSUMMARY of {SUMMARY_BATCH} turns" in last_user_content(
        request
    )
    assert [m["role"] for m in request["messages"]].count("system") == 1
    assert not any(c.startswith("question 0") for c in contents)
    assert sum(m["role"] == "user" for m in request["messages"]) == KEPT_TURNS + 1


async def test_history_survives_a_restart(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """Every message is stored and still there after a reload of the entry."""
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama)
    _script(fake_ollama, [])
    await _talk(telegram, 0, 3)
    assert await hass.config_entries.async_reload(entry.entry_id)
    await hass.async_block_till_done()
    await _talk(telegram, 3, 1)
    database = entry.runtime_data.assistant.database

    def rows(conn: sqlite3.Connection) -> list[tuple[str, str]]:
        return conn.execute(
            "SELECT role, content FROM conversation_history ORDER BY id"
        ).fetchall()

    await _wait_for(lambda: True)
    await asyncio.sleep(0.2)
    stored = await database.async_run(rows)
    assert [c for r, c in stored if r == "user"] == [f"question {i}" for i in range(4)]
    assert [c for r, c in stored if r == "assistant"] == [
        f"Echo: question {i}" for i in range(4)
    ]
    # The conversation went on across the reload.
    contents = [m["content"] for m in fake_ollama.chat_requests[-1]["messages"]]
    assert "question 2" in contents


async def test_a_new_session_starts_with_the_last_sessions_summary(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """After /new the old turns are gone, their short summary stays."""
    await async_setup_house(hass)
    await async_setup_assistant(hass, fake_ollama)
    log: list[str] = []
    _script(fake_ollama, log)
    await _talk(telegram, 0, 3)
    await telegram.send_command("/new")
    await telegram.wait_for_sent(4)
    await _wait_for(lambda: "summary call" in log)
    await asyncio.sleep(0.1)
    await _talk(telegram, 3, 1)
    request = [r for r in fake_ollama.chat_requests if not _is_summary_request(r)][-1]
    contents = [m["content"] for m in request["messages"]]
    assert f"{SUMMARY_HEADER}\nSUMMARY of 3 turns" in last_user_content(request)
    assert not any(c.startswith("question 0") for c in contents)


async def test_a_failing_summary_changes_nothing_for_the_user(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """If the summary call fails, replies go on and the old turns are simply gone."""
    await async_setup_house(hass)
    await async_setup_assistant(hass, fake_ollama)
    log: list[str] = []

    def answer(request: dict[str, Any]) -> str:
        if _is_summary_request(request):
            log.append("summary call")
            return ""
        return f"Echo: {last_user_content(request).splitlines()[0]}"

    fake_ollama.default = answer
    await _talk(telegram, 0, KEPT_TURNS + SUMMARY_BATCH + 1)
    await _wait_for(lambda: "summary call" in log)
    request = [r for r in fake_ollama.chat_requests if not _is_summary_request(r)][-1]
    assert not any(SUMMARY_HEADER in m["content"] for m in request["messages"])


async def test_clear_history_forgets_one_chat(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """clear_history with a chat id forgets that chat only, state included."""
    from .telegram_harness import ALICE_ID, BOB_ID

    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama)
    _script(fake_ollama, [])
    await _talk(telegram, 0, 2)
    await telegram.send_text("bob question", chat_id=BOB_ID, user_id=BOB_ID)
    await telegram.wait_for_sent(1, chat_id=BOB_ID)
    await asyncio.sleep(0.2)
    response = await hass.services.async_call(
        "ha_personal_assistant",
        "clear_history",
        {"chat_id": ALICE_ID},
        blocking=True,
        return_response=True,
    )
    assert response == {"sessions": 1}
    database = entry.runtime_data.assistant.database

    def users(conn: sqlite3.Connection) -> list[str]:
        return [
            r[0]
            for r in conn.execute(
                "SELECT content FROM conversation_history WHERE role = 'user'"
            )
        ]

    assert await database.async_run(users) == ["bob question"]
    await _talk(telegram, 2, 1)
    contents = [m["content"] for m in fake_ollama.chat_requests[-1]["messages"]]
    assert not any(c.startswith(("question 0", "question 1")) for c in contents)
