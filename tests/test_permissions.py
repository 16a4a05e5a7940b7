"""The permission policy judges what a call would really change."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import voluptuous as vol
from homeassistant.components.homeassistant.exposed_entities import (
    async_expose_entity,
)
from homeassistant.helpers import config_validation as cv
from homeassistant.helpers import device_registry as dr
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers import issue_registry as ir

from custom_components.ha_personal_assistant.const import DOMAIN
from custom_components.ha_personal_assistant.policy.judge import evaluate_call
from custom_components.ha_personal_assistant.policy.rules import (
    DEFAULT_BLOCKED_SERVICES,
    DEFAULT_CONFIRM_SERVICES,
    DEFAULT_POLICY,
    Policy,
    parse_entries,
)
from custom_components.ha_personal_assistant.policy.verdict import (
    Decision,
    ResolvedCall,
    Verdict,
)
from custom_components.ha_personal_assistant.policy.visibility import NOT_VISIBLE
from custom_components.ha_personal_assistant.repairs import (
    async_delete_policy_issue,
    async_update_policy_issue,
)

from .common import async_setup_assistant, texts
from .policy_house import async_setup_policy_house

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant, ServiceCall

    from .fake_ollama import FakeOllama

ALLOW_GOODNIGHT = Policy(allowed_scripts=frozenset({"script.goodnight"}))


@pytest.fixture
async def house(hass: HomeAssistant) -> HomeAssistant:
    """The demo house with rooms, groups, scenes, scripts and a gate, some exposed."""
    await async_setup_policy_house(hass)
    return hass


def decide(
    hass: HomeAssistant,
    call: str,
    policy: Policy | None = None,
    **data: Any,
) -> Verdict:
    """Judge "domain.service" with the given service data."""
    domain, _, service = call.partition(".")
    return evaluate_call(hass, domain, service, data, policy=policy)


def device_of(hass: HomeAssistant, entity_id: str) -> str:
    """Return the id of an entity's device."""
    entry = er.async_get(hass).async_get(entity_id)
    assert entry is not None
    assert entry.device_id is not None
    return entry.device_id


