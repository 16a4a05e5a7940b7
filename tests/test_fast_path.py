"""Commands Home Assistant understands are answered without the model, under the policy."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from homeassistant.components import conversation
from homeassistant.core import Context
from homeassistant.helpers import entity_registry as er

from custom_components.ha_personal_assistant.const import (
    CONF_FAST_PATH,
    DOMAIN,
    EVENT_ACTION_EXECUTED,
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


@pytest.fixture
def executed(hass: HomeAssistant) -> list[Event[Any]]:
    """The assistant's action_executed events."""
    events: list[Event[Any]] = []
    hass.bus.async_listen(EVENT_ACTION_EXECUTED, events.append)
    return events


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
