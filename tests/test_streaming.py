"""The answer appears in Telegram while the model is still writing it."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from .common import async_setup_assistant, async_setup_house
from .telegram_harness import ALICE_ID, GROUP_ID

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant
    from pytest_homeassistant_custom_component.common import MockConfigEntry

    from .fake_ollama import FakeOllama
    from .telegram_harness import TelegramHarness

# Six pieces, 0.7 s apart: about 3.5 s of writing, long enough for drafts
# (first after ~1 s, then once a second) and group edits (first after ~2 s,
# then every 3 s) even on a loaded machine.
SLOW_REPLY = (
    "The kitchen lights are on, ",
    "the front door is locked, ",
    "the garage door is closed ",
    "and the living room is ",
    "warm at twenty-one degrees. ",
    "Anything else?",
)
FULL_REPLY = "".join(SLOW_REPLY)


@pytest.fixture
def fake_ollama(fake_server: FakeOllama) -> FakeOllama:
    """Run every test here over Ollama's API and over OpenAI's (both fakes)."""
    return fake_server


@pytest.fixture
async def assistant(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> MockConfigEntry:
    """The demo house, the Telegram bot and the assistant, all set up."""
    await async_setup_house(hass)
    return await async_setup_assistant(hass, fake_ollama)


def _methods(telegram: TelegramHarness, chat_id: int) -> list[str]:
    """Return the Bot API methods called for a chat, in order."""
    return [
        call.method
        for call in telegram.api.calls
        if call.params.get("chat_id") == chat_id and call.method != "sendChatAction"
    ]


async def _final_text(telegram: TelegramHarness, chat_id: int, expected: str) -> str:
    """Wait (up to 30 s) until the chat's one bot message reads ``expected``."""
    text = ""
    for _ in range(600):
        [message] = telegram.bot_messages(chat_id)
        text = str(message["text"])
        if text == expected:
            break
        await asyncio.sleep(0.05)
    return text


