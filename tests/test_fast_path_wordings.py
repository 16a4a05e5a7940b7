"""The fast path beyond HA's templates: its gazetteer's sure readings, and captions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from custom_components.ha_personal_assistant.const import (
    CONF_FAST_PATH,
    CONF_VISION_MODEL,
)

from .common import async_setup_assistant, async_setup_house, fixed_text
from .telegram_harness import ALICE_ID, media_update

if TYPE_CHECKING:
    from homeassistant.core import Event, HomeAssistant
    from pytest_homeassistant_custom_component.common import MockConfigEntry

    from .fake_ollama import FakeOllama
    from .telegram_harness import TelegramHarness

JPEG = b"\xff\xd8\xff\xe0fake jpeg of a kitchen\xff\xd9"
VISION = "llava-tools:7b"


@pytest.fixture
async def assistant(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> MockConfigEntry:
    """The demo house, both lights off, the assistant with the fast path on."""
    await async_setup_house(hass)
    for light in ("light.kitchen_lights", "light.bed_light"):
        await hass.services.async_call(
            "light", "turn_off", {"entity_id": light}, blocking=True
        )
    fake_ollama.add_model(VISION, ["completion", "vision", "tools"])
    return await async_setup_assistant(
        hass, fake_ollama, **{CONF_FAST_PATH: True, CONF_VISION_MODEL: VISION}
    )


def _on(hass: HomeAssistant, entity_id: str) -> bool:
    state = hass.states.get(entity_id)
    return state is not None and state.state == "on"


async def test_two_lights_in_one_sentence_need_no_model_call(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    executed: list[Event[Any]],
) -> None:
    """A wording HA's templates lack, read exactly by its gazetteer: both run."""
    requests = len(fake_ollama.chat_requests)
    await telegram.send_text("turn on the kitchen lights and the bed light")
    sent = await telegram.wait_for_sent(1)
    assert _on(hass, "light.kitchen_lights")
    assert _on(hass, "light.bed_light")
    assert sent[0]["text"] == "Turned on the light."
    assert len(fake_ollama.chat_requests) == requests
    assert sorted(e.data["entity_ids"][0] for e in executed) == [
        "light.bed_light",
        "light.kitchen_lights",
    ]


async def test_a_misspelt_command_goes_to_the_model(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """A near-miss name is not as sure as a strict match: the model decides."""
    fake_ollama.reply("Which light do you mean?")
    requests = len(fake_ollama.chat_requests)
    await telegram.send_text("turn on the kitchn lights")
    sent = await telegram.wait_for_sent(1)
    assert sent[0]["text"] == "Which light do you mean?"
    assert len(fake_ollama.chat_requests) == requests + 1
    assert not _on(hass, "light.kitchen_lights")


async def test_a_misspelt_question_is_answered_without_the_model(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """A question only reads an exposed state: HA's gazetteer reading answers it."""
    requests = len(fake_ollama.chat_requests)
    await telegram.send_text("is the frnt door locked?")
    sent = await telegram.wait_for_sent(1)
    assert sent[0]["text"] == "Yes"
    assert len(fake_ollama.chat_requests) == requests


async def test_a_light_and_an_unlock_in_one_sentence_wait_together(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    executed: list[Event[Any]],
) -> None:
    """One Confirm for the whole command; nothing of it runs before the press."""
    requests = len(fake_ollama.chat_requests)
    await telegram.send_text(
        "turn on the kitchen lights and then unlock the front door"
    )
    sent = await telegram.wait_for_sent(2)
    assert sent[0]["text"] == fixed_text("fast_path_confirm")
    assert "lock.front_door" in sent[1]["text"]
    assert "light.kitchen_lights" in sent[1]["text"]
    await hass.async_block_till_done()
    assert not _on(hass, "light.kitchen_lights")
    assert hass.states.get("lock.front_door").state == "locked"
    assert executed == []
    assert len(fake_ollama.chat_requests) == requests


async def test_a_photo_captioned_with_a_command_takes_the_fast_path(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """The caption is the sender's words: the light is on, no model request."""
    requests = len(fake_ollama.chat_requests)
    update = media_update(telegram, "photo", JPEG, caption="turn on the kitchen lights")
    await telegram.post_update(update)
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[-1]["text"] == "Turned on the light"
    assert _on(hass, "light.kitchen_lights")
    assert len(fake_ollama.chat_requests) == requests


async def test_a_photo_captioned_with_a_question_about_it_reaches_the_model(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """A caption HA does not know is about the photo: the vision model sees it."""
    fake_ollama.reply("A kitchen.")
    update = media_update(telegram, "photo", JPEG, caption="what room is this?")
    await telegram.post_update(update)
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[-1]["text"] == "A kitchen."
    assert fake_ollama.chat_requests[-1]["model"] == VISION
