"""Sensors, the device and the repair issues a household sees in HA."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest
from homeassistant.helpers import device_registry as dr
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers import issue_registry as ir
from homeassistant.util import dt as dt_util
from pytest_homeassistant_custom_component.common import (  # type: ignore[import-untyped]
    async_fire_time_changed,
)

from custom_components.ha_personal_assistant.const import DOMAIN

from .common import MODEL, async_setup_assistant, async_setup_house

if TYPE_CHECKING:
    from freezegun.api import FrozenDateTimeFactory
    from homeassistant.core import HomeAssistant
    from pytest_homeassistant_custom_component.common import MockConfigEntry

    from .fake_ollama import FakeOllama
    from .telegram_harness import TelegramHarness

UNLOCK = {"domain": "lock", "service": "unlock", "entity_id": "lock.front_door"}


@pytest.fixture
async def assistant(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> MockConfigEntry:
    """The demo house, the Telegram bot and the assistant, all set up."""
    await async_setup_house(hass)
    return await async_setup_assistant(hass, fake_ollama)


def _entity_id(hass: HomeAssistant, entry: MockConfigEntry, key: str) -> str:
    entity_id = er.async_get(hass).async_get_entity_id(
        "sensor", DOMAIN, f"{entry.entry_id}_{key}"
    )
    assert entity_id is not None
    return entity_id


def _state(hass: HomeAssistant, entry: MockConfigEntry, key: str) -> Any:
    state = hass.states.get(_entity_id(hass, entry, key))
    assert state is not None
    return state


async def _tick(
    hass: HomeAssistant, freezer: FrozenDateTimeFactory, minutes: float
) -> None:
    """Let the Ollama check run after ``minutes``."""
    freezer.tick(timedelta(minutes=minutes))
    async_fire_time_changed(hass, dt_util.utcnow())
    await hass.async_block_till_done()


async def _wait_status(
    hass: HomeAssistant, entry: MockConfigEntry, expected: str
) -> None:
    """Let the check's HTTP calls finish, then compare the status."""
    await hass.async_block_till_done()
    assert _state(hass, entry, "model_status").state == expected


async def _wait_state(
    hass: HomeAssistant, entry: MockConfigEntry, key: str, expected: str
) -> None:
    """Wait (real time, a few seconds at most) for a sensor to show ``expected``.

    The gateway's turn runs as a background task, which async_block_till_done
    does not wait for: the count is refreshed when the turn is recorded.
    """
    async with asyncio.timeout(10):
        while _state(hass, entry, key).state != expected:
            await hass.async_block_till_done()
            await asyncio.sleep(0.02)


async def test_one_device_carries_the_translated_sensors(
    hass: HomeAssistant, assistant: MockConfigEntry
) -> None:
    """The entry is one service device named after it, with named sensors."""
    device = dr.async_get(hass).async_get_device_by_identifier(
        (DOMAIN, assistant.entry_id), assistant.entry_id
    )
    assert device is not None
    assert device.name == MODEL
    assert device.entry_type is dr.DeviceEntryType.SERVICE
    names = {
        key: _state(hass, assistant, key).attributes["friendly_name"]
        for key in (
            "pending_confirmations",
            "last_reply_latency",
            "context_tokens",
            "model_status",
        )
    }
    assert names == {
        "pending_confirmations": f"{MODEL} Pending confirmations",
        "last_reply_latency": f"{MODEL} Last reply latency",
        "context_tokens": f"{MODEL} Context tokens",
        "model_status": f"{MODEL} Model status",
    }
    await _wait_status(hass, assistant, "ok")
    assert _state(hass, assistant, "last_reply_latency").state == "unknown"


