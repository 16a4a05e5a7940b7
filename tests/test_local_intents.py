"""A pipeline whose "prefer local" lets HA's intents bypass our policy gets a repair."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from homeassistant.components.assist_pipeline import (
    PipelineEvent,
    PipelineEventType,
    async_get_pipeline,
)
from homeassistant.components.assist_pipeline.pipeline import (
    KEY_ASSIST_PIPELINE,
    PipelineInput,
    PipelineRun,
    PipelineStage,
)
from homeassistant.core import Context
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.helpers import chat_session
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers import issue_registry as ir
from homeassistant.setup import async_setup_component

from custom_components.ha_personal_assistant.const import DOMAIN

from .common import async_setup_assistant, async_setup_house

if TYPE_CHECKING:
    from homeassistant.components.assist_pipeline import Pipeline
    from homeassistant.core import HomeAssistant
    from pytest_homeassistant_custom_component.common import MockConfigEntry

    from .fake_ollama import FakeOllama


@pytest.fixture
async def assistant(hass: HomeAssistant, fake_ollama: FakeOllama) -> MockConfigEntry:
    """The demo house, Assist pipelines and the assistant."""
    await async_setup_house(hass)
    assert await async_setup_component(hass, "assist_pipeline", {})
    return await async_setup_assistant(hass, fake_ollama)


def _agent_id(hass: HomeAssistant, entry: MockConfigEntry) -> str:
    entity_id = er.async_get(hass).async_get_entity_id(
        "conversation", DOMAIN, entry.entry_id
    )
    assert entity_id is not None
    return entity_id


async def _create_pipeline(
    hass: HomeAssistant, agent: str, *, prefer_local: bool, name: str = "Hall"
) -> Pipeline:
    store = hass.data[KEY_ASSIST_PIPELINE].pipeline_store
    pipeline: Pipeline = await store.async_create_item(
        {
            "conversation_engine": agent,
            "conversation_language": "en",
            "language": "en",
            "name": name,
            "stt_engine": None,
            "stt_language": None,
            "tts_engine": None,
            "tts_language": None,
            "tts_voice": None,
            "wake_word_entity": None,
            "wake_word_id": None,
            "prefer_local_intents": prefer_local,
        }
    )
    await hass.async_block_till_done()
    return pipeline


def _issue(hass: HomeAssistant, pipeline: Pipeline) -> ir.IssueEntry | None:
    return ir.async_get(hass).async_get_issue(
        DOMAIN, f"prefer_local_intents_{pipeline.id}"
    )


async def _say(hass: HomeAssistant, pipeline: Pipeline, text: str) -> str:
    """Run a text-only turn through the pipeline; return the spoken answer."""
    events: list[PipelineEvent] = []
    with chat_session.async_get_chat_session(hass) as session:
        await PipelineInput(
            intent_input=text,
            session=session,
            run=PipelineRun(
                hass,
                context=Context(),
                pipeline=pipeline,
                start_stage=PipelineStage.INTENT,
                end_stage=PipelineStage.INTENT,
                event_callback=events.append,
            ),
        ).execute(validate=True)
    (end,) = [e for e in events if e.type is PipelineEventType.INTENT_END]
    data: dict[str, Any] = end.data or {}
    return str(data["intent_output"]["response"]["speech"]["plain"]["speech"])


async def test_prefer_local_pipeline_gets_a_repair_whose_fix_turns_it_off(
    hass: HomeAssistant, assistant: MockConfigEntry, fake_ollama: FakeOllama
) -> None:
    """The repair names the pipeline; its fix turns "prefer local" off and goes."""
    pipeline = await _create_pipeline(
        hass, _agent_id(hass, assistant), prefer_local=True
    )
    # The bypass is real: HA's own intent unlocks, no model, no Confirm.
    assert hass.states.get("lock.front_door").state == "locked"
    await _say(hass, pipeline, "unlock the front door")
    await hass.async_block_till_done()
    assert hass.states.get("lock.front_door").state == "unlocked"
    assert not fake_ollama.chat_requests

    issue = _issue(hass, pipeline)
    assert issue is not None
    assert issue.is_fixable
    assert issue.severity is ir.IssueSeverity.WARNING
    assert issue.translation_placeholders == {"pipeline": "Hall"}

    assert await async_setup_component(hass, "repairs", {})
    flows = hass.data["repairs"]["flow_manager"]
    step = await flows.async_init(DOMAIN, data={"issue_id": issue.issue_id})
    assert step["type"] is FlowResultType.FORM
    assert step["description_placeholders"] == {"pipeline": "Hall"}
    done = await flows.async_configure(step["flow_id"], {})
    assert done["type"] is FlowResultType.CREATE_ENTRY
    await hass.async_block_till_done()

    assert async_get_pipeline(hass, pipeline.id).prefer_local_intents is False
    assert _issue(hass, pipeline) is None
    # Now the same words reach the assistant, which asks before unlocking.
    await hass.services.async_call(
        "lock", "lock", {"entity_id": "lock.front_door"}, blocking=True
    )
    fake_ollama.tool_call(
        "call_service",
        {"domain": "lock", "service": "unlock", "entity_id": "lock.front_door"},
    )
    await _say(hass, async_get_pipeline(hass, pipeline.id), "unlock the front door")
    await hass.async_block_till_done()
    assert fake_ollama.chat_requests
    assert hass.states.get("lock.front_door").state == "locked"


async def test_the_repair_goes_when_the_pipeline_changes_agent_or_is_deleted(
    hass: HomeAssistant, assistant: MockConfigEntry
) -> None:
    """Another agent, or no pipeline at all: nothing to warn about."""
    agent = _agent_id(hass, assistant)
    store = hass.data[KEY_ASSIST_PIPELINE].pipeline_store
    first = await _create_pipeline(hass, agent, prefer_local=True, name="Hall")
    second = await _create_pipeline(hass, agent, prefer_local=True, name="Kitchen")
    assert _issue(hass, first) is not None
    assert _issue(hass, second) is not None

    updates = first.to_json()
    updates.pop("id")
    await store.async_update_item(
        first.id, {**updates, "conversation_engine": "conversation.home_assistant"}
    )
    await store.async_delete_item(second.id)
    await hass.async_block_till_done()

    assert _issue(hass, first) is None
    assert _issue(hass, second) is None


async def test_a_pipeline_without_prefer_local_gets_no_repair(
    hass: HomeAssistant, assistant: MockConfigEntry
) -> None:
    """Our agent with "prefer local" off: every command reaches our policy."""
    plain = await _create_pipeline(
        hass, _agent_id(hass, assistant), prefer_local=False, name="Plain"
    )
    assert _issue(hass, plain) is None


async def test_an_ignored_repair_survives_a_reload_and_goes_with_the_entry(
    hass: HomeAssistant, assistant: MockConfigEntry
) -> None:
    """An options change does not bring it back; removing the entry drops it."""
    local = await _create_pipeline(
        hass, _agent_id(hass, assistant), prefer_local=True, name="Local"
    )
    ir.async_ignore_issue(hass, DOMAIN, f"prefer_local_intents_{local.id}", True)
    assert await hass.config_entries.async_reload(assistant.entry_id)
    await hass.async_block_till_done()
    issue = _issue(hass, local)
    assert issue is not None
    assert issue.dismissed_version is not None

    assert await hass.config_entries.async_remove(assistant.entry_id)
    await hass.async_block_till_done()
    assert _issue(hass, local) is None


async def test_a_pipeline_set_up_after_the_assistant_is_still_checked(
    hass: HomeAssistant, fake_ollama: FakeOllama
) -> None:
    """assist_pipeline loading after the entry: its pipelines are still watched."""
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama)
    assert await async_setup_component(hass, "assist_pipeline", {})
    await hass.async_block_till_done()
    pipeline = await _create_pipeline(hass, _agent_id(hass, entry), prefer_local=True)
    assert _issue(hass, pipeline) is not None
