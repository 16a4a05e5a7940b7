"""Our read-only tools in HA's Assist API: prefixed, annotated, as the caller."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import probatio
import pytest
from homeassistant.auth.const import GROUP_ID_ADMIN, GROUP_ID_USER
from homeassistant.components import conversation
from homeassistant.core import Context
from homeassistant.helpers import llm
from pytest_homeassistant_custom_component.common import MockUser

from custom_components.ha_personal_assistant.const import DOMAIN

from .common import HIDDEN, async_setup_house
from .test_documents import add_document, async_setup_documents

if TYPE_CHECKING:
    from homeassistant.auth.models import User
    from homeassistant.core import HomeAssistant
    from pytest_homeassistant_custom_component.common import MockConfigEntry

    from .fake_ollama import FakeOllama

SHARED = {
    f"{DOMAIN}__search_documents",
    f"{DOMAIN}__get_history",
    f"{DOMAIN}__list_tasks",
}


@pytest.fixture
async def assistant(hass: HomeAssistant, fake_ollama: FakeOllama) -> MockConfigEntry:
    """The demo house and the assistant with document search."""
    await async_setup_house(hass)
    return await async_setup_documents(hass, fake_ollama)


async def _user(hass: HomeAssistant, group: str = GROUP_ID_USER) -> User:
    """Return a new HA user in ``group`` (a person of the household)."""
    return await hass.auth.async_create_user("Person", group_ids=[group])


def _limited_user(hass: HomeAssistant, readable: str) -> MockUser:
    """Return a user who may read only the entity ``readable``."""
    user = MockUser(name="Guest").add_to_hass(hass)
    user.mock_policy({"entities": {"entity_ids": {readable: True}}})
    return user


async def _api(hass: HomeAssistant, user_id: str | None) -> llm.APIInstance:
    return await llm.async_get_api(
        hass,
        llm.LLM_API_ASSIST,
        llm.LLMContext(
            platform="other_agent",
            context=Context(user_id=user_id),
            language="en",
            assistant=conversation.DOMAIN,
            device_id=None,
        ),
    )


async def _call(
    hass: HomeAssistant, user_id: str | None, tool: str, **args: Any
) -> llm.ToolResult:
    api = await _api(hass, user_id)
    return await api.async_call_tool(
        llm.ToolInput(tool_name=f"{DOMAIN}__{tool}", tool_args=args)
    )


async def test_our_three_read_only_tools_join_the_assist_api(
    hass: HomeAssistant, assistant: MockConfigEntry
) -> None:
    """Prefixed, annotated read-only, and nothing that acts or remembers."""
    api = await _api(hass, (await _user(hass)).id)
    ours = {tool.name: tool for tool in api.tools if tool.name.startswith(DOMAIN)}
    assert set(ours) == SHARED
    for tool in ours.values():
        assert tool.annotations == llm.ToolAnnotations(
            read_only=True, destructive=False, idempotent=True, open_world=False
        )
        assert tool.integration == DOMAIN
    # HA's own tools are still there beside ours.
    assert any(tool.name.startswith("homeassistant__") for tool in api.tools)
    # Other agents' models read the same arguments as ours.
    history = probatio.to_openapi(
        ours[f"{DOMAIN}__get_history"].parameters,
        custom_serializer=llm.selector_serializer,
    )
    assert history["required"] == ["entity_id"]
    assert history["properties"]["hours"]["type"] == "number"


async def test_history_hides_what_the_user_may_not_read_like_a_missing_entity(
    hass: HomeAssistant, assistant: MockConfigEntry
) -> None:
    """Not exposed, not readable by this user, or missing: the same answer."""
    user = _limited_user(hass, "light.kitchen_lights")
    missing = await _call(hass, user.id, "get_history", entity_id="light.nowhere")
    assert missing.error
    hidden = await _call(hass, user.id, "get_history", entity_id=HIDDEN)
    forbidden = await _call(hass, user.id, "get_history", entity_id="lock.front_door")
    assert hidden == missing
    assert forbidden == missing
    seen = await _call(hass, user.id, "get_history", entity_id="light.kitchen_lights")
    assert not seen.error
    assert "on" in str(seen.data)
    # The lock is exposed: a user who may read it gets its history.
    admin = await _user(hass, GROUP_ID_ADMIN)
    lock = await _call(hass, admin.id, "get_history", entity_id="lock.front_door")
    assert not lock.error
    assert "locked" in str(lock.data)


async def test_list_tasks_shows_only_the_callers_own_tasks(
    hass: HomeAssistant, assistant: MockConfigEntry, fake_ollama: FakeOllama
) -> None:
    """A reminder Ann set in Assist is listed for Ann, not for Bob."""
    ann, bob = await _user(hass), await _user(hass)
    fake_ollama.tool_call("schedule", {"message": "Water the plants", "at": "2h"})
    fake_ollama.reply("I will remind you.")
    await conversation.async_converse(
        hass,
        "remind me to water the plants in two hours",
        None,
        Context(user_id=ann.id),
        language="en",
        agent_id="conversation.personal_assistant",
    )
    mine = await _call(hass, ann.id, "list_tasks")
    assert not mine.error
    assert "Water the plants" in str(mine.data)
    theirs = await _call(hass, bob.id, "list_tasks")
    assert "Water the plants" not in str(theirs.data)
    assert theirs.data["tasks"] == []


async def test_document_text_reaches_other_agents_fenced(
    hass: HomeAssistant, assistant: MockConfigEntry
) -> None:
    """Outside text comes back inside a data fence, as our own agent reads it."""
    await add_document(
        hass, "Boiler", "The boiler pressure should read between 1.2 and 1.5 bar."
    )
    found = await _call(
        hass, (await _user(hass)).id, "search_documents", query="boiler"
    )
    assert not found.error
    text = str(found.data["result"])
    assert "Untrusted data from the household's documents" in text
    assert "<data-" in text


async def test_a_task_written_after_outside_text_reaches_other_agents_fenced(
    hass: HomeAssistant, assistant: MockConfigEntry, fake_ollama: FakeOllama
) -> None:
    """A reminder set while a document was in the prompt is listed as data."""
    ann = await _user(hass)
    await add_document(hass, "Boiler", "Bleed the radiators every autumn.")
    fake_ollama.tool_call("search_documents", {"query": "radiators"})
    fake_ollama.tool_call("schedule", {"message": "Bleed the radiators", "at": "2h"})
    fake_ollama.reply("Please confirm the reminder.")
    await conversation.async_converse(
        hass,
        "look up the radiators and remind me in two hours",
        None,
        Context(user_id=ann.id),
        language="en",
        agent_id="conversation.personal_assistant",
    )
    listed = await _call(hass, ann.id, "list_tasks")
    text = str(listed.data["result"])
    assert "<data-" in text
    assert "Bleed" in text