async def test_a_reply_updates_latency_and_context_tokens(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """After a Telegram reply, the latency and token sensors show its figures."""
    fake_ollama.reply("All quiet.")
    await telegram.send_text("How is the house?")
    await telegram.wait_for_sent(1)
    await hass.async_block_till_done()
    latency = _state(hass, assistant, "last_reply_latency")
    assert float(latency.state) > 0
    assert latency.attributes["unit_of_measurement"] == "s"
    tokens = _state(hass, assistant, "context_tokens")
    assert tokens.state != "unknown"
    assert int(tokens.state) >= 0


async def test_pending_confirmations_count_up_and_down(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """An unlock request counts as pending until it is confirmed."""
    await hass.async_block_till_done()
    assert _state(hass, assistant, "pending_confirmations").state == "0"
    fake_ollama.tool_call("call_service", UNLOCK).reply("Please confirm.")
    await telegram.send_text("Unlock the front door")
    await telegram.wait_for_sent(2)
    await _wait_state(hass, assistant, "pending_confirmations", "1")
    await telegram.send_command("/confirm")
    await telegram.wait_for_sent(3)
    await _wait_state(hass, assistant, "pending_confirmations", "0")
    assert hass.states.get("lock.front_door").state in ("unlocking", "unlocked")


async def test_a_removed_model_raises_an_issue_that_clears_when_pulled(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    fake_ollama: FakeOllama,
    freezer: FrozenDateTimeFactory,
) -> None:
    """Model missing: a repair issue and the status sensor, both clear again."""
    issues = ir.async_get(hass)
    issue_id = f"model_missing_{assistant.entry_id}"
    model = fake_ollama.get_model(MODEL)
    assert model is not None
    fake_ollama.remove_model(MODEL)
    await _tick(hass, freezer, 1.1)
    await _wait_status(hass, assistant, "model_missing")
    issue = issues.async_get_issue(DOMAIN, issue_id)
    assert issue is not None
    assert issue.translation_key == "model_missing"
    assert issue.translation_placeholders is not None
    assert issue.translation_placeholders["model"] == MODEL

    fake_ollama.models[model.name] = model
    await _tick(hass, freezer, 1.1)
    await _wait_status(hass, assistant, "ok")
    assert issues.async_get_issue(DOMAIN, issue_id) is None


async def test_a_model_without_tools_raises_an_issue(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    fake_ollama: FakeOllama,
    freezer: FrozenDateTimeFactory,
) -> None:
    """A model re-pulled without tool support is reported."""
    fake_ollama.remove_model(MODEL)
    fake_ollama.add_model(MODEL, ["completion"])
    await _tick(hass, freezer, 1.1)
    await _wait_status(hass, assistant, "no_tools")
    assert (
        ir.async_get(hass).async_get_issue(
            DOMAIN, f"model_no_tools_{assistant.entry_id}"
        )
        is not None
    )


async def test_ollama_unreachable_for_long_raises_an_issue_then_clears(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    fake_ollama: FakeOllama,
    freezer: FrozenDateTimeFactory,
) -> None:
    """A short outage is only a status; after 10 minutes it is a repair issue."""
    issues = ir.async_get(hass)
    issue_id = f"ollama_unreachable_{assistant.entry_id}"
    port = int(fake_ollama.url.rsplit(":", 1)[1])
    await fake_ollama.stop()
    await _tick(hass, freezer, 1.1)
    await _wait_status(hass, assistant, "unreachable")
    assert issues.async_get_issue(DOMAIN, issue_id) is None
    await _tick(hass, freezer, 5)
    assert issues.async_get_issue(DOMAIN, issue_id) is None
    await _tick(hass, freezer, 6)
    issue = issues.async_get_issue(DOMAIN, issue_id)
    assert issue is not None
    assert issue.severity is ir.IssueSeverity.ERROR

    await fake_ollama.start(port)
    await _tick(hass, freezer, 1.1)
    assert issues.async_get_issue(DOMAIN, issue_id) is None
    await _wait_status(hass, assistant, "ok")


async def test_unloading_the_entry_drops_its_ollama_issues(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    fake_ollama: FakeOllama,
    freezer: FrozenDateTimeFactory,
) -> None:
    """Issues belong to a running entry: unloading clears them."""
    fake_ollama.remove_model(MODEL)
    await _tick(hass, freezer, 1.1)
    await _wait_status(hass, assistant, "model_missing")
    issue_id = f"model_missing_{assistant.entry_id}"
    assert ir.async_get(hass).async_get_issue(DOMAIN, issue_id) is not None
    assert await hass.config_entries.async_unload(assistant.entry_id)
    assert ir.async_get(hass).async_get_issue(DOMAIN, issue_id) is None
