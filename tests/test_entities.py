"""Sensors, the device and the repair issues a household sees in HA."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest
from homeassistant import config_entries
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.helpers import device_registry as dr
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers import issue_registry as ir
from homeassistant.util import dt as dt_util
from pytest_homeassistant_custom_component.common import (  # type: ignore[import-untyped]
    MockConfigEntry,
)

from custom_components.ha_personal_assistant.const import DOMAIN

from .common import (
    MODEL,
    async_setup_assistant,
    async_setup_house,
    fire_time_changed,
    wait_until,
)
from .fake_ollama import FakeOllama

if TYPE_CHECKING:
    from freezegun.api import FrozenDateTimeFactory
    from homeassistant.core import HomeAssistant

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
    """Let the model server check run after ``minutes``.

    The monitor is a DataUpdateCoordinator: its scheduled checks run as
    background tasks of the entry.
    """
    freezer.tick(timedelta(minutes=minutes))
    fire_time_changed(hass, dt_util.utcnow())
    await hass.async_block_till_done(wait_background_tasks=True)


async def _wait_status(
    hass: HomeAssistant, entry: MockConfigEntry, expected: str
) -> None:
    """Let the check's HTTP calls finish, then compare the status."""
    await hass.async_block_till_done(wait_background_tasks=True)
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


KEYS = ("pending_confirmations", "last_reply_latency", "context_tokens", "model_status")
TASKS_LIST = "todo.personal_assistant_tasks"
# The entity ids a new entry gets: from the device's translated name and the
# entities' translation keys, never from the model or the server.
STABLE_IDS = {
    "ai_task.personal_assistant",
    "conversation.personal_assistant",
    TASKS_LIST,
    *(f"sensor.personal_assistant_{key}" for key in KEYS),
}


def _entity_ids(hass: HomeAssistant, entry: MockConfigEntry) -> set[str]:
    return {
        entity.entity_id
        for entity in er.async_entries_for_config_entry(
            er.async_get(hass), entry.entry_id
        )
    }


def _device(hass: HomeAssistant, entry: MockConfigEntry) -> dr.DeviceEntry:
    device = dr.async_get(hass).async_get_device_by_identifier(
        (DOMAIN, entry.entry_id), entry.entry_id
    )
    assert device is not None
    return device


async def test_one_device_carries_the_translated_sensors(
    hass: HomeAssistant, assistant: MockConfigEntry
) -> None:
    """The entry is one service device with named sensors and stable ids."""
    device = _device(hass, assistant)
    assert device.name == "Personal Assistant"
    assert device.entry_type is dr.DeviceEntryType.SERVICE
    assert _entity_ids(hass, assistant) == STABLE_IDS
    names = {
        key: _state(hass, assistant, key).attributes["friendly_name"] for key in KEYS
    }
    assert names == {
        "pending_confirmations": "Personal Assistant Pending confirmations",
        "last_reply_latency": "Personal Assistant Last reply latency",
        "context_tokens": "Personal Assistant Context tokens",
        "model_status": "Personal Assistant Model status",
    }
    await _wait_status(hass, assistant, "ok")
    assert _state(hass, assistant, "last_reply_latency").state == "unknown"


async def test_the_device_says_what_it_is(
    hass: HomeAssistant, assistant: MockConfigEntry
) -> None:
    """The device is this integration's service running the chat model.

    Ollama only serves the model: it is not the manufacturer. The server's
    address is no configuration page (Ollama has none, and localhost would
    point at the browser's own machine), so there is no link to it.
    """
    device = _device(hass, assistant)
    assert device.manufacturer == "Personal Assistant integration"
    assert "Ollama" not in (device.manufacturer or "")
    assert device.model == MODEL
    assert device.configuration_url is None
    assert device.config_entry_id == assistant.entry_id


