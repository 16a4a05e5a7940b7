"""Stop Home Assistant and start a new instance on the same config folder.

Not an entry reload: the first ``hass`` goes through its whole stop (the
stop event, background tasks cancelled, the final write), and a fresh
``HomeAssistant`` is built by pytest-homeassistant-custom-component's own
``async_test_home_assistant`` on the same ``config_dir`` (as HA core's
recorder tests restart). Config entries keep their ids, as HA's
``core.config_entries`` store keeps them; the demo house, telegram_bot
(against the same fake Telegram API) and the assistant (against the same
fake Ollama) are set up again.
"""

from __future__ import annotations

from contextlib import AsyncExitStack, suppress
from typing import TYPE_CHECKING

import pytest
from homeassistant import loader
from homeassistant.config_entries import ConfigEntryState
from homeassistant.helpers import frame
from homeassistant.helpers import translation as translation_helper
from homeassistant.util.async_ import _SHUTDOWN_RUN_CALLBACK_THREADSAFE
from pytest_homeassistant_custom_component.common import (  # type: ignore[import-untyped]
    MockConfigEntry,
    async_test_home_assistant,
)

from .common import async_setup_house
from .telegram_harness import TelegramHarness

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator

    from homeassistant.core import HomeAssistant
    from pytest_homeassistant_custom_component.typing import (  # type: ignore[import-untyped]
        ClientSessionGenerator,
    )

    from .telegram_harness import FakeTelegramApi


class Restarter:
    """Stops a ``hass`` and starts the next one on the same config folder."""

    def __init__(
        self,
        stack: AsyncExitStack,
        api: FakeTelegramApi,
        aiohttp_client: ClientSessionGenerator,
    ) -> None:
        """Keep what the new instances are built with."""
        self._stack = stack
        self._api = api
        self._aiohttp_client = aiohttp_client
        self.instances: list[HomeAssistant] = []
        self.harnesses: list[TelegramHarness] = []

    async def stop(self, hass: HomeAssistant) -> None:
        """Stop ``hass`` the way Home Assistant stops (not an unload)."""
        await hass.async_stop()
        # The stop marks the loop as shutting down (meant for the process's
        # end); async_test_home_assistant clears the mark the same way so
        # the next instance on this loop can run.
        with suppress(AttributeError):
            delattr(hass.loop, _SHUTDOWN_RUN_CALLBACK_THREADSAFE)

    async def start(self, config_dir: str) -> HomeAssistant:
        """Start a new Home Assistant on ``config_dir``."""
        hass: HomeAssistant = await self._stack.enter_async_context(
            async_test_home_assistant(config_dir=config_dir)
        )
        # As the hass fixture and enable_custom_integrations do.
        hass.data.pop(loader.DATA_CUSTOM_COMPONENTS, None)
        frame.async_setup(hass)
        await translation_helper.async_load_integrations(hass, {"homeassistant"})
        self.instances.append(hass)
        return hass

    async def restart(
        self,
        hass: HomeAssistant,
        telegram: TelegramHarness,
        entry: MockConfigEntry,
        *,
        setup: bool = True,
    ) -> tuple[HomeAssistant, TelegramHarness, MockConfigEntry]:
        """Stop ``hass``; start the house, telegram_bot and the assistant anew.

        With ``setup`` False the assistant's entry is only added (the test
        sets it up itself, e.g. after patching something).
        """
        await self.stop(hass)
        new = await self.start(hass.config.config_dir)
        await async_setup_house(new)
        harness = TelegramHarness(
            new, self._api, lambda: self._aiohttp_client(new.http.app)
        )
        await harness.setup(telegram.chat_ids, entry_id=telegram.entry_id)
        self.harnesses.append(harness)
        again = MockConfigEntry(
            domain=entry.domain,
            entry_id=entry.entry_id,
            title=entry.title,
            unique_id=entry.unique_id,
            data=dict(entry.data),
            options=dict(entry.options),
        )
        again.add_to_hass(new)
        if setup:
            assert await new.config_entries.async_setup(again.entry_id)
            await new.async_block_till_done()
        return new, harness, again

    async def async_close(self) -> None:
        """Unload what runs (telegram_bot while the fake API answers) and stop."""
        for harness in self.harnesses:
            await harness.async_teardown()
        for hass in self.instances:
            for entry in hass.config_entries.async_entries():
                if entry.state is ConfigEntryState.LOADED:
                    await hass.config_entries.async_unload(entry.entry_id)
            await hass.async_stop(force=True)


@pytest.fixture
async def restarter(
    telegram_api: FakeTelegramApi,
    aiohttp_client: ClientSessionGenerator,
    socket_enabled: None,
) -> AsyncGenerator[Restarter]:
    """Restart Home Assistant within a test (torn down before the fake APIs)."""
    async with AsyncExitStack() as stack:
        restarter = Restarter(stack, telegram_api, aiohttp_client)
        try:
            yield restarter
        finally:
            await restarter.async_close()