# The decision table of DESIGN §3: (call, service data, decision).
DECISIONS: list[tuple[str, dict[str, Any], Decision]] = [
    # Exposed entities are allowed, others refused.
    ("light.turn_on", {"entity_id": "light.kitchen_lights"}, Decision.ALLOW),
    ("light.turn_on", {"entity_id": "light.ceiling_lights"}, Decision.BLOCK),
    ("light.turn_on", {"entity_id": "light.does_not_exist"}, Decision.BLOCK),
    ("switch.turn_off", {"entity_id": "switch.decorative_lights"}, Decision.ALLOW),
    ("switch.turn_off", {"entity_id": "switch.ac"}, Decision.BLOCK),
    # Locks.
    ("lock.lock", {"entity_id": "lock.front_door"}, Decision.ALLOW),
    ("lock.unlock", {"entity_id": "lock.front_door"}, Decision.CONFIRM),
    ("lock.open", {"entity_id": "lock.front_door"}, Decision.CONFIRM),
    # Opening entrances asks; closing them and opening windows does not.
    ("cover.open_cover", {"entity_id": "cover.garage_door"}, Decision.CONFIRM),
    ("cover.toggle", {"entity_id": "cover.garage_door"}, Decision.CONFIRM),
    ("cover.close_cover", {"entity_id": "cover.garage_door"}, Decision.ALLOW),
    ("cover.open_cover_tilt", {"entity_id": "cover.garage_door"}, Decision.ALLOW),
    (
        "cover.set_cover_position",
        {"entity_id": "cover.driveway_gate", "position": 50},
        Decision.CONFIRM,
    ),
    (
        "cover.set_cover_position",
        {"entity_id": "cover.garage_door", "position": 0},
        Decision.ALLOW,
    ),
    ("cover.open_cover", {"entity_id": "cover.kitchen_window"}, Decision.ALLOW),
    ("valve.open_valve", {"entity_id": "valve.front_door"}, Decision.CONFIRM),
    ("valve.toggle", {"entity_id": "valve.front_door"}, Decision.CONFIRM),
    ("valve.close_valve", {"entity_id": "valve.front_door"}, Decision.ALLOW),
    ("valve.open_valve", {"entity_id": "valve.front_garden"}, Decision.ALLOW),
    (
        "valve.set_valve_position",
        {"entity_id": "valve.front_door", "position": 0},
        Decision.ALLOW,
    ),
    # The alarm, arming and disarming alike.
    (
        "alarm_control_panel.alarm_disarm",
        {"entity_id": "alarm_control_panel.security"},
        Decision.CONFIRM,
    ),
    (
        "alarm_control_panel.alarm_arm_away",
        {"entity_id": "alarm_control_panel.security"},
        Decision.CONFIRM,
    ),
    (
        "alarm_control_panel.alarm_trigger",
        {"entity_id": "alarm_control_panel.security"},
        Decision.CONFIRM,
    ),
    # Camera privacy.
    ("camera.turn_off", {"entity_id": "camera.demo_camera"}, Decision.CONFIRM),
    (
        "camera.disable_motion_detection",
        {"entity_id": "camera.demo_camera"},
        Decision.CONFIRM,
    ),
    (
        "camera.play_stream",
        {"entity_id": "camera.demo_camera", "media_player": "media_player.kitchen"},
        Decision.CONFIRM,
    ),
    (
        "camera.snapshot",
        {"entity_id": "camera.demo_camera", "filename": "/tmp/x.jpg"},  # noqa: S108
        Decision.BLOCK,
    ),
    # Automations: running, switching off or on asks (a disabled automation
    # can be a disabled protection), reloading never.
    ("automation.trigger", {"entity_id": "automation.let_in"}, Decision.CONFIRM),
    ("automation.turn_off", {"entity_id": "automation.let_in"}, Decision.CONFIRM),
    ("automation.turn_on", {"entity_id": "automation.let_in"}, Decision.CONFIRM),
    ("automation.toggle", {"entity_id": "automation.let_in"}, Decision.CONFIRM),
    (
        "homeassistant.turn_off",
        {"entity_id": "automation.let_in"},
        Decision.CONFIRM,
    ),
    ("automation.reload", {}, Decision.BLOCK),
    # homeassistant: turn_on/off/toggle are judged per domain, the rest blocked.
    (
        "homeassistant.turn_on",
        {"entity_id": "light.kitchen_lights"},
        Decision.ALLOW,
    ),
    ("homeassistant.toggle", {"entity_id": "cover.garage_door"}, Decision.CONFIRM),
    (
        "homeassistant.turn_off",
        {"entity_id": "light.ceiling_lights"},
        Decision.BLOCK,
    ),
    ("homeassistant.restart", {}, Decision.BLOCK),
    (
        "homeassistant.update_entity",
        {"entity_id": "light.kitchen_lights"},
        Decision.BLOCK,
    ),
    ("homeassistant.reload_all", {}, Decision.BLOCK),
    # Scripts only when allowed in the options.
    ("script.turn_on", {"entity_id": "script.goodnight"}, Decision.BLOCK),
    ("script.goodnight", {}, Decision.BLOCK),
    ("script.turn_on", {"entity_id": "light.kitchen_lights"}, Decision.BLOCK),
    ("script.reload", {}, Decision.BLOCK),
    # Blocked domains and services, installed or not.
    ("shell_command.run", {"entity_id": "light.kitchen_lights"}, Decision.BLOCK),
    ("python_script.exec", {}, Decision.BLOCK),
    ("notify.send_message", {"entity_id": "notify.notifier"}, Decision.BLOCK),
    ("notify.persistent_notification", {"message": "hi"}, Decision.BLOCK),
    ("group.set", {"object_id": "x", "entities": []}, Decision.BLOCK),
    ("group.reload", {}, Decision.BLOCK),
    ("scene.apply", {"entities": {"light.kitchen_lights": "on"}}, Decision.BLOCK),
    ("scene.create", {"scene_id": "x"}, Decision.BLOCK),
    ("scene.delete", {"entity_id": "scene.movie"}, Decision.BLOCK),
    ("scene.reload", {}, Decision.BLOCK),
    ("zone.reload", {}, Decision.BLOCK),
    # Services that do not act on entities reach past them.
    (
        "conversation.process",
        {"text": "unlock the front door", "entity_id": "light.kitchen_lights"},
        Decision.BLOCK,
    ),
    # Scenes are judged by what they set.
    ("scene.turn_on", {"entity_id": "scene.movie"}, Decision.ALLOW),
    ("scene.turn_on", {"entity_id": "scene.leaving"}, Decision.CONFIRM),
    ("scene.turn_on", {"entity_id": "scene.welcome"}, Decision.CONFIRM),
    ("scene.turn_on", {"entity_id": "scene.night"}, Decision.BLOCK),
    # Entity groups are judged by their members.
    ("light.turn_off", {"entity_id": "light.downstairs_lights"}, Decision.ALLOW),
    ("light.turn_off", {"entity_id": "light.hidden_member_lights"}, Decision.BLOCK),
    ("cover.open_cover", {"entity_id": "cover.all_covers"}, Decision.CONFIRM),
    ("cover.close_cover", {"entity_id": "cover.all_covers"}, Decision.ALLOW),
    ("lock.unlock", {"entity_id": "lock.all_locks"}, Decision.CONFIRM),
    # Services that do not exist.
    ("light.explode", {"entity_id": "light.kitchen_lights"}, Decision.BLOCK),
    ("warp.engage", {"entity_id": "light.kitchen_lights"}, Decision.BLOCK),
]


async def test_default_policy_decisions(house: HomeAssistant) -> None:
    """Each call gets the decision DESIGN §3 gives it."""
    wrong = []
    for call, data, decision in DECISIONS:
        verdict = decide(house, call, **data)
        # Only what is allowed or confirmable carries calls to run.
        if verdict.decision is not decision or bool(verdict.calls) is (
            decision is Decision.BLOCK
        ):
            wrong.append((call, data, verdict.decision, verdict.reason))
    assert wrong == []


async def test_no_policy_means_the_default_policy(house: HomeAssistant) -> None:
    """evaluate_call without a policy is the same as with DEFAULT_POLICY."""
    for call, data in (
        ("lock.unlock", {"entity_id": "lock.front_door"}),
        ("script.turn_on", {"entity_id": "script.goodnight"}),
        ("light.turn_on", {"area_id": "kitchen"}),
    ):
        domain, _, service = call.partition(".")
        assert evaluate_call(house, domain, service, data) == evaluate_call(
            house, domain, service, data, policy=DEFAULT_POLICY
        )


# Reasons the model can act on.


