"""Conversations are kept as sent; summaries come in the background, when quiet.

Within a session the prompt only grows (the model server reuses its cache);
when the history outgrows its room it is trimmed in one large step, with a
summary written beforehand by a background call that shares the chat's
cached prefix and never starts while a turn is in flight.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import sqlite3
import time
from contextlib import closing
from typing import TYPE_CHECKING, Any

import pytest
from homeassistant.util import dt as dt_util

from custom_components.ha_personal_assistant.agent.budget import SUMMARIZE_AT
from custom_components.ha_personal_assistant.agent.turns import OPENING_HEADER
from custom_components.ha_personal_assistant.const import (
    BACKGROUND_NUM_PREDICT,
    CONF_NUM_CTX,
    DEFAULT_NUM_PREDICT,
    DOMAIN,
)
from custom_components.ha_personal_assistant.memory import learner as learner_module
from custom_components.ha_personal_assistant.runtime import SUMMARY_SWEEP_INTERVAL
from custom_components.ha_personal_assistant.store import faults as faults_module
from custom_components.ha_personal_assistant.store import turns as turns_store
from custom_components.ha_personal_assistant.telegram.stream import ReplyStream
from custom_components.ha_personal_assistant.tools import web

from .common import (
    async_setup_assistant,
    async_setup_house,
    errors_logged,
    fire_time_changed,
    last_user_content,
    wait_until,
)
from .fake_ollama import error_reply, text_reply, tool_call_reply
from .telegram_harness import ALICE_ID, BOB_ID
from .test_taint import POISON_LIGHT, Results

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant
    from pytest_homeassistant_custom_component.common import MockConfigEntry

    from custom_components.ha_personal_assistant.models import Interaction

    from .fake_ollama import FakeOllama
    from .restart import Restarter
    from .telegram_harness import TelegramHarness

# A long question, so a few turns fill a 4,096-token window's history room.
FILLER = " ".join(f"word{i}" for i in range(25))
QUIET = 0.3


def _is_summary_request(request: dict[str, Any]) -> bool:
    return request["messages"][-1]["content"].startswith("[Summary request")


def _is_background(request: dict[str, Any]) -> bool:
    return request["messages"][-1]["content"].startswith(
        ("[Summary request", "[Learning request")
    )


def _chats(fake_ollama: FakeOllama) -> list[dict[str, Any]]:
    return [r for r in fake_ollama.chat_requests if not _is_background(r)]


def _asked(content: str) -> str:
    """Return the question's number (or second word) from a turn's message.

    Also when the message opens with the earlier turns ("[Earlier in this
    conversation]" after a trim): the question comes last.
    """
    numbers = re.findall(r"question (\d+)", content)
    return numbers[-1] if numbers else content.split()[1]


def _script(fake_ollama: FakeOllama, log: list[tuple[str, float]]) -> None:
    """Answer turns with an echo and summaries with a recognizable text."""

    def answer(request: dict[str, Any]) -> str:
        if _is_summary_request(request):
            log.append(("summary call", time.monotonic()))
            users = sum(m["role"] == "user" for m in request["messages"]) - 1
            return f"SUMMARY of {users} turns"
        if _is_background(request):
            return "NONE"
        log.append(("turn call", time.monotonic()))
        return f"Echo: {_asked(last_user_content(request))}"

    fake_ollama.default = answer


async def _talk(
    telegram: TelegramHarness, start: int, count: int, *, long: bool = False
) -> None:
    for index in range(start, start + count):
        before = len(telegram.sent_messages())
        text = f"question {index}"
        await telegram.send_text(f"{text} {FILLER}" if long else text)
        await telegram.wait_for_sent(before + 1)


async def _setup(
    hass: HomeAssistant,
    fake_ollama: FakeOllama,
    *,
    quiet: float = QUIET,
    **options: Any,
) -> MockConfigEntry:
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama, **options)
    entry.runtime_data.assistant.model_queue.quiet_seconds = quiet
    return entry


async def test_the_prompt_only_grows_and_the_model_is_told_its_output_cap(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """Each request starts with the previous one byte for byte, plus its answer."""
    await _setup(hass, fake_ollama)
    _script(fake_ollama, [])
    await _talk(telegram, 0, 4)
    chats = _chats(fake_ollama)
    for before, after in itertools.pairwise(chats):
        assert after["messages"][: len(before["messages"])] == before["messages"]
        assert after["tools"] == before["tools"]
        assert after["messages"][len(before["messages"])]["role"] == "assistant"
    assert all(r["options"]["num_predict"] == DEFAULT_NUM_PREDICT for r in chats)


async def test_a_long_conversation_is_summarized_when_quiet_then_trimmed_once(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """The summary shares the chat's prefix, waits for quiet, and replaces half."""
    await _setup(hass, fake_ollama, **{CONF_NUM_CTX: 4096})
    log: list[tuple[str, float]] = []
    _script(fake_ollama, log)
    replies: list[float] = []
    hass.bus.async_listen("telegram_sent", lambda _e: replies.append(time.monotonic()))
    turns = 0
    while not any(kind == "summary call" for kind, _ in log):
        await _talk(telegram, turns, 1, long=True)
        turns += 1
        assert turns < 30, "no summary was ever written"
        await asyncio.sleep(QUIET * 2)
    summary_at = next(at for kind, at in log if kind == "summary call")
    # It started only after the quiet period that followed the last reply.
    assert summary_at - max(at for at in replies if at < summary_at) >= QUIET
    summary = next(r for r in fake_ollama.chat_requests if _is_summary_request(r))
    last_chat = _chats(fake_ollama)[-1]
    # Same system prompt, tools and history bytes as the chat: the server's
    # cache serves all of it; only the instruction is new.
    shared = summary["messages"][:-1]
    assert last_chat["messages"][: len(shared)] == shared
    assert summary["tools"] == last_chat["tools"]
    assert summary["options"]["num_predict"] == BACKGROUND_NUM_PREDICT
    covered = sum(m["role"] == "user" for m in shared)
    assert 0 < covered < turns

    await _talk(telegram, turns, 1, long=True)
    request = _chats(fake_ollama)[-1]
    first_user = next(m for m in request["messages"] if m["role"] == "user")
    assert first_user["content"].startswith(
        f"{OPENING_HEADER}\nSUMMARY of {covered} turns"
    )
    users = [m["content"] for m in request["messages"] if m["role"] == "user"]
    assert not any("question 0 " in content for content in users)
    assert len(users) == turns + 1 - covered
    # After the trim the prompt grows again from the new start.
    await _talk(telegram, turns + 1, 1, long=True)
    after = _chats(fake_ollama)[-1]["messages"]
    assert after[: len(request["messages"])] == request["messages"]


