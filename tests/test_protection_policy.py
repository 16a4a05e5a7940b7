"""What can weaken the house's protection waits for a person (#13, 7).

A hostile model switches off the intruder automation, activates a scene that
unlocks the door and disables that automation, runs an allowed script that
disarms the alarm, and flips the helper the automation depends on. Each waits
for the user's Confirm, with a request written by the integration.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import pytest
from homeassistant.components.homeassistant.exposed_entities import (
    async_expose_entity,
)
from homeassistant.helpers import device_registry as dr
from homeassistant.helpers import entity_registry as er
from homeassistant.setup import async_setup_component
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.ha_personal_assistant.const import (
    CONF_ALLOWED_SCRIPTS,
    CONF_BLOCKED_SERVICES,
)
from custom_components.ha_personal_assistant.policy.judge import evaluate_call
from custom_components.ha_personal_assistant.policy.rules import (
    DEFAULT_BLOCKED_SERVICES,
    DEFAULT_CONFIRM_SERVICES,
    WEAKENED_CONFIRM,
    Policy,
    Weakening,
)
from custom_components.ha_personal_assistant.policy.verdict import Decision

from .common import async_setup_assistant, async_setup_house, tool_results
from .telegram_harness import ALICE_ID

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant

    from .fake_ollama import FakeOllama
    from .telegram_harness import TelegramHarness

INTRUDER = "automation.intruder_alarm"
AWAY = "input_boolean.away_mode"
GUEST = "input_boolean.guest_mode"
ALARM = "alarm_control_panel.security"
DOOR = "lock.front_door"
ALSO_EXPOSED = (
    INTRUDER,
    AWAY,
    GUEST,
    ALARM,
    "scene.party",
    "scene.all_clear",
    "script.welcome_home",
    "siren.siren",
    "remote.remote_one",
    "update.demo_update_no_install",
)


@pytest.fixture(autouse=True)
def fast_demo_locks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the demo locks move at once instead of after two seconds."""
    monkeypatch.setattr("homeassistant.components.demo.lock.LOCK_UNLOCK_DELAY", 0)


async def _setup_protected_house(hass: HomeAssistant) -> None:
    """The demo house with an intruder automation, its helper, scenes, a script."""
    await async_setup_house(hass)
    assert await async_setup_component(
        hass,
        "input_boolean",
        {"input_boolean": {"away_mode": {"name": "Away mode"}, "guest_mode": {}}},
    )
    assert await async_setup_component(
        hass,
        "automation",
        {
            "automation": [
                {
                    "id": "intruder_alarm",
                    "alias": "Intruder alarm",
                    "triggers": [{"trigger": "event", "event_type": "intruder"}],
                    # Only while everyone is away: the helper gates it.
                    "conditions": [
                        {"condition": "state", "entity_id": AWAY, "state": "on"}
                    ],
                    "actions": [
                        {"action": "siren.turn_on", "target": {"entity_id": "all"}}
                    ],
                }
            ]
        },
    )
    assert await async_setup_component(
        hass,
        "scene",
        {
            "scene": [
                {
                    "name": "Party",
                    "entities": {
                        "light.kitchen_lights": "on",
                        DOOR: "unlocked",
                        INTRUDER: "off",
                    },
                },
                {"name": "All clear", "entities": {ALARM: "disarmed"}},
            ]
        },
    )
    assert await async_setup_component(
        hass,
        "script",
        {
            "script": {
                "welcome_home": {
                    "sequence": [
                        {
                            "action": "alarm_control_panel.alarm_disarm",
                            "target": {"entity_id": ALARM},
                            "data": {"code": "1234"},
                        }
                    ]
                }
            }
        },
    )
    await hass.async_block_till_done()
    for entity_id in ALSO_EXPOSED:
        assert hass.states.get(entity_id) is not None, entity_id
        async_expose_entity(hass, "conversation", entity_id, True)


@pytest.fixture
async def house(hass: HomeAssistant, telegram: TelegramHarness) -> HomeAssistant:
    """The protected house, with Telegram."""
    await _setup_protected_house(hass)
    return hass


def _model_calls(fake_ollama: FakeOllama) -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    for request in fake_ollama.chat_requests:
        for message in request["messages"]:
            for call in message.get("tool_calls") or []:
                made = (call["function"]["name"], call["function"]["arguments"])
                if made not in calls:
                    calls.append(made)
    return calls


def _request_message(telegram: TelegramHarness) -> dict[str, Any]:
    return next(
        m for m in reversed(telegram.bot_messages(ALICE_ID)) if m.get("reply_markup")
    )


def _buttons(message: dict[str, Any]) -> dict[str, str]:
    rows = message["reply_markup"]["inline_keyboard"]
    return {b["text"]: b["callback_data"] for row in rows for b in row}


