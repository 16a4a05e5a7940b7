"""What the policy protects: entrances, security devices, helpers automations use.

The hard rules about entities, whatever the options say: a lock, an alarm
panel or a camera (and any other entity of their device) deserves a person's
look, as does opening an entrance; a helper's confirmation entries apply only
when an automation uses it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from homeassistant.components.automation import automations_with_entity
from homeassistant.const import ATTR_DEVICE_CLASS
from homeassistant.helpers import entity_registry as er

from .verdict import domain_of

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant

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


class Protection:
    """Tells, for one policy, which entities a change needs a person's look for."""

    def __init__(self, hass: HomeAssistant, confirm: frozenset[str]) -> None:
        """Keep Home Assistant and the policy's confirmation entries."""
        self.hass = hass
        self.confirm = confirm

    def entrance(self, entity_id: str) -> bool:
        """Tell whether the entity is a garage door, gate, door or gas valve."""
        state = self.hass.states.get(entity_id)
        return (
            state is not None
            and state.attributes.get(ATTR_DEVICE_CLASS) in ENTRANCE_DEVICE_CLASSES
        )

    def on_security_device(self, entity_id: str) -> bool:
        """Tell whether another entity of the same device is a lock, alarm or camera.

        A camera's privacy switch, a lock's auto-unlock or an alarm panel's
        bypass switch weaken the protection as much as the camera, the lock or
        the panel themselves.
        """
        if domain_of(entity_id) in SENSITIVE_DOMAINS:
            return False
        registry = er.async_get(self.hass)
        entry = registry.async_get(entity_id)
        if entry is None or entry.device_id is None:
            return False
        return any(
            domain_of(sibling.entity_id) in SENSITIVE_DOMAINS
            for sibling in er.async_entries_for_device(registry, entry.device_id)
        )

    def sensitive(self, entity_id: str) -> bool:
        """Tell whether changing the entity in any way deserves a person's look."""
        domain = domain_of(entity_id)
        return (
            domain in SENSITIVE_DOMAINS
            or (domain in {"cover", "valve"} and self.entrance(entity_id))
            or self.on_security_device(entity_id)
        )

    def gates_automation(self, entity_id: str) -> bool:
        """Tell whether the entity is a helper that some automation uses."""
        return domain_of(entity_id) in GATE_DOMAINS and bool(
            automations_with_entity(self.hass, entity_id)
        )

    def protective(self, entity_id: str) -> bool:
        """Tell whether some change to the entity would need confirmation.

        The hard rule (sensitive), or a confirmation entry of the policy that
        applies to this entity for some service of its domain.
        """
        if self.sensitive(entity_id):
            return True
        domain = domain_of(entity_id)
        entries = [
            entry
            for entry in self.confirm
            if entry == domain or entry.startswith(f"{domain}.")
        ]
        if not entries:
            return False
        if domain in GATE_DOMAINS:
            return self.gates_automation(entity_id)
        return (
            domain in self.confirm
            or any(entry not in ENTRANCE_SERVICES for entry in entries)
            or self.entrance(entity_id)
        )
