"""The fixed prompt prefix is sent to the model server before the first message."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from homeassistant.components.homeassistant.exposed_entities import (
    async_expose_entity,
)

from custom_components.ha_personal_assistant.const import CONF_WARM_CACHE

from .common import async_setup_assistant, async_setup_house, wait_until
from .telegram_harness import ALICE_ID

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant
    from pytest_homeassistant_custom_component.common import MockConfigEntry

    from .fake_ollama import FakeOllama
    from .telegram_harness import TelegramHarness

# The warm-up waits for this much quiet (the default is a minute).
QUIET = 0.05


@pytest.fixture
def fake_ollama(fake_server: FakeOllama) -> FakeOllama:
    """Run every test here over Ollama's API and over OpenAI's (both fakes)."""
    return fake_server


def _quick(entry: MockConfigEntry) -> None:
    """Shorten the quiet period and the debounce, as a test can wait for them."""
    entry.runtime_data.assistant.model_queue.quiet_seconds = QUIET
    assert entry.runtime_data.warmer is not None
    entry.runtime_data.warmer.debounce = QUIET


def _prefix(request: dict[str, Any]) -> tuple[str, str, str]:
    """Return what makes the cached prefix: model, system message, tools."""
    return (
        str(request["model"]),
        json.dumps(request["messages"][0]),
        json.dumps(request.get("tools")),
    )


def _context_size(request: dict[str, Any]) -> object:
    """Return the context window the request asks for (Ollama's num_ctx)."""
    return (request.get("options") or {}).get("num_ctx")


async def test_the_first_message_finds_the_prefix_warmed(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """After setup the prefix goes out once with a cap of one token, same bytes."""
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama)
    _quick(entry)
    await wait_until(lambda: len(fake_ollama.warmup_requests) == 1)
    [warmup] = fake_ollama.warmup_requests
    assert fake_ollama.chat_requests == []

    fake_ollama.reply("The kitchen lights are on.")
    await telegram.send_text("Are the kitchen lights on?")
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[0]["text"] == "The kitchen lights are on."
    [turn] = fake_ollama.chat_requests
    assert _prefix(warmup) == _prefix(turn)
    assert _context_size(warmup) == _context_size(turn)
    # The catalogue of exposed entities is part of that prefix.
    assert "light.kitchen_lights" in warmup["messages"][0]["content"]


async def test_a_catalogue_change_warms_the_new_prefix(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """Exposing another entity sends the new system prompt before anyone asks."""
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama)
    _quick(entry)
    await wait_until(lambda: len(fake_ollama.warmup_requests) == 1)

    async_expose_entity(hass, "conversation", "light.ceiling_lights", True)
    await wait_until(lambda: len(fake_ollama.warmup_requests) == 2)
    assert (
        "light.ceiling_lights"
        in fake_ollama.warmup_requests[1]["messages"][0]["content"]
    )
    assert (
        "light.ceiling_lights"
        not in (fake_ollama.warmup_requests[0]["messages"][0]["content"])
    )
    fake_ollama.reply("Yes.")
    await telegram.send_text("Are the decorative lights on?")
    await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert _prefix(fake_ollama.warmup_requests[1]) == _prefix(
        fake_ollama.chat_requests[0]
    )


async def test_no_warmup_when_switched_off(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """With the option off nothing is sent before the first message."""
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama, **{CONF_WARM_CACHE: False})
    assert entry.runtime_data.warmer is None
    entry.runtime_data.assistant.model_queue.quiet_seconds = QUIET
    fake_ollama.reply("Hello.")
    await telegram.send_text("Hi")
    await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert fake_ollama.warmup_requests == []
    assert len(fake_ollama.chat_requests) == 1


async def test_a_summary_on_the_one_slot_is_followed_by_a_warmup(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """After /new the summary runs when quiet, and the prefix goes out after it."""
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama)
    _quick(entry)
    await wait_until(lambda: len(fake_ollama.warmup_requests) == 1)
    # Three turns: a session that short is worth a summary.
    for number, text in enumerate(("Hi.", "Lights?", "Thanks."), 1):
        fake_ollama.reply("OK.")
        await telegram.send_text(text)
        await telegram.wait_for_sent(number, chat_id=ALICE_ID)
    await telegram.send_command("/new")

    def summaries() -> list[dict[str, Any]]:
        return [
            r
            for r in fake_ollama.chat_requests
            if r["messages"][-1]["content"].startswith("[Summary request")
        ]

    await wait_until(lambda: len(summaries()) == 1)
    await wait_until(lambda: len(fake_ollama.warmup_requests) == 2)
    [summary] = summaries()
    assert _prefix(fake_ollama.warmup_requests[1]) == _prefix(summary)


async def test_no_warmup_while_a_turn_is_in_flight(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """A catalogue change during a slow answer warms only after the reply."""
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama)
    _quick(entry)
    await wait_until(lambda: len(fake_ollama.warmup_requests) == 1)
    fake_ollama.delay(1.0).reply("The kitchen lights are on.")
    await telegram.send_text("Are the kitchen lights on?")
    await wait_until(lambda: len(fake_ollama.chat_requests) == 1)
    async_expose_entity(hass, "conversation", "light.ceiling_lights", True)
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[0]["text"] == "The kitchen lights are on."
    # Nothing went out while the answer was being written.
    assert len(fake_ollama.warmup_requests) == 1
    await wait_until(lambda: len(fake_ollama.warmup_requests) == 2)
    assert (
        "light.ceiling_lights"
        in (fake_ollama.warmup_requests[1]["messages"][0]["content"])
    )
