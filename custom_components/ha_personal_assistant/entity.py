"""The device every entity of an entry belongs to."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from homeassistant.helpers.device_registry import DeviceEntryType, DeviceInfo
from homeassistant.helpers.entity import Entity

from .const import CONF_MODEL, DOMAIN

if TYPE_CHECKING:
    from .data import PersonalAssistantConfigEntry

# The device's name, from strings.json ("device"): fixed, so entity ids, made
# from it and the entities' translated names, do not name the model or the
# server and stay right after a reconfigure.
DEVICE_TRANSLATION_KEY: Final = "assistant"
# The service is this integration's; Ollama only serves the model it runs.
MANUFACTURER: Final = "Personal Assistant integration"


def device_info(entry: PersonalAssistantConfigEntry) -> DeviceInfo:
    """Return the entry's service device: the assistant running the chat model."""
    return DeviceInfo(
        identifiers={(DOMAIN, entry.entry_id)},
        translation_key=DEVICE_TRANSLATION_KEY,
        manufacturer=MANUFACTURER,
        model=entry.data[CONF_MODEL],
        entry_type=DeviceEntryType.SERVICE,
    )


class PersonalAssistantEntity(Entity):
    """An entity of the assistant's service device, named after its purpose."""

    _attr_has_entity_name = True
    _attr_should_poll = False

    def __init__(self, entry: PersonalAssistantConfigEntry, key: str) -> None:
        """Attach the entity to the entry's device.

        The unique id is the entry id and the entity's key: it survives a
        reconfigure to another server or model, and so does the entity id.
        """
        self.entry = entry
        self._attr_unique_id = f"{entry.entry_id}_{key}" if key else entry.entry_id
        self._attr_device_info = device_info(entry)