async def test_entity_ids_stay_after_reconfigure_to_another_server_and_model(
    hass: HomeAssistant, assistant: MockConfigEntry, fake_ollama: FakeOllama
) -> None:
    """A reconfigure renames the entry but keeps every entity and its id.

    Unique ids are the entry id and the entity's key, so the reloaded entry
    finds its registry entries again; the device shows the new model.
    """
    unique_ids = {
        entity.entity_id: entity.unique_id
        for entity in er.async_entries_for_config_entry(
            er.async_get(hass), assistant.entry_id
        )
    }
    other = FakeOllama()
    other.add_model("llama3.1:8b", ["completion", "tools"])
    await other.start()
    try:
        result = await hass.config_entries.flow.async_init(
            DOMAIN,
            context={
                "source": config_entries.SOURCE_RECONFIGURE,
                "entry_id": assistant.entry_id,
            },
        )
        result = await hass.config_entries.flow.async_configure(
            result["flow_id"], {"ollama_url": other.url}
        )
        assert result["step_id"] == "model"
        result = await hass.config_entries.flow.async_configure(
            result["flow_id"], {"model": "llama3.1:8b"}
        )
        assert result["type"] is FlowResultType.ABORT
        assert result["reason"] == "reconfigure_successful"
        await hass.async_block_till_done()

        assert assistant.data["ollama_url"] == other.url
        assert assistant.data["model"] == "llama3.1:8b"
        assert {
            entity.entity_id: entity.unique_id
            for entity in er.async_entries_for_config_entry(
                er.async_get(hass), assistant.entry_id
            )
        } == unique_ids
        assert set(unique_ids) == STABLE_IDS
        device = _device(hass, assistant)
        assert device.name == "Personal Assistant"
        assert device.model == "llama3.1:8b"
        state = _state(hass, assistant, "context_tokens")
        assert state.attributes["friendly_name"] == "Personal Assistant Context tokens"
        assert hass.states.get("conversation.personal_assistant") is not None
    finally:
        await hass.config_entries.async_unload(assistant.entry_id)
        await other.stop()


async def test_an_entry_named_the_old_way_keeps_its_entities(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """Upgrading keeps the registry entries of an entry set up before.

    Before, the device was named after the entry ("<model> on <host>") and
    made "by Ollama", so the entity ids named the model and the server. The
    unique ids were the entry id and the key then too: the upgraded entry
    finds the same entries (history, area, customisations kept), keeps the
    entity ids automations use, and fixes the device in place. HA's "Recreate
    entity IDs" on the device page then gives the stable ids.
    """
    await async_setup_house(hass)
    entry = MockConfigEntry(
        domain=DOMAIN,
        title="qwen3:4b on 127.0.0.1",
        unique_id=fake_ollama.url,
        data={"ollama_url": fake_ollama.url, "model": MODEL},
        options={"request_timeout": 10},
    )
    entry.add_to_hass(hass)
    old_device = dr.async_get(hass).async_get_or_create(
        config_entry_id=entry.entry_id,
        identifiers={(DOMAIN, entry.entry_id)},
        name="qwen3:4b on 127.0.0.1",
        manufacturer="Ollama",
        model=MODEL,
        entry_type=dr.DeviceEntryType.SERVICE,
    )
    registry = er.async_get(hass)
    old_ids = {
        registry.async_get_or_create(
            domain,
            DOMAIN,
            f"{entry.entry_id}_{key}" if key else entry.entry_id,
            config_entry=entry,
            device_id=old_device.id,
            suggested_object_id=(
                f"qwen3_4b_on_127_0_0_1_{key}" if key else "qwen3_4b_on_127_0_0_1"
            ),
        ).entity_id
        for domain, key in [("conversation", ""), *(("sensor", k) for k in KEYS)]
    }
    assert "sensor.qwen3_4b_on_127_0_0_1_context_tokens" in old_ids

    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()

    # The tasks list and the AI Task entity are newer than such an entry:
    # they get their stable ids.
    assert _entity_ids(hass, entry) == old_ids | {
        TASKS_LIST,
        "ai_task.personal_assistant",
    }
    assert all(hass.states.get(entity_id) is not None for entity_id in old_ids)
    device = _device(hass, entry)
    assert device.id == old_device.id
    assert device.name == "Personal Assistant"
    assert device.manufacturer == "Personal Assistant integration"
    # The title generated from the model and server takes the device's name.
    assert entry.title == "Personal Assistant"
    state = hass.states.get("sensor.qwen3_4b_on_127_0_0_1_context_tokens")
    assert state is not None
    assert state.attributes["friendly_name"] == "Personal Assistant Context tokens"
    recreated = {
        registry.async_regenerate_entity_id(entity)
        for entity in er.async_entries_for_config_entry(registry, entry.entry_id)
    }
    assert recreated == STABLE_IDS
    await hass.config_entries.async_unload(entry.entry_id)


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
    # The figures are recorded once the delivery has ended, which can be a
    # moment after Telegram got the message.
    await wait_until(
        lambda: _state(hass, assistant, "last_reply_latency").state != "unknown"
    )
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
    assert issue.translation_placeholders["name"] == "Personal Assistant"

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
    issue_id = f"server_unreachable_{assistant.entry_id}"
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
