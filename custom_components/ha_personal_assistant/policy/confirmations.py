"""Which calls must wait for a person's Confirm, and why.

The confirmation entries of the policy applied to each entity a call changes
(an entrance opened, a helper an automation uses, another entity of a lock's
device), to what an entity group or scene changes (a scene is judged by the
calls it makes: unlocking is unlocking), and to what an allowed script may
change. ``require_confirmation`` is the taint rule: after outside text entered
the conversation, every change waits for a person.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Final

from homeassistant.components.script import entities_in_script

from .protection import (
    ENTRANCE_SERVICES,
    GATE_DOMAINS,
    POSITION_SERVICES,
    SENSITIVE_DOMAINS,
)
from .rules import SCENE, SCRIPT, check_blocked
from .targets import scene_action, scene_states
from .verdict import (
    MAX_EXPANSION_DEPTH,
    MAX_TARGETS,
    Decision,
    RefusedError,
    Verdict,
    domain_of,
    refuse,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from homeassistant.core import HomeAssistant

    from .protection import Protection
    from .rules import Policy
    from .verdict import Findings
    from .visibility import Visibility


class ConfirmationRules:
    """Records, for one call being judged, every reason it must wait for a person."""

    def __init__(
        self,
        hass: HomeAssistant,
        policy: Policy,
        *,
        visibility: Visibility,
        protection: Protection,
        findings: Findings,
    ) -> None:
        """Keep what the rules read and the findings they add to."""
        self.hass = hass
        self.policy = policy
        self.visibility = visibility
        self.protection = protection
        self.findings = findings

    def judge_direct(
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
                if self.protection.gates_automation(entity_id):
                    reasons.append(
                        f"{entity_id} is used by an automation, so {name} "
                        "needs confirmation"
                    )
            elif domain in self.policy.confirm or name not in ENTRANCE_SERVICES:
                reasons.append(f"{name} needs confirmation")
            elif self.protection.entrance(entity_id) and not (
                name in POSITION_SERVICES and data.get("position") in (0, "0")
            ):
                reasons.append(f"opening {entity_id} needs confirmation")
        entity_domain = domain_of(entity_id)
        if entity_domain != domain and self.protection.sensitive(entity_id):
            reasons.append(f"{name} acts on {entity_id}, which needs confirmation")
        elif (
            entity_domain not in SENSITIVE_DOMAINS
            and self.protection.on_security_device(entity_id)
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
            self.findings.confirm(reason)

    def judge_members(
        self, domain: str, service: str, entity_id: str, data: Mapping[str, Any]
    ) -> None:
        """Judge what an entity group or scene changes when the call reaches it."""
        if domain_of(entity_id) == SCENE:
            self.judge_scene(entity_id)
            return
        for member, parent in self.visibility.walk(entity_id):
            if self.hass.states.get(member) is None:
                continue
            self.findings.targets[member] = None
            if domain_of(parent) != SCENE and domain_of(member) == domain:
                # An entity group passes the same service on to its members.
                self.judge_direct(domain, service, member, data)
            elif self.protection.sensitive(member):
                self.findings.confirm(
                    f"it would change {member}, which needs confirmation"
                )

    def judge_scene(self, scene_id: str) -> None:
        """Judge a scene as the calls it makes: unlocking is unlocking.

        A member whose new state is unknown (a scene of another integration)
        and that is sensitive still asks, as does any sensitive member.
        """
        wanted: dict[str, tuple[str, Mapping[str, Any]]] = {
            member: (state.state, state.attributes)
            for member, state in (scene_states(self.hass, scene_id) or {}).items()
        }
        for member, parent in self.visibility.walk(scene_id):
            if self.hass.states.get(member) is None:
                continue
            self.findings.targets[member] = None
            if member not in wanted and parent in wanted:
                # A group in the scene: HA gives each member the group's state.
                wanted[member] = wanted[parent]
            before = len(self.findings.reasons)
            if member in wanted and (
                action := scene_action(domain_of(member), *wanted[member])
            ):
                service, data = action
                domain = domain_of(member)
                try:
                    check_blocked(self.policy, domain, service)
                except RefusedError:
                    refuse(
                        f"{scene_id} would run {domain}.{service}, which is "
                        "blocked for the assistant"
                    )
                self.judge_direct(domain, service, member, data, via=scene_id)
            if len(self.findings.reasons) == before and self.protection.sensitive(
                member
            ):
                self.findings.confirm(
                    f"it would change {member}, which needs confirmation"
                )

    def judge_script(self, script_id: str) -> None:
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
                    if domain_of(parent) == SCRIPT
                    else self.visibility.members(parent)
                )
                for entity_id in sorted(reached):
                    if entity_id in seen or len(seen) > MAX_TARGETS:
                        continue
                    seen.add(entity_id)
                    following.append(entity_id)
                    if not self.protection.protective(entity_id):
                        continue
                    if self.visibility.visible(entity_id):
                        self.findings.confirm(
                            f"{script_id} may change {entity_id}, which needs "
                            "confirmation"
                        )
                    else:
                        self.findings.confirm(
                            f"{script_id} may change an entity that needs confirmation"
                        )
            frontier = following


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
