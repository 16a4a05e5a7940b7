"""Which services the assistant may call: the options, their defaults, hard rules.

Entries are ``domain`` (every service of it) or ``domain.service``. The
defaults follow DESIGN §3; ``Policy.weakened`` says where an entry's options
are less safe than them (the repair issue), and ``check_blocked`` applies the
entries together with the rules no option changes (no reload, only the
per-domain homeassistant services).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from homeassistant.core import valid_domain

from ..const import CONF_ALLOWED_SCRIPTS, CONF_BLOCKED_SERVICES, CONF_CONFIRM_SERVICES
from .protection import ENTRANCE_SERVICES, GATE_DOMAINS
from .verdict import refuse

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

HOMEASSISTANT: Final = "homeassistant"
SCRIPT: Final = "script"
SCENE: Final = "scene"
# The generic services HA expands into one call per domain of the targets.
EXPANDED_SERVICES: Final = frozenset({"turn_on", "turn_off", "toggle"})
# The services of the script domain that act on script entities; any other
# script.<name> service runs the script of that name.
SCRIPT_ENTITY_SERVICES: Final = frozenset({"turn_on", "turn_off", "toggle"})

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

SERVICE_NAME: Final = re.compile(r"^[a-z0-9_]+$")


def is_valid_entry(entry: str) -> bool:
    """Tell whether a policy entry is a ``domain`` or a ``domain.service``."""
    domain, dot, service = entry.partition(".")
    return valid_domain(domain) and (not dot or SERVICE_NAME.match(service) is not None)


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


def check_blocked(policy: Policy, domain: str, service: str) -> None:
    """Refuse a service an entry or a hard rule blocks for the assistant."""
    name = f"{domain}.{service}"
    if service == "reload" or service.startswith("reload_"):
        # Reloading rereads configuration: never from a chat.
        refuse(f"{name} is blocked for the assistant")
    if domain == HOMEASSISTANT and service not in EXPANDED_SERVICES:
        refuse(f"{name} is blocked for the assistant")
    if name in policy.blocked:
        refuse(f"{name} is blocked for the assistant")
    # The domain entries of homeassistant and script leave room for the
    # per-domain expansion and for the allowed scripts, judged later.
    if domain in policy.blocked and domain not in {HOMEASSISTANT, SCRIPT}:
        refuse(f"{name} is blocked for the assistant")
