"""The action permission policy: allow, confirm or block, decided on real targets.

The model writes a service call; nothing here trusts it. Before deciding, the
call is resolved the way Home Assistant itself would resolve it: areas, devices,
floors and labels become entities (only the exposed ones are kept), old-style
groups become their members, ``homeassistant.turn_on`` becomes one call per
domain, and scenes and entity groups are judged by the entities they change.
The verdict carries the concrete calls to run, on explicit entity ids only, so
what runs is exactly what was judged.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final, NoReturn

from homeassistant.components.homeassistant.exposed_entities import (
    async_should_expose,
)
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
from homeassistant.helpers.group import GenericGroup, get_group_entities
from homeassistant.helpers.target import (
    TargetSelection,
    async_extract_referenced_entity_ids,
)

from ..const import CONF_ALLOWED_SCRIPTS, CONF_BLOCKED_SERVICES, CONF_CONFIRM_SERVICES

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant

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

# Opening these lets someone into the house; closing them does not.
ENTRANCE_DEVICE_CLASSES: Final = frozenset({"garage", "gate", "door"})
# Confirmation entries for these services only apply to entrances: opening a
# kitchen window is an everyday action. Tilting is left out on purpose: it
# turns slats, it does not open the way in.
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
# A scene, entity group or foreign service that reaches these needs a person.
SENSITIVE_DOMAINS: Final = frozenset({"lock", "alarm_control_panel", "camera"})

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
        "automation.trigger",
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

    def weakened(self) -> list[str]:
        """Describe, in English, where this policy is less safe than the defaults."""
        problems: list[str] = []
        for entry in CRITICAL_CONFIRMATIONS:
            domain, _, service = entry.partition(".")
            if self.needs_confirmation(domain, service) or self.is_blocked(
                domain, service
            ):
                continue
            if entry in ENTRANCE_SERVICES:
                problems.append(
                    f"{entry} opens garage doors, gates and doors without confirmation"
                )
            else:
                problems.append(f"{entry} runs without confirmation")
        # Only turn_on, turn_off and toggle of homeassistant ever run, judged
        # per domain, whatever the entry says: dropping it changes nothing.
        for entry in sorted(DEFAULT_BLOCKED_SERVICES - {HOMEASSISTANT}):
            domain, _, service = entry.partition(".")
            if service and self.is_blocked(domain, service):
                continue
            if not service and domain in self.blocked:
                continue
            problems.append(f"{entry} is no longer blocked")
        return problems


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

    def _sensitive(self, entity_id: str) -> bool:
        """Tell whether changing the entity in any way deserves a person's look."""
        domain = _domain_of(entity_id)
        return domain in SENSITIVE_DOMAINS or (
            domain in {"cover", "valve"} and self._entrance(entity_id)
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

    def _unexposed_member(self, root: str) -> str | None:
        """Return a member the user did not expose, if the entity reaches one."""
        for member, _parent in self._walk(root):
            # A member without a state has no entity to change.
            if self.hass.states.get(member) is not None and not self._exposed(member):
                return member
        return None

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
        """Judge entities named in the service data (tts players, members to join)."""
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
                    if self._exists(entity_id := part.strip().lower()):
                        self._check_named(entity_id)

    def _check_named(self, entity_id: str) -> None:
        """Refuse a hidden entity named in the data; ask for a sensitive one."""
        if not self._exposed(entity_id):
            _refuse(f"{entity_id} is not exposed to the assistant")
        if (unexposed := self._unexposed_member(entity_id)) is not None:
            _refuse(f"{unexposed} is not exposed to the assistant")
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
        """Return the explicit, exposed entities a call on ``domain`` changes.

        ``domain`` None keeps every domain (homeassistant.turn_on and friends).
        """
        if targets.empty:
            _refuse(
                "name the target entities in entity_id (use list_entities to find them)"
            )
        only = domain if domain is not None and self._owns_entities(domain) else None
        resolved: list[str] = []
        for entity_id in targets.entity_ids:
            if not self._exists(entity_id):
                _refuse(f"{entity_id} does not exist")
            if not self._exposed(entity_id):
                _refuse(f"{entity_id} is not exposed to the assistant")
            if (unexposed := self._unexposed_member(entity_id)) is not None:
                _refuse(f"{unexposed} is not exposed to the assistant")
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
        for key, missing in (
            (ATTR_AREA_ID, selected.missing_areas),
            (ATTR_DEVICE_ID, selected.missing_devices),
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
            and self._exists(entity_id)
            and self._exposed(entity_id)
            and self._unexposed_member(entity_id) is None
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
        self, domain: str, service: str, entity_id: str, data: Mapping[str, Any]
    ) -> None:
        """Apply the confirmation entries to one entity the service acts on."""
        name = f"{domain}.{service}"
        if domain in self.policy.confirm:
            self._confirm(f"{name} needs confirmation")
        elif name in self.policy.confirm:
            if name not in ENTRANCE_SERVICES:
                self._confirm(f"{name} needs confirmation")
            elif self._entrance(entity_id) and not (
                name in POSITION_SERVICES and data.get("position") in (0, "0")
            ):
                self._confirm(f"opening {entity_id} needs confirmation")
        if _domain_of(entity_id) != domain and self._sensitive(entity_id):
            self._confirm(f"{name} acts on {entity_id}, which needs confirmation")

    def _judge_members(
        self, domain: str, service: str, entity_id: str, data: Mapping[str, Any]
    ) -> None:
        """Judge what an entity group or scene changes when the call reaches it."""
        for member, parent in self._walk(entity_id):
            if self.hass.states.get(member) is None:
                continue
            self.targets[member] = None
            if _domain_of(parent) != SCENE and _domain_of(member) == domain:
                # An entity group passes the same service on to its members.
                self._judge_direct(domain, service, member, data)
            elif self._sensitive(member):
                self._confirm(f"it would change {member}, which needs confirmation")

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


def require_confirmation(verdict: Verdict, reason: str = TAINT_REASON) -> Verdict:
    """Make an allowed verdict wait for the user (the taint rule).

    Blocked stays blocked and a confirmation stays a confirmation; only what
    the policy would have let run at once now waits for a person.
    """
    if verdict.decision is not Decision.ALLOW:
        return verdict
    return Verdict(Decision.CONFIRM, reason, verdict.targets, verdict.calls)


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
