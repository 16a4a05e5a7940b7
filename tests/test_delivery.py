"""Replies reach Telegram: retried when Telegram certainly did not take them.

Through the real telegram_bot and python-telegram-bot, against the fake Bot
API: a 429 with retry_after is retried after that wait, a 502 or a refused
connection after a backoff; a read timeout (the message may have arrived)
and a 403 are not retried. Every message is sent at most once, the parts of
a long reply in order; a reply that cannot be delivered is logged once, and
a repair issue appears when it keeps happening.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from homeassistant.helpers import issue_registry as ir

from custom_components.ha_personal_assistant.const import CONF_NUM_PREDICT, DOMAIN
from custom_components.ha_personal_assistant.telegram import delivery as delivery_module
from custom_components.ha_personal_assistant.telegram import stream as stream_module

from .common import async_setup_assistant, async_setup_house, errors_logged
from .telegram_harness import (
    ALICE_ID,
    GROUP_ID,
    TELEGRAM_MESSAGE_LIMIT,
    BotApiError,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from homeassistant.core import HomeAssistant
    from pytest_homeassistant_custom_component.common import (  # type: ignore[import-untyped]
        MockConfigEntry,
    )

    from .fake_ollama import FakeOllama
    from .telegram_harness import TelegramCall, TelegramHarness

BACKOFF = 0.2
BLOCKED = "Forbidden: bot was blocked by the user"


@pytest.fixture(autouse=True)
def short_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retry after 0.2 s instead of 1 s (Telegram's retry_after still counts)."""
    monkeypatch.setattr(delivery_module, "SEND_BACKOFF", BACKOFF)


