"""Sensors for dashboards and automations: confirmations, latency, tokens, model."""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Final, override

from homeassistant.components.sensor import (
    SensorDeviceClass,
    SensorEntity,
    SensorEntityDescription,
    SensorStateClass,
)
from homeassistant.const import EntityCategory, UnitOfTime
from homeassistant.helpers.update_coordinator import CoordinatorEntity

from .const import LOGGER
from .entity import PersonalAssistantEntity
from .monitor import ModelStatus, ServerMonitor
from .store.actions import count_pending

if TYPE_CHECKING:
    from collections.abc import Callable

    from homeassistant.core import HomeAssistant
    from homeassistant.helpers.entity_platform import AddConfigEntryEntitiesCallback

    from .data import PersonalAssistantConfigEntry, PersonalAssistantData

# Only the pending-confirmations count is read from the database (it changes
# when a request expires, with no event); the others follow the turns.
SCAN_INTERVAL: Final = timedelta(seconds=30)
PARALLEL_UPDATES: Final = 0


@dataclass(frozen=True, kw_only=True)
class AssistantSensorDescription(SensorEntityDescription):
    """A sensor and how it reads the entry's runtime data."""

    value: Callable[[PersonalAssistantData], float | int | str | None]


SENSORS: Final = (
    AssistantSensorDescription(
        key="last_reply_latency",
        translation_key="last_reply_latency",
        device_class=SensorDeviceClass.DURATION,
        state_class=SensorStateClass.MEASUREMENT,
        native_unit_of_measurement=UnitOfTime.SECONDS,
        suggested_display_precision=1,
        value=lambda data: (
            round(last.seconds, 3) if (last := data.assistant.stats.last) else None
        ),
    ),
    AssistantSensorDescription(
        key="context_tokens",
        translation_key="context_tokens",
        state_class=SensorStateClass.MEASUREMENT,
        native_unit_of_measurement="tokens",
        value=lambda data: (
            last.context_tokens if (last := data.assistant.stats.last) else None
        ),
    ),
)


async def async_setup_entry(
    hass: HomeAssistant,  # noqa: ARG001
    entry: PersonalAssistantConfigEntry,
    async_add_entities: AddConfigEntryEntitiesCallback,
) -> None:
    """Add the entry's sensors."""
    async_add_entities(
        [
            PendingConfirmationsSensor(entry),
            *(AssistantSensor(entry, description) for description in SENSORS),
            ModelStatusSensor(entry, entry.runtime_data.monitor),
        ]
    )


class AssistantSensor(PersonalAssistantEntity, SensorEntity):
    """A figure of the last turn."""

    entity_description: AssistantSensorDescription

    def __init__(
        self,
        entry: PersonalAssistantConfigEntry,
        description: AssistantSensorDescription,
    ) -> None:
        """Describe the sensor."""
        super().__init__(entry, description.key)
        self.entity_description = description

    @property
    @override
    def native_value(self) -> float | int | str | None:
        """Return the current value from the runtime data."""
        return self.entity_description.value(self.entry.runtime_data)

    @override
    async def async_added_to_hass(self) -> None:
        """Update when a turn is recorded."""
        self.async_on_remove(
            self.entry.runtime_data.assistant.stats.async_listen(
                self.async_write_ha_state
            )
        )


class ModelStatusSensor(
    CoordinatorEntity[ServerMonitor], PersonalAssistantEntity, SensorEntity
):
    """What the last check of the model server found (the monitor's coordinator).

    An unreachable server is one of its values, not an unavailable sensor.
    """

    _attr_translation_key = "model_status"
    _attr_device_class = SensorDeviceClass.ENUM
    _attr_options: list[str] = [status.value for status in ModelStatus]  # noqa: RUF012 - HA's attribute
    _attr_entity_category = EntityCategory.DIAGNOSTIC

    def __init__(
        self, entry: PersonalAssistantConfigEntry, monitor: ServerMonitor
    ) -> None:
        """Describe the sensor and follow the monitor."""
        CoordinatorEntity.__init__(self, monitor)
        PersonalAssistantEntity.__init__(self, entry, "model_status")

    @property
    @override
    def available(self) -> bool:
        """Stay available: "unreachable" is what the sensor reports then."""
        return True

    @property
    @override
    def native_value(self) -> str:
        """Return the monitor's status."""
        return self.coordinator.status.value


class PendingConfirmationsSensor(PersonalAssistantEntity, SensorEntity):
    """How many actions wait for someone's confirmation."""

    _attr_translation_key = "pending_confirmations"
    _attr_state_class = SensorStateClass.MEASUREMENT
    _attr_native_value: int | None = None
    _attr_should_poll = True

    def __init__(self, entry: PersonalAssistantConfigEntry) -> None:
        """Describe the sensor."""
        super().__init__(entry, "pending_confirmations")

    @override
    async def async_added_to_hass(self) -> None:
        """Count now, and again whenever something changes."""
        await self.async_update()
        self.async_on_remove(
            self.entry.runtime_data.assistant.stats.async_listen(
                lambda: self.async_schedule_update_ha_state(force_refresh=True)
            )
        )

    async def async_update(self) -> None:
        """Count the pending actions that have not expired."""
        database = self.entry.runtime_data.assistant.database
        now = time.time()
        try:
            self._attr_native_value = await database.async_run(
                lambda conn: count_pending(conn, now)
            )
        except sqlite3.Error as err:
            LOGGER.debug("Could not count pending confirmations: %s", err)