@pytest.mark.parametrize(
    ("call", "data", "reason"),
    [
        # Hidden and missing entities get one answer that names neither.
        ("light.turn_on", {"entity_id": "light.ceiling_lights"}, NOT_VISIBLE),
        (
            "light.turn_on",
            {"entity_id": ["light.kitchen_lights", "light.ceiling_lights"]},
            NOT_VISIBLE,
        ),
        ("light.turn_on", {"entity_id": "light.does_not_exist"}, NOT_VISIBLE),
        ("light.turn_on", {"entity_id": "not an entity"}, NOT_VISIBLE),
        (
            "light.explode",
            {"entity_id": "light.kitchen_lights"},
            "the service light.explode does not exist",
        ),
        (
            "light.turn_on",
            {"entity_id": "lock.front_door"},
            "lock.front_door is not a light entity",
        ),
        (
            "homeassistant.turn_on",
            {"entity_id": "lock.front_door"},
            "none of the targets supports turn_on",
        ),
        (
            "cover.close_cover",
            {"entity_id": "group.downstairs"},
            "none of the targets is a cover entity",
        ),
        (
            "light!.turn_on",
            {"entity_id": "light.kitchen_lights"},
            "the service light!.turn_on does not exist",
        ),
        (
            "media_player.join",
            {
                "entity_id": "media_player.kitchen",
                "group_members": ["group.with_hidden"],
            },
            NOT_VISIBLE,
        ),
        (
            "shell_command.run",
            {"entity_id": "light.kitchen_lights"},
            "shell_command.run is blocked for the assistant",
        ),
        (
            "light.turn_off",
            {"entity_id": "light.hidden_member_lights"},
            NOT_VISIBLE,
        ),
        (
            "conversation.process",
            {"text": "hi", "entity_id": "light.kitchen_lights"},
            (
                "conversation.process does not act on entities, "
                "so the assistant may not call it"
            ),
        ),
    ],
)
async def test_refusals_say_why(
    house: HomeAssistant, call: str, data: dict[str, Any], reason: str
) -> None:
    """A refusal names the entity or service at fault."""
    verdict = decide(house, call, **data)
    assert verdict.decision is Decision.BLOCK
    assert verdict.reason == reason
    assert verdict.calls == ()


@pytest.mark.parametrize(
    "data",
    [
        {"entity_id": "all"},
        {"entity_id": "ALL"},
        {"entity_id": ["light.kitchen_lights", "all"]},
        {"entity_id": "light.kitchen_lights, all"},
        {"entity_id": "none"},
        {"area_id": "all"},
    ],
)
async def test_all_and_none_are_not_targets(
    house: HomeAssistant, data: dict[str, Any]
) -> None:
    """'all' would reach every entity, hidden ones included."""
    verdict = decide(house, "light.turn_off", **data)
    assert verdict.decision is Decision.BLOCK
    assert "not allowed" in verdict.reason


@pytest.mark.parametrize(
    "data",
    [{}, {"entity_id": ""}, {"entity_id": []}, {"entity_id": " , "}, {"area_id": []}],
)
async def test_a_call_without_target_is_refused(
    house: HomeAssistant, data: dict[str, Any]
) -> None:
    """The model must name what to change."""
    verdict = decide(house, "light.turn_on", brightness_pct=40, **data)
    assert verdict.decision is Decision.BLOCK
    assert "name the target" in verdict.reason


@pytest.mark.parametrize(
    "data",
    [
        {"entity_id": 5},
        {"entity_id": ["light.kitchen_lights", 5]},
        {"entity_id": {"light.kitchen_lights": True}},
        {"area_id": {"kitchen": 1}},
        {"device_id": [None]},
    ],
)
async def test_malformed_targets_are_refused(
    house: HomeAssistant, data: dict[str, Any]
) -> None:
    """Targets of the wrong type are refused, never half-read."""
    verdict = decide(house, "light.turn_on", **data)
    assert verdict.decision is Decision.BLOCK
    assert "must be an id or a list of ids" in verdict.reason


async def test_names_are_read_like_the_tool_does(house: HomeAssistant) -> None:
    """Domain, service and entity ids are trimmed and lower-cased."""
    verdict = evaluate_call(
        house, " Light ", "TURN_ON ", {"entity_id": " Light.Kitchen_Lights , "}
    )
    assert verdict.decision is Decision.ALLOW
    assert verdict.calls == (
        ResolvedCall("light", "turn_on", ("light.kitchen_lights",), {}),
    )


# Resolution: what really runs is explicit entity ids of exposed entities.


async def test_an_area_switches_only_its_exposed_lights(house: HomeAssistant) -> None:
    """The kitchen's hidden ceiling light and its window are left alone."""
    verdict = decide(house, "light.turn_on", area_id="kitchen", brightness_pct=50)
    assert verdict.decision is Decision.ALLOW
    assert verdict.calls == (
        ResolvedCall(
            "light", "turn_on", ("light.kitchen_lights",), {"brightness_pct": 50}
        ),
    )
    assert verdict.targets == ("light.kitchen_lights",)


async def test_an_area_resolves_to_the_services_domain(house: HomeAssistant) -> None:
    """cover.open_cover on the kitchen opens its window, not its lights."""
    verdict = decide(house, "cover.open_cover", area_id=["kitchen"])
    assert verdict.decision is Decision.ALLOW
    assert verdict.calls == (
        ResolvedCall("cover", "open_cover", ("cover.kitchen_window",), {}),
    )


async def test_an_area_with_only_hidden_lights_is_refused(house: HomeAssistant) -> None:
    """Nothing exposed is left to switch, so the call says so."""
    verdict = decide(house, "light.turn_on", area_id="living_room")
    assert verdict.decision is Decision.BLOCK
    assert verdict.reason == "there is no exposed light entity in area_id living_room"


