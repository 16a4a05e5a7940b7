"""What the assistant may see: exposed entities, and groups with no hidden member.

An entity is *visible* when it exists, is exposed to Assist and reaches no
unexposed entity (a group or scene with a hidden member is not visible). Every
entity that is not visible gets the same answer, NOT_VISIBLE, whether it is
hidden or does not exist, and no refusal or confirmation ever names one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from homeassistant.components.homeassistant.exposed_entities import (
    async_should_expose,
)
from homeassistant.const import ATTR_ENTITY_ID, ATTR_GROUP_ENTITIES
from homeassistant.core import valid_entity_id
from homeassistant.helpers.group import GenericGroup, get_group_entities

from .verdict import MAX_EXPANSION_DEPTH, MAX_TARGETS, RefusedError, refuse

if TYPE_CHECKING:
    from collections.abc import Iterator

    from homeassistant.core import HomeAssistant

# Assist's id in Home Assistant's exposure settings: what is exposed to it is
# what the assistant may see.
ASSISTANT: Final = "conversation"

# The one answer for an entity that is hidden or does not exist: it names no
# entity, so the two cannot be told apart.
NOT_VISIBLE: Final = (
    "an entity_id you gave is not an entity you can see; use list_entities "
    "to find the right one"
)


class Visibility:
    """Walks groups and scenes to tell what the assistant may see."""

    def __init__(self, hass: HomeAssistant) -> None:
        """Keep Home Assistant, whose states and exposure settings are read."""
        self.hass = hass

    def exposed(self, entity_id: str) -> bool:
        """Tell whether the entity is exposed to Assist."""
        return async_should_expose(self.hass, ASSISTANT, entity_id)

    def exists(self, entity_id: str) -> bool:
        """Tell whether the id is an entity id with a state."""
        return (
            valid_entity_id(entity_id) and self.hass.states.get(entity_id) is not None
        )

    def visible(self, entity_id: str) -> bool:
        """Tell whether the entity exists, is exposed and reaches no hidden entity."""
        if not (self.exists(entity_id) and self.exposed(entity_id)):
            return False
        # A member without a state has no entity to change. A group too big or
        # too deep to walk raises, naming only itself.
        return all(
            self.hass.states.get(member) is None or self.exposed(member)
            for member, _parent in self.walk(entity_id)
        )

    def members(self, entity_id: str) -> list[str]:
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

    def expanded_by_ha(self, entity_id: str) -> bool:
        """Tell whether HA replaces this id by its members when a service runs.

        The same test as homeassistant.helpers.group.expand_entity_ids.
        """
        if entity_id.startswith("group."):
            return True
        entity = get_group_entities(self.hass).get(entity_id)
        return entity is not None and isinstance(entity.group, GenericGroup)

    def walk(self, root: str) -> Iterator[tuple[str, str]]:
        """Yield (member, parent) for everything a group or scene reaches, bounded."""
        seen = {root}
        frontier = [root]
        for _ in range(MAX_EXPANSION_DEPTH):
            following: list[str] = []
            for parent in frontier:
                for member in self.members(parent):
                    if member in seen:
                        continue
                    seen.add(member)
                    if len(seen) > MAX_TARGETS:
                        refuse(f"{root} reaches too many entities")
                    yield member, parent
                    following.append(member)
            if not following:
                return
            frontier = following
        if any(m not in seen for parent in frontier for m in self.members(parent)):
            refuse(f"{root} nests groups too deeply")

    def expand(self, entity_id: str, depth: int = 0) -> Iterator[str]:
        """Replace groups by their members as HA does when the service runs."""
        if not self.expanded_by_ha(entity_id):
            yield entity_id
            return
        if depth >= MAX_EXPANSION_DEPTH:
            refuse(f"{entity_id} nests groups too deeply")
        for member in self.members(entity_id):
            yield from self.expand(member, depth + 1)


def is_visible(hass: HomeAssistant, entity_id: str) -> bool:
    """Tell whether the assistant may see the entity: exists, exposed, no hidden member.

    Everything else is answered as if it did not exist.
    """
    try:
        return Visibility(hass).visible(entity_id)
    except RefusedError:
        # Too big or too deep to walk: every call on it is refused for that.
        return True
