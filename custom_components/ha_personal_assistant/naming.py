"""The assistant's one name: its device's, in repairs, diagnostics and the entry.

The device is named by strings.json ("device": "Personal Assistant", the
product's name in every language) unless the user renamed it. Entries made
before this were titled after their model and server ("qwen3:4b on
localhost"); such a generated title becomes the device's name at setup, so the
integration page, Repairs and diagnostics all say the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from homeassistant.core import callback
from homeassistant.helpers import device_registry as dr
from yarl import URL

from .backends import entry_url
from .const import CONF_MODEL, DOMAIN

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from homeassistant.config_entries import ConfigEntry
    from homeassistant.core import HomeAssistant

# The device's name in strings.json, and a new entry's title.
DEVICE_NAME: Final = "Personal Assistant"


@callback
def assistant_name(hass: HomeAssistant, entry_id: str) -> str:
    """Return the name people see for the assistant: its device's."""
    device = dr.async_get(hass).async_get_device_by_identifier(
        (DOMAIN, entry_id), entry_id
    )
    if device is not None and (name := device.name_by_user or device.name):
        return name
    return DEVICE_NAME


def generated_title(data: Mapping[str, Any]) -> str:
    """Return the title entries used to get: the model and the server's host."""
    return f"{data[CONF_MODEL]} on {URL(entry_url(data)).host}"


@callback
def async_rename_generated_title(hass: HomeAssistant, entry: ConfigEntry) -> None:
    """Give an entry with a generated title the device's name instead."""
    if entry.title == generated_title(entry.data):
        hass.config_entries.async_update_entry(entry, title=DEVICE_NAME)
