"""Home Assistant's own knowledge as documents: exposed entities, areas, floors."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from homeassistant.helpers import area_registry as ar
from homeassistant.helpers import device_registry as dr
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers import floor_registry as fr

from ..security.names import model_name
from ..tools.ha import exposed_states

if TYPE_CHECKING:
    from collections.abc import Mapping

    from homeassistant.core import HomeAssistant


def _area_of(
    hass: HomeAssistant, entry: er.RegistryEntry | None
) -> ar.AreaEntry | None:
    """Return the entity's area, its own or its device's."""
    if entry is None:
        return None
    area_id = entry.area_id
    if area_id is None and entry.device_id is not None:
        device = dr.async_get(hass).async_get(entry.device_id)
        area_id = device.area_id if device is not None else None
    return ar.async_get(hass).async_get_area(area_id) if area_id else None


def _floor_name(hass: HomeAssistant, area: ar.AreaEntry) -> str | None:
    floor = fr.async_get(hass).async_get_floor(area.floor_id) if area.floor_id else None
    return floor.name if floor is not None else None


def _aliases(entry: er.RegistryEntry | None) -> list[str]:
    if entry is None:
        return []
    # Newer registries hold a marker for "the entity's own name" among aliases.
    return sorted(a for a in entry.aliases if isinstance(a, str))


def _description(hass: HomeAssistant, entity_id: str) -> str:
    """Return an automation's description from its configuration, if any."""
    component: Any = hass.data.get("automation")
    entity = component.get_entity(entity_id) if component is not None else None
    raw = getattr(entity, "raw_config", None)
    if isinstance(raw, dict):
        return " ".join(str(raw.get("description") or "").split())
    return ""


def ha_knowledge(hass: HomeAssistant) -> dict[str, str]:  # noqa: PLR0912
    """Describe the exposed part of the house as text documents, by title.

    Only entities exposed to Assist appear, and only the areas and floors they
    are in; run on the event loop (registries). A few milliseconds for
    thousands of entities: cheap enough to check every search result against.
    """
    registry = er.async_get(hass)
    by_area: dict[str, list[str]] = {}
    automations: list[str] = []
    scenes: list[str] = []
    # Only areas with something exposed in them are described at all.
    described: dict[str, ar.AreaEntry] = {}
    for state in exposed_states(hass):
        entry = registry.async_get(state.entity_id)
        area = _area_of(hass, entry)
        domain = state.domain
        # A name a device chose is not the house's knowledge (security/names.py).
        name = model_name(hass, state)
        line = f"{name} ({state.entity_id}) is a {domain.replace('_', ' ')}"
        if area is not None:
            described[area.id] = area
            line += f" in the area {area.name}"
            if floor := _floor_name(hass, area):
                line += f" on the floor {floor}"
        line += "."
        if aliases := _aliases(entry):
            line += f" Also called: {', '.join(aliases)}."
        if domain == "automation":
            if description := _description(hass, state.entity_id):
                line += f" What it does: {description}"
            automations.append(line)
        elif domain == "scene":
            scenes.append(line)
        else:
            by_area.setdefault(area.name if area is not None else "no area", []).append(
                line
            )
    docs: dict[str, str] = {}
    for area_name, lines in sorted(by_area.items()):
        docs[f"Home Assistant devices: {area_name}"] = "\n\n".join(lines)
    if automations:
        docs["Home Assistant automations"] = "\n\n".join(automations)
    if scenes:
        docs["Home Assistant scenes"] = "\n\n".join(scenes)
    area_lines = []
    for area_entry in sorted(described.values(), key=lambda a: a.name):
        line = f"The area {area_entry.name}"
        if on_floor := _floor_name(hass, area_entry):
            line += f" is on the floor {on_floor}"
        line += "."
        if area_entry.aliases:
            line += f" Also called: {', '.join(sorted(area_entry.aliases))}."
        area_lines.append(line)
    if area_lines:
        docs["Home Assistant areas and floors"] = "\n\n".join(area_lines)
    return docs


def still_known(title: str, content: str, knowledge: Mapping[str, str]) -> str:
    """Return the part of an HA knowledge chunk that is still true now.

    The index is rebuilt in the background, so a chunk may describe an entity
    that was hidden since, or an area with nothing exposed any more. Every
    paragraph (or run of sentences of one) must still be in what
    :func:`ha_knowledge` says now under the same title; the rest is dropped.
    Only text about exposed entities can pass, however stale the index.
    """
    current = knowledge.get(title)
    if current is None:
        return ""
    return "\n\n".join(
        part for part in content.split("\n\n") if part.strip() and part in current
    )