async def test_an_entrance_in_an_area_still_asks(house: HomeAssistant) -> None:
    """Opening the garage by its area needs the same confirmation as by its id."""
    verdict = decide(house, "cover.open_cover", area_id="garage")
    assert verdict.decision is Decision.CONFIRM
    assert verdict.reason == "opening cover.garage_door needs confirmation"
    assert verdict.calls == (
        ResolvedCall("cover", "open_cover", ("cover.garage_door",), {}),
    )


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        # The living room on the ground floor has hidden lights only.
        ({"floor_id": "ground_floor"}, ("light.kitchen_lights",)),
        # The bed light is upstairs through its device's area.
        ({"floor_id": "upstairs"}, ("light.bed_light",)),
        ({"area_id": "bedroom"}, ("light.bed_light",)),
        # The entrance lights carry the label too, but are hidden.
        ({"label_id": "night"}, ("light.bed_light",)),
        (
            {"area_id": "kitchen", "entity_id": "light.bed_light"},
            ("light.bed_light", "light.kitchen_lights"),
        ),
    ],
)
async def test_floors_devices_and_labels_resolve_to_exposed_entities(
    house: HomeAssistant, data: dict[str, Any], expected: tuple[str, ...]
) -> None:
    """Every kind of target resolves with HA's helper, then loses hidden entities."""
    verdict = decide(house, "light.turn_off", **data)
    assert verdict.decision is Decision.ALLOW, verdict.reason
    assert verdict.calls == (ResolvedCall("light", "turn_off", expected, {}),)


async def test_a_device_target_resolves_to_its_exposed_entities(
    house: HomeAssistant,
) -> None:
    """A device is reached through its exposed entities, a hidden one refused."""
    verdict = decide(
        house, "light.turn_on", device_id=device_of(house, "light.bed_light")
    )
    assert verdict.calls == (ResolvedCall("light", "turn_on", ("light.bed_light",)),)
    hidden = decide(
        house, "light.turn_on", device_id=device_of(house, "light.ceiling_lights")
    )
    assert hidden.decision is Decision.BLOCK
    assert "there is no exposed light entity in device_id" in hidden.reason


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("area_id", "attic"),
        ("floor_id", "basement"),
        ("label_id", "nope"),
    ],
)
async def test_unknown_areas_floors_labels_and_devices_are_refused(
    house: HomeAssistant, key: str, value: str
) -> None:
    """A made-up id does not exist."""
    verdict = decide(house, "light.turn_on", **{key: value})
    assert verdict.decision is Decision.BLOCK
    assert verdict.reason.startswith(f"{key} {value} does not exist")


async def test_a_made_up_device_is_answered_like_a_hidden_one(
    house: HomeAssistant,
) -> None:
    """A device with only hidden entities must not show that it exists."""
    made_up = decide(house, "light.turn_on", device_id="0123456789abcdef")
    hidden = decide(
        house, "light.turn_on", device_id=device_of(house, "light.ceiling_lights")
    )
    assert made_up.decision is hidden.decision is Decision.BLOCK
    assert made_up.reason == hidden.reason.replace(
        device_of(house, "light.ceiling_lights"), "0123456789abcdef"
    )


async def test_homeassistant_turn_off_is_split_per_domain(house: HomeAssistant) -> None:
    """As HA does: one call per domain, domains without the service skipped."""
    verdict = decide(
        house,
        "homeassistant.turn_off",
        entity_id=["switch.decorative_lights", "lock.front_door", "light.bed_light"],
    )
    assert verdict.decision is Decision.ALLOW
    assert verdict.calls == (
        ResolvedCall("light", "turn_off", ("light.bed_light",), {}),
        ResolvedCall("switch", "turn_off", ("switch.decorative_lights",), {}),
    )


async def test_homeassistant_turn_on_of_an_area_keeps_the_data(
    house: HomeAssistant,
) -> None:
    """The area resolves across domains; the data goes to every call."""
    verdict = decide(house, "homeassistant.turn_on", area_id="kitchen", transition=2)
    assert verdict.calls == (
        ResolvedCall("light", "turn_on", ("light.kitchen_lights",), {"transition": 2}),
    )


@pytest.mark.parametrize(
    ("call", "data", "decision", "calls"),
    [
        (
            "homeassistant.toggle",
            {"entity_id": "group.entrance"},
            Decision.CONFIRM,
            # Locks have no toggle: HA skips them, and so does the policy.
            (
                ResolvedCall("cover", "toggle", ("cover.garage_door",), {}),
                ResolvedCall("light", "toggle", ("light.kitchen_lights",), {}),
            ),
        ),
        (
            "homeassistant.turn_off",
            {"entity_id": "camera.demo_camera"},
            Decision.CONFIRM,
            (ResolvedCall("camera", "turn_off", ("camera.demo_camera",), {}),),
        ),
        (
            "homeassistant.turn_on",
            {"entity_id": "scene.leaving"},
            Decision.CONFIRM,
            (ResolvedCall("scene", "turn_on", ("scene.leaving",), {}),),
        ),
        (
            "homeassistant.turn_on",
            {"entity_id": "script.goodnight"},
            Decision.BLOCK,
            (),
        ),
    ],
)
async def test_homeassistant_services_are_judged_per_domain(
    house: HomeAssistant,
    call: str,
    data: dict[str, Any],
    decision: Decision,
    calls: tuple[ResolvedCall, ...],
) -> None:
    """Each per-domain call meets the rules of its own domain."""
    verdict = decide(house, call, **data)
    assert verdict.decision is decision, verdict.reason
    assert verdict.calls == calls


