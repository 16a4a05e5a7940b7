"""Slow models are not cut off; hung ones are; every answer is bounded.

The answer time limit (``request_timeout``) measures silence, not length. A
model that Ollama is still loading (not yet in /api/ps), or one that streams
slowly, is never cut off; one that says nothing for the limit is. The user
sees typing, or a draft, all the while.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import TYPE_CHECKING

import pytest

from custom_components.ha_personal_assistant.const import (
    BACKGROUND_NUM_PREDICT,
    CONF_NUM_PREDICT,
    CONF_REQUEST_TIMEOUT,
)

from .common import async_setup_assistant, async_setup_house, fixed_text
from .fake_ollama import text_reply
from .telegram_harness import ALICE_ID

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant

    from .fake_ollama import FakeOllama
    from .telegram_harness import TelegramHarness

SILENCE = 1.0
REPLY_CUT_AT_LIMIT = fixed_text("cut_at_limit")
REPLY_TIMEOUT = fixed_text("model_timeout")


@pytest.fixture
def fake_ollama(fake_server: FakeOllama) -> FakeOllama:
    """Run every test here over Ollama's API and over OpenAI's (both fakes)."""
    return fake_server


async def _setup(hass: HomeAssistant, fake_ollama: FakeOllama) -> None:
    await async_setup_house(hass)
    await async_setup_assistant(hass, fake_ollama, **{CONF_REQUEST_TIMEOUT: SILENCE})


async def test_a_model_that_is_still_loading_is_not_cut_off(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """2.5 s of loading (three silence limits): the answer still comes."""
    await _setup(hass, fake_ollama)
    fake_ollama.enqueue(dataclasses.replace(text_reply("Loaded and ready."), load=2.5))
    started = time.monotonic()
    await telegram.send_text("Hello")
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID, timeout=15)
    assert sent[-1]["text"] == "Loaded and ready."
    assert time.monotonic() - started >= 2.5
    # The integration asked the server whether it was loading while it
    # waited: Ollama's /api/ps, or llama-server's /health.
    assert any(r.path in {"/api/ps", "/health"} for r in fake_ollama.requests)
    # The user saw "typing…" while waiting.
    assert telegram.calls("sendChatAction")


async def test_a_slow_writer_is_not_cut_off_and_shows_drafts(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """3.6 s of writing in 0.6 s steps, under a 1 s silence limit."""
    await _setup(hass, fake_ollama)
    words = "One two three four five six seven eight nine ten eleven twelve."
    fake_ollama.enqueue(text_reply(words, text_chunks=6, chunk_delay=0.6))
    started = time.monotonic()
    await telegram.send_text("Count for me")
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID, timeout=15)
    assert sent[-1]["text"] == words
    assert time.monotonic() - started >= 3.0
    # A draft showed the answer while it was written (a private chat).
    assert telegram.calls("sendMessageDraft")


async def test_a_model_that_stops_talking_is_cut_off_after_the_silence(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """Loaded, a few words, then nothing: cut off after the silence limit."""
    await _setup(hass, fake_ollama)
    fake_ollama.enqueue(
        dataclasses.replace(
            text_reply("I will now think very hard about", text_chunks=4),
            stall_after=2,
        )
    )
    started = time.monotonic()
    await telegram.send_text("Think hard")
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID, timeout=15)
    elapsed = time.monotonic() - started
    assert sent[-1]["text"] == REPLY_TIMEOUT
    assert SILENCE <= elapsed < SILENCE + 3


async def test_a_loaded_model_that_never_answers_is_cut_off(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """Listed in /api/ps, no first word: the silence limit applies."""
    await _setup(hass, fake_ollama)
    fake_ollama.reply("warm up")
    await telegram.send_text("Hi")
    await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    fake_ollama.hang()
    started = time.monotonic()
    await telegram.send_text("Are you there?")
    sent = await telegram.wait_for_sent(2, chat_id=ALICE_ID, timeout=15)
    assert sent[-1]["text"] == REPLY_TIMEOUT
    assert time.monotonic() - started < SILENCE + 3


async def test_no_model_call_exceeds_its_output_cap(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """Every request carries num_predict; a reply cut there says so."""
    await async_setup_house(hass)
    entry = await async_setup_assistant(
        hass, fake_ollama, **{CONF_REQUEST_TIMEOUT: 10, CONF_NUM_PREDICT: 64}
    )
    entry.runtime_data.assistant.model_queue.quiet_seconds = 0.05
    # A model that would ramble on: 300 words, for every request (turns,
    # summaries, learning).
    fake_ollama.default = lambda _request: " ".join(["blah"] * 300)
    await telegram.send_text("Tell me a long story")
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    await telegram.send_command("/new")
    await telegram.wait_for_sent(2, chat_id=ALICE_ID)
    # The learner runs when quiet (a session this short needs no summary).
    for _ in range(200):
        if len(fake_ollama.chat_requests) >= 2:
            break
        await asyncio.sleep(0.05)
    requests = fake_ollama.chat_requests
    assert len(requests) >= 2
    assert requests[1]["messages"][-1]["content"].startswith("[Learning request")
    # Ollama's num_predict, or OpenAI's max_tokens.
    caps = [r.get("max_tokens") or r["options"]["num_predict"] for r in requests]
    assert caps[0] == 64
    assert all(0 < cap <= BACKGROUND_NUM_PREDICT for cap in caps[1:])
    assert fake_ollama.capped == len(requests)
    # The user got the first 64 words and a note that it was cut.
    assert sent[0]["text"].startswith("blah blah")
    assert sent[0]["text"].count("blah") == 64
    assert REPLY_CUT_AT_LIMIT in sent[0]["text"]
