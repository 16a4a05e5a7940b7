"""Which entities a service call really reaches, resolved as Home Assistant would.

Areas, devices, floors and labels become entities (only the visible ones are
kept) and old-style groups become their members. What a scene sets, per
member, is read here too (``scene_states``, ``scene_action``), so a scene can
be judged by the calls it makes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from homeassistant.components.homeassistant.scene import (
    DATA_PLATFORM as SCENE_PLATFORM,
)
from homeassistant.components.homeassistant.scene import HomeAssistantScene
from homeassistant.const import (
    ATTR_AREA_ID,
    ATTR_DEVICE_ID,
    ATTR_ENTITY_ID,
    ATTR_FLOOR_ID,
    ATTR_LABEL_ID,
    ENTITY_MATCH_ALL,
    ENTITY_MATCH_NONE,
    Platform,
)
from homeassistant.helpers.target import (
    TargetSelection,
    async_extract_referenced_entity_ids,
)

from .verdict import MAX_TARGETS, domain_of, refuse
from .visibility import NOT_VISIBLE

if TYPE_CHECKING:
    from collections.abc import Mapping

    from homeassistant.core import HomeAssistant, State

    from .visibility import Visibility

INDIRECT_TARGETS: Final = (ATTR_AREA_ID, ATTR_DEVICE_ID, ATTR_FLOOR_ID, ATTR_LABEL_ID)
TARGET_KEYS: Final = frozenset({ATTR_ENTITY_ID, *INDIRECT_TARGETS})

# What a scene does to a member, as HA's reproduce_state does it: the state a
# scene sets, per domain, and the service that sets it.
SCENE_STATE_SERVICES: Final[Mapping[str, Mapping[str, str]]] = {
    "lock": {
        "locked": "lock",
        "locking": "lock",
        "unlocked": "unlock",
        "unlocking": "unlock",
        "open": "open",
        "opening": "open",
    },
    "alarm_control_panel": {
        "armed_away": "alarm_arm_away",
        "armed_custom_bypass": "alarm_arm_custom_bypass",
        "armed_home": "alarm_arm_home",
        "armed_night": "alarm_arm_night",
        "armed_vacation": "alarm_arm_vacation",
        "disarmed": "alarm_disarm",
        "triggered": "alarm_trigger",
    },
    "cover": {
        "open": "open_cover",
        "opening": "open_cover",
        "closed": "close_cover",
        "closing": "close_cover",
    },
    "timer": {"active": "start", "paused": "pause", "idle": "cancel"},
}
# Domains whose scene state is a value set by one service.
SCENE_VALUE_SERVICES: Final[Mapping[str, str]] = {
    "input_select": "select_option",
    "select": "select_option",
    "input_number": "set_value",
    "number": "set_value",
    "input_text": "set_value",
    "text": "set_value",
    "input_datetime": "set_datetime",
    "counter": "set_value",
}

_PLATFORM_DOMAINS: Final = frozenset(platform.value for platform in Platform)


@dataclass(slots=True)
class Targets:
    """The targets of a call as the model wrote them."""

    entity_ids: list[str]
    indirect: dict[str, list[str]]

    @property
    def empty(self) -> bool:
        """Tell whether the model named no target at all."""
        return not self.entity_ids and not self.indirect


def _id_list(value: object, key: str) -> list[str]:
    """Return the ids of one target key: a string, a comma list or a list."""
    if value is None:
        return []
    if isinstance(value, str):
        # HA splits entity ids on commas (cv.comp_entity_ids), not other ids.
        parts = value.split(",") if key == ATTR_ENTITY_ID else [value]
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        parts = list(value)
    else:
        refuse(f"{key} must be an id or a list of ids")
    ids = [part.strip() for part in parts if part.strip()]
    if key == ATTR_ENTITY_ID:
        ids = [entity_id.lower() for entity_id in ids]
    for target in ids:
        if target in (ENTITY_MATCH_ALL, ENTITY_MATCH_NONE):
            refuse(f"{key} '{target}' is not allowed; name the entities")
    if len(ids) > MAX_TARGETS:
        refuse(f"too many targets in {key}")
    return list(dict.fromkeys(ids))


def parse_targets(data: Mapping[str, Any]) -> Targets:
    """Read the target keys of service data; refuse malformed or unbounded ones."""
    indirect = {
        key: ids for key in INDIRECT_TARGETS if (ids := _id_list(data.get(key), key))
    }
    return Targets(_id_list(data.get(ATTR_ENTITY_ID), ATTR_ENTITY_ID), indirect)


def scene_states(hass: HomeAssistant, scene_id: str) -> Mapping[str, State] | None:
    """Return what a scene of Home Assistant's own sets, per member entity.

    None for scenes of other integrations (a Hue scene): they do not say.
    """
    platform = hass.data.get(SCENE_PLATFORM)
    entity = platform.entities.get(scene_id) if platform is not None else None
    if not isinstance(entity, HomeAssistantScene):
        return None
    return entity.scene_config.states


def scene_action(
    domain: str, state: str, attributes: Mapping[str, Any]
) -> tuple[str, dict[str, Any]] | None:
    """Return the service (and its data) a scene calls to set a member's state.

    As HA's reproduce_state does; None when the state maps to no service.
    """
    position = attributes.get("current_position")
    if domain == "cover" and state in {"open", "opening"} and position is not None:
        return "set_cover_position", {"position": position}
    if (services := SCENE_STATE_SERVICES.get(domain)) is not None:
        service = services.get(state)
        return (service, {}) if service is not None else None
    if (service := SCENE_VALUE_SERVICES.get(domain)) is not None:
        return service, {}
    if state in {"on", "off"}:
        return f"turn_{state}", {}
    return None


class TargetResolver:
    """Turns the targets the model wrote into the visible entities a call changes."""

    def __init__(self, hass: HomeAssistant, visibility: Visibility) -> None:
        """Keep Home Assistant and what tells visible entities apart."""
        self.hass = hass
        self.visibility = visibility

    def owns_entities(self, domain: str) -> bool:
        """Tell whether the domain's services act on entities of that domain only.

        Entity domains (light, lock, script...) do. An integration's own
        services (a lock maker's "unlock with code") may act on any entity.
        """
        return domain in _PLATFORM_DOMAINS or bool(
            self.hass.states.async_entity_ids(domain)
        )

    def resolve(self, domain: str | None, targets: Targets) -> list[str]:
        """Return the explicit, visible entities a call on ``domain`` changes.

        ``domain`` None keeps every domain (homeassistant.turn_on and friends).
        """
        if targets.empty:
            refuse(
                "name the target entities in entity_id (use list_entities to find them)"
            )
        only = domain if domain is not None and self.owns_entities(domain) else None
        resolved: list[str] = []
        for entity_id in targets.entity_ids:
            if not self.visibility.visible(entity_id):
                # Hidden or missing: the same words, naming nothing.
                refuse(NOT_VISIBLE)
            if not self.visibility.expanded_by_ha(entity_id):
                if only is not None and domain_of(entity_id) != only:
                    refuse(f"{entity_id} is not a {only} entity")
                resolved.append(entity_id)
                continue
            # Members of other domains are ignored by the service, as in HA.
            resolved.extend(
                member
                for member in self.visibility.expand(entity_id)
                if self.visibility.exists(member)
                and (only is None or domain_of(member) == only)
            )
        if targets.indirect:
            resolved.extend(self.resolve_indirect(only, targets.indirect))
        resolved = list(dict.fromkeys(resolved))
        if not resolved:
            refuse(f"none of the targets is a {only or 'controllable'} entity")
        if len(resolved) > MAX_TARGETS:
            refuse("the call reaches too many entities")
        return resolved

    def resolve_indirect(
        self, only: str | None, indirect: Mapping[str, list[str]]
    ) -> list[str]:
        """Resolve areas, devices, floors and labels with HA's own helper."""
        selected = async_extract_referenced_entity_ids(
            self.hass, TargetSelection(dict(indirect)), expand_group=False
        )
        # A device without a visible entity and a device that does not exist
        # get the same answer below: devices are not named anywhere the model
        # looks, and one with only hidden entities must not show it exists.
        for key, missing in (
            (ATTR_AREA_ID, selected.missing_areas),
            (ATTR_FLOOR_ID, selected.missing_floors),
            (ATTR_LABEL_ID, selected.missing_labels),
        ):
            if missing:
                refuse(
                    f"{key} {', '.join(sorted(missing))} does not exist "
                    "(use list_entities to find the entities)"
                )
        # Hidden entities in the area are left alone; the others still change.
        found = [
            entity_id
            for entity_id in sorted(selected.indirectly_referenced)
            if (only is None or domain_of(entity_id) == only)
            and self.visibility.visible(entity_id)
        ]
        if not found:
            where = ", ".join(
                f"{key} {', '.join(ids)}" for key, ids in indirect.items()
            )
            kind = f"{only} entity" if only else "entity"
            refuse(f"there is no exposed {kind} in {where}")
        return found