async def test_an_old_style_group_is_replaced_by_its_members(
    house: HomeAssistant,
) -> None:
    """Like HA, a light service on a group changes the group's lights only."""
    verdict = decide(house, "light.turn_off", entity_id="group.downstairs")
    assert verdict.decision is Decision.ALLOW
    assert verdict.calls == (
        ResolvedCall(
            "light", "turn_off", ("light.kitchen_lights", "light.bed_light"), {}
        ),
    )


async def test_nested_groups_are_expanded(house: HomeAssistant) -> None:
    """A group of groups reaches the lights of the inner group."""
    verdict = decide(house, "light.turn_on", entity_id="group.nested")
    assert verdict.calls == (
        ResolvedCall(
            "light", "turn_on", ("light.kitchen_lights", "light.bed_light"), {}
        ),
    )


async def test_a_group_with_a_lock_asks_before_unlocking(house: HomeAssistant) -> None:
    """Unlocking a group unlocks the lock in it: confirmation, on the lock itself."""
    verdict = decide(house, "lock.unlock", entity_id="group.entrance")
    assert verdict.decision is Decision.CONFIRM
    assert verdict.calls == (ResolvedCall("lock", "unlock", ("lock.front_door",), {}),)


async def test_a_group_with_a_hidden_member_is_refused(house: HomeAssistant) -> None:
    """A group cannot be used to reach an entity the user did not expose."""
    for group in ("group.with_hidden", "light.hidden_member_lights"):
        verdict = decide(house, "light.turn_off", entity_id=group)
        assert verdict.reason == NOT_VISIBLE


async def test_an_entity_group_is_called_as_itself_and_judged_by_members(
    house: HomeAssistant,
) -> None:
    """A cover group passes open_cover on to the garage door: confirmation."""
    verdict = decide(house, "cover.open_cover", entity_id="cover.all_covers")
    assert verdict.decision is Decision.CONFIRM
    assert verdict.reason == "opening cover.garage_door needs confirmation"
    assert verdict.calls == (
        ResolvedCall("cover", "open_cover", ("cover.all_covers",), {}),
    )
    assert verdict.targets == (
        "cover.all_covers",
        "cover.kitchen_window",
        "cover.garage_door",
    )


async def test_a_lock_group_is_expanded_as_ha_does(house: HomeAssistant) -> None:
    """HA replaces a lock group by its locks; so do the resolved calls."""
    verdict = decide(house, "lock.unlock", entity_id="lock.all_locks")
    assert verdict.calls == (ResolvedCall("lock", "unlock", ("lock.front_door",), {}),)


async def test_a_scene_is_judged_by_the_entities_it_sets(house: HomeAssistant) -> None:
    """Activating a scene that touches a lock names the lock."""
    verdict = decide(house, "scene.turn_on", entity_id="scene.leaving")
    assert verdict.decision is Decision.CONFIRM
    assert "lock.front_door" in verdict.reason
    assert verdict.targets == (
        "scene.leaving",
        "light.kitchen_lights",
        "lock.front_door",
    )
    assert verdict.calls == (ResolvedCall("scene", "turn_on", ("scene.leaving",), {}),)


async def test_a_scene_with_a_hidden_entity_is_refused(house: HomeAssistant) -> None:
    """A scene cannot reach an entity the user did not expose."""
    verdict = decide(house, "scene.turn_on", entity_id="scene.night")
    assert verdict.reason == NOT_VISIBLE


async def test_a_scene_of_a_group_is_judged_by_its_members(
    house: HomeAssistant,
) -> None:
    """A scene setting a group reaches the group's members."""
    house.states.async_set("scene.arrive", "unknown", {"entity_id": ["group.entrance"]})
    async_expose_entity(house, "conversation", "scene.arrive", True)
    verdict = decide(house, "scene.turn_on", entity_id="scene.arrive")
    assert verdict.decision is Decision.CONFIRM
    assert "lock.front_door" in verdict.reason


async def test_cyclic_and_deep_groups_are_refused(house: HomeAssistant) -> None:
    """Expansion is bounded: a loop or a deep nest cannot hang the policy."""
    house.states.async_set("group.loop_a", "on", {"entity_id": ["group.loop_b"]})
    house.states.async_set("group.loop_b", "on", {"entity_id": ["group.loop_a"]})
    for depth in range(8):
        members = [f"group.deep_{depth + 1}"] if depth < 7 else ["light.bed_light"]
        house.states.async_set(f"group.deep_{depth}", "on", {"entity_id": members})
    for entity_id in (
        "group.loop_a",
        "group.loop_b",
        *(f"group.deep_{depth}" for depth in range(8)),
    ):
        async_expose_entity(house, "conversation", entity_id, True)
    loop = decide(house, "light.turn_on", entity_id="group.loop_a")
    assert loop.decision is Decision.BLOCK
    assert "nests groups too deeply" in loop.reason
    deep = decide(house, "light.turn_on", entity_id="group.deep_0")
    assert deep.decision is Decision.BLOCK
    assert "nests groups too deeply" in deep.reason


async def test_floods_are_refused(house: HomeAssistant) -> None:
    """Too many ids, members or data items are refused before being judged."""
    ids = [f"light.fake_{n}" for n in range(201)]
    verdict = decide(house, "light.turn_on", entity_id=ids)
    assert verdict.reason == "too many targets in entity_id"
    house.states.async_set("group.huge", "on", {"entity_id": ids})
    async_expose_entity(house, "conversation", "group.huge", True)
    huge = decide(house, "light.turn_on", entity_id="group.huge")
    assert huge.reason == "group.huge reaches too many entities"
    data = {"rgb_color": list(range(600))}
    flood = decide(house, "light.turn_on", entity_id="light.bed_light", **data)
    assert flood.reason == "the service data is too large"