@pytest.fixture(autouse=True)
def no_errors_logged(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Telegram trouble is a warning at most, never a logged error."""
    yield
    assert errors_logged(caplog) == []


@pytest.fixture
async def assistant(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> MockConfigEntry:
    """The house, the bot and the assistant (room for replies of several parts)."""
    await async_setup_house(hass)
    # The fake Ollama stops at num_predict words, as a real model would.
    return await async_setup_assistant(hass, fake_ollama, **{CONF_NUM_PREDICT: 4096})


def _warnings(caplog: pytest.LogCaptureFixture, text: str) -> int:
    return sum(
        record.levelno >= logging.WARNING and text in record.getMessage()
        for record in caplog.records
    )


def _sends(telegram: TelegramHarness) -> list[TelegramCall]:
    return [call for call in telegram.api.calls if call.method == "sendMessage"]


async def _settled(hass: HomeAssistant) -> None:
    await asyncio.sleep(0.1)
    await hass.async_block_till_done()


@pytest.mark.parametrize(
    "timedelta_env",
    # python-telegram-bot's retry_after as seconds, and as its coming default
    # (PTB_TIMEDELTA) a timedelta: the same wait.
    [None, "true"],
    ids=["seconds", "timedelta"],
)
async def test_a_429_is_sent_again_after_retry_after_once(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    monkeypatch: pytest.MonkeyPatch,
    timedelta_env: str | None,
) -> None:
    """Telegram's flood control: the reply waits retry_after, then arrives once."""
    if timedelta_env is not None:
        monkeypatch.setenv("PTB_TIMEDELTA", timedelta_env)
    telegram.api.fail_next(
        "sendMessage", "Too Many Requests: retry after 1", error_code=429, retry_after=1
    )
    fake_ollama.reply("The kitchen lights are on.")
    await telegram.send_text("Are the kitchen lights on?")
    await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    await _settled(hass)
    refused, delivered = _sends(telegram)
    assert not refused.ok
    assert refused.params["text"] == delivered.params["text"]
    assert delivered.ok
    # At least retry_after (1 s), not the shorter backoff.
    assert delivered.at - refused.at >= 1.0
    assert [m["text"] for m in telegram.sent_messages()] == [
        "The kitchen lights are on."
    ]


async def test_a_502_is_retried_with_backoff(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two Bad Gateways: retried after 0.2 s, then 0.4 s; delivered once, no warning."""
    telegram.api.fail_next("sendMessage", "Bad Gateway", error_code=502, count=2)
    fake_ollama.reply("Done.")
    await telegram.send_text("Switch on the kitchen lights")
    await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    await _settled(hass)
    first, second, third = _sends(telegram)
    assert (first.ok, second.ok, third.ok) == (False, False, True)
    assert second.at - first.at >= BACKOFF
    assert third.at - second.at >= 2 * BACKOFF
    assert len(telegram.sent_messages()) == 1
    assert _warnings(caplog, "Could not send to Telegram") == 0


async def test_a_refused_connection_is_retried_and_a_read_timeout_is_not(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Never connected: sent again. Timed out reading: it may be there, not again."""
    telegram.api.fail_next(
        "sendMessage", "", exception=httpx.ConnectError("Connection refused")
    )
    fake_ollama.reply("First answer.")
    await telegram.send_text("first")
    await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert [call.ok for call in _sends(telegram)] == [False, True]

    telegram.api.fail_next(
        "sendMessage", "", exception=httpx.ReadTimeout("The read operation timed out")
    )
    fake_ollama.reply("Second answer.")
    await telegram.send_text("second")
    await telegram.wait_for_calls("sendMessage", 3)
    await asyncio.sleep(3 * BACKOFF)
    await _settled(hass)
    # One try only; the user may have it, so it is not sent twice.
    assert [call.ok for call in _sends(telegram)] == [False, True, False]
    assert _warnings(caplog, "Could not send to Telegram") == 1


async def test_the_parts_of_a_long_reply_arrive_in_order_once(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """A part refused on the way is sent again; the parts after it wait for it."""
    # Room for the whole answer: the fake Ollama stops at num_predict words.
    hass.config_entries.async_update_entry(
        assistant, options={**assistant.options, CONF_NUM_PREDICT: 4096}
    )
    assert await hass.config_entries.async_reload(assistant.entry_id)
    await hass.async_block_till_done()
    paragraphs = [
        f"Part {n}: " + ("word " * (TELEGRAM_MESSAGE_LIMIT // 5 - 4)).strip()
        for n in range(3)
    ]
    fake_ollama.reply("\n\n".join(paragraphs))
    refused: list[str] = []

    def send(params: dict[str, Any]) -> Any:
        if str(params["text"]).startswith("Part 1") and not refused:
            # The second part's first try meets a Bad Gateway.
            refused.append(params["text"])
            raise BotApiError(502, "Bad Gateway")
        return telegram.api._send_message(params)

    telegram.api.set_handler("sendMessage", send)
    await telegram.send_text("Tell me everything")
    await telegram.wait_for_sent(3, chat_id=ALICE_ID, timeout=20)
    await _settled(hass)
    assert len(refused) == 1
    assert [m["text"] for m in telegram.sent_messages()] == paragraphs
    assert [call.params["text"][:6] for call in _sends(telegram)] == [
        "Part 0",
        "Part 1",
        "Part 1",
        "Part 2",
    ]


async def test_an_undeliverable_reply_is_logged_once_and_a_repair_follows(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Three replies in a row lost: one warning, one repair; gone once one arrives."""
    registry = ir.async_get(hass)
    telegram.api.fail_next("sendMessage", BLOCKED, error_code=403, count=2)
    telegram.api.fail_next("sendMessage", "Bad Gateway", error_code=502, count=4)
    for number, calls in enumerate((1, 2, 2 + delivery_module.SEND_ATTEMPTS)):
        fake_ollama.reply(f"Answer {number}")
        await telegram.send_text(f"Question {number}")
        await telegram.wait_for_calls("sendMessage", calls)
        await _settled(hass)
        issue = registry.async_get_issue(DOMAIN, delivery_module.ISSUE_UNDELIVERED)
        assert (issue is not None) == (number == 2)
    # Two refusals for good, tried once each; a 502 tried four times.
    assert len(_sends(telegram)) == 2 + delivery_module.SEND_ATTEMPTS
    assert telegram.sent_messages() == []
    assert _warnings(caplog, "Could not send to Telegram") == 1
    assert issue is not None
    assert issue.translation_placeholders == {
        "count": "3",
        "error": "Action failed. Bad Gateway",
    }

    fake_ollama.reply("Answer 3")
    await telegram.send_text("Question 3")
    await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    await _settled(hass)
    assert registry.async_get_issue(DOMAIN, delivery_module.ISSUE_UNDELIVERED) is None
    assert "Sending to Telegram works again" in caplog.text


async def test_a_group_reply_finished_by_an_edit_is_retried(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """In a group the reply grows in one message; its final edit is retried."""
    await telegram.add_allowed_chat(GROUP_ID)
    words = [f"word{n} " for n in range(12)]
    full = "".join(words).strip()
    refused: list[str] = []

    def edit(params: dict[str, Any]) -> Any:
        if params["text"] == full and not refused:
            refused.append(full)
            raise BotApiError(502, "Bad Gateway")
        return telegram.api._edit_message_text(params)

    telegram.api.set_handler("editMessageText", edit)
    fake_ollama.reply(
        full, text_chunks=[*words[:-1], words[-1].strip()], chunk_delay=0.3
    )
    await telegram.send_text("Talk to me", chat_id=GROUP_ID, user_id=ALICE_ID)
    await telegram.wait_for_sent(1, chat_id=GROUP_ID, timeout=20)
    for _ in range(200):
        if any(m.get("text") == full for m in telegram.bot_messages(GROUP_ID)):
            break
        await asyncio.sleep(0.05)
    await _settled(hass)
    assert refused == [full]
    assert [m["text"] for m in telegram.bot_messages(GROUP_ID)] == [full]
    assert len(telegram.sent_messages(GROUP_ID)) == 1


async def test_a_429_asking_for_more_than_a_minute_is_not_waited_for(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Flood control asking for two minutes: given up at once, said once in the log."""
    telegram.api.fail_next(
        "sendMessage",
        "Too Many Requests: retry after 120",
        error_code=429,
        retry_after=120,
    )
    fake_ollama.reply("The kitchen lights are on.")
    await telegram.send_text("Are the kitchen lights on?")
    await telegram.wait_for_calls("sendMessage", 1)
    await _settled(hass)
    await asyncio.sleep(3 * BACKOFF)
    assert [call.ok for call in _sends(telegram)] == [False]
    assert telegram.sent_messages() == []
    assert _warnings(caplog, "Could not send to Telegram") == 1


def _long_paragraphs(count: int) -> list[str]:
    """Paragraphs that each nearly fill a Telegram message."""
    return [
        f"Part {n}: " + ("word " * (TELEGRAM_MESSAGE_LIMIT // 5 - 4)).strip()
        for n in range(count)
    ]


@pytest.fixture
def quick_edits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Show a group reply's growing message after 0.05 s, then every 0.05 s."""
    monkeypatch.setattr(stream_module, "EDIT_FIRST_SECONDS", 0.05)
    monkeypatch.setattr(stream_module, "EDIT_INTERVAL_SECONDS", 0.05)


@pytest.mark.usefixtures("quick_edits")
async def test_a_long_group_reply_grows_in_one_message_and_goes_on_in_the_next(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """The growing message holds the first part; the rest arrives after it."""
    await telegram.add_allowed_chat(GROUP_ID)
    first, second = _long_paragraphs(2)
    full = f"{first}\n\n{second}"
    fake_ollama.reply(full, text_chunks=[f"{first}\n\n", second], chunk_delay=0.3)
    await telegram.send_text("Tell me everything", chat_id=GROUP_ID, user_id=ALICE_ID)
    await telegram.wait_for_sent(2, chat_id=GROUP_ID)
    await _settled(hass)
    assert [m["text"] for m in telegram.bot_messages(GROUP_ID)] == [first, second]
    assert len(telegram.sent_messages(GROUP_ID)) == 2


@pytest.mark.usefixtures("quick_edits")
async def test_a_long_reply_past_the_first_part_is_not_edited_again_and_again(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Once the growing message is full, the ticks leave it alone.

    Each edit counts against the group's rate limit; an edit that changes
    nothing is refused by Telegram ("message is not modified").
    """
    await telegram.add_allowed_chat(GROUP_ID)
    # Words that never repeat: a repeated block would be cut as a loop.
    first, second = (
        " ".join(f"p{part}w{n}" for n in range(TELEGRAM_MESSAGE_LIMIT // 8))
        for part in (1, 2)
    )
    full = f"{first}\n\n{second}"
    pieces = [second[i : i + 800] for i in range(0, len(second), 800)]
    fake_ollama.reply(full, text_chunks=[f"{first}\n\n", *pieces], chunk_delay=0.2)
    await telegram.send_text("Tell me everything", chat_id=GROUP_ID, user_id=ALICE_ID)
    await telegram.wait_for_sent(2, chat_id=GROUP_ID)
    await _settled(hass)
    assert [m["text"] for m in telegram.bot_messages(GROUP_ID)] == [first, second]
    # Every edit changed the message, and Telegram took each one.
    edits = [c["text"] for c in telegram.calls("editMessageText")]
    assert len(edits) == len(set(edits))
    assert telegram.calls("editMessageText", include_failed=False) == (
        telegram.calls("editMessageText")
    )


@pytest.mark.usefixtures("quick_edits")
async def test_a_long_group_reply_whose_first_part_cannot_be_finished_stops_there(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The bot was removed from the group while writing: no later part, one warning."""
    await telegram.add_allowed_chat(GROUP_ID)
    first, second = _long_paragraphs(2)
    opening = first[:100]
    full = f"{first}\n\n{second}"
    fake_ollama.reply(
        full, text_chunks=[opening, full[len(opening) :]], chunk_delay=0.3
    )
    await telegram.send_text("Tell me everything", chat_id=GROUP_ID, user_id=ALICE_ID)
    await telegram.wait_for_sent(1, chat_id=GROUP_ID)

    def kicked(_params: dict[str, Any]) -> Any:
        raise BotApiError(403, "Forbidden: bot was kicked from the supergroup chat")

    telegram.api.set_handler("editMessageText", kicked)
    await telegram.wait_for_calls("editMessageText", 1)
    await _settled(hass)
    await asyncio.sleep(3 * BACKOFF)
    # The group keeps the opening shown while the model wrote; the second
    # part, which would read out of order, was not even tried.
    [shown] = [m["text"] for m in telegram.bot_messages(GROUP_ID)]
    assert opening.startswith(shown[:50])
    assert first.startswith(shown)
    assert len(shown) <= len(opening)
    assert len([c for c in _sends(telegram) if c.params["chat_id"] == GROUP_ID]) == 1
    assert telegram.calls("editMessageText")[-1]["text"] == first
    assert _warnings(caplog, "Could not send to Telegram") == 1