async def test_a_turn_never_waits_for_a_background_call(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """A slow summary gives way to a turn; none starts while a turn runs."""
    await _setup(hass, fake_ollama, **{CONF_NUM_CTX: 4096})
    log: list[tuple[str, float]] = []
    spans: list[tuple[float, float]] = []
    summaries = 0

    def answer(request: dict[str, Any]) -> Any:
        nonlocal summaries
        if _is_background(request) and not _is_summary_request(request):
            return "NONE"
        if _is_summary_request(request):
            summaries += 1
            log.append(("summary call", time.monotonic()))
            # The first summary is slow (a Pi reading the history): a turn
            # arrives meanwhile and must not wait for it.
            return text_reply("SUMMARY", delay=30.0 if summaries == 1 else 0.0)
        log.append(("turn call", time.monotonic()))
        return text_reply(
            f"Echo: {_asked(last_user_content(request))}", chunk_delay=0.05
        )

    fake_ollama.default = answer
    turns = 0
    while summaries == 0:
        started = time.monotonic()
        await _talk(telegram, turns, 1, long=True)
        spans.append((started, time.monotonic()))
        turns += 1
        assert turns < 30
        await asyncio.sleep(QUIET * 2)
    # The slow summary is running now; the user writes again.
    started = time.monotonic()
    await _talk(telegram, turns, 1, long=True)
    waited = time.monotonic() - started
    spans.append((started, time.monotonic()))
    assert waited < 5.0
    model_queue = hass.config_entries.async_entries("ha_personal_assistant")[
        0
    ].runtime_data.assistant.model_queue
    assert model_queue.gave_way >= 1
    # It is tried again once quiet, and then finishes.
    await wait_until(lambda: summaries >= 2)
    for kind, at in log:
        if kind == "summary call":
            assert not any(start <= at <= end for start, end in spans)


async def test_history_survives_a_restart(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """Every message is stored and still there after a reload of the entry."""
    entry = await _setup(hass, fake_ollama)
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

    await asyncio.sleep(0.2)
    stored = await database.async_run(rows)
    assert [c for r, c in stored if r == "user"] == [f"question {i}" for i in range(4)]
    assert [c for r, c in stored if r == "assistant"] == [
        f"Echo: {i}" for i in range(4)
    ]
    # The conversation went on across the reload.
    contents = [m["content"] for m in fake_ollama.chat_requests[-1]["messages"]]
    assert any(c.startswith("question 2") for c in contents)


def _history_rows(path: Any) -> list[tuple[str, str]]:
    """Read conversation_history with a connection of the test's own."""
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(
            "SELECT role, content FROM conversation_history ORDER BY id"
        ).fetchall()


async def test_the_history_row_is_written_before_the_reply_is_sent(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """When Telegram receives the reply, assistant.db already holds the turn."""
    entry = await _setup(hass, fake_ollama)
    path = entry.runtime_data.assistant.database.path
    _script(fake_ollama, [])
    stored_when_sent: list[list[tuple[str, str]]] = []

    def send(params: dict[str, Any]) -> Any:
        stored_when_sent.append(_history_rows(path))
        return telegram.api._send_message(params)

    telegram.api.set_handler("sendMessage", send)
    await _talk(telegram, 0, 2)
    assert stored_when_sent == [
        [("user", "question 0"), ("assistant", "Echo: 0")],
        [
            ("user", "question 0"),
            ("assistant", "Echo: 0"),
            ("user", "question 1"),
            ("assistant", "Echo: 1"),
        ],
    ]


async def test_a_crash_between_the_history_and_the_reply_loses_nothing(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    restarter: Restarter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """HA dies after the turn was stored, before it was sent: kept and reported."""
    entry = await _setup(hass, fake_ollama)
    path = entry.runtime_data.assistant.database.path
    _script(fake_ollama, [])
    await _talk(telegram, 0, 1)
    crashed = asyncio.Event()

    async def crash(_stream: ReplyStream, _reply: str) -> None:
        # Home Assistant dies here: nothing after this line runs.
        crashed.set()
        await asyncio.Event().wait()

    with monkeypatch.context() as patch:
        patch.setattr(ReplyStream, "async_finish", crash)
        await telegram.send_text("question 1")
        async with asyncio.timeout(10):
            await crashed.wait()
        hass, telegram, entry = await restarter.restart(hass, telegram, entry)
    # The turn is in the database and in what the model sees next.
    assert _history_rows(path)[-2:] == [
        ("user", "question 1"),
        ("assistant", "Echo: 1"),
    ]
    notices = await telegram.wait_for_sent(2, chat_id=ALICE_ID)
    assert notices[-1]["text"] == (
        'I was restarted while answering your message "question 1". '
        "If you did not get an answer, please send it again."
    )
    await _talk(telegram, 2, 1)
    contents = [m["content"] for m in _chats(fake_ollama)[-1]["messages"]]
    assert any(c.startswith("question 1") for c in contents)
    assert "Echo: 1" in contents
    await asyncio.sleep(0.2)
    # Reported once: the notice is not repeated.
    assert [m["text"] for m in telegram.sent_messages(ALICE_ID)].count(
        notices[-1]["text"]
    ) == 1


async def test_a_new_session_starts_with_the_last_sessions_summary(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """After /new the old turns are gone, their short summary stays."""
    await _setup(hass, fake_ollama)
    log: list[tuple[str, float]] = []
    _script(fake_ollama, log)
    await _talk(telegram, 0, 3)
    await telegram.send_command("/new")
    await telegram.wait_for_sent(4)
    await wait_until(lambda: any(kind == "summary call" for kind, _ in log))
    summary = next(r for r in fake_ollama.chat_requests if _is_summary_request(r))
    # The ended session's own history, as sent, is the summary's prefix.
    last_chat = _chats(fake_ollama)[-1]["messages"]
    assert summary["messages"][: len(last_chat)] == last_chat
    await asyncio.sleep(0.1)
    await _talk(telegram, 3, 1)
    request = _chats(fake_ollama)[-1]
    contents = [m["content"] for m in request["messages"]]
    assert contents[1].startswith(f"{OPENING_HEADER}\nSUMMARY of 3 turns")
    assert not any(c.startswith("question 0") for c in contents)
    assert [m["role"] for m in request["messages"]].count("system") == 1


async def test_a_failing_summary_still_trims_with_the_users_own_words(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Without a summary, the trim keeps what the user asked, and replies go on."""
    await _setup(hass, fake_ollama, quiet=60.0, **{CONF_NUM_CTX: 4096})
    _script(fake_ollama, [])
    turns = 0
    while True:
        await _talk(telegram, turns, 1, long=True)
        turns += 1
        request = _chats(fake_ollama)[-1]
        first_user = next(m for m in request["messages"] if m["role"] == "user")
        if first_user["content"].startswith(OPENING_HEADER):
            break
        assert turns < 40, "the history was never trimmed"
    assert _newest_dropped_is_kept(first_user["content"])
    users = sum(m["role"] == "user" for m in request["messages"])
    # One large step: at most half the turns stay.
    assert users <= turns / 2 + 1


async def test_clear_history_forgets_one_chat(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """clear_history with a chat id forgets that chat only, state included."""
    from .telegram_harness import ALICE_ID, BOB_ID

    entry = await _setup(hass, fake_ollama)
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


# ------------------------------------------------ when summaries cannot be had


def _summary_requests(fake_ollama: FakeOllama) -> list[dict[str, Any]]:
    return [r for r in fake_ollama.chat_requests if _is_summary_request(r)]


def _newest_dropped_is_kept(content: str) -> bool:
    """Tell whether the opening names the turn right before the first one kept.

    The opening keeps the user's own words, the oldest going first when it
    is full: the newest dropped question is always there.
    """
    kept = int(_asked(content))
    return f"- The user asked: question {kept - 1} word0" in content


def _opening(request: dict[str, Any]) -> str | None:
    """Return the opening a turn's request starts with, if it has one."""
    first_user = next(m for m in request["messages"] if m["role"] == "user")
    content = str(first_user["content"])
    return content if content.startswith(OPENING_HEADER) else None


def _sweep_timer(hass: HomeAssistant) -> None:
    """Fire the timer that summarizes ended sessions every ten minutes."""
    fire_time_changed(hass, dt_util.utcnow() + SUMMARY_SWEEP_INTERVAL)


@pytest.fixture
def learning_without_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let learning run whenever the chats are quiet, so its worker ends soon.

    :func:`_settled` waits for every background task, the learner's too,
    which otherwise waits two minutes between its model calls.
    """
    monkeypatch.setattr(learner_module, "LEARNING_INTERVAL_SECONDS", 0.0)


async def _settled(hass: HomeAssistant) -> None:
    """Wait until the work after the replies (history, summaries) is done."""
    await hass.async_block_till_done(wait_background_tasks=True)


async def _end_session(telegram: TelegramHarness) -> None:
    before = len(telegram.sent_messages())
    await telegram.send_command("/new")
    await telegram.wait_for_sent(before + 1)


@pytest.mark.usefixtures("learning_without_pause")
async def test_a_turn_the_history_cannot_store_is_answered_and_never_summarized(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The history refuses every row: replies go on, a warning, no summary."""
    entry = await _setup(hass, fake_ollama, **{CONF_NUM_CTX: 4096})
    log: list[tuple[str, float]] = []
    _script(fake_ollama, log)
    assistant = entry.runtime_data.assistant
    await assistant.database.async_run(
        lambda conn: conn.execute(
            "CREATE TRIGGER refuse_history BEFORE INSERT ON conversation_history"
            " BEGIN SELECT RAISE(ABORT, 'the history refuses rows'); END"
        )
    )
    pressures: list[float] = []

    async def record(interaction: Interaction) -> None:
        pressures.append(interaction.history_pressure)

    assistant.after_reply.append(record)
    turns = 0
    # On until a summary would be due: the history is past SUMMARIZE_AT.
    while sum(pressure >= SUMMARIZE_AT for pressure in pressures) < 2:
        await _talk(telegram, turns, 1, long=True)
        turns += 1
        assert turns < 30, "the history never filled its room"
    await _settled(hass)
    assert [m["text"] for m in telegram.sent_messages()] == [
        f"Echo: {index}" for index in range(turns)
    ]
    # A summary of turns that are not stored would reach nothing: none is made.
    assert _summary_requests(fake_ollama) == []
    warnings = [
        record.getMessage()
        for record in caplog.records
        if record.levelno == logging.WARNING
    ]
    assert any(
        "Could not store the conversation history" in warning
        and "the history refuses rows" in warning
        for warning in warnings
    )


@pytest.mark.usefixtures("learning_without_pause")
async def test_a_summary_that_cannot_be_read_leaves_the_reply_without_it(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The file is locked just when the last session's summary is read: answered."""
    entry = await _setup(hass, fake_ollama)
    log: list[tuple[str, float]] = []
    _script(fake_ollama, log)
    await _talk(telegram, 0, 3)
    await _end_session(telegram)
    await wait_until(lambda: any(kind == "summary call" for kind, _ in log))
    await _settled(hass)
    database = entry.runtime_data.assistant.database
    stored = await database.async_run(
        lambda conn: conn.execute(
            "SELECT summary FROM conversation_sessions WHERE summary IS NOT NULL"
        ).fetchall()
    )
    assert stored == [("SUMMARY of 3 turns",)]

    def locked(*_args: Any) -> str | None:
        msg = "database is locked"
        raise sqlite3.OperationalError(msg)

    monkeypatch.setattr(turns_store, "previous_summary", locked)
    await _talk(telegram, 3, 1)
    assert telegram.sent_messages()[-1]["text"] == "Echo: 3"
    assert _opening(_chats(fake_ollama)[-1]) is None


@pytest.mark.usefixtures("learning_without_pause")
async def test_a_summary_the_server_fails_leaves_the_users_own_words(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The summary request gets an error: replies go on, the trim keeps the asks."""
    await _setup(hass, fake_ollama, **{CONF_NUM_CTX: 4096})
    failed: list[dict[str, Any]] = []

    def answer(request: dict[str, Any]) -> Any:
        if _is_summary_request(request):
            failed.append(request)
            return error_reply(500, "model runner has unexpectedly stopped")
        if _is_background(request):
            return "NONE"
        return f"Echo: {_asked(last_user_content(request))}"

    fake_ollama.default = answer
    turns = 0
    opening = None
    while not (failed and opening):
        await _talk(telegram, turns, 1, long=True)
        turns += 1
        assert turns < 40, "no summary was tried, or the history never trimmed"
        opening = _opening(_chats(fake_ollama)[-1])
        # Quiet: the summary may run.
        await asyncio.sleep(QUIET * 2)
    assert opening is not None
    assert _newest_dropped_is_kept(opening)
    sent = telegram.sent_messages()
    assert len(sent) == turns
    assert all(m["text"].startswith("Echo: ") for m in sent)
    await _settled(hass)
    assert errors_logged(caplog) == []


@pytest.mark.usefixtures("learning_without_pause")
async def test_a_failed_summary_never_erases_the_one_before(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """The server fails from the second summary on: the next session has the first."""
    await _setup(hass, fake_ollama, **{CONF_NUM_CTX: 4096})
    log: list[tuple[str, float]] = []
    _script(fake_ollama, log)
    echo = fake_ollama.default

    def answer(request: dict[str, Any]) -> Any:
        if _is_summary_request(request) and _summary_requests(fake_ollama)[1:]:
            return error_reply(500, "model runner has unexpectedly stopped")
        return echo(request)

    fake_ollama.default = answer
    turns = 0
    # On until the summary of an older half failed after one was written.
    while len(_summary_requests(fake_ollama)) < 2:
        await _talk(telegram, turns, 1, long=True)
        turns += 1
        assert turns < 40, "no second summary was tried"
        # Quiet: the summary may run.
        await asyncio.sleep(QUIET * 2)
    await _settled(hass)
    await _end_session(telegram)
    await wait_until(lambda: len(_summary_requests(fake_ollama)) == 3)
    await _settled(hass)
    # One was written (the first); the second and the session's were not.
    assert sum(kind == "summary call" for kind, _ in log) == 1
    await _talk(telegram, turns, 1)
    opening = _opening(_chats(fake_ollama)[-1])
    assert opening is not None
    assert opening.startswith(f"{OPENING_HEADER}\nSUMMARY of ")


@pytest.mark.usefixtures("learning_without_pause")
async def test_a_summary_answered_with_a_tool_call_is_dropped_and_written_later(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """A tool call for a summary: nothing runs or is kept; a later sweep writes it."""
    await _setup(hass, fake_ollama)
    log: list[tuple[str, float]] = []
    _script(fake_ollama, log)
    echo = fake_ollama.default
    bed_light_on = {
        "domain": "light",
        "service": "turn_on",
        "entity_id": "light.bed_light",
    }

    def answer(request: dict[str, Any]) -> Any:
        if _is_summary_request(request) and not _summary_requests(fake_ollama)[1:]:
            return tool_call_reply(
                [("call_service", bed_light_on)],
                content="The user wants the bed light on.",
            )
        return echo(request)

    fake_ollama.default = answer
    await _talk(telegram, 0, 3)
    await _end_session(telegram)
    await wait_until(lambda: len(_summary_requests(fake_ollama)) == 1)
    await _settled(hass)
    assert hass.states.get("light.bed_light").state == "off"
    # The session is still to be summarized: the ten-minute sweep does it.
    _sweep_timer(hass)
    await wait_until(lambda: len(_summary_requests(fake_ollama)) == 2)
    await _settled(hass)
    await _talk(telegram, 3, 1)
    opening = _opening(_chats(fake_ollama)[-1])
    assert opening is not None
    assert opening.startswith(f"{OPENING_HEADER}\nSUMMARY of 3 turns")
    assert "bed light" not in opening
    assert hass.states.get("light.bed_light").state == "off"


@pytest.mark.usefixtures("learning_without_pause")
async def test_summaries_wait_out_a_locked_database(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Locked when the summary reads the session and when the next sweep looks."""
    monkeypatch.setattr(faults_module, "FAULT_BACKOFF", 5.0)
    # The summary of an ended session waits for quiet: a minute, for now.
    entry = await _setup(hass, fake_ollama, quiet=60.0)
    assistant = entry.runtime_data.assistant
    database = assistant.database
    log: list[tuple[str, float]] = []
    _script(fake_ollama, log)
    echo = fake_ollama.default

    def answer(request: dict[str, Any]) -> Any:
        if not _is_background(request) and "from Bob" in last_user_content(request):
            # Another program locks the file while the model answers Bob.
            database.gate.failed("database is locked")
            return "Hello Bob"
        return echo(request)

    fake_ollama.default = answer
    await _talk(telegram, 0, 3)
    await _end_session(telegram)
    # Bob's message ends the quiet; the summary then finds the file locked.
    assistant.model_queue.quiet_seconds = QUIET
    await telegram.send_text("Hello from Bob", chat_id=BOB_ID, user_id=BOB_ID)
    await telegram.wait_for_sent(1, chat_id=BOB_ID)
    await _settled(hass)
    assert _summary_requests(fake_ollama) == []
    # Still locked when the ten-minute sweep looks for ended sessions.
    database.gate.failed("database is locked")
    _sweep_timer(hass)
    await _settled(hass)
    assert _summary_requests(fake_ollama) == []
    # The file answers again: the next sweep writes it; the new session opens with it.
    await asyncio.sleep(faults_module.FAULT_BACKOFF)
    _sweep_timer(hass)
    await _settled(hass)
    assert len(_summary_requests(fake_ollama)) == 1
    await _talk(telegram, 3, 1)
    opening = _opening(_chats(fake_ollama)[-1])
    assert opening is not None
    assert opening.startswith(f"{OPENING_HEADER}\nSUMMARY of 3 turns")


@pytest.mark.usefixtures("learning_without_pause")
async def test_a_history_cleared_while_its_summary_waits_is_not_summarized(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """clear_history before the quiet came: no summary of what was forgotten."""
    entry = await _setup(hass, fake_ollama, quiet=60.0)
    log: list[tuple[str, float]] = []
    _script(fake_ollama, log)
    await _talk(telegram, 0, 3)
    await _end_session(telegram)
    await hass.services.async_call(
        DOMAIN,
        "clear_history",
        {"chat_id": ALICE_ID},
        blocking=True,
        return_response=True,
    )
    entry.runtime_data.assistant.model_queue.quiet_seconds = QUIET
    await _talk(telegram, 3, 1)
    await _settled(hass)
    assert _summary_requests(fake_ollama) == []
    await _talk(telegram, 4, 1)
    contents = [m["content"] for m in _chats(fake_ollama)[-1]["messages"]]
    assert not any(c.startswith(("question 0", "question 1")) for c in contents)
    assert _opening(_chats(fake_ollama)[-1]) is None


@pytest.mark.usefixtures("learning_without_pause")
async def test_clear_history_without_a_chat_forgets_every_chat_and_learns_nothing(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """clear_history for all chats: no chat remembers, nothing is learned later."""
    entry = await _setup(hass, fake_ollama, quiet=60.0)
    _script(fake_ollama, [])
    await _talk(telegram, 0, 2)
    await telegram.send_text("bobs question", chat_id=BOB_ID, user_id=BOB_ID)
    await telegram.wait_for_sent(1, chat_id=BOB_ID)
    response = await hass.services.async_call(
        DOMAIN, "clear_history", {}, blocking=True, return_response=True
    )
    assert response == {"sessions": 2}
    entry.runtime_data.assistant.model_queue.quiet_seconds = QUIET
    # Each chat starts over.
    await _talk(telegram, 2, 1)
    alice = [str(m["content"]) for m in _chats(fake_ollama)[-1]["messages"]]
    assert not any("question 0" in c or "question 1" in c for c in alice)
    before = len(telegram.sent_messages(BOB_ID))
    await telegram.send_text("bob again", chat_id=BOB_ID, user_id=BOB_ID)
    await telegram.wait_for_sent(before + 1, chat_id=BOB_ID)
    bob = [str(m["content"]) for m in _chats(fake_ollama)[-1]["messages"]]
    assert not any("bobs question" in c for c in bob)
    # The chats go quiet: what was cleared is neither summarized nor learned.
    await _settled(hass)
    background = [r for r in fake_ollama.chat_requests if _is_background(r)]
    assert background
    assert not any(
        "question 0" in str(m["content"]) or "bobs question" in str(m["content"])
        for r in background
        for m in r["messages"]
    )


@pytest.mark.usefixtures("learning_without_pause")
async def test_one_sweep_at_a_time_summarizes_a_session_once(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """/new twice while the first sweep waits for quiet: one summary."""
    entry = await _setup(hass, fake_ollama, quiet=60.0)
    log: list[tuple[str, float]] = []
    _script(fake_ollama, log)
    await _talk(telegram, 0, 3)
    await _end_session(telegram)
    # /new again while the first sweep waits for quiet.
    await _end_session(telegram)
    entry.runtime_data.assistant.model_queue.quiet_seconds = QUIET
    await _talk(telegram, 3, 1)
    await _settled(hass)
    assert len(_summary_requests(fake_ollama)) == 1


@pytest.mark.usefixtures("learning_without_pause")
async def test_a_session_without_its_saved_state_is_summarized_from_its_rows(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The saved state cannot be read: the stored turns stand in, within limits.

    What fits the summary's share of the window goes (the oldest turns are
    left out), and an answer written from outside text is not in it.
    """
    monkeypatch.setattr(web, "DDGS", Results(POISON_LIGHT))
    entry = await _setup(hass, fake_ollama, **{CONF_NUM_CTX: 4096})
    log: list[tuple[str, float]] = []
    _script(fake_ollama, log)
    echo = fake_ollama.default

    def answer(request: dict[str, Any]) -> Any:
        last = request["messages"][-1]
        if last["role"] == "tool":
            return "The web says: POISONED ADVICE"
        if not _is_background(request) and "save energy" in last_user_content(request):
            return tool_call_reply([("web_search", {"query": "save energy"})])
        return echo(request)

    fake_ollama.default = answer
    long_question = "question 0 " + " ".join(f"word{i}" for i in range(400))
    await telegram.send_text(long_question)
    await telegram.wait_for_sent(1)
    await telegram.send_text("question 1 how do I save energy?")
    await telegram.wait_for_sent(2)
    await _talk(telegram, 2, 1)
    assert telegram.sent_messages()[1]["text"].startswith("The web says")
    # The summary of its older half (turn 0 filled the history) comes first.
    await _settled(hass)
    before = len(_summary_requests(fake_ollama))
    # The session's saved state is damaged inside its rows, where SQLite's
    # checks do not look.
    conn = entry.runtime_data.storage.checkpoints.saver.inner.conn  # type: ignore[union-attr]
    await conn.execute("UPDATE checkpoints SET checkpoint = ?", (b"garbage",))
    await conn.commit()
    await _end_session(telegram)
    await wait_until(lambda: len(_summary_requests(fake_ollama)) > before)
    await _settled(hass)
    (summary,) = _summary_requests(fake_ollama)[before:]
    assert "the whole conversation above" in summary["messages"][-1]["content"]
    contents = [str(m["content"]) for m in summary["messages"]]
    text = "\n".join(contents)
    # The rows of turns 1 and 2, not the long turn 0 before them.
    assert "question 0" not in text
    assert "question 1 how do I save energy?" in contents
    assert "question 2" in contents
    # The answer written from web results is a note, not its words.
    assert "POISONED" not in text
    assert "an earlier answer" in text
    stored = await entry.runtime_data.assistant.database.async_run(
        lambda conn: conn.execute(
            "SELECT summary FROM conversation_sessions WHERE summary IS NOT NULL"
        ).fetchall()
    )
    assert stored == [("SUMMARY of 2 turns",)]