async def test_groups_reaching_too_many_entities_are_refused(
    house: HomeAssistant,
) -> None:
    """Each group is small, but together they reach past the limit."""
    for half in (0, 1):
        members = [f"light.fake_{half}_{n}" for n in range(150)]
        house.states.async_set(f"group.half_{half}", "on", {"entity_id": members})
        async_expose_entity(house, "conversation", f"group.half_{half}", True)
        for member in members:
            house.states.async_set(member, "on")
            async_expose_entity(house, "conversation", member, True)
    verdict = decide(house, "light.turn_on", entity_id=["group.half_0", "group.half_1"])
    assert verdict.reason == "the call reaches too many entities"


async def test_members_that_do_not_exist_are_ignored(house: HomeAssistant) -> None:
    """A group or scene naming a removed entity still works on the others."""
    house.states.async_set(
        "group.with_gone", "on", {"entity_id": ["light.bed_light", "light.gone"]}
    )
    # Some integrations write a single member as a string.
    house.states.async_set("scene.single", "unknown", {"entity_id": "lock.front_door"})
    house.states.async_set(
        "light.partly_gone", "on", {"entity_id": ["light.bed_light", "light.gone"]}
    )
    for entity_id in ("group.with_gone", "scene.single", "light.partly_gone"):
        async_expose_entity(house, "conversation", entity_id, True)
    verdict = decide(house, "light.turn_on", entity_id="group.with_gone")
    assert verdict.calls == (ResolvedCall("light", "turn_on", ("light.bed_light",)),)
    light_group = decide(house, "light.turn_on", entity_id="light.partly_gone")
    assert light_group.targets == ("light.partly_gone", "light.bed_light")
    scene = decide(house, "scene.turn_on", entity_id="scene.single")
    assert scene.decision is Decision.CONFIRM
    assert scene.targets == ("scene.single", "lock.front_door")


# Scripts.


async def test_an_allowed_script_runs(house: HomeAssistant) -> None:
    """A script allowed in the options runs like any exposed entity."""
    verdict = decide(
        house, "script.turn_on", ALLOW_GOODNIGHT, entity_id="script.goodnight"
    )
    assert verdict.decision is Decision.ALLOW
    assert verdict.calls == (
        ResolvedCall("script", "turn_on", ("script.goodnight",), {}),
    )


async def test_a_script_by_name_runs_as_script_turn_on_with_variables(
    house: HomeAssistant,
) -> None:
    """script.goodnight(data) runs as script.turn_on, the data as its variables."""
    verdict = decide(house, "script.goodnight", ALLOW_GOODNIGHT, room="kitchen")
    assert verdict.decision is Decision.ALLOW
    assert verdict.calls == (
        ResolvedCall(
            "script",
            "turn_on",
            ("script.goodnight",),
            {"variables": {"room": "kitchen"}},
        ),
    )


async def test_script_variables_cannot_name_hidden_entities(
    house: HomeAssistant,
) -> None:
    """An allowed script is not a way to pass a hidden entity along."""
    verdict = decide(
        house, "script.goodnight", ALLOW_GOODNIGHT, entity_id="light.ceiling_lights"
    )
    assert verdict.reason == NOT_VISIBLE


async def test_other_scripts_stay_blocked(house: HomeAssistant) -> None:
    """Allowing one script does not allow the others, nor hidden allowed ones."""
    verdict = decide(house, "script.open_up", ALLOW_GOODNIGHT)
    assert verdict.decision is Decision.BLOCK
    assert "script.open_up is not an allowed script" in verdict.reason
    async_expose_entity(house, "conversation", "script.goodnight", False)
    hidden = decide(
        house, "script.turn_on", ALLOW_GOODNIGHT, entity_id="script.goodnight"
    )
    assert hidden.reason == NOT_VISIBLE


async def test_unblocking_scripts_allows_every_exposed_script(
    house: HomeAssistant,
) -> None:
    """Without the script entry, exposed scripts run like other entities."""
    policy = Policy(blocked=DEFAULT_BLOCKED_SERVICES - {"script"})
    verdict = decide(house, "script.turn_on", policy, entity_id="script.goodnight")
    assert verdict.decision is Decision.ALLOW
    # One that unlocks the door is judged by what it does.
    verdict = decide(house, "script.turn_on", policy, entity_id="script.open_up")
    assert verdict.decision is Decision.CONFIRM
    assert verdict.reason == (
        "script.open_up may change lock.front_door, which needs confirmation"
    )


# Service data that names entities.


async def test_service_data_naming_a_hidden_entity_is_refused(
    house: HomeAssistant,
) -> None:
    """Entity ids in the data (members to join, a player to cast to) count too."""
    verdict = decide(
        house,
        "media_player.join",
        entity_id="media_player.kitchen",
        group_members=["media_player.bedroom"],
    )
    assert verdict.reason == NOT_VISIBLE


async def test_service_data_naming_a_lock_asks(house: HomeAssistant) -> None:
    """Naming a sensitive entity in the data needs a person's look."""
    verdict = decide(
        house,
        "media_player.join",
        entity_id="media_player.kitchen",
        group_members="media_player.kitchen, lock.front_door",
    )
    assert verdict.decision is Decision.CONFIRM
    assert "lock.front_door" in verdict.reason


# Services of other integrations.


