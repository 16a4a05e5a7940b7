"""Commands HA understands are answered without the model, under the same policy."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pytest
from homeassistant.components import conversation
from homeassistant.core import Context
from homeassistant.helpers import entity_registry as er

from custom_components.ha_personal_assistant.const import (
    CONF_FAST_PATH,
    DOMAIN,
)

from .common import (
    async_setup_assistant,
    async_setup_house,
    fixed_text,
    last_user_content,
    wait_until,
)
from .telegram_harness import ALICE_ID

if TYPE_CHECKING:
    from homeassistant.core import Event, HomeAssistant
    from pytest_homeassistant_custom_component.common import MockConfigEntry

    from .fake_ollama import FakeOllama
    from .telegram_harness import TelegramHarness


@pytest.fixture
async def assistant(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> MockConfigEntry:
    """The demo house and the assistant with the fast path on (its default)."""
    await async_setup_house(hass)
    return await async_setup_assistant(hass, fake_ollama, **{CONF_FAST_PATH: True})


def _buttons(message: dict[str, Any]) -> list[tuple[str, str]]:
    rows = message["reply_markup"]["inline_keyboard"]
    return [(b["text"], b["callback_data"]) for row in rows for b in row]


async def test_turn_on_the_kitchen_lights_needs_no_model_call(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    executed: list[Event[Any]],
) -> None:
    """HA's recognizer switches the light, answers in its words; the model is idle."""
    await hass.services.async_call(
        "light", "turn_off", {"entity_id": "light.kitchen_lights"}, blocking=True
    )
    requests = len(fake_ollama.chat_requests)
    await telegram.send_text("turn on the kitchen lights")
    sent = await telegram.wait_for_sent(1)
    assert hass.states.get("light.kitchen_lights").state == "on"
    assert sent[0]["text"] == "Turned on the light"
    assert len(fake_ollama.chat_requests) == requests
    # Counted like the model's actions: the event, as Alice's HA user.
    assert [(e.data["domain"], e.data["service"]) for e in executed] == [
        ("light", "turn_on")
    ]
    assert executed[0].data["entity_ids"] == ["light.kitchen_lights"]


async def test_is_the_front_door_locked_needs_no_model_call(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """A question HA understands is answered from the exposed lock's state."""
    requests = len(fake_ollama.chat_requests)
    await telegram.send_text("is the front door locked?")
    sent = await telegram.wait_for_sent(1)
    assert sent[0]["text"] == "Yes"
    assert len(fake_ollama.chat_requests) == requests


async def test_unlock_the_front_door_asks_for_confirm_and_runs_once(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    executed: list[Event[Any]],
) -> None:
    """The fast path holds the unlock for Confirm; one press unlocks it once."""
    requests = len(fake_ollama.chat_requests)
    await telegram.send_text("unlock the front door")
    sent = await telegram.wait_for_sent(2)
    assert sent[0]["text"] == fixed_text("fast_path_confirm")
    assert "Unlock Front Door (lock.front_door)" in sent[1]["text"]
    assert hass.states.get("lock.front_door").state == "locked"
    (_, confirm), _cancel = _buttons(sent[1])
    await telegram.press_button(confirm)
    await telegram.press_button(confirm)
    await wait_until(lambda: hass.states.get("lock.front_door").state == "unlocked")
    await hass.async_block_till_done()
    assert [(e.data["domain"], e.data["service"]) for e in executed] == [
        ("lock", "unlock")
    ]
    assert len(fake_ollama.chat_requests) == requests


async def test_a_german_user_is_answered_in_german(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Telegram's language_code picks HA's German sentences and answers."""
    er.async_get(hass).async_update_entity(
        "light.kitchen_lights", aliases={"Küchenlicht"}
    )
    await hass.services.async_call(
        "light", "turn_off", {"entity_id": "light.kitchen_lights"}, blocking=True
    )
    telegram.languages[ALICE_ID] = "de"
    requests = len(fake_ollama.chat_requests)
    await telegram.send_text("Schalte das Küchenlicht ein")
    sent = await telegram.wait_for_sent(1)
    assert sent[0]["text"] == "Licht eingeschaltet"
    assert hass.states.get("light.kitchen_lights").state == "on"
    assert len(fake_ollama.chat_requests) == requests


async def test_a_forwarded_command_goes_to_the_model_under_the_taint_rule(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Someone else's words never take the fast path; their call waits for Confirm."""
    fake_ollama.tool_call(
        "call_service",
        {"domain": "light", "service": "turn_off", "entity_id": "light.kitchen_lights"},
    ).reply("I need your confirmation.")
    update = telegram.text_update(ALICE_ID, ALICE_ID, "turn off the lights")
    update["message"]["forward_origin"] = {
        "type": "hidden_user",
        "sender_user_name": "Someone",
        "date": int(time.time()),
    }
    requests = len(fake_ollama.chat_requests)
    await telegram.post_update(update)
    sent = await telegram.wait_for_sent(2)
    assert len(fake_ollama.chat_requests) > requests
    assert hass.states.get("light.kitchen_lights").state == "on"
    assert fixed_text("source_forwarded") in sent[1]["text"]
    assert _buttons(sent[1])


async def test_a_follow_up_sees_the_fast_turn_in_its_history(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """The fast turn is part of the conversation the model reads next."""
    await telegram.send_text("turn on the kitchen lights")
    await telegram.wait_for_sent(1)
    fake_ollama.reply("The bed light too, then.")
    await telegram.send_text("and what about the bedroom?")
    await telegram.wait_for_sent(2)
    messages = fake_ollama.chat_requests[-1]["messages"]
    said = [(m["role"], m["content"]) for m in messages]
    assert ("user", "turn on the kitchen lights") in said
    assert ("assistant", "Turned on the light") in said
    assert last_user_content(fake_ollama.chat_requests[-1]).startswith(
        "and what about the bedroom?"
    )


async def test_with_the_option_off_the_model_answers_everything(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """fast_path off: even a sentence HA knows goes to the model, as before."""
    await async_setup_house(hass)
    await async_setup_assistant(hass, fake_ollama, **{CONF_FAST_PATH: False})
    fake_ollama.reply("It is locked.")
    requests = len(fake_ollama.chat_requests)
    await telegram.send_text("is the front door locked?")
    sent = await telegram.wait_for_sent(1)
    assert sent[0]["text"] == "It is locked."
    assert len(fake_ollama.chat_requests) == requests + 1


async def test_assist_answers_a_known_command_without_the_model(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    fake_ollama: FakeOllama,
    hass_admin_user: Any,
    executed: list[Event[Any]],
) -> None:
    """conversation.process to our agent: HA's recognizer, our policy, no model."""
    await hass.services.async_call(
        "light", "turn_off", {"entity_id": "light.kitchen_lights"}, blocking=True
    )
    agent_id = er.async_get(hass).async_get_entity_id(
        "conversation", DOMAIN, assistant.entry_id
    )
    requests = len(fake_ollama.chat_requests)
    result = await conversation.async_converse(
        hass,
        "turn on the kitchen lights",
        None,
        Context(user_id=hass_admin_user.id),
        language="en",
        agent_id=agent_id,
    )
    assert result.response.speech["plain"]["speech"] == "Turned on the light"
    assert hass.states.get("light.kitchen_lights").state == "on"
    assert executed[0].data["ha_user_id"] == hass_admin_user.id
    assert len(fake_ollama.chat_requests) == requests
