"""The permission policy judges what a call would really change."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from homeassistant.components.homeassistant.exposed_entities import (
    async_expose_entity,
)

from custom_components.ha_personal_assistant.security.permissions import (
    Decision,
    evaluate,
)

from .common import async_setup_house

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant


@pytest.fixture
async def house(hass: HomeAssistant) -> HomeAssistant:
    """The demo house with a scene, a light group and a gate, exposed."""
    await async_setup_house(hass)
    hass.states.async_set(
        "scene.leaving",
        "2026-01-01T00:00:00",
        {"entity_id": ["light.kitchen_lights", "lock.front_door"]},
    )
    hass.states.async_set(
        "scene.movie", "2026-01-01T00:00:00", {"entity_id": ["light.bed_light"]}
    )
    hass.states.async_set(
        "light.downstairs",
        "on",
        {"entity_id": ["light.kitchen_lights", "light.ceiling_lights"]},
    )
    hass.states.async_set("cover.driveway_gate", "closed", {"device_class": "gate"})
    hass.states.async_set("valve.front_door", "closed", {"device_class": "door"})
    for entity_id in (
        "scene.leaving",
        "scene.movie",
        "light.downstairs",
        "cover.driveway_gate",
        "valve.front_door",
    ):
        async_expose_entity(hass, "conversation", entity_id, True)
    return hass


@pytest.mark.parametrize(
    ("domain", "service", "entity_ids", "decision"),
    [
        ("light", "turn_on", ["light.kitchen_lights"], Decision.ALLOW),
        ("light", "turn_on", ["light.ceiling_lights"], Decision.BLOCK),
        ("light", "turn_on", ["light.does_not_exist"], Decision.BLOCK),
        ("lock", "lock", ["lock.front_door"], Decision.ALLOW),
        ("lock", "unlock", ["lock.front_door"], Decision.CONFIRM),
        ("lock", "open", ["lock.front_door"], Decision.CONFIRM),
        ("cover", "open_cover", ["cover.garage_door"], Decision.CONFIRM),
        ("cover", "close_cover", ["cover.garage_door"], Decision.ALLOW),
        ("cover", "set_cover_position", ["cover.driveway_gate"], Decision.CONFIRM),
        ("cover", "open_cover", ["cover.kitchen_window"], Decision.ALLOW),
        ("valve", "open_valve", ["valve.front_door"], Decision.CONFIRM),
        ("valve", "close_valve", ["valve.front_door"], Decision.ALLOW),
        ("alarm_control_panel", "alarm_disarm", ["lock.front_door"], Decision.CONFIRM),
        ("homeassistant", "turn_on", ["light.kitchen_lights"], Decision.BLOCK),
        ("script", "turn_on", ["light.kitchen_lights"], Decision.BLOCK),
        ("shell_command", "run", ["light.kitchen_lights"], Decision.BLOCK),
        ("automation", "reload", ["light.kitchen_lights"], Decision.BLOCK),
        ("scene", "turn_on", ["scene.movie"], Decision.ALLOW),
        ("scene", "turn_on", ["scene.leaving"], Decision.CONFIRM),
        ("light", "turn_off", ["light.downstairs"], Decision.BLOCK),
    ],
)
async def test_policy_decisions(
    house: HomeAssistant,
    domain: str,
    service: str,
    entity_ids: list[str],
    decision: Decision,
) -> None:
    """Each call gets the decision DESIGN §3 gives it."""
    assert evaluate(house, domain, service, entity_ids).decision is decision


async def test_a_scene_is_judged_by_the_entities_it_sets(house: HomeAssistant) -> None:
    """Activating a scene that unlocks a door names the door."""
    verdict = evaluate(house, "scene", "turn_on", ["scene.leaving"])
    assert "lock.front_door" in verdict.reason
    assert verdict.targets == (
        "scene.leaving",
        "light.kitchen_lights",
        "lock.front_door",
    )


async def test_a_group_with_a_hidden_member_is_refused(house: HomeAssistant) -> None:
    """A light group cannot be used to reach a light the user did not expose."""
    verdict = evaluate(house, "light", "turn_off", ["light.downstairs"])
    assert verdict.reason == "light.ceiling_lights is not exposed to the assistant"
