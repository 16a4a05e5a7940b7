"""Junk the model writes never reaches Telegram or Assist, not even in a draft.

The fake Ollama streams each junk shape slowly, in pieces cut anywhere; drafts
(and, in groups, edits) are shown every few hundredths of a second meanwhile,
so any junk that slipped through the partial filter would be caught on its way
to Telegram. The model is corrected once; a second junk answer gets an apology.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import pytest
from homeassistant.components import conversation
from homeassistant.core import Context
from homeassistant.helpers import chat_session
from homeassistant.helpers import entity_registry as er

from custom_components.ha_personal_assistant.agent.prompts import (
    FEEDBACK_ECHO,
    FEEDBACK_JSON_DUMP,
    FEEDBACK_TEXT_TOOL_CALL,
)
from custom_components.ha_personal_assistant.const import DOMAIN
from custom_components.ha_personal_assistant.telegram import stream as stream_module

from .common import async_setup_assistant, async_setup_house, fixed_text
from .junk_replies import GOOD, JUNK, JUNK_IDS
from .telegram_harness import ALICE_ID, GROUP_ID

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant
    from pytest_homeassistant_custom_component.common import MockConfigEntry

    from .fake_ollama import FakeOllama
    from .junk_replies import Junk
    from .telegram_harness import TelegramHarness

ANSWER = "The kitchen lights are on."
REPLY_UNUSABLE = fixed_text("unusable")
CORRECTIONS = (FEEDBACK_TEXT_TOOL_CALL, FEEDBACK_JSON_DUMP, FEEDBACK_ECHO)
PIECES = 8
PIECE_DELAY = 0.04


@pytest.fixture(autouse=True)
def fast_drafts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Show partial text every 20 ms, so every stage of the junk could leak."""
    for name in (
        "DRAFT_FIRST_SECONDS",
        "DRAFT_INTERVAL_SECONDS",
        "EDIT_FIRST_SECONDS",
        "EDIT_INTERVAL_SECONDS",
    ):
        monkeypatch.setattr(stream_module, name, 0.02)


