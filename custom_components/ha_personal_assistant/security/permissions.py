"""The action permission policy: allow, confirm or block, decided on real targets.

The model writes a service call; nothing here trusts it. Before deciding, the
call is resolved the way Home Assistant itself would resolve it: areas, devices,
floors and labels become entities (only the exposed ones are kept), old-style
groups become their members, ``homeassistant.turn_on`` becomes one call per
domain, and scenes and entity groups are judged by the entities they change.
The verdict carries the concrete calls to run, on explicit entity ids only, so
what runs is exactly what was judged.

An entity is *visible* when it exists, is exposed to Assist and reaches no
unexposed entity (a group or scene with a hidden member is not visible). Every
entity that is not visible gets the same answer, NOT_VISIBLE, whether it is
hidden or does not exist, and no refusal or confirmation ever names one.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final, NamedTuple, NoReturn

from homeassistant.components.automation import automations_with_entity
from homeassistant.components.homeassistant.exposed_entities import (
    async_should_expose,
)
from homeassistant.components.homeassistant.scene import (
    DATA_PLATFORM as SCENE_PLATFORM,
)
from homeassistant.components.homeassistant.scene import HomeAssistantScene
from homeassistant.components.script import entities_in_script
from homeassistant.const import (
    ATTR_AREA_ID,
    ATTR_DEVICE_CLASS,
    ATTR_DEVICE_ID,
    ATTR_ENTITY_ID,
    ATTR_FLOOR_ID,
    ATTR_GROUP_ENTITIES,
    ATTR_LABEL_ID,
    ENTITY_MATCH_ALL,
    ENTITY_MATCH_NONE,
    Platform,
)
from homeassistant.core import valid_domain, valid_entity_id
from homeassistant.helpers import config_validation as cv
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers.group import GenericGroup, get_group_entities
from homeassistant.helpers.target import (
    TargetSelection,
    async_extract_referenced_entity_ids,
)

from ..const import CONF_ALLOWED_SCRIPTS, CONF_BLOCKED_SERVICES, CONF_CONFIRM_SERVICES

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant, State

ASSISTANT: Final = "conversation"

HOMEASSISTANT: Final = "homeassistant"
SCRIPT: Final = "script"
SCENE: Final = "scene"
# The generic services HA expands into one call per domain of the targets.
EXPANDED_SERVICES: Final = frozenset({"turn_on", "turn_off", "toggle"})
# The services of the script domain that act on script entities; any other
# script.<name> service runs the script of that name.
SCRIPT_ENTITY_SERVICES: Final = frozenset({"turn_on", "turn_off", "toggle"})

INDIRECT_TARGETS: Final = (ATTR_AREA_ID, ATTR_DEVICE_ID, ATTR_FLOOR_ID, ATTR_LABEL_ID)
TARGET_KEYS: Final = frozenset({ATTR_ENTITY_ID, *INDIRECT_TARGETS})

# Opening these lets someone (or something) in; closing them does not. Gas
# valves are here too: opening one is a hazard, closing one is the safe side.
ENTRANCE_DEVICE_CLASSES: Final = frozenset({"garage", "gate", "door", "gas"})
# Confirmation entries for these services only apply to entrances: opening a
# kitchen window or a garden valve is an everyday action. Tilting is left out
# on purpose: it turns slats, it does not open the way in.
ENTRANCE_SERVICES: Final = frozenset(
    {
        "cover.open_cover",
        "cover.set_cover_position",
        "cover.toggle",
        "valve.open_valve",
        "valve.set_valve_position",
        "valve.toggle",
    }
)
# Setting one of these positions to 0 closes, which needs no confirmation.
POSITION_SERVICES: Final = frozenset(
    {"cover.set_cover_position", "valve.set_valve_position"}
)
# A scene, entity group or foreign service that reaches these needs a person,
# whatever the options say; so does any change to another entity of a device
# that has one of them (a camera's privacy switch, a lock's auto-unlock).
SENSITIVE_DOMAINS: Final = frozenset({"lock", "alarm_control_panel", "camera"})
# Helpers: entities that only hold a value for automations (and dashboards).
# Their confirmation entries apply only to helpers an automation uses: switching
# "away mode" may switch a security automation off. Other helpers are free.
GATE_DOMAINS: Final = frozenset(
    {
        "input_boolean",
        "input_button",
        "input_datetime",
        "input_number",
        "input_select",
        "input_text",
        "counter",
        "timer",
    }
)
# Automation services; reload is refused by a hard rule, like every reload.
AUTOMATION_SERVICES: Final = (
    "automation.trigger",
    "automation.turn_off",
    "automation.turn_on",
    "automation.toggle",
)

DEFAULT_CONFIRM_SERVICES: Final = frozenset(
    {
        "lock.unlock",
        "lock.open",
        # Arming, disarming and triggering alike.
        "alarm_control_panel",
        *ENTRANCE_SERVICES,
        "camera.turn_on",
        "camera.turn_off",
        "camera.enable_motion_detection",
        "camera.disable_motion_detection",
        # Shows a camera's picture on a screen: a privacy change too.
        "camera.play_stream",
        # A disabled automation can be a disabled protection; running one runs
        # whatever it does, an enabled one may be a trap.
        *AUTOMATION_SERVICES,
        # Silencing a siren or an alert (water leak, door left open) hides a
        # warning; sounding one frightens the house.
        "siren",
        "alert",
        # An IR/RF blaster can replay the remote of a gate or a garage door.
        "remote.send_command",
        # Only for helpers an automation uses (see GATE_DOMAINS).
        *GATE_DOMAINS,
    }
)
DEFAULT_BLOCKED_SERVICES: Final = frozenset(
    {
        # Domains that reach past the entities the user exposed: the host, the
        # configuration, code, other people's messages.
        HOMEASSISTANT,
        "hassio",
        "shell_command",
        "python_script",
        "pyscript",
        "rest_command",
        "recorder",
        "backup",
        "notify",
        "telegram_bot",
        "persistent_notification",
        "system_log",
        "logger",
        # Installing or skipping software and firmware (Home Assistant itself,
        # a lock's firmware) is for the admin.
        "update",
        # Scripts can do anything; the options allow single scripts.
        SCRIPT,
        # Creating or changing scenes and groups edits the configuration.
        "scene.apply",
        "scene.create",
        "scene.delete",
        "group.set",
        "group.remove",
        # These write files on the Home Assistant host.
        "camera.snapshot",
        "camera.record",
    }
)
# Confirmations whose removal the repair issue reports.
CRITICAL_CONFIRMATIONS: Final = (
    "lock.unlock",
    "lock.open",
    "alarm_control_panel.alarm_disarm",
    *sorted(ENTRANCE_SERVICES),
    "automation.turn_off",
    "automation.toggle",
)

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

# The one answer for an entity that is hidden or does not exist: it names no
# entity, so the two cannot be told apart.
NOT_VISIBLE: Final = (
    "an entity_id you gave is not an entity you can see; use list_entities "
    "to find the right one"
)

# Bounds that keep a hostile call from making the resolver do unbounded work.
MAX_EXPANSION_DEPTH: Final = 5
MAX_TARGETS: Final = 200
MAX_DATA_ITEMS: Final = 500

_SERVICE_NAME = re.compile(r"^[a-z0-9_]+$")
_PLATFORM_DOMAINS: Final = frozenset(platform.value for platform in Platform)


class Decision(StrEnum):
    """What the policy lets a service call do."""

    ALLOW = "allow"
    CONFIRM = "confirm"
    BLOCK = "block"


@dataclass(frozen=True, slots=True)
class ResolvedCall:
    """One concrete service call on explicit entity ids: what really runs."""

    domain: str
    service: str
    entity_ids: tuple[str, ...]
    # Service data without any target keys (entity_id, area_id, ...).
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Verdict:
    """The policy's answer for one service call."""

    decision: Decision
    reason: str
    # Every entity the call would really change, after expansion.
    targets: tuple[str, ...]
    # What to execute when allowed or confirmed; empty when blocked.
    calls: tuple[ResolvedCall, ...] = ()
    # What outside text was in the prompt when the call was made, in the
    # integration's words (ToolContext.taint_sources); empty when none was.
    taint_sources: tuple[str, ...] = ()
    # True when only the taint rule asks: the policy alone would have allowed it.
    because_of_taint: bool = False