async def test_an_integrations_own_service_on_a_lock_asks(
    house: HomeAssistant,
) -> None:
    """A lock maker's service may unlock; on a light it is a normal action."""

    async def handler(call: ServiceCall) -> None:
        """Do nothing."""

    house.services.async_register(
        "nuki", "lock_n_go", handler, schema=cv.make_entity_service_schema({})
    )
    verdict = decide(house, "nuki.lock_n_go", entity_id="lock.front_door")
    assert verdict.decision is Decision.CONFIRM
    assert verdict.reason == (
        "nuki.lock_n_go acts on lock.front_door, which needs confirmation"
    )
    assert (
        decide(house, "nuki.lock_n_go", entity_id="light.kitchen_lights").decision
        is Decision.ALLOW
    )
    assert decide(house, "nuki.lock_n_go", area_id="garage").decision is (
        Decision.CONFIRM
    )


async def test_a_service_that_takes_no_entities_is_refused(
    house: HomeAssistant,
) -> None:
    """mqtt.publish could reach any device; it acts on no entity."""

    async def handler(call: ServiceCall) -> None:
        """Do nothing."""

    house.services.async_register(
        "mqtt", "publish", handler, schema=vol.Schema({}, extra=vol.ALLOW_EXTRA)
    )
    verdict = decide(
        house, "mqtt.publish", entity_id="light.kitchen_lights", topic="garage/open"
    )
    assert verdict.decision is Decision.BLOCK
    assert "does not act on entities" in verdict.reason


# The policy from the options.


async def test_resolved_calls_are_judged_the_same_again(house: HomeAssistant) -> None:
    """Re-checking a resolved call (as a confirmation does) keeps its decision."""
    for call, data in (
        ("lock.unlock", {"entity_id": "group.entrance"}),
        ("homeassistant.toggle", {"entity_id": "group.entrance"}),
        ("light.turn_on", {"area_id": "kitchen", "brightness_pct": 20}),
        ("scene.turn_on", {"entity_id": "scene.leaving"}),
        ("script.goodnight", {"room": "hall"}),
    ):
        verdict = decide(house, call, ALLOW_GOODNIGHT, **data)
        assert verdict.decision is not Decision.BLOCK
        for resolved in verdict.calls:
            again = evaluate_call(
                house,
                resolved.domain,
                resolved.service,
                {**resolved.data, "entity_id": list(resolved.entity_ids)},
                ALLOW_GOODNIGHT,
            )
            assert again.decision is not Decision.BLOCK, again.reason
            assert again.calls == (resolved,)


def test_policy_from_options_defaults_to_design() -> None:
    """Absent options are the defaults of DESIGN §3."""
    policy = Policy.from_options({})
    assert policy == DEFAULT_POLICY
    assert {"lock.unlock", "lock.open", "alarm_control_panel"} <= policy.confirm
    assert {"homeassistant", "shell_command", "script", "notify"} <= policy.blocked
    assert policy.allowed_scripts == frozenset()


def test_policy_from_options_reads_the_stored_lists() -> None:
    """Stored lists replace the defaults; malformed entries are skipped."""
    policy = Policy.from_options(
        {
            "confirm_services": ["light", "lock.unlock", "Bad Entry", None, "lock."],
            "blocked_services": [],
            "allowed_scripts": ["script.goodnight"],
        }
    )
    assert policy.confirm == {"light", "lock.unlock"}
    assert policy.blocked == frozenset()
    assert policy.allowed_scripts == {"script.goodnight"}
    # Something other than a list is not a choice the user made.
    assert Policy.from_options({"confirm_services": "lock"}).confirm == (
        DEFAULT_CONFIRM_SERVICES
    )


async def test_the_options_change_the_decisions(house: HomeAssistant) -> None:
    """Confirmation and block entries apply by domain or by service."""
    policy = Policy.from_options(
        {
            "confirm_services": ["light", "cover"],
            "blocked_services": ["switch.turn_on"],
        }
    )
    lights = decide(house, "light.turn_on", policy, entity_id="light.kitchen_lights")
    assert lights.decision is Decision.CONFIRM
    assert lights.reason == "light.turn_on needs confirmation"
    # A domain entry covers every cover, not just entrances.
    window = decide(house, "cover.open_cover", policy, entity_id="cover.kitchen_window")
    assert window.decision is Decision.CONFIRM
    switch = decide(
        house, "switch.turn_on", policy, entity_id="switch.decorative_lights"
    )
    assert switch.reason == "switch.turn_on is blocked for the assistant"
    assert (
        decide(
            house, "switch.turn_off", policy, entity_id="switch.decorative_lights"
        ).decision
        is Decision.ALLOW
    )
    # Nothing confirms lock.unlock any more: the repair issue warns about it.
    assert (
        decide(house, "lock.unlock", policy, entity_id="lock.front_door").decision
        is Decision.ALLOW
    )
    # Entries for homeassistant and script.<name> apply to the name used.
    expanded = Policy(confirm=frozenset({"homeassistant.turn_on", "script.goodnight"}))
    verdict = decide(
        house, "homeassistant.turn_on", expanded, entity_id="light.kitchen_lights"
    )
    assert verdict.reason == "homeassistant.turn_on needs confirmation"
    verdict = decide(
        house,
        "script.goodnight",
        Policy(
            confirm=frozenset({"script.goodnight"}),
            allowed_scripts=frozenset({"script.goodnight"}),
        ),
    )
    assert verdict.reason == "script.goodnight needs confirmation"
    # Hard rules stay whatever the options say.
    assert decide(house, "homeassistant.restart", policy).decision is Decision.BLOCK
    assert decide(house, "automation.reload", policy).decision is Decision.BLOCK


