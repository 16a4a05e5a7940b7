"""Repair issues: weakened permissions, and vector search without sqlite-vec."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from homeassistant.core import callback
from homeassistant.helpers import issue_registry as ir

from .const import DOMAIN
from .security.permissions import Policy

if TYPE_CHECKING:
    from collections.abc import Mapping

    from homeassistant.config_entries import ConfigEntry
    from homeassistant.core import HomeAssistant

UNSAFE_PERMISSIONS: Final = "unsafe_permissions"


def unsafe_permissions_issue_id(entry_id: str) -> str:
    """Return the id of an entry's unsafe-permissions issue."""
    return f"{UNSAFE_PERMISSIONS}_{entry_id}"


@callback
def async_update_policy_issue(
    hass: HomeAssistant, entry_id: str, title: str, options: Mapping[str, Any]
) -> None:
    """Raise the repair issue for unsafe options, or clear it when they are safe."""
    issue_id = unsafe_permissions_issue_id(entry_id)
    problems = Policy.from_options(options).weakened()
    if not problems:
        ir.async_delete_issue(hass, DOMAIN, issue_id)
        return
    ir.async_create_issue(
        hass,
        DOMAIN,
        issue_id,
        is_fixable=False,
        severity=ir.IssueSeverity.WARNING,
        translation_key=UNSAFE_PERMISSIONS,
        translation_placeholders={"settings": "; ".join(problems), "title": title},
    )


@callback
def async_check_policy(hass: HomeAssistant, entry: ConfigEntry) -> None:
    """Raise or clear the unsafe-permissions issue for an entry's options."""
    async_update_policy_issue(hass, entry.entry_id, entry.title, entry.options)


@callback
def async_delete_policy_issue(hass: HomeAssistant, entry_id: str) -> None:
    """Remove an entry's issue; call it when the entry is removed."""
    ir.async_delete_issue(hass, DOMAIN, unsafe_permissions_issue_id(entry_id))


VECTOR_EXTENSION_UNAVAILABLE: Final = "vector_extension_unavailable"


@callback
def async_update_vector_issue(hass: HomeAssistant, reason: str | None) -> None:
    """Say when sqlite-vec could not load and numpy searches instead; clear it after."""
    if not reason:
        ir.async_delete_issue(hass, DOMAIN, VECTOR_EXTENSION_UNAVAILABLE)
        return
    ir.async_create_issue(
        hass,
        DOMAIN,
        VECTOR_EXTENSION_UNAVAILABLE,
        is_fixable=False,
        severity=ir.IssueSeverity.WARNING,
        translation_key=VECTOR_EXTENSION_UNAVAILABLE,
        translation_placeholders={"reason": reason},
    )