def is_valid_entry(entry: str) -> bool:
    """Tell whether a policy entry is a ``domain`` or a ``domain.service``."""
    domain, dot, service = entry.partition(".")
    return valid_domain(domain) and (
        not dot or _SERVICE_NAME.match(service) is not None
    )


def parse_entries(values: Iterable[object]) -> list[str]:
    """Return policy entries stripped, sorted and without repeats.

    Raise ValueError naming the first entry that is not ``domain`` or
    ``domain.service`` in lower case.
    """
    entries: set[str] = set()
    for value in values:
        text = str(value).strip()
        if not text:
            continue
        if not is_valid_entry(text):
            raise ValueError(text)
        entries.add(text)
    return sorted(entries)


def _option_entries(value: object, default: frozenset[str]) -> frozenset[str]:
    """Read a stored list of entries; a missing or malformed option is the default."""
    if not isinstance(value, (list, tuple, set, frozenset)):
        return default
    # Stored options come from the validated form; anything else is skipped
    # rather than trusted.
    return frozenset(
        text
        for item in value
        if isinstance(item, str) and is_valid_entry(text := item.strip())
    )


@dataclass(frozen=True, slots=True)
class Policy:
    """Which services need confirmation, which are blocked, which scripts run."""

    # Entries are "domain" (every service of it) or "domain.service".
    confirm: frozenset[str] = DEFAULT_CONFIRM_SERVICES
    blocked: frozenset[str] = DEFAULT_BLOCKED_SERVICES
    # Script entity ids the assistant may run although scripts are blocked.
    allowed_scripts: frozenset[str] = frozenset()

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> Policy:
        """Build the policy from an entry's options; absent keys are the defaults."""
        scripts = options.get(CONF_ALLOWED_SCRIPTS)
        return cls(
            confirm=_option_entries(
                options.get(CONF_CONFIRM_SERVICES), DEFAULT_CONFIRM_SERVICES
            ),
            blocked=_option_entries(
                options.get(CONF_BLOCKED_SERVICES), DEFAULT_BLOCKED_SERVICES
            ),
            allowed_scripts=frozenset(
                script.strip().lower()
                for script in (scripts if isinstance(scripts, list) else [])
                if isinstance(script, str)
            ),
        )

    def is_blocked(self, domain: str, service: str) -> bool:
        """Tell whether an entry blocks the service (hard rules aside)."""
        return domain in self.blocked or f"{domain}.{service}" in self.blocked

    def needs_confirmation(self, domain: str, service: str) -> bool:
        """Tell whether an entry asks confirmation for the service, on some target."""
        return domain in self.confirm or f"{domain}.{service}" in self.confirm

    def weakened(self) -> list[Weakening]:
        """Return where this policy is less safe than the defaults."""
        problems: list[Weakening] = []
        for entry in CRITICAL_CONFIRMATIONS:
            domain, _, service = entry.partition(".")
            if self.needs_confirmation(domain, service) or self.is_blocked(
                domain, service
            ):
                continue
            key = WEAKENED_ENTRANCE if entry in ENTRANCE_SERVICES else WEAKENED_CONFIRM
            problems.append(Weakening(key, entry))
        # Only turn_on, turn_off and toggle of homeassistant ever run, judged
        # per domain, whatever the entry says: dropping it changes nothing.
        for entry in sorted(DEFAULT_BLOCKED_SERVICES - {HOMEASSISTANT}):
            domain, _, service = entry.partition(".")
            if service and self.is_blocked(domain, service):
                continue
            if not service and domain in self.blocked:
                continue
            problems.append(Weakening(WEAKENED_UNBLOCKED, entry))
        return problems


