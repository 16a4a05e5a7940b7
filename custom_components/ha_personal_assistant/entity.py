"""The device every entity of an entry belongs to."""

from __future__ import annotations

from typing import TYPE_CHECKING

from homeassistant.helpers.device_registry import DeviceEntryType, DeviceInfo
from homeassistant.helpers.entity import Entity

from .const import CONF_MODEL, DOMAIN

if TYPE_CHECKING:
    from .data import PersonalAssistantConfigEntry


class PersonalAssistantEntity(Entity):
    """An entity of the assistant's service device, named after its purpose."""

    _attr_has_entity_name = True
    _attr_should_poll = False

    def __init__(self, entry: PersonalAssistantConfigEntry, key: str) -> None:
        """Attach the entity to the entry's device."""
        self.entry = entry
        self._attr_unique_id = f"{entry.entry_id}_{key}" if key else entry.entry_id
        self._attr_device_info = DeviceInfo(
            identifiers={(DOMAIN, entry.entry_id)},
            name=entry.title,
            manufacturer="Ollama",
            model=entry.data[CONF_MODEL],
            entry_type=DeviceEntryType.SERVICE,
        )
