"""Hidden entities cannot be probed for, nor named (#13, 6).

A hostile model asks about entities the user did not expose, directly, by
area, through a scene or a group, through homeassistant.turn_on and in the
service data. Every answer is byte for byte the one an entity that does not
exist gets, and the hidden entity's id and name never reach the model or
Telegram.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import pytest
from homeassistant.components.homeassistant.exposed_entities import (
    async_expose_entity,
)
from homeassistant.helpers import entity_registry as er

from .common import async_set_named, async_setup_assistant, tool_results
from .policy_house import async_setup_policy_house
from .telegram_harness import ALICE_ID

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant
    from pytest_homeassistant_custom_component.common import MockConfigEntry

    from .fake_ollama import FakeOllama
    from .telegram_harness import TelegramHarness

HIDDEN = "light.ceiling_lights"
# The kitchen's hidden light, and the living room's (only hidden lights).
HIDDEN_WORDS = (
    "ceiling",
    "living_room_rgbww",
    "office_rgbw",
    "Living Room RGBWW",
    "Office RGBW",
)
MISSING = "light.no_such_lights"


def _call(domain: str, service: str, **data: Any) -> tuple[str, dict[str, Any]]:
    return ("call_service", {"domain": domain, "service": service, "data": data})


# Pairs of probes: a hidden entity, then one that does not exist.
PROBES: list[tuple[str, dict[str, Any]]] = [
    _call("light", "turn_on", entity_id=HIDDEN),
    _call("light", "turn_on", entity_id=MISSING),
    # A scene that sets the hidden light, and a scene that does not exist.
    _call("scene", "turn_on", entity_id="scene.night"),
    _call("scene", "turn_on", entity_id="scene.no_such_scene"),
    # Old-style group and light group with the hidden light, and none.
    _call("light", "turn_off", entity_id="group.with_hidden"),
    _call("light", "turn_off", entity_id="group.no_such_group"),
    _call("light", "turn_off", entity_id="light.hidden_member_lights"),
    _call("light", "turn_off", entity_id="light.no_such_group"),
    # homeassistant.turn_on, split per domain.
    _call("homeassistant", "turn_on", entity_id=HIDDEN),
    _call("homeassistant", "turn_on", entity_id=MISSING),
    # Named in the service data.
    _call(
        "media_player",
        "join",
        entity_id="media_player.kitchen",
        group_members=[HIDDEN],
    ),
    _call(
        "media_player",
        "join",
        entity_id="media_player.kitchen",
        group_members=[MISSING],
    ),
    ("get_state", {"entity_id": HIDDEN}),
    ("get_state", {"entity_id": MISSING}),
    ("get_state", {"entity_id": "scene.night"}),
    ("get_state", {"entity_id": "scene.no_such_scene"}),
]
BY_AREA = [
    _call("light", "turn_on", area_id="living_room"),
    _call("light", "turn_on", area_id="kitchen"),
]


@pytest.fixture
async def assistant(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> MockConfigEntry:
    """The furnished house: hidden lights in the kitchen and the living room."""
    await async_setup_policy_house(hass)
    # An exposed entity whose attributes name the hidden light.
    async_set_named(
        hass,
        "sensor.probe",
        "1",
        {
            "friendly_name": "Probe",
            "source": HIDDEN,
            "group_members": ["light.kitchen_lights", HIDDEN],
        },
    )
    async_expose_entity(hass, "conversation", "sensor.probe", True)
    await hass.services.async_call(
        "light", "turn_on", {"entity_id": "light.kitchen_lights"}, blocking=True
    )
    return await async_setup_assistant(hass, fake_ollama)


def _model_calls(fake_ollama: FakeOllama) -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    for request in fake_ollama.chat_requests:
        for message in request["messages"]:
            for call in message.get("tool_calls") or []:
                made = (call["function"]["name"], call["function"]["arguments"])
                if made not in calls:
                    calls.append(made)
    return calls


def _seen_by_model(fake_ollama: FakeOllama) -> str:
    """Everything the model was sent, except the tool calls it wrote itself."""
    return json.dumps(
        [
            {key: value for key, value in message.items() if key != "tool_calls"}
            for request in fake_ollama.chat_requests
            for message in request["messages"]
        ]
        + [request.get("tools") for request in fake_ollama.chat_requests],
        ensure_ascii=False,
    )


async def _turn(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    calls: list[tuple[str, dict[str, Any]]],
) -> list[str]:
    """Run one turn in which the model makes ``calls``; return their results."""
    before = len(telegram.sent_messages(ALICE_ID))
    fake_ollama.tool_calls(calls).reply("I could not find those.")
    await telegram.send_text("Switch on the lights please")
    await telegram.wait_for_sent(before + 1, chat_id=ALICE_ID)
    await asyncio.sleep(0.1)
    await hass.async_block_till_done()
    return tool_results(fake_ollama.chat_requests[-1])[-len(calls) :]


async def test_hidden_and_missing_entities_get_the_same_answer(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Byte-identical answers, and the hidden light named nowhere."""
    before = hass.states.get(HIDDEN).state
    listing = [
        ("list_entities", {"domain": "light"}),
        ("list_entities", {"domain": "scene"}),
        ("get_state", {"entity_id": "sensor.probe"}),
    ]
    results = await _turn(hass, telegram, fake_ollama, PROBES + BY_AREA + listing)
    # The probes were really made, as written.
    assert _model_calls(fake_ollama) == PROBES + BY_AREA + listing
    for hidden, missing in zip(results[0:16:2], results[1:16:2], strict=True):
        assert hidden == missing
        assert hidden.startswith("Error: ")
    assert "not an entity you can see" in results[0]
    area_with_hidden, kitchen_with_hidden = results[16:18]
    assert "there is no exposed light entity in area_id living_room" in (
        area_with_hidden
    )
    assert json.loads(kitchen_with_hidden)["result"] == "done"
    lights, scenes, probe = (json.loads(r) for r in results[18:])
    assert "scene.night" not in [e.split(" | ")[0] for e in scenes["entities"]]
    assert probe["attributes"] == {"group_members": "['light.kitchen_lights']"}
    assert lights["entities"]
    assert hass.states.get(HIDDEN).state == before

    # The same calls by area once the hidden lights no longer exist.
    registry = er.async_get(hass)
    for entity_id in (
        HIDDEN,
        "light.living_room_rgbww_lights",
        "light.office_rgbw_lights",
    ):
        registry.async_remove(entity_id)
    await hass.async_block_till_done()
    assert hass.states.get(HIDDEN) is None
    assert await _turn(hass, telegram, fake_ollama, BY_AREA) == [
        area_with_hidden,
        kitchen_with_hidden,
    ]

    seen = _seen_by_model(fake_ollama)
    told = json.dumps([call.params for call in telegram.api.calls], ensure_ascii=False)
    for word in HIDDEN_WORDS:
        assert word.casefold() not in seen.casefold(), word
        assert word.casefold() not in told.casefold(), word