async def test_a_private_chat_sees_drafts_then_one_final_message(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Partial text arrives as drafts of one draft id; the reply is sent once."""
    fake_ollama.reply(FULL_REPLY, text_chunks=SLOW_REPLY, chunk_delay=0.7)
    await telegram.send_text("How is the house?")
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID, timeout=30)
    await hass.async_block_till_done()

    assert [m["text"] for m in telegram.sent_messages(ALICE_ID)] == [FULL_REPLY]
    drafts = telegram.calls("sendMessageDraft")
    assert drafts, "no draft was shown while the model wrote"
    assert {d["draft_id"] for d in drafts} == {drafts[0]["draft_id"]}
    assert all(d["chat_id"] == ALICE_ID for d in drafts)
    for draft in drafts:
        assert FULL_REPLY.startswith(draft["text"]), draft["text"]
        # Never the whole text before the model finished: it was partial.
    assert drafts[0]["text"] != FULL_REPLY
    # No draft after the final message, and nothing was edited.
    methods = _methods(telegram, ALICE_ID)
    assert methods[-1] == "sendMessage"
    assert methods.count("sendMessage") == 1
    assert "editMessageText" not in methods
    assert sent[0]["link_preview_options"] == {"is_disabled": True}


async def test_a_group_chat_gets_one_message_that_is_edited(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Groups have no drafts: a message grows by edits and ends as the reply."""
    await telegram.add_allowed_chat(GROUP_ID)
    fake_ollama.reply(FULL_REPLY, text_chunks=SLOW_REPLY, chunk_delay=0.9)
    await telegram.send_text("How is the house?", chat_id=GROUP_ID, user_id=ALICE_ID)
    await telegram.wait_for_sent(1, chat_id=GROUP_ID, timeout=30)
    await telegram.wait_for_calls("editMessageText", 1, timeout=30)

    assert await _final_text(telegram, GROUP_ID, FULL_REPLY) == FULL_REPLY
    assert telegram.calls("sendMessageDraft") == []
    sent = telegram.sent_messages(GROUP_ID)
    assert len(sent) == 1
    assert sent[0]["text"] != FULL_REPLY
    assert FULL_REPLY.startswith(sent[0]["text"])
    edits = telegram.calls("editMessageText")
    assert edits[-1]["text"] == FULL_REPLY
    assert all(e["message_id"] == edits[0]["message_id"] for e in edits)


async def test_a_link_not_from_the_turn_never_appears_in_a_draft(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Drafts pass the same link filter (and fence removal) as the final reply."""
    pieces = (
        "Sure, log in at ",
        "https://evil-login.example.com/reset ",
        "<data-1a2b3c4d5e6f>to keep ",
        "your account safe. ",
        "The docs at https://www.home-assistant.io/docs ",
        "say the same.",
    )
    text = "".join(pieces)
    fake_ollama.reply(text, text_chunks=pieces, chunk_delay=0.7)
    await telegram.send_text(
        "What does https://www.home-assistant.io/docs say about passwords?"
    )
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID, timeout=30)
    await hass.async_block_till_done()

    drafts = [d["text"] for d in telegram.calls("sendMessageDraft")]
    assert drafts
    for shown in [*drafts, sent[0]["text"]]:
        assert "evil-login" not in shown
        assert "data-1a2b" not in shown
    assert "[link removed]" in sent[0]["text"]
    # The user's own link stays.
    assert "https://www.home-assistant.io/docs" in sent[0]["text"]


async def test_a_tool_call_still_works_while_streaming(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """A streamed answer with a tool call runs the tool, then streams the answer."""
    await hass.services.async_call(
        "light", "turn_off", {"entity_id": "light.kitchen_lights"}, blocking=True
    )
    fake_ollama.tool_call(
        "call_service",
        {"domain": "light", "service": "turn_on", "entity_id": "light.kitchen_lights"},
    ).reply(FULL_REPLY, text_chunks=SLOW_REPLY, chunk_delay=0.7)
    await telegram.send_text("Turn on the kitchen lights")
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID, timeout=30)
    assert hass.states.get("light.kitchen_lights").state == "on"
    assert [m["text"] for m in sent] == [FULL_REPLY]
    drafts = telegram.calls("sendMessageDraft")
    assert drafts
    assert all(FULL_REPLY.startswith(d["text"]) for d in drafts)
    # The typing indicator was shown while the tool ran.
    assert telegram.calls("sendChatAction")


async def test_refused_drafts_fall_back_to_editing_a_message(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """When Telegram refuses a draft, the reply grows in one edited message."""
    telegram.api.fail_next("sendMessageDraft", "Bad Request: method not available")
    fake_ollama.reply(FULL_REPLY, text_chunks=SLOW_REPLY, chunk_delay=0.7)
    await telegram.send_text("How is the house?")
    await telegram.wait_for_sent(1, chat_id=ALICE_ID, timeout=30)
    await telegram.wait_for_calls("editMessageText", 1, timeout=30)
    assert await _final_text(telegram, ALICE_ID, FULL_REPLY) == FULL_REPLY
    assert len(telegram.calls("sendMessageDraft")) == 1
    assert len(telegram.sent_messages(ALICE_ID)) == 1


async def test_a_group_message_that_cannot_be_sent_leaves_the_final_reply(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """If the growing message fails, streaming stops and the reply is sent once."""
    await telegram.add_allowed_chat(GROUP_ID)
    telegram.api.fail_next("sendMessage", "Too Many Requests", error_code=429)
    fake_ollama.reply(FULL_REPLY, text_chunks=SLOW_REPLY, chunk_delay=0.9)
    await telegram.send_text("How is the house?", chat_id=GROUP_ID, user_id=ALICE_ID)
    sent = await telegram.wait_for_sent(1, chat_id=GROUP_ID, timeout=30)
    await hass.async_block_till_done()
    assert [m["text"] for m in sent] == [FULL_REPLY]
    assert telegram.calls("editMessageText") == []
    # The failed attempt was the partial text, not the reply.
    [failed] = [
        call.params
        for call in telegram.api.calls
        if call.method == "sendMessage" and not call.ok
    ]
    assert FULL_REPLY.startswith(failed["text"])
    assert failed["text"] != FULL_REPLY


async def test_typing_is_shown_again_while_a_long_turn_runs(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Telegram clears "typing…" after 5 s; a long turn refreshes it."""
    fake_ollama.tool_call(
        "get_state", {"entity_id": "light.kitchen_lights"}, delay=2.5
    ).reply("The kitchen lights are on.", delay=2.5)
    await telegram.send_text("Are the kitchen lights on?")
    await telegram.wait_for_sent(1, chat_id=ALICE_ID, timeout=30)
    actions = telegram.calls("sendChatAction")
    assert len(actions) >= 2
    assert {a["action"] for a in actions} == {"typing"}