@pytest.mark.parametrize(
    ("options", "problems"),
    [
        ({}, []),
        (
            {"confirm_services": sorted(DEFAULT_CONFIRM_SERVICES - {"lock.unlock"})},
            ["lock.unlock runs without confirmation"],
        ),
        (
            # Blocking locks altogether is safe.
            {
                "confirm_services": sorted(DEFAULT_CONFIRM_SERVICES - {"lock.unlock"}),
                "blocked_services": sorted(DEFAULT_BLOCKED_SERVICES | {"lock"}),
            },
            [],
        ),
        (
            {
                "confirm_services": [
                    *sorted(
                        DEFAULT_CONFIRM_SERVICES
                        - {"alarm_control_panel", "cover.open_cover"}
                    ),
                    "alarm_control_panel.alarm_arm_away",
                ]
            },
            [
                "alarm_control_panel.alarm_disarm runs without confirmation",
                (
                    "cover.open_cover opens garage doors, gates and doors without "
                    "confirmation"
                ),
            ],
        ),
        (
            {"blocked_services": sorted(DEFAULT_BLOCKED_SERVICES - {"script"})},
            ["script is no longer blocked"],
        ),
        (
            # Other homeassistant services stay blocked by a hard rule.
            {"blocked_services": sorted(DEFAULT_BLOCKED_SERVICES - {"homeassistant"})},
            [],
        ),
        (
            {"blocked_services": sorted(DEFAULT_BLOCKED_SERVICES - {"scene.apply"})},
            ["scene.apply is no longer blocked"],
        ),
    ],
)
def test_weakened_names_what_is_less_safe(
    options: dict[str, Any], problems: list[str]
) -> None:
    """The repair issue lists what no longer asks or is no longer blocked."""
    english = texts()
    described = [
        english(problem.key, entry=problem.entry)
        for problem in Policy.from_options(options).weakened()
    ]
    assert described == problems


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([" lock.unlock ", "lock", "", "lock"], ["lock", "lock.unlock"]),
        (
            ["alarm_control_panel", "cover.open_cover"],
            ["alarm_control_panel", "cover.open_cover"],
        ),
    ],
)
def test_parse_entries_accepts_domains_and_services(
    values: list[str], expected: list[str]
) -> None:
    """Entries are trimmed, sorted and without repeats."""
    assert parse_entries(values) == expected


@pytest.mark.parametrize(
    "bad", ["Lock.unlock", "lock.", ".unlock", "lock.un lock", "lock.unlock.now", "*"]
)
def test_parse_entries_refuses_malformed_entries(bad: str) -> None:
    """Anything but domain or domain.service in lower case is refused."""
    with pytest.raises(
        ValueError, match="^" + bad.replace(".", r"\.").replace("*", r"\*")
    ):
        parse_entries(["lock", bad])


# The repair issue.


async def test_the_repair_issue_can_be_removed(hass: HomeAssistant) -> None:
    """Removing an entry's issue leaves no warning behind."""
    await async_update_policy_issue(hass, "abc", {"confirm_services": []})
    issues = ir.async_get(hass)
    assert issues.async_get_issue(DOMAIN, "unsafe_permissions_abc") is not None
    async_delete_policy_issue(hass, "abc")
    assert issues.async_get_issue(DOMAIN, "unsafe_permissions_abc") is None


async def test_setup_warns_about_unsafe_options(
    hass: HomeAssistant, fake_ollama: FakeOllama
) -> None:
    """An entry whose options drop lock.unlock's confirmation raises a repair."""
    await async_setup_policy_house(hass)
    entry = await async_setup_assistant(
        hass,
        fake_ollama,
        confirm_services=sorted(DEFAULT_CONFIRM_SERVICES - {"lock.unlock"}),
    )
    issue = ir.async_get(hass).async_get_issue(
        DOMAIN, f"unsafe_permissions_{entry.entry_id}"
    )
    assert issue is not None
    assert issue.severity is ir.IssueSeverity.WARNING
    assert issue.translation_key == "unsafe_permissions"
    assert issue.translation_placeholders == {
        "settings": "lock.unlock runs without confirmation",
        "name": "Personal Assistant",
    }
    assert await hass.config_entries.async_unload(entry.entry_id)


async def test_the_repair_names_the_assistant_as_its_device_is_named(
    hass: HomeAssistant, fake_ollama: FakeOllama
) -> None:
    """A device the user renamed gives the repair its name, not the model's."""
    await async_setup_policy_house(hass)
    entry = await async_setup_assistant(
        hass,
        fake_ollama,
        confirm_services=sorted(DEFAULT_CONFIRM_SERVICES - {"lock.unlock"}),
    )
    devices = dr.async_get(hass)
    device = devices.async_get_device_by_identifier(
        (DOMAIN, entry.entry_id), entry.entry_id
    )
    assert device is not None
    devices.async_update_device(device.id, name_by_user="House brain")

    # Saving the options (unchanged) raises the issue again.
    result = await hass.config_entries.options.async_init(entry.entry_id)
    await hass.config_entries.options.async_configure(result["flow_id"], {})
    await hass.async_block_till_done()

    issue = ir.async_get(hass).async_get_issue(
        DOMAIN, f"unsafe_permissions_{entry.entry_id}"
    )
    assert issue is not None
    assert (issue.translation_placeholders or {})["name"] == "House brain"
    assert await hass.config_entries.async_unload(entry.entry_id)