class Weakening(NamedTuple):
    """One way a policy is less safe than the defaults, for the repair issue."""

    # The text's key in the translations' exceptions: WEAKENED_*.
    key: str
    # The domain or domain.service entry it is about.
    entry: str


# "{entry} runs without confirmation", "... opens garage doors, gates and
# doors without confirmation", "{entry} is no longer blocked".
WEAKENED_CONFIRM: Final = "weakened_confirm"
WEAKENED_ENTRANCE: Final = "weakened_entrance"
WEAKENED_UNBLOCKED: Final = "weakened_unblocked"

DEFAULT_POLICY: Final = Policy()


class _RefusedError(Exception):
    """The call is blocked; the message says why, in words the model can use."""


def _refuse(reason: str) -> NoReturn:
    raise _RefusedError(reason)


@dataclass(slots=True)
class _Targets:
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
        _refuse(f"{key} must be an id or a list of ids")
    ids = [part.strip() for part in parts if part.strip()]
    if key == ATTR_ENTITY_ID:
        ids = [entity_id.lower() for entity_id in ids]
    for target in ids:
        if target in (ENTITY_MATCH_ALL, ENTITY_MATCH_NONE):
            _refuse(f"{key} '{target}' is not allowed; name the entities")
    if len(ids) > MAX_TARGETS:
        _refuse(f"too many targets in {key}")
    return list(dict.fromkeys(ids))


