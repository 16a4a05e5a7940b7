"""Watching what HA knowledge is built from: exposure, registries, entity names."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from homeassistant.components.homeassistant.exposed_entities import (
    async_listen_entity_updates,
)
from homeassistant.const import EVENT_STATE_CHANGED
from homeassistant.core import Event, EventStateChangedData, HassJob, callback
from homeassistant.helpers import area_registry as ar
from homeassistant.helpers import device_registry as dr
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers import floor_registry as fr
from homeassistant.helpers.event import async_call_later

from ..policy.visibility import ASSISTANT

if TYPE_CHECKING:
    from collections.abc import Callable

    from homeassistant.config_entries import ConfigEntry
    from homeassistant.core import HomeAssistant

# After what is exposed, named or placed changes, HA knowledge is rebuilt
# this many seconds later (one rebuild for a burst of changes).
HA_KNOWLEDGE_DEBOUNCE: Final = 30.0
# Registry changes that can change what HA knowledge says.
_REGISTRY_EVENTS: Final = (
    er.EVENT_ENTITY_REGISTRY_UPDATED,
    dr.EVENT_DEVICE_REGISTRY_UPDATED,
    ar.EVENT_AREA_REGISTRY_UPDATED,
    fr.EVENT_FLOOR_REGISTRY_UPDATED,
)


@callback
def _renamed_or_new(event_data: EventStateChangedData) -> bool:
    """Tell whether a state change can change HA knowledge (name, existence)."""
    old = event_data["old_state"]
    new = event_data["new_state"]
    return old is None or new is None or old.name != new.name


class HaKnowledgeWatch:
    """Calls ``refresh`` a little after HA knowledge may have changed."""

    def __init__(
        self,
        hass: HomeAssistant,
        entry: ConfigEntry[Any],
        refresh: Callable[[], None],
    ) -> None:
        """Keep the wiring; nothing is watched until :meth:`start`."""
        self.hass = hass
        self.entry = entry
        self._refresh = refresh
        self._stopped = False
        # The pending rebuild of HA knowledge after a change (debounced).
        self._timer: Callable[[], None] | None = None
        self._job = HassJob(
            self._async_timer_fired,
            "ha_personal_assistant HA knowledge changed",
            cancel_on_shutdown=True,
        )

    def start(self) -> None:
        """Listen to exposure, registry and name changes until the entry unloads."""
        on_unload = self.entry.async_on_unload
        on_unload(
            async_listen_entity_updates(self.hass, ASSISTANT, self._async_changed)
        )
        for event_type in _REGISTRY_EVENTS:
            on_unload(self.hass.bus.async_listen(event_type, self._async_changed))
        on_unload(
            self.hass.bus.async_listen(
                EVENT_STATE_CHANGED,
                self._async_changed,
                event_filter=_renamed_or_new,
            )
        )
        on_unload(self._async_cancel_timer)

    def stop(self) -> None:
        """Schedule no more rebuilds."""
        self._stopped = True

    @callback
    def _async_changed(self, _event: Event[Any] | None = None) -> None:
        """Rebuild HA knowledge a little later; one rebuild per burst of changes.

        Until then, searches check each HA passage against the house as it is
        now (see :func:`still_known`), so a hidden entity is never shown.
        """
        if self._stopped or self._timer is not None:
            return
        self._timer = async_call_later(self.hass, HA_KNOWLEDGE_DEBOUNCE, self._job)

    @callback
    def _async_timer_fired(self, _now: Any) -> None:
        self._timer = None
        self._refresh()

    @callback
    def _async_cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer()
            self._timer = None
