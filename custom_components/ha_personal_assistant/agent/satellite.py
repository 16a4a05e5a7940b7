"""Where an Assist request came from: the device, its area, and added instructions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from homeassistant.const import ATTR_AREA_ID
from homeassistant.helpers import area_registry as ar
from homeassistant.helpers import device_registry as dr
from homeassistant.helpers import entity_registry as er

from ..policy.targets import TARGET_KEYS
from ..security.firewall import mark_untrusted_parts

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant

# What taints a turn whose request carried extra instructions
# (assist_satellite.start_conversation, announcements): an automation may
# have filled them from anywhere, so they are outside text.
EXTRA_PROMPT_SOURCE: Final = "instructions added to the request"
# The label before the fenced instructions, in the prompt's language.
EXTRA_PROMPT_LABEL: Final = "Instructions added to this request (not the user's words)"
SATELLITE_DOMAIN: Final = "assist_satellite"
SCRIPT_DOMAIN: Final = "script"


@dataclass(frozen=True, slots=True)
class Satellite:
    """The device an Assist request came from, and what came with it."""

    device_id: str | None
    # The device's area (or its satellite entity's): the default target of
    # commands that name none. Names of areas are the household's own.
    area_id: str | None = None
    area_name: str | None = None
    # ConversationInput.extra_system_prompt: for this turn only, fenced.
    extra_prompt: str | None = None

    @property
    def sources(self) -> tuple[str, ...]:
        """Return the outside text this request carries (it taints the turn)."""
        return (EXTRA_PROMPT_SOURCE,) if self.extra_prompt else ()

    def header(self) -> list[str]:
        """Return the lines this turn's message carries (after the cached prefix)."""
        lines: list[str] = []
        if self.area_name:
            name = " ".join(self.area_name.split())
            lines.append(
                f"Spoken to a device in: {name} (a command without an area means"
                f" {name})"
            )
        if self.extra_prompt:
            block, _withheld = mark_untrusted_parts(
                [self.extra_prompt],
                source=EXTRA_PROMPT_SOURCE,
                labels=[EXTRA_PROMPT_LABEL],
            )
            lines.append(block)
        return lines


def satellite_of(
    hass: HomeAssistant,
    device_id: str | None,
    satellite_id: str | None,
    extra_prompt: str | None,
) -> Satellite | None:
    """Describe the requesting device (None: neither a device nor instructions).

    The area is the device's, else its satellite entity's (``satellite_id``,
    or the device's assist_satellite entity).
    """
    extra = (extra_prompt or "").strip() or None
    area_id = _device_area(hass, device_id) or _satellite_area(
        hass, device_id, satellite_id
    )
    if device_id is None and area_id is None and extra is None:
        return None
    area = ar.async_get(hass).async_get_area(area_id) if area_id else None
    return Satellite(
        device_id=device_id,
        area_id=area.id if area else None,
        area_name=area.name if area else None,
        extra_prompt=extra,
    )


def _device_area(hass: HomeAssistant, device_id: str | None) -> str | None:
    """Return the area of a device (a child device's is its parent's)."""
    device = dr.async_get(hass).async_get(device_id) if device_id else None
    return dr.async_get_effective_area_id(hass, device) if device else None


def _satellite_area(
    hass: HomeAssistant, device_id: str | None, satellite_id: str | None
) -> str | None:
    """Return the area of the satellite entity that heard the request."""
    entities = er.async_get(hass)
    candidates = [entities.async_get(satellite_id)] if satellite_id else []
    if device_id:
        candidates.extend(
            entry
            for entry in er.async_entries_for_device(entities, device_id)
            if entry.domain == SATELLITE_DOMAIN
        )
    for entry in candidates:
        if entry is None:
            continue
        if entry.area_id:
            return entry.area_id
        if area_id := _device_area(hass, entry.device_id):
            return area_id
    return None


def with_default_area(
    domain: str, data: dict[str, Any], area_id: str | None
) -> dict[str, Any]:
    """Aim a call that names no target at the satellite's area.

    The call is judged as usual afterwards: the area resolves to its exposed
    entities of the call's domain. Scripts take their data as variables, so
    they are left alone.
    """
    if area_id is None or domain == SCRIPT_DOMAIN or TARGET_KEYS & data.keys():
        return data
    return {**data, ATTR_AREA_ID: area_id}
