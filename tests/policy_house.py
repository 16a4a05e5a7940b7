"""The demo house furnished for the permission tests: rooms, groups, scenes, scripts.

Everything is built with Home Assistant's own components and registries, so the
policy resolves areas, groups and scenes exactly as it would in a real home.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from homeassistant.components.homeassistant.exposed_entities import (
    async_expose_entity,
)
from homeassistant.helpers import area_registry as ar
from homeassistant.helpers import device_registry as dr
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers import floor_registry as fr
from homeassistant.helpers import label_registry as lr
from homeassistant.setup import async_setup_component
from pytest_homeassistant_custom_component.common import MockConfigEntry

from .common import async_setup_house

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant

# Exposed on top of tests/common.py's EXPOSED.
ALSO_EXPOSED: Final = (
    "alarm_control_panel.security",
    "camera.demo_camera",
    "switch.decorative_lights",
    "media_player.kitchen",
    "fan.living_room_fan",
    "valve.front_garden",
    "climate.hvac",
    "scene.movie",
    "scene.leaving",
    "scene.night",
    "scene.welcome",
    "script.goodnight",
    "script.open_up",
    "automation.let_in",
    "group.downstairs",
    "group.entrance",
    "group.with_hidden",
    "group.nested",
    "light.downstairs_lights",
    "light.hidden_member_lights",
    "cover.all_covers",
    "lock.all_locks",
    "cover.driveway_gate",
    "valve.front_door",
)
# Set with hass.states.async_set: no integration provides a gate or a door valve.
FAKE_STATES: Final = {
    "cover.driveway_gate": ("closed", {"device_class": "gate"}),
    "valve.front_door": ("closed", {"device_class": "door"}),
}
# Who lives where: area -> entities. Hidden ones are marked in the comments.
ROOMS: Final = {
    "kitchen": ("light.kitchen_lights", "light.ceiling_lights", "cover.kitchen_window"),
    "garage": ("cover.garage_door",),
    # Only hidden lights: the office and the living room lights.
    "living_room": ("light.living_room_rgbww_lights", "light.office_rgbw_lights"),
    "bedroom": (),
}
FLOORS: Final = {"ground_floor": ("kitchen", "garage", "living_room"), "upstairs": ()}


async def _async_group_entry(
    hass: HomeAssistant, group_type: str, name: str, entities: list[str]
) -> None:
    """Add a group helper the way the UI does: a group config entry."""
    entry = MockConfigEntry(
        domain="group",
        title=name,
        options={
            "group_type": group_type,
            "name": name,
            "entities": entities,
            "hide_members": False,
            "all": False,
        },
    )
    entry.add_to_hass(hass)
    assert await hass.config_entries.async_setup(entry.entry_id)


async def async_setup_policy_house(hass: HomeAssistant) -> None:
    """Set up the demo house with rooms, floors, labels, groups, scenes and scripts."""
    await async_setup_house(hass)
    assert await async_setup_component(
        hass,
        "scene",
        {
            "scene": [
                {
                    "name": "Movie",
                    "entities": {
                        "light.bed_light": "on",
                        "light.kitchen_lights": "off",
                    },
                },
                {
                    "name": "Leaving",
                    "entities": {
                        "light.kitchen_lights": "off",
                        "lock.front_door": "locked",
                    },
                },
                # Sets a light the user did not expose.
                {"name": "Night", "entities": {"light.ceiling_lights": "off"}},
                {"name": "Welcome", "entities": {"cover.garage_door": "open"}},
            ]
        },
    )
    assert await async_setup_component(
        hass,
        "script",
        {
            "script": {
                "goodnight": {
                    "sequence": [
                        {
                            "action": "light.turn_off",
                            "target": {"entity_id": "light.kitchen_lights"},
                        }
                    ]
                },
                "open_up": {
                    "sequence": [
                        {
                            "action": "lock.unlock",
                            "target": {"entity_id": "lock.front_door"},
                        }
                    ]
                },
            }
        },
    )
    assert await async_setup_component(
        hass,
        "automation",
        {
            "automation": [
                {
                    "id": "let_in",
                    "alias": "Let in",
                    # Never fires by itself: only automation.trigger runs it.
                    "triggers": [{"trigger": "event", "event_type": "never_fired"}],
                    "actions": [
                        {
                            "action": "lock.unlock",
                            "target": {"entity_id": "lock.front_door"},
                        }
                    ],
                }
            ]
        },
    )
    # Old-style groups, created with HA's own group.set service.
    for object_id, entities in (
        (
            "downstairs",
            ["light.kitchen_lights", "light.bed_light", "switch.decorative_lights"],
        ),
        ("entrance", ["lock.front_door", "cover.garage_door", "light.kitchen_lights"]),
        ("with_hidden", ["light.kitchen_lights", "light.ceiling_lights"]),
        ("nested", ["group.downstairs", "cover.kitchen_window"]),
    ):
        await hass.services.async_call(
            "group",
            "set",
            {"object_id": object_id, "entities": entities},
            blocking=True,
        )
    # Entity groups: a light group and a cover group pass the service on, a
    # lock group is expanded by HA itself.
    await _async_group_entry(
        hass, "light", "Downstairs lights", ["light.kitchen_lights", "light.bed_light"]
    )
    await _async_group_entry(
        hass,
        "light",
        "Hidden member lights",
        ["light.kitchen_lights", "light.ceiling_lights"],
    )
    await _async_group_entry(
        hass, "cover", "All covers", ["cover.kitchen_window", "cover.garage_door"]
    )
    await _async_group_entry(hass, "lock", "All locks", ["lock.front_door"])
    for entity_id, (state, attributes) in FAKE_STATES.items():
        hass.states.async_set(entity_id, state, attributes)
    await hass.async_block_till_done()

    floors = fr.async_get(hass)
    areas = ar.async_get(hass)
    entities = er.async_get(hass)
    floor_ids = {name: floors.async_create(name).floor_id for name in FLOORS}
    for floor, rooms in FLOORS.items():
        for room in rooms:
            areas.async_create(room, floor_id=floor_ids[floor])
    areas.async_create("bedroom", floor_id=floor_ids["upstairs"])
    devices = dr.async_get(hass)
    for room, members in ROOMS.items():
        area = areas.async_get_area_by_name(room)
        assert area is not None
        for entity_id in members:
            # Demo entities take their name, and so their area, from the device.
            entry = entities.async_get(entity_id)
            assert entry is not None
            assert entry.device_id is not None
            devices.async_update_device(entry.device_id, area_id=area.id)
    # Upstairs: the bed light, reached through the floor or the area.
    bed_light = entities.async_get("light.bed_light")
    assert bed_light is not None
    assert bed_light.device_id is not None
    bedroom = areas.async_get_area_by_name("bedroom")
    assert bedroom is not None
    devices.async_update_device(bed_light.device_id, area_id=bedroom.id)
    labels = lr.async_get(hass)
    night = labels.async_create("night").label_id
    # Bed light is exposed, the entrance lights are not.
    for entity_id in ("light.bed_light", "light.entrance_color_white_lights"):
        entities.async_update_entity(entity_id, labels={night})
    labels.async_create("unused")

    for entity_id in ALSO_EXPOSED:
        assert hass.states.get(entity_id) is not None, entity_id
        async_expose_entity(hass, "conversation", entity_id, True)
