"""The action permission policy: allow, confirm or block, decided on real targets.

The model writes a service call; nothing here trusts it. Before deciding, the
call is resolved the way Home Assistant itself would resolve it (targets.py):
areas, devices, floors and labels become entities (only the exposed ones are
kept), old-style groups become their members, ``homeassistant.turn_on``
becomes one call per domain, and scenes and entity groups are judged by the
entities they change (confirmations.py). The verdict carries the concrete
calls to run, on explicit entity ids only, so what runs is exactly what was
judged. What the assistant may see is in visibility.py, which services the
options block or ask for in rules.py, which entities are protected in
protection.py.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from homeassistant.const import ATTR_ENTITY_ID
from homeassistant.core import valid_domain, valid_entity_id
from homeassistant.helpers import config_validation as cv

from .confirmations import ConfirmationRules
from .protection import Protection
from .rules import (
    DEFAULT_POLICY,
    HOMEASSISTANT,
    SCRIPT,
    SCRIPT_ENTITY_SERVICES,
    SERVICE_NAME,
    check_blocked,
)
from .targets import TARGET_KEYS, TargetResolver, Targets, parse_targets
from .verdict import (
    MAX_DATA_ITEMS,
    Decision,
    Findings,
    RefusedError,
    ResolvedCall,
    Verdict,
    domain_of,
    refuse,
)
from .visibility import NOT_VISIBLE, Visibility

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant

    from .rules import Policy


class _Judge:
    """Resolves one call as the model wrote it; collects calls and reasons."""

    def __init__(self, hass: HomeAssistant, policy: Policy) -> None:
        self.hass = hass
        self.policy = policy
        self.findings = Findings()
        self.visibility = Visibility(hass)
        self.protection = Protection(hass, policy.confirm)
        self.resolver = TargetResolver(hass, self.visibility)
        self.rules = ConfirmationRules(
            hass,
            policy,
            visibility=self.visibility,
            protection=self.protection,
            findings=self.findings,
        )

    def judge(self, domain: str, service: str, data: Mapping[str, Any]) -> None:
        """Resolve and judge the call; raise _RefusedError when it is blocked."""
        if not valid_domain(domain) or SERVICE_NAME.match(service) is None:
            refuse(f"the service {domain}.{service} does not exist")
        check_blocked(self.policy, domain, service)
        if not self.hass.services.has_service(domain, service):
            refuse(f"the service {domain}.{service} does not exist")
        rewritten = domain == SCRIPT and service not in SCRIPT_ENTITY_SERVICES
        # The calls that run carry other names: apply the entries for the name
        # the model used here.
        if (rewritten or domain == HOMEASSISTANT) and self.policy.needs_confirmation(
            domain, service
        ):
            self.findings.confirm(f"{domain}.{service} needs confirmation")
        if rewritten:
            # script.<name> runs that script with the data as its variables:
            # judge it as script.turn_on on the script entity, which is also
            # how it runs, so the variables cannot pose as targets.
            data = {ATTR_ENTITY_ID: f"{SCRIPT}.{service}", "variables": dict(data)}
            service = "turn_on"
            check_blocked(self.policy, domain, service)
        targets = parse_targets(data)
        rest = {key: value for key, value in data.items() if key not in TARGET_KEYS}
        self._check_data(rest)
        if domain == HOMEASSISTANT:
            self._expanded(service, targets, rest)
        else:
            self._call(domain, service, targets, rest)

    def _call(
        self, domain: str, service: str, targets: Targets, data: Mapping[str, Any]
    ) -> None:
        """Resolve and judge a call of an entity service; record what runs."""
        self._check_entity_service(domain, service)
        entity_ids = self.resolver.resolve(domain, targets)
        if domain == SCRIPT and SCRIPT in self.policy.blocked:
            for entity_id in entity_ids:
                if entity_id not in self.policy.allowed_scripts:
                    refuse(
                        f"{entity_id} is not an allowed script; scripts are "
                        "blocked unless allowed in the options"
                    )
        for entity_id in entity_ids:
            self.findings.targets[entity_id] = None
            self.rules.judge_direct(domain, service, entity_id, data)
            self.rules.judge_members(domain, service, entity_id, data)
            if domain_of(entity_id) == SCRIPT and service != "turn_off":
                self.rules.judge_script(entity_id)
        self.findings.calls.append(
            ResolvedCall(domain, service, tuple(entity_ids), data)
        )

    def _expanded(
        self, service: str, targets: Targets, data: Mapping[str, Any]
    ) -> None:
        """Split homeassistant.turn_on/off/toggle per domain, as HA does."""
        entity_ids = self.resolver.resolve(None, targets)
        for domain, group in itertools.groupby(sorted(entity_ids), domain_of):
            # HA skips its own domain (an endless loop) and domains without
            # the service.
            if domain == HOMEASSISTANT or not self.hass.services.has_service(
                domain, service
            ):
                continue
            check_blocked(self.policy, domain, service)
            self._call(domain, service, Targets(list(group), {}), data)
        if not self.findings.calls:
            refuse(f"none of the targets supports {service}")

    def _check_entity_service(self, domain: str, service: str) -> None:
        handler = self.hass.services.async_services_for_domain(domain).get(service)
        if handler is None:
            refuse(f"the service {domain}.{service} does not exist")
        # Only entity services filter what they touch by target; anything else
        # (mqtt.publish, conversation.process...) reaches past exposed entities.
        if handler.schema is None or not cv.is_entity_service_schema(handler.schema):
            refuse(
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
                refuse("the service data is too large")
            if isinstance(value, Mapping):
                stack.extend(value.keys())
                stack.extend(value.values())
            elif isinstance(value, (list, tuple)):
                stack.extend(value)
            elif isinstance(value, str) and "." in value:
                for part in value.split(","):
                    entity_id = part.strip().lower()
                    if valid_entity_id(entity_id) and self.resolver.owns_entities(
                        domain_of(entity_id)
                    ):
                        self._check_named(entity_id)

    def _check_named(self, entity_id: str) -> None:
        """Refuse an entity named in the data that is not visible; ask for one."""
        if not self.visibility.visible(entity_id):
            refuse(NOT_VISIBLE)
        # A named group or scene stands for its members.
        for named in (
            entity_id,
            *(member for member, _ in self.visibility.walk(entity_id)),
        ):
            if self.protection.sensitive(named):
                self.findings.confirm(
                    f"the call names {named}, which needs confirmation"
                )


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
    except RefusedError as err:
        return Verdict(Decision.BLOCK, str(err), tuple(judge.findings.targets))
    targets = tuple(judge.findings.targets)
    calls = tuple(judge.findings.calls)
    if judge.findings.reasons:
        return Verdict(
            Decision.CONFIRM, "; ".join(judge.findings.reasons), targets, calls
        )
    return Verdict(Decision.ALLOW, "allowed", targets, calls)
