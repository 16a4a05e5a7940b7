"""Voice satellites for tests: real assist_satellite entities of a mock integration.

Set up through a config entry like any satellite, next to the test speech
engines (tests/speech_mocks.py): HA's broadcast intent and its announce
service reach them unpatched, through HA's tts; each records what it said.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import pytest
from homeassistant.components import assist_satellite
from homeassistant.config_entries import ConfigEntry, ConfigFlow
from homeassistant.const import Platform
from homeassistant.setup import async_setup_component
from pytest_homeassistant_custom_component.common import (  # type: ignore[import-untyped]
    MockConfigEntry,
    MockModule,
    MockPlatform,
    mock_config_flow,
    mock_integration,
    mock_platform,
)

from .speech_mocks import async_setup_speech

if TYPE_CHECKING:
    from collections.abc import Iterator

    from homeassistant.components.assist_pipeline import PipelineEvent
    from homeassistant.core import HomeAssistant
    from homeassistant.helpers.entity_platform import AddConfigEntryEntitiesCallback

SATELLITE_DOMAIN: Final = "test_satellite"


class MockSatellite(assist_satellite.AssistSatelliteEntity):
    """A satellite that can announce; records every announcement's message."""

    _attr_supported_features = assist_satellite.AssistSatelliteEntityFeature.ANNOUNCE

    def __init__(self, name: str) -> None:
        """Say nothing yet."""
        self._attr_name = name
        self._attr_unique_id = name.lower().replace(" ", "_")
        self.announced: list[str] = []

    def async_get_configuration(
        self,
    ) -> assist_satellite.AssistSatelliteConfiguration:
        """No wake words."""
        return assist_satellite.AssistSatelliteConfiguration(
            available_wake_words=[], active_wake_words=[], max_active_wake_words=1
        )

    async def async_set_configuration(
        self, config: assist_satellite.AssistSatelliteConfiguration
    ) -> None:
        """Nothing to set."""

    def on_pipeline_event(self, event: PipelineEvent) -> None:
        """Pipelines are not run here."""

    async def async_announce(
        self, announcement: assist_satellite.AssistSatelliteAnnouncement
    ) -> None:
        """Record what HA asked this satellite to say."""
        self.announced.append(announcement.message)


class _SatelliteFlow(ConfigFlow):
    """The test satellites' config flow; never run."""


@pytest.fixture
def satellite_flow() -> Iterator[None]:
    """Let the test satellites' and speech engines' config entries load."""
    with (
        mock_config_flow(SATELLITE_DOMAIN, _SatelliteFlow),
        mock_config_flow("test_speech", _SatelliteFlow),
    ):
        yield


async def async_setup_satellites(
    hass: HomeAssistant, *names: str
) -> list[MockSatellite]:
    """Set up HA's speech engines, Assist pipelines and one satellite per name."""
    await async_setup_speech(hass)
    satellites = [MockSatellite(name) for name in names]

    async def _setup_entry(hass: HomeAssistant, entry: ConfigEntry) -> bool:
        await hass.config_entries.async_forward_entry_setups(
            entry, [Platform.ASSIST_SATELLITE]
        )
        return True

    async def _satellite_entry(
        _hass: HomeAssistant,
        _entry: ConfigEntry,
        add: AddConfigEntryEntitiesCallback,
    ) -> None:
        add(satellites)

    mock_integration(hass, MockModule(SATELLITE_DOMAIN, async_setup_entry=_setup_entry))
    mock_platform(hass, f"{SATELLITE_DOMAIN}.config_flow")
    mock_platform(
        hass,
        f"{SATELLITE_DOMAIN}.assist_satellite",
        MockPlatform(async_setup_entry=_satellite_entry),
    )
    assert await async_setup_component(hass, "assist_pipeline", {})
    assert await async_setup_component(hass, "assist_satellite", {})
    entry = MockConfigEntry(domain=SATELLITE_DOMAIN)
    entry.add_to_hass(hass)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    return satellites
