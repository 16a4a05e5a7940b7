"""The action permission policy: allow, confirm or block, decided on real targets."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final

from homeassistant.components.homeassistant.exposed_entities import (
    async_should_expose,
)
from homeassistant.const import ATTR_DEVICE_CLASS, ATTR_ENTITY_ID

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant

ASSISTANT: Final = "conversation"


class Decision(StrEnum):
    """What the policy lets a service call do."""

    ALLOW = "allow"
    CONFIRM = "confirm"
    BLOCK = "block"


# Domains whose services reach past the entities the user exposed: the host,
# the configuration, other people's messages. Never callable from a chat.
BLOCKED_DOMAINS: Final = frozenset(
    {
        "backup",
        "hassio",
        "homeassistant",
        "logger",
        "notify",
        "persistent_notification",
        "python_script",
        "recorder",
        "rest_command",
        "script",
        "shell_command",
        "system_log",
        "telegram_bot",
    }
)
BLOCKED_SERVICES: Final = frozenset({("automation", "reload")})

# Services that need the user's confirmation whatever the target.
CONFIRM_SERVICES: Final = frozenset(
    {
        ("lock", "unlock"),
        ("lock", "open"),
        ("automation", "trigger"),
        ("camera", "turn_on"),
        ("camera", "turn_off"),
        ("camera", "enable_motion_detection"),
        ("camera", "disable_motion_detection"),
    }
)
CONFIRM_DOMAINS: Final = frozenset({"alarm_control_panel"})

# Opening these lets someone into the house.
OPENING_SERVICES: Final = {
    "cover": frozenset(
        {"open_cover", "set_cover_position", "toggle", "open_cover_tilt"}
    ),
    "valve": frozenset({"open_valve", "set_valve_position", "toggle"}),
}
ENTRANCE_DEVICE_CLASSES: Final = frozenset({"garage", "gate", "door"})

# A scene or group sets its members; members in these domains are sensitive.
SENSITIVE_MEMBER_DOMAINS: Final = frozenset({"lock", "alarm_control_panel", "camera"})
MAX_EXPANSION_DEPTH: Final = 3


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
    # The entities the call would really change, after expansion.
    targets: tuple[str, ...]
    # What to execute when allowed or confirmed; empty when blocked.
    calls: tuple[ResolvedCall, ...] = ()


def evaluate_call(
    hass: HomeAssistant, domain: str, service: str, data: Mapping[str, Any]
) -> Verdict:
    """Decide a service call as the model wrote it (targets inside ``data``)."""
    raw = data.get(ATTR_ENTITY_ID)
    if isinstance(raw, str):
        entity_ids = [p.strip().lower() for p in raw.split(",") if p.strip()]
    elif isinstance(raw, (list, tuple)):
        entity_ids = [str(p).strip().lower() for p in raw if str(p).strip()]
    else:
        entity_ids = []
    extra = {k: v for k, v in data.items() if k != ATTR_ENTITY_ID}
    verdict = evaluate(hass, domain, service, entity_ids)
    if verdict.decision is Decision.BLOCK:
        return verdict
    return Verdict(
        verdict.decision,
        verdict.reason,
        verdict.targets,
        (ResolvedCall(domain, service, tuple(entity_ids), extra),),
    )


def _members(hass: HomeAssistant, entity_id: str) -> list[str]:
    """Return the entities a group or scene stands for (empty for plain entities)."""
    state = hass.states.get(entity_id)
    if state is None:
        return []
    members = state.attributes.get(ATTR_ENTITY_ID)
    if isinstance(members, str):
        return [members]
    if isinstance(members, (list, tuple)):
        return [m for m in members if isinstance(m, str)]
    return []


def expand_targets(hass: HomeAssistant, entity_ids: list[str]) -> list[str]:
    """Expand groups and scenes to the entities they change, targets included."""
    seen: list[str] = []
    frontier = list(entity_ids)
    for _ in range(MAX_EXPANSION_DEPTH + 1):
        following: list[str] = []
        for entity_id in frontier:
            if entity_id in seen:
                continue
            seen.append(entity_id)
            following.extend(_members(hass, entity_id))
        frontier = following
        if not frontier:
            break
    return seen


def _entrance(hass: HomeAssistant, entity_id: str) -> bool:
    state = hass.states.get(entity_id)
    return (
        state is not None
        and state.attributes.get(ATTR_DEVICE_CLASS) in ENTRANCE_DEVICE_CLASSES
    )


def evaluate(
    hass: HomeAssistant, domain: str, service: str, entity_ids: list[str]
) -> Verdict:
    """Decide a service call on the expanded, real targets."""
    if domain in BLOCKED_DOMAINS or (domain, service) in BLOCKED_SERVICES:
        return Verdict(
            Decision.BLOCK,
            f"{domain}.{service} is blocked for the assistant",
            tuple(entity_ids),
        )
    targets = expand_targets(hass, entity_ids)
    for entity_id in targets:
        if hass.states.get(entity_id) is None:
            return Verdict(
                Decision.BLOCK, f"{entity_id} does not exist", tuple(targets)
            )
        if not async_should_expose(hass, ASSISTANT, entity_id):
            return Verdict(
                Decision.BLOCK,
                f"{entity_id} is not exposed to the assistant",
                tuple(targets),
            )
    reasons: list[str] = []
    if (domain, service) in CONFIRM_SERVICES or domain in CONFIRM_DOMAINS:
        reasons.append(f"{domain}.{service} needs confirmation")
    if service in OPENING_SERVICES.get(domain, frozenset()):
        reasons.extend(
            f"opening {entity_id} needs confirmation"
            for entity_id in targets
            if _entrance(hass, entity_id)
        )
    # A scene or group reaches its members: judge what it would really touch.
    direct = set(entity_ids)
    for entity_id in targets:
        if entity_id in direct:
            continue
        member_domain = entity_id.split(".", 1)[0]
        if member_domain in SENSITIVE_MEMBER_DOMAINS or (
            member_domain in OPENING_SERVICES and _entrance(hass, entity_id)
        ):
            reasons.append(f"it would change {entity_id}, which needs confirmation")
    if reasons:
        return Verdict(Decision.CONFIRM, "; ".join(reasons), tuple(targets))
    return Verdict(Decision.ALLOW, "allowed", tuple(targets))