@pytest.fixture
async def assistant(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> MockConfigEntry:
    """The demo house, the Telegram bot and the assistant, all set up."""
    await async_setup_house(hass)
    return await async_setup_assistant(hass, fake_ollama)


def _pieces(text: str, count: int = PIECES) -> tuple[str, ...]:
    """Cut ``text`` into ``count`` pieces anywhere, mid-word and mid-tag."""
    size = -(-len(text) // count)
    return tuple(text[i : i + size] for i in range(0, len(text), size))


def _stream(fake_ollama: FakeOllama, text: str) -> None:
    fake_ollama.reply(text, text_chunks=_pieces(text), chunk_delay=PIECE_DELAY)


def _shown(telegram: TelegramHarness, chat_id: int) -> list[str]:
    """Every text Telegram received for the chat: drafts, messages and edits."""
    return [
        str(call.params["text"])
        for call in telegram.api.calls
        if call.params.get("chat_id") == chat_id and "text" in call.params
    ]


def _corrections(fake_ollama: FakeOllama) -> list[str]:
    """The corrections the model was sent, in the last request."""
    return [
        m["content"]
        for m in fake_ollama.chat_requests[-1]["messages"]
        if m["role"] == "user" and m["content"] in CORRECTIONS
    ]


@pytest.mark.parametrize("junk", JUNK, ids=JUNK_IDS)
async def test_junk_is_corrected_and_never_shown(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    junk: Junk,
) -> None:
    """Drafts show at most the words before the junk; the user gets the answer."""
    _stream(fake_ollama, junk.text)
    _stream(fake_ollama, ANSWER)
    await telegram.send_text("Are the kitchen lights on?")
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID, timeout=30)
    await hass.async_block_till_done()

    assert [m["text"] for m in sent] == [ANSWER]
    shown = _shown(telegram, ALICE_ID)
    assert telegram.calls("sendMessageDraft"), "no draft was shown"
    for text in shown:
        assert junk.lead.startswith(text) or ANSWER.startswith(text), text
    # One correction: the model read the start of its answer and what was wrong.
    assert len(fake_ollama.chat_requests) == 2
    *_, rejected, correction = fake_ollama.chat_requests[1]["messages"]
    assert rejected["role"] == "assistant"
    assert len(rejected["content"]) <= 210
    assert " ".join(junk.text.split()).startswith(rejected["content"].rstrip(" […]"))
    assert correction["role"] == "user"
    assert correction["content"] in CORRECTIONS


async def test_junk_twice_gets_an_honest_apology(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """After one correction the user hears the answer was unusable; no third call."""
    by_name = {junk.name: junk for junk in JUNK}
    _stream(fake_ollama, by_name["python_call_service"].text)
    _stream(fake_ollama, by_name["system_prompt_echo"].text)
    fake_ollama.reply("never asked for")
    await telegram.send_text("Turn on the kitchen lights")
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID, timeout=30)
    await hass.async_block_till_done()

    assert [m["text"] for m in sent] == [REPLY_UNUSABLE]
    assert len(fake_ollama.chat_requests) == 2
    assert _corrections(fake_ollama) == [FEEDBACK_TEXT_TOOL_CALL]
    for text in _shown(telegram, ALICE_ID):
        assert "Sure!".startswith(text) or text == REPLY_UNUSABLE, text
    # The next turn starts clean: the apology is the turn's answer, no junk kept.
    fake_ollama.reply(ANSWER)
    await telegram.send_text("Are they on now?")
    await telegram.wait_for_sent(2, chat_id=ALICE_ID, timeout=30)
    history = json.dumps(fake_ollama.chat_requests[-1]["messages"])
    assert "call_service(" not in history
    assert REPLY_UNUSABLE in history


async def test_a_group_never_sees_junk_in_its_edited_message(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Groups get a message that grows by edits; neither shows the junk."""
    await telegram.add_allowed_chat(GROUP_ID)
    junk = next(junk for junk in JUNK if junk.name == "python_call_service")
    _stream(fake_ollama, junk.text)
    _stream(fake_ollama, ANSWER)
    await telegram.send_text(
        "Turn on the kitchen lights", chat_id=GROUP_ID, user_id=ALICE_ID
    )
    # The model's second request: the partial message was sent by then.
    await fake_ollama.wait_for_chat_requests(2, timeout=30)
    await telegram.wait_for_sent(1, chat_id=GROUP_ID, timeout=30)
    for _ in range(600):
        [message] = telegram.bot_messages(GROUP_ID)
        if message["text"] == ANSWER:
            break
        await asyncio.sleep(0.05)
    await hass.async_block_till_done()

    assert message["text"] == ANSWER
    assert telegram.calls("sendMessageDraft") == []
    assert telegram.calls("editMessageText")
    for text in _shown(telegram, GROUP_ID):
        assert junk.lead.startswith(text) or ANSWER.startswith(text), text


@pytest.mark.parametrize(
    "answer",
    [*GOOD[:6], *(a for a in GOOD if "```" in a)],
    ids=lambda answer: answer.splitlines()[0][:40],
)
async def test_ordinary_answers_arrive_as_written(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    answer: str,
) -> None:
    """Entity ids, short JSON and code the user asked for: one call, sent as is."""
    _stream(fake_ollama, answer)
    await telegram.send_text("Show me")
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID, timeout=30)
    assert [m["text"] for m in sent] == [answer]
    assert len(fake_ollama.chat_requests) == 1
    for text in _shown(telegram, ALICE_ID):
        assert answer.startswith(text)


async def _converse(
    hass: HomeAssistant, entry: MockConfigEntry, text: str
) -> tuple[str, list[dict[str, Any]]]:
    """Ask Assist; return its speech and the chat-log deltas it streamed."""
    agent_id = er.async_get(hass).async_get_entity_id(
        "conversation", DOMAIN, entry.entry_id
    )
    deltas: list[dict[str, Any]] = []
    with (
        chat_session.async_get_chat_session(hass) as session,
        conversation.async_get_chat_log(
            hass, session, chat_log_delta_listener=lambda _log, d: deltas.append(d)
        ),
    ):
        result = await conversation.async_converse(
            hass,
            text,
            session.conversation_id,
            Context(),
            language="en",
            agent_id=agent_id,
        )
    return str(result.response.speech["plain"]["speech"]), deltas


@pytest.mark.parametrize(
    "name", ["tool_model_schema", "python_call_service", "system_prompt_run"]
)
async def test_assist_gets_the_same_cleaning(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    fake_ollama: FakeOllama,
    name: str,
) -> None:
    """Assist's chat log and speech never hold junk; the model was corrected."""
    junk = next(junk for junk in JUNK if junk.name == name)
    _stream(fake_ollama, junk.text)
    _stream(fake_ollama, ANSWER)
    speech, deltas = await _converse(hass, assistant, "Are the kitchen lights on?")

    assert speech == ANSWER
    contents = [str(d["content"]) for d in deltas if "content" in d]
    assert contents
    streamed = "".join(contents)
    assert ANSWER in streamed
    assert streamed.replace(ANSWER, "").strip() in ("", junk.lead)
    assert len(_corrections(fake_ollama)) == 1


async def test_assist_apologizes_after_junk_twice(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    fake_ollama: FakeOllama,
) -> None:
    """Assist says the answer was unusable, in speech and in the chat log."""
    junk = next(junk for junk in JUNK if junk.name == "json_name_arguments")
    _stream(fake_ollama, junk.text)
    _stream(fake_ollama, junk.text)
    speech, deltas = await _converse(hass, assistant, "Turn on the kitchen lights")
    assert speech == REPLY_UNUSABLE
    streamed = "".join(str(d["content"]) for d in deltas if "content" in d)
    assert streamed == REPLY_UNUSABLE
    assert len(fake_ollama.chat_requests) == 2


# A small model's loop, as a 135M model wrote it through llama-server's /v1
# (bench/real_model): an answer, then the same two sentences until the cap.
LOOP_ANSWER = "The front door is locked."
LOOP_BLOCK = "\n\nThank you again for your visit. I hope you enjoy your visit."


async def test_an_answer_that_loops_is_stopped_and_cut_at_the_loop(
    hass: HomeAssistant, telegram: TelegramHarness, fake_server: FakeOllama
) -> None:
    """The user gets the answer once; the model is stopped, not left to the cap.

    On both backends: an OpenAI-compatible server applies no repeat penalty
    unless asked, so its small models loop more often than Ollama's.
    """
    fake_ollama = fake_server
    await async_setup_house(hass)
    await async_setup_assistant(hass, fake_ollama)
    text = LOOP_ANSWER + LOOP_BLOCK * 40
    pieces = tuple(text[i : i + 12] for i in range(0, len(text), 12))
    # 217 pieces, 20 ms apart: over 4 s if the model were left to finish.
    fake_ollama.reply(text, text_chunks=pieces, chunk_delay=0.02)
    await telegram.send_text("Is the front door locked?")
    (sent,) = await telegram.wait_for_sent(1)
    assert sent["text"] == LOOP_ANSWER + LOOP_BLOCK
    # The request was closed after a few repeats of the block (the fake
    # notices at its next line, 20 ms later).
    async with asyncio.timeout(2):
        await fake_ollama.stream_closed.wait()
    assert len(fake_ollama.closed_early) == 1
    assert fake_ollama.closed_early[0] < len(pieces) // 2
    # No draft or edit ever showed more than the loop's first lines repeating.
    for shown in _shown(telegram, ALICE_ID):
        assert shown.count("Thank you again") <= 10
    # The history keeps the cut answer, so the next request says it once.
    fake_ollama.reply("Yes.")
    await telegram.send_text("Thanks")
    await telegram.wait_for_sent(2)
    history = json.dumps(fake_ollama.chat_requests[-1]["messages"])
    assert history.count("Thank you again") == 1


async def test_a_line_the_user_asked_to_repeat_is_not_a_loop(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Short deliberate repetition and tables of equal values arrive whole."""
    lines = "I will remember to water the plants.\n" * 5
    rooms = ("Kitchen", "Hall", "Porch", "Office", "Bedroom", "Bathroom", "Garage")
    table = "".join(
        f"{room} {kind} | on | 100 %\n" for kind in ("light", "lamp") for room in rooms
    )
    for text in (lines.rstrip(), table.rstrip()):
        before = len(telegram.sent_messages(ALICE_ID))
        fake_ollama.reply(text, text_chunks=_pieces(text, 20), chunk_delay=0.01)
        await telegram.send_text("Go on")
        sent = await telegram.wait_for_sent(before + 1, chat_id=ALICE_ID)
        assert sent[-1]["text"] == text
    assert fake_ollama.closed_early == []