def _parse_targets(data: Mapping[str, Any]) -> _Targets:
    indirect = {
        key: ids for key in INDIRECT_TARGETS if (ids := _id_list(data.get(key), key))
    }
    return _Targets(_id_list(data.get(ATTR_ENTITY_ID), ATTR_ENTITY_ID), indirect)


def _domain_of(entity_id: str) -> str:
    return entity_id.partition(".")[0]


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


class _Judge:
    """Resolves one call as the model wrote it; collects calls and reasons."""

    def __init__(self, hass: HomeAssistant, policy: Policy) -> None:
        self.hass = hass
        self.policy = policy
        self.calls: list[ResolvedCall] = []
        # Dicts keep the order things were found in, without repeats.
        self.targets: dict[str, None] = {}
        self.reasons: dict[str, None] = {}

    # Helpers on entities.

    def _exposed(self, entity_id: str) -> bool:
        return async_should_expose(self.hass, ASSISTANT, entity_id)

    def _exists(self, entity_id: str) -> bool:
        return (
            valid_entity_id(entity_id) and self.hass.states.get(entity_id) is not None
        )

    def visible(self, entity_id: str) -> bool:
        """Tell whether the entity exists, is exposed and reaches no hidden entity."""
        if not (self._exists(entity_id) and self._exposed(entity_id)):
            return False
        # A member without a state has no entity to change. A group too big or
        # too deep to walk raises, naming only itself.
        return all(
            self.hass.states.get(member) is None or self._exposed(member)
            for member, _parent in self._walk(entity_id)
        )

    def _members(self, entity_id: str) -> list[str]:
        """Return what a group or scene stands for (empty for a plain entity)."""
        state = self.hass.states.get(entity_id)
        if state is None:
            return []
        members: list[str] = []
        for attribute in (ATTR_ENTITY_ID, ATTR_GROUP_ENTITIES):
            value = state.attributes.get(attribute)
            if isinstance(value, str):
                value = [value]
            if isinstance(value, (list, tuple)):
                members.extend(
                    m.lower() for m in value if isinstance(m, str) and m != entity_id
                )
        return list(dict.fromkeys(members))

    def _expanded_by_ha(self, entity_id: str) -> bool:
        """Tell whether HA replaces this id by its members when a service runs.

        The same test as homeassistant.helpers.group.expand_entity_ids.
        """
        if entity_id.startswith("group."):
            return True
        entity = get_group_entities(self.hass).get(entity_id)
        return entity is not None and isinstance(entity.group, GenericGroup)

    def _entrance(self, entity_id: str) -> bool:
        state = self.hass.states.get(entity_id)
        return (
            state is not None
            and state.attributes.get(ATTR_DEVICE_CLASS) in ENTRANCE_DEVICE_CLASSES
        )

    def _on_security_device(self, entity_id: str) -> bool:
        """Tell whether another entity of the same device is a lock, alarm or camera.

        A camera's privacy switch, a lock's auto-unlock or an alarm panel's
        bypass switch weaken the protection as much as the camera, the lock or
        the panel themselves.
        """
        if _domain_of(entity_id) in SENSITIVE_DOMAINS:
            return False
        registry = er.async_get(self.hass)
        entry = registry.async_get(entity_id)
        if entry is None or entry.device_id is None:
            return False
        return any(
            _domain_of(sibling.entity_id) in SENSITIVE_DOMAINS
            for sibling in er.async_entries_for_device(registry, entry.device_id)
        )

    def _sensitive(self, entity_id: str) -> bool:
        """Tell whether changing the entity in any way deserves a person's look."""
        domain = _domain_of(entity_id)
        return (
            domain in SENSITIVE_DOMAINS
            or (domain in {"cover", "valve"} and self._entrance(entity_id))
            or self._on_security_device(entity_id)
        )

    def _gates_automation(self, entity_id: str) -> bool:
        """Tell whether the entity is a helper that some automation uses."""
        return _domain_of(entity_id) in GATE_DOMAINS and bool(
            automations_with_entity(self.hass, entity_id)
        )

    def _protective(self, entity_id: str) -> bool:
        """Tell whether some change to the entity would need confirmation.

        The hard rule (_sensitive), or a confirmation entry of the policy that
        applies to this entity for some service of its domain.
        """
        if self._sensitive(entity_id):
            return True
        domain = _domain_of(entity_id)
        entries = [
            entry
            for entry in self.policy.confirm
            if entry == domain or entry.startswith(f"{domain}.")
        ]
        if not entries:
            return False
        if domain in GATE_DOMAINS:
            return self._gates_automation(entity_id)
        return (
            domain in self.policy.confirm
            or any(entry not in ENTRANCE_SERVICES for entry in entries)
            or self._entrance(entity_id)
        )

    def _owns_entities(self, domain: str) -> bool:
        """Tell whether the domain's services act on entities of that domain only.

        Entity domains (light, lock, script...) do. An integration's own
        services (a lock maker's "unlock with code") may act on any entity.
        """
        return domain in _PLATFORM_DOMAINS or bool(
            self.hass.states.async_entity_ids(domain)
        )

    def _walk(self, root: str) -> Iterator[tuple[str, str]]:
        """Yield (member, parent) for everything a group or scene reaches, bounded."""
        seen = {root}
        frontier = [root]
        for _ in range(MAX_EXPANSION_DEPTH):
            following: list[str] = []
            for parent in frontier:
                for member in self._members(parent):
                    if member in seen:
                        continue
                    seen.add(member)
                    if len(seen) > MAX_TARGETS:
                        _refuse(f"{root} reaches too many entities")
                    yield member, parent
                    following.append(member)
            if not following:
                return
            frontier = following
        if any(m not in seen for parent in frontier for m in self._members(parent)):
            _refuse(f"{root} nests groups too deeply")

    # The steps of a decision.

    def _check_blocked(self, domain: str, service: str) -> None:
        name = f"{domain}.{service}"
        if service == "reload" or service.startswith("reload_"):
            # Reloading rereads configuration: never from a chat.
            _refuse(f"{name} is blocked for the assistant")
        if domain == HOMEASSISTANT and service not in EXPANDED_SERVICES:
            _refuse(f"{name} is blocked for the assistant")
        if name in self.policy.blocked:
            _refuse(f"{name} is blocked for the assistant")
        # The domain entries of homeassistant and script leave room for the
        # per-domain expansion and for the allowed scripts, judged later.
        if domain in self.policy.blocked and domain not in {HOMEASSISTANT, SCRIPT}:
            _refuse(f"{name} is blocked for the assistant")

    def _check_entity_service(self, domain: str, service: str) -> None:
        handler = self.hass.services.async_services_for_domain(domain).get(service)
        if handler is None:
            _refuse(f"the service {domain}.{service} does not exist")
        # Only entity services filter what they touch by target; anything else
        # (mqtt.publish, conversation.process...) reaches past exposed entities.
        if handler.schema is None or not cv.is_entity_service_schema(handler.schema):
            _refuse(
                f"{domain}.{service} does not act on entities, so the assistant "
                "may not call it"
            )

    def _check_data(self, data: Mapping[str, Any]) -> None:
        """Judge entities named in the service data (tts players, members to join).

        Anything written like the id of an entity of a real entity domain must
        be visible, existing or not: a hidden one and a missing one are refused
        alike, so the data cannot be used to probe for hidden entities.
        """
        stack: list[object] = [data]
        count = 0
        while stack:
            value = stack.pop()
            count += 1
            if count > MAX_DATA_ITEMS:
                _refuse("the service data is too large")
            if isinstance(value, Mapping):
                stack.extend(value.keys())
                stack.extend(value.values())
            elif isinstance(value, (list, tuple)):
                stack.extend(value)
            elif isinstance(value, str) and "." in value:
                for part in value.split(","):
                    entity_id = part.strip().lower()
                    if valid_entity_id(entity_id) and self._owns_entities(
                        _domain_of(entity_id)
                    ):
                        self._check_named(entity_id)

    def _check_named(self, entity_id: str) -> None:
        """Refuse an entity named in the data that is not visible; ask for one."""
        if not self.visible(entity_id):
            _refuse(NOT_VISIBLE)
        # A named group or scene stands for its members.
        for named in (entity_id, *(member for member, _ in self._walk(entity_id))):
            if self._sensitive(named):
                self._confirm(f"the call names {named}, which needs confirmation")

    def _expand(self, entity_id: str, depth: int = 0) -> Iterator[str]:
        """Replace groups by their members as HA does when the service runs."""
        if not self._expanded_by_ha(entity_id):
            yield entity_id
            return
        if depth >= MAX_EXPANSION_DEPTH:
            _refuse(f"{entity_id} nests groups too deeply")
        for member in self._members(entity_id):
            yield from self._expand(member, depth + 1)

    def _resolve(self, domain: str | None, targets: _Targets) -> list[str]:
        """Return the explicit, visible entities a call on ``domain`` changes.

        ``domain`` None keeps every domain (homeassistant.turn_on and friends).
        """
        if targets.empty:
            _refuse(
                "name the target entities in entity_id (use list_entities to find them)"
            )
        only = domain if domain is not None and self._owns_entities(domain) else None
        resolved: list[str] = []
        for entity_id in targets.entity_ids:
            if not self.visible(entity_id):
                # Hidden or missing: the same words, naming nothing.
                _refuse(NOT_VISIBLE)
            if not self._expanded_by_ha(entity_id):
                if only is not None and _domain_of(entity_id) != only:
                    _refuse(f"{entity_id} is not a {only} entity")
                resolved.append(entity_id)
                continue
            # Members of other domains are ignored by the service, as in HA.
            resolved.extend(
                member
                for member in self._expand(entity_id)
                if self._exists(member) and (only is None or _domain_of(member) == only)
            )
        if targets.indirect:
            resolved.extend(self._resolve_indirect(only, targets.indirect))
        resolved = list(dict.fromkeys(resolved))
        if not resolved:
            _refuse(f"none of the targets is a {only or 'controllable'} entity")
        if len(resolved) > MAX_TARGETS:
            _refuse("the call reaches too many entities")
        return resolved

    def _resolve_indirect(
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
                _refuse(
                    f"{key} {', '.join(sorted(missing))} does not exist "
                    "(use list_entities to find the entities)"
                )
        # Hidden entities in the area are left alone; the others still change.
        found = [
            entity_id
            for entity_id in sorted(selected.indirectly_referenced)
            if (only is None or _domain_of(entity_id) == only)
            and self.visible(entity_id)
        ]
        if not found:
            where = ", ".join(
                f"{key} {', '.join(ids)}" for key, ids in indirect.items()
            )
            kind = f"{only} entity" if only else "entity"
            _refuse(f"there is no exposed {kind} in {where}")
        return found

    def _confirm(self, reason: str) -> None:
        self.reasons[reason] = None

    def _judge_direct(
        self,
        domain: str,
        service: str,
        entity_id: str,
        data: Mapping[str, Any],
        via: str | None = None,
    ) -> None:
        """Apply the confirmation entries to one entity the service acts on.

        ``via`` is the scene that would make the call, for the reason's words.
        """
        name = f"{domain}.{service}"
        reasons: list[str] = []
        if self.policy.needs_confirmation(domain, service):
            if domain in GATE_DOMAINS:
                if self._gates_automation(entity_id):
                    reasons.append(
                        f"{entity_id} is used by an automation, so {name} "
                        "needs confirmation"
                    )
            elif domain in self.policy.confirm or name not in ENTRANCE_SERVICES:
                reasons.append(f"{name} needs confirmation")
            elif self._entrance(entity_id) and not (
                name in POSITION_SERVICES and data.get("position") in (0, "0")
            ):
                reasons.append(f"opening {entity_id} needs confirmation")
        entity_domain = _domain_of(entity_id)
        if entity_domain != domain and self._sensitive(entity_id):
            reasons.append(f"{name} acts on {entity_id}, which needs confirmation")
        elif entity_domain not in SENSITIVE_DOMAINS and self._on_security_device(
            entity_id
        ):
            reasons.append(
                f"{entity_id} belongs to a lock, alarm or camera device, so "
                f"{name} needs confirmation"
            )
        if via is not None and reasons:
            reasons = [
                f"{via} would run {name} on {entity_id}, which needs confirmation"
            ]
        for reason in reasons:
            self._confirm(reason)

    def _judge_members(
        self, domain: str, service: str, entity_id: str, data: Mapping[str, Any]
    ) -> None:
        """Judge what an entity group or scene changes when the call reaches it."""
        if _domain_of(entity_id) == SCENE:
            self._judge_scene(entity_id)
            return
        for member, parent in self._walk(entity_id):
            if self.hass.states.get(member) is None:
                continue
            self.targets[member] = None
            if _domain_of(parent) != SCENE and _domain_of(member) == domain:
                # An entity group passes the same service on to its members.
                self._judge_direct(domain, service, member, data)
            elif self._sensitive(member):
                self._confirm(f"it would change {member}, which needs confirmation")

    def _judge_scene(self, scene_id: str) -> None:
        """Judge a scene as the calls it makes: unlocking is unlocking.

        A member whose new state is unknown (a scene of another integration)
        and that is sensitive still asks, as does any sensitive member.
        """
        wanted: dict[str, tuple[str, Mapping[str, Any]]] = {
            member: (state.state, state.attributes)
            for member, state in (scene_states(self.hass, scene_id) or {}).items()
        }
        for member, parent in self._walk(scene_id):
            if self.hass.states.get(member) is None:
                continue
            self.targets[member] = None
            if member not in wanted and parent in wanted:
                # A group in the scene: HA gives each member the group's state.
                wanted[member] = wanted[parent]
            before = len(self.reasons)
            if member in wanted and (
                action := scene_action(_domain_of(member), *wanted[member])
            ):
                service, data = action
                domain = _domain_of(member)
                try:
                    self._check_blocked(domain, service)
                except _RefusedError:
                    _refuse(
                        f"{scene_id} would run {domain}.{service}, which is "
                        "blocked for the assistant"
                    )
                self._judge_direct(domain, service, member, data, via=scene_id)
            if len(self.reasons) == before and self._sensitive(member):
                self._confirm(f"it would change {member}, which needs confirmation")

    def _judge_script(self, script_id: str) -> None:
        """Ask before an allowed script runs that may change a protective entity.

        The script's own actions (and those of the scripts and scenes it
        reaches) are what runs: a script that disarms the alarm disarms it.
        """
        seen = {script_id}
        frontier = [script_id]
        for _ in range(MAX_EXPANSION_DEPTH):
            following: list[str] = []
            for parent in frontier:
                reached = (
                    entities_in_script(self.hass, parent)
                    if _domain_of(parent) == SCRIPT
                    else self._members(parent)
                )
                for entity_id in sorted(reached):
                    if entity_id in seen or len(seen) > MAX_TARGETS:
                        continue
                    seen.add(entity_id)
                    following.append(entity_id)
                    if not self._protective(entity_id):
                        continue
                    if self.visible(entity_id):
                        self._confirm(
                            f"{script_id} may change {entity_id}, which needs "
                            "confirmation"
                        )
                    else:
                        self._confirm(
                            f"{script_id} may change an entity that needs confirmation"
                        )
            frontier = following

    def _judge_call(
        self, domain: str, service: str, targets: _Targets, data: Mapping[str, Any]
    ) -> None:
        """Resolve and judge a call of an entity service; record what runs."""
        self._check_entity_service(domain, service)
        entity_ids = self._resolve(domain, targets)
        if domain == SCRIPT and SCRIPT in self.policy.blocked:
            for entity_id in entity_ids:
                if entity_id not in self.policy.allowed_scripts:
                    _refuse(
                        f"{entity_id} is not an allowed script; scripts are "
                        "blocked unless allowed in the options"
                    )
        for entity_id in entity_ids:
            self.targets[entity_id] = None
            self._judge_direct(domain, service, entity_id, data)
            self._judge_members(domain, service, entity_id, data)
            if _domain_of(entity_id) == SCRIPT and service != "turn_off":
                self._judge_script(entity_id)
        self.calls.append(ResolvedCall(domain, service, tuple(entity_ids), data))

    def _judge_expanded(
        self, service: str, targets: _Targets, data: Mapping[str, Any]
    ) -> None:
        """Split homeassistant.turn_on/off/toggle per domain, as HA does."""
        entity_ids = self._resolve(None, targets)
        for domain, group in itertools.groupby(sorted(entity_ids), _domain_of):
            # HA skips its own domain (an endless loop) and domains without
            # the service.
            if domain == HOMEASSISTANT or not self.hass.services.has_service(
                domain, service
            ):
                continue
            self._check_blocked(domain, service)
            self._judge_call(domain, service, _Targets(list(group), {}), data)
        if not self.calls:
            _refuse(f"none of the targets supports {service}")

    def judge(self, domain: str, service: str, data: Mapping[str, Any]) -> None:
        """Resolve and judge the call; raise _RefusedError when it is blocked."""
        if not valid_domain(domain) or _SERVICE_NAME.match(service) is None:
            _refuse(f"the service {domain}.{service} does not exist")
        self._check_blocked(domain, service)
        if not self.hass.services.has_service(domain, service):
            _refuse(f"the service {domain}.{service} does not exist")
        rewritten = domain == SCRIPT and service not in SCRIPT_ENTITY_SERVICES
        # The calls that run carry other names: apply the entries for the name
        # the model used here.
        if (rewritten or domain == HOMEASSISTANT) and self.policy.needs_confirmation(
            domain, service
        ):
            self._confirm(f"{domain}.{service} needs confirmation")
        if rewritten:
            # script.<name> runs that script with the data as its variables:
            # judge it as script.turn_on on the script entity, which is also
            # how it runs, so the variables cannot pose as targets.
            data = {ATTR_ENTITY_ID: f"{SCRIPT}.{service}", "variables": dict(data)}
            service = "turn_on"
            self._check_blocked(domain, service)
        targets = _parse_targets(data)
        rest = {key: value for key, value in data.items() if key not in TARGET_KEYS}
        self._check_data(rest)
        if domain == HOMEASSISTANT:
            self._judge_expanded(service, targets, rest)
        else:
            self._judge_call(domain, service, targets, rest)


TAINT_REASON: Final = (
    "untrusted text (web results or documents) entered this turn, so every "
    "change waits for the user's confirmation"
)


def require_confirmation(
    verdict: Verdict, sources: Sequence[str] = (), reason: str = TAINT_REASON
) -> Verdict:
    """Make an allowed verdict wait for the user (the taint rule).

    Blocked stays blocked and a confirmation stays a confirmation; only what
    the policy would have let run at once now waits for a person. ``sources``
    (what outside text is in the prompt) travel with the verdict, so the
    confirmation request can say why it asks.
    """
    if verdict.decision is Decision.BLOCK:
        return verdict
    if verdict.decision is Decision.CONFIRM:
        return replace(verdict, taint_sources=tuple(sources))
    return Verdict(
        Decision.CONFIRM,
        reason,
        verdict.targets,
        verdict.calls,
        taint_sources=tuple(sources),
        because_of_taint=True,
    )


def is_visible(hass: HomeAssistant, entity_id: str) -> bool:
    """Tell whether the assistant may see the entity: exists, exposed, no hidden member.

    Everything else is answered as if it did not exist.
    """
    try:
        return _Judge(hass, DEFAULT_POLICY).visible(entity_id)
    except _RefusedError:
        # Too big or too deep to walk: every call on it is refused for that.
        return True


def evaluate_call(
    hass: HomeAssistant,
    domain: str,
    service: str,
    data: Mapping[str, Any],
    policy: Policy | None = None,
) -> Verdict:
    """Decide a service call as the model wrote it (targets inside ``data``).

    ``policy`` None is the default policy of DESIGN §3.
    """
    judge = _Judge(hass, DEFAULT_POLICY if policy is None else policy)
    domain = str(domain).strip().lower()
    service = str(service).strip().lower()
    try:
        judge.judge(domain, service, data)
    except _RefusedError as err:
        return Verdict(Decision.BLOCK, str(err), tuple(judge.targets))
    targets = tuple(judge.targets)
    calls = tuple(judge.calls)
    if judge.reasons:
        return Verdict(Decision.CONFIRM, "; ".join(judge.reasons), targets, calls)
    return Verdict(Decision.ALLOW, "allowed", targets, calls)
