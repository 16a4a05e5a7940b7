"""The scripted household conversation, and the houses it is held in.

Each step is one thing Alice does in her private Telegram chat: say
something, send a command, or press a button. ``force`` lists the tool calls
the model is made to write (one list per model request, see shim.py); the
rest of every turn is the model's own. ``about`` names the entities whose
live state the turn needs, ``facts`` any other live fact (a remembered
preference): with the tool results, they make the turn's floor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant

type Call = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Step:
    """One thing the user does."""

    kind: str  # "say", "command" or "press"
    text: str
    force: tuple[tuple[Call, ...], ...] = ()
    about: tuple[str, ...] = ()
    facts: tuple[str, ...] = ()
    # The answer the model is made to write with --replies scripted.
    reply: str = ""
    note: str = ""


def _service(domain: str, service: str, entity_id: str) -> Call:
    return (
        "call_service",
        {"domain": domain, "service": service, "entity_id": entity_id},
    )


BEDROOM_FACT: Final = "Alice likes the bedroom at 19 degrees"

SCRIPT: Final[tuple[Step, ...]] = (
    Step(
        "say",
        "Hi! Are the kitchen lights on?",
        about=("light.kitchen_lights",),
        reply="Yes, the kitchen lights are on.",
    ),
    Step(
        "say",
        "Please turn them off.",
        force=((_service("light", "turn_off", "light.kitchen_lights"),),),
        about=("light.kitchen_lights",),
        reply="Done, the kitchen lights are off.",
    ),
    Step(
        "say",
        "Is the front door locked?",
        about=("lock.front_door",),
        reply="Yes, the front door is locked.",
    ),
    Step(
        "say",
        "Unlock the front door, my sister is coming over.",
        force=((_service("lock", "unlock", "lock.front_door"),),),
        about=("lock.front_door",),
        reply="Unlocking the front door needs your confirmation: please press Confirm.",
        note="needs confirmation",
    ),
    Step("press", "Confirm"),
    Step(
        "say",
        "How warm is it outside?",
        force=((("get_state", {"entity_id": "sensor.outside_temperature"}),),),
        about=("sensor.outside_temperature",),
        reply="It is 15.6 °C outside.",
    ),
    Step(
        "say",
        "Remember that I like the bedroom at 19 degrees.",
        force=((("remember", {"fact": BEDROOM_FACT}),),),
        reply="Got it: you like the bedroom at 19 degrees.",
    ),
    Step(
        "say",
        "Close the hall window and the living room window.",
        force=(
            (
                _service("cover", "close_cover", "cover.hall_window"),
                _service("cover", "close_cover", "cover.living_room_window"),
            ),
        ),
        about=("cover.hall_window", "cover.living_room_window"),
        reply="Both windows are closing.",
        note="two calls in one round",
    ),
    Step(
        "say",
        "Which lights are still on?",
        force=((("list_entities", {"domain": "light"}),),),
        reply="The ceiling, entrance, living room and office lights are still on.",
    ),
    Step("command", "/new"),
    Step(
        "say",
        "What temperature do I like in the bedroom?",
        facts=(BEDROOM_FACT,),
        reply="You like the bedroom at 19 degrees.",
    ),
    Step(
        "say",
        "Turn on the bed light.",
        force=((_service("light", "turn_on", "light.bed_light"),),),
        about=("light.bed_light",),
        reply="The bed light is on.",
    ),
    Step("say", "Thanks, that's all for now.", reply="You're welcome, Alice!"),
)

# The demo house: what the assistant can see of HA's demo integration.
DEMO_EXPOSED_DOMAINS: Final = ("light", "lock", "cover", "climate", "fan", "switch")
DEMO_EXPOSED_ENTITIES: Final = (
    "sensor.outside_temperature",
    "sensor.outside_humidity",
    "sensor.power_consumption",
    "binary_sensor.movement_backyard",
)

# The large house: generated on top of the demo house, in rooms whose names
# do not overlap the demo's, so the script's questions stay unambiguous.
BIG_ROOMS: Final = (
    "Attic", "Basement", "Guest Room", "Laundry", "Study", "Workshop",
    "Nursery", "Pantry", "Porch", "Cellar",
)  # fmt: skip
BIG_DOMAINS: Final = (
    "light",
    "switch",
    "sensor",
    "binary_sensor",
    "cover",
    "climate",
    "fan",
)
BIG_AREAS: Final = 40
BIG_FLOORS: Final = 3


async def async_setup_house(hass: HomeAssistant, extra_entities: int) -> int:
    """Set up the demo house and ``extra_entities`` more; return the exposed count."""
    from homeassistant.components.homeassistant.exposed_entities import (  # noqa: PLC0415
        async_expose_entity,
    )
    from homeassistant.setup import async_setup_component  # noqa: PLC0415

    assert await async_setup_component(hass, "homeassistant", {})
    assert await async_setup_component(hass, "demo", {})
    await hass.async_block_till_done()
    exposed = 0
    for entity_id in hass.states.async_entity_ids():
        show = (
            entity_id.split(".")[0] in DEMO_EXPOSED_DOMAINS
            or entity_id in DEMO_EXPOSED_ENTITIES
        )
        async_expose_entity(hass, "conversation", entity_id, should_expose=show)
        exposed += show
    if extra_entities:
        exposed += await _async_big_house(hass, extra_entities)
    await hass.async_block_till_done()
    return exposed


def _big_state(domain: str, index: int) -> tuple[str, dict[str, Any]]:
    if domain == "sensor":
        if index % 2:
            return f"{18 + index % 7}.{index % 10}", {
                "unit_of_measurement": "°C", "device_class": "temperature",
            }  # fmt: skip
        return str(35 + index % 30), {
            "unit_of_measurement": "%",
            "device_class": "humidity",
        }
    if domain == "cover":
        return ("open" if index % 3 else "closed"), {}
    if domain == "climate":
        return ("heat" if index % 2 else "off"), {"temperature": 19 + index % 4}
    return ("on" if index % 3 == 0 else "off"), {}


async def _async_big_house(hass: HomeAssistant, count: int) -> int:
    from homeassistant.components.homeassistant.exposed_entities import (  # noqa: PLC0415
        async_expose_entity,
    )
    from homeassistant.helpers import area_registry as ar  # noqa: PLC0415
    from homeassistant.helpers import entity_registry as er  # noqa: PLC0415
    from homeassistant.helpers import floor_registry as fr  # noqa: PLC0415

    floors = fr.async_get(hass)
    areas = ar.async_get(hass)
    registry = er.async_get(hass)
    floor_ids = [floors.async_create(f"Level {i}").floor_id for i in range(BIG_FLOORS)]
    area_ids = [
        areas.async_create(
            f"{BIG_ROOMS[i % len(BIG_ROOMS)]} {i // len(BIG_ROOMS) + 1}",
            floor_id=floor_ids[i % BIG_FLOORS],
        ).id
        for i in range(BIG_AREAS)
    ]
    words = {"binary_sensor": "motion", "sensor": "sensor"}
    for index in range(count):
        domain = BIG_DOMAINS[index % len(BIG_DOMAINS)]
        area = index % BIG_AREAS
        room = f"{BIG_ROOMS[area % len(BIG_ROOMS)]} {area // len(BIG_ROOMS) + 1}"
        entry = registry.async_get_or_create(
            domain, "real_model_bench", f"e{index}", suggested_object_id=f"big_{index}"
        )
        registry.async_update_entity(entry.entity_id, area_id=area_ids[area])
        state, attributes = _big_state(domain, index)
        name = f"{room} {words.get(domain, domain.replace('_', ' '))} {index}"
        hass.states.async_set(
            entry.entity_id, state, {"friendly_name": name, **attributes}
        )
        async_expose_entity(hass, "conversation", entry.entity_id, should_expose=True)
    return count


def state_line(hass: HomeAssistant, entity_id: str) -> str:
    """Return one entity's live state as a short line: the floor's unit of fact."""
    state = hass.states.get(entity_id)
    if state is None:
        return f"{entity_id}: unknown"
    unit = state.attributes.get("unit_of_measurement")
    return f"{state.name} ({entity_id}): {state.state}{f' {unit}' if unit else ''}"