async def _settle(hass: HomeAssistant) -> None:
    await asyncio.sleep(0.1)
    await hass.async_block_till_done()


async def _hostile_turn(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    calls: list[tuple[str, dict[str, Any]]],
    replies: int = 2,
) -> list[str]:
    """The model makes ``calls`` whatever it is asked; return the tool results."""
    fake_ollama.tool_calls(calls).reply("All done, nothing to confirm.")
    await telegram.send_text("Good evening")
    await telegram.wait_for_sent(replies, chat_id=ALICE_ID)
    await _settle(hass)
    assert _model_calls(fake_ollama) == calls
    return tool_results(fake_ollama.chat_requests[-1])


def _service(domain: str, service: str, entity_id: str) -> tuple[str, dict[str, Any]]:
    return (
        "call_service",
        {"domain": domain, "service": service, "entity_id": entity_id},
    )


async def test_switching_off_the_intruder_automation_waits_for_confirm(
    house: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """automation.turn_off and homeassistant.turn_off both ask; Confirm runs it."""
    await async_setup_assistant(house, fake_ollama)
    results = await _hostile_turn(
        house,
        telegram,
        fake_ollama,
        [
            _service("automation", "turn_off", INTRUDER),
            _service("homeassistant", "turn_off", INTRUDER),
        ],
    )
    assert house.states.get(INTRUDER).state == "on"
    for result in results:
        answer = json.loads(result)
        assert answer["result"] == "waiting_for_confirmation"
        assert answer["reason"] == "automation.turn_off needs confirmation"
    request = _request_message(telegram)
    # Both calls resolve to the same one: one action to confirm.
    assert request["text"] == (
        "Please confirm:\nTurn off Intruder alarm (automation.intruder_alarm)"
        "\n\nThis request expires in 5 minutes."
    )
    await telegram.press_button(
        _buttons(request)["Confirm"], message_id=request["message_id"]
    )
    await telegram.wait_for_calls("answerCallbackQuery", 1)
    await _settle(house)
    assert house.states.get(INTRUDER).state == "off"


async def test_a_scene_or_script_is_judged_as_the_calls_it_makes(
    house: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """A scene that unlocks and disables the automation; a script that disarms."""
    await async_setup_assistant(
        house, fake_ollama, **{CONF_ALLOWED_SCRIPTS: ["script.welcome_home"]}
    )
    alarm = house.states.get(ALARM).state
    results = await _hostile_turn(
        house,
        telegram,
        fake_ollama,
        [
            _service("scene", "turn_on", "scene.party"),
            _service("scene", "turn_on", "scene.all_clear"),
            _service("script", "turn_on", "script.welcome_home"),
        ],
    )
    party, all_clear, welcome = (json.loads(r) for r in results)
    assert party["result"] == "waiting_for_confirmation"
    assert party["reason"].split("; ") == [
        (
            "scene.party would run lock.unlock on lock.front_door, which needs "
            "confirmation"
        ),
        (
            "scene.party would run automation.turn_off on "
            "automation.intruder_alarm, which needs confirmation"
        ),
    ]
    assert all_clear["reason"] == (
        "scene.all_clear would run alarm_control_panel.alarm_disarm on "
        "alarm_control_panel.security, which needs confirmation"
    )
    assert welcome["reason"] == (
        "script.welcome_home may change alarm_control_panel.security, which needs "
        "confirmation"
    )
    assert house.states.get(DOOR).state == "locked"
    assert house.states.get(INTRUDER).state == "on"
    assert house.states.get(ALARM).state == alarm
    # The request says what the scenes set, from their configuration.
    lines = _request_message(telegram)["text"].splitlines()
    assert lines[1:7] == [
        "• Activate Party (scene.party)",
        "  sets Kitchen Lights (light.kitchen_lights) to on",
        "  sets Front Door (lock.front_door) to unlocked",
        "  sets Intruder alarm (automation.intruder_alarm) to off",
        "• Activate All clear (scene.all_clear)",
        "  sets Security (alarm_control_panel.security) to disarmed",
    ]
    assert lines[7] == "• Turn on welcome_home (script.welcome_home)"


async def test_a_scene_that_unlocks_is_blocked_when_unlocking_is(
    house: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """Blocking lock.unlock in the options blocks the scene that unlocks too."""
    await async_setup_assistant(
        house,
        fake_ollama,
        **{CONF_BLOCKED_SERVICES: sorted(DEFAULT_BLOCKED_SERVICES | {"lock.unlock"})},
    )
    (result,) = await _hostile_turn(
        house,
        telegram,
        fake_ollama,
        [_service("scene", "turn_on", "scene.party")],
        replies=1,
    )
    assert result == (
        "Error: Refused: scene.party would run lock.unlock, which is blocked for "
        "the assistant."
    )
    await _settle(house)
    assert not any(m.get("reply_markup") for m in telegram.bot_messages(ALICE_ID))
    assert house.states.get(DOOR).state == "locked"
    assert house.states.get("light.kitchen_lights").state == "on"


async def test_the_helper_an_automation_uses_waits_for_confirm(
    house: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """Away mode gates the intruder automation: it asks; guest mode does not."""
    await async_setup_assistant(house, fake_ollama)
    away, guest = await _hostile_turn(
        house,
        telegram,
        fake_ollama,
        [
            _service("input_boolean", "turn_off", AWAY),
            _service("input_boolean", "turn_on", GUEST),
        ],
    )
    assert json.loads(away)["reason"] == (
        "input_boolean.away_mode is used by an automation, so "
        "input_boolean.turn_off needs confirmation"
    )
    assert json.loads(guest)["result"] == "done"
    assert house.states.get(GUEST).state == "on"
    request = _request_message(telegram)
    assert request["text"].startswith(
        "Please confirm:\nTurn off Away mode (input_boolean.away_mode)\n"
    )


async def test_the_rest_of_the_protection_table(house: HomeAssistant) -> None:
    """Sirens, remotes, gas valves, updates and a camera's own switches."""
    registry = dr.async_get(house)
    entry = MockConfigEntry(domain="porch_cam")
    entry.add_to_hass(house)
    device = registry.async_get_or_create(
        config_entry_id=entry.entry_id, identifiers={("porch_cam", "1")}
    )
    entities = er.async_get(house)
    for domain, key in (("camera", "cam"), ("switch", "privacy"), ("light", "flood")):
        entities.async_get_or_create(
            domain,
            "porch_cam",
            key,
            device_id=device.id,
            suggested_object_id=f"porch_{key}",
        )
    house.states.async_set("valve.gas_main", "closed", {"device_class": "gas"})
    for entity_id, state in (
        ("camera.porch_cam", "idle"),
        ("switch.porch_privacy", "on"),
        ("light.porch_flood", "off"),
        ("valve.gas_main", "closed"),
    ):
        if entity_id != "valve.gas_main":
            house.states.async_set(entity_id, state)
        async_expose_entity(house, "conversation", entity_id, True)

    def decide(call: str, **data: Any) -> Decision:
        domain, _, service = call.partition(".")
        return evaluate_call(house, domain, service, data).decision

    assert decide("siren.turn_off", entity_id="siren.siren") is Decision.CONFIRM
    assert decide("siren.turn_on", entity_id="siren.siren") is Decision.CONFIRM
    assert (
        decide("remote.send_command", entity_id="remote.remote_one", command="open")
        is Decision.CONFIRM
    )
    assert decide("remote.turn_on", entity_id="remote.remote_one") is Decision.ALLOW
    assert (
        decide("update.install", entity_id="update.demo_update_no_install")
        is Decision.BLOCK
    )
    assert decide("valve.open_valve", entity_id="valve.gas_main") is Decision.CONFIRM
    assert decide("valve.close_valve", entity_id="valve.gas_main") is Decision.ALLOW
    # A camera's privacy switch and floodlight ask, like the camera.
    privacy = evaluate_call(
        house, "switch", "turn_off", {"entity_id": "switch.porch_privacy"}
    )
    assert privacy.decision is Decision.CONFIRM
    assert privacy.reason == (
        "switch.porch_privacy belongs to a lock, alarm or camera device, so "
        "switch.turn_off needs confirmation"
    )
    assert decide("light.turn_on", entity_id="light.porch_flood") is Decision.CONFIRM
    assert decide("light.turn_on", entity_id="light.kitchen_lights") is (Decision.ALLOW)
    # An unused helper is free; a used one asks unless the entry is removed.
    assert decide("input_boolean.toggle", entity_id=GUEST) is Decision.ALLOW
    assert decide("input_boolean.toggle", entity_id=AWAY) is Decision.CONFIRM
    relaxed = Policy(confirm=DEFAULT_CONFIRM_SERVICES - {"input_boolean"})
    assert (
        evaluate_call(
            house, "input_boolean", "toggle", {"entity_id": AWAY}, relaxed
        ).decision
        is Decision.ALLOW
    )
    # The repair issue names a removed automation confirmation.
    weaker = Policy(confirm=DEFAULT_CONFIRM_SERVICES - {"automation.turn_off"})
    assert weaker.weakened() == [Weakening(WEAKENED_CONFIRM, "automation.turn_off")]
