"""Every tool parameter reaches the model with a type, exactly as it is sent."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

import pytest
from ollama._types import Tool
from pydantic import BaseModel, Field
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.ha_personal_assistant.const import (
    CONF_EMBEDDING_MODEL,
    CONF_FAST_PATH,
    CONF_MODEL,
    CONF_OLLAMA_URL,
    CONF_REQUEST_TIMEOUT,
    DOMAIN,
)
from custom_components.ha_personal_assistant.tasks.tools import task_tools
from custom_components.ha_personal_assistant.tools.documents import document_tools
from custom_components.ha_personal_assistant.tools.ha import HA_TOOLS
from custom_components.ha_personal_assistant.tools.memory import memory_tools
from custom_components.ha_personal_assistant.tools.recorder import RECORDER_TOOLS
from custom_components.ha_personal_assistant.tools.registry import ToolSpec
from custom_components.ha_personal_assistant.tools.web import web_tools

from .common import MODEL, async_setup_house
from .telegram_harness import ALICE_ID

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant

    from .fake_ollama import FakeOllama
    from .telegram_harness import TelegramHarness

ALL_TOOLS = (
    "get_state",
    "list_entities",
    "call_service",
    "get_history",
    "web_search",
    "search_documents",
    "remember",
    "forget",
    "schedule",
    "watch",
    "list_tasks",
    "cancel_task",
)


def _specs() -> list[ToolSpec]:
    """Every tool the registry can hold (handlers are never called here)."""
    return [
        *HA_TOOLS,
        *RECORDER_TOOLS,
        *web_tools(None),  # type: ignore[arg-type]
        *document_tools(None),  # type: ignore[arg-type]
        *memory_tools(None),  # type: ignore[arg-type]
        *task_tools(None),  # type: ignore[arg-type]
    ]


def _untyped(tool: dict[str, Any]) -> list[str]:
    """Return the parameters of a tool (as sent) that have no type, or no items."""
    function = tool["function"]
    problems = []
    for name, prop in function["parameters"].get("properties", {}).items():
        where = f"{function['name']}.{name}"
        kinds = prop.get("type")
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not kinds:
            problems.append(f"{where}: no type")
            continue
        if "array" in kinds and not (prop.get("items") or {}).get("type"):
            problems.append(f"{where}: an array without typed items")
    return problems


def test_every_registered_tool_survives_the_ollama_client_whole() -> None:
    """What the registry declares is what ollama's Tool model sends: no key lost."""
    specs = _specs()
    assert sorted(spec.name for spec in specs) == sorted(ALL_TOOLS)
    for spec in specs:
        schema = spec.schema()
        sent = Tool.model_validate(schema).model_dump(exclude_none=True)
        assert sent == schema, spec.name
        assert _untyped(sent) == [], spec.name
        # Byte-stable: the same bytes every time it is built.
        assert json.dumps(spec.schema()) == json.dumps(schema)


def test_call_service_arguments_keep_their_types() -> None:
    """entity_id is a string or a list of strings; data an object; none required."""
    [call_service] = [spec for spec in HA_TOOLS if spec.name == "call_service"]
    parameters = call_service.schema()["function"]["parameters"]
    assert parameters["required"] == ["domain", "service"]
    assert parameters["properties"]["entity_id"] == {
        "type": ["string", "array"],
        "items": {"type": "string"},
    }
    assert parameters["properties"]["data"]["type"] == "object"
    assert "anyOf" not in json.dumps(parameters)


class _Nested(BaseModel):
    """A nested model."""

    when: str


class _Odd(BaseModel):
    """Shapes no tool uses yet, so a new tool cannot lose a type."""

    mode: Literal["a", "b"] | None = None
    fixed: Literal["x"] = "x"
    count: int | float | None = None
    tags: list[str] | None = None
    nested: _Nested | None = Field(default=None, description="A nested thing")
    many: list[_Nested] = Field(default_factory=list)


def test_unions_literals_and_nested_models_get_a_type() -> None:
    """Optional literals keep their enum, unions list their types, refs resolve."""
    spec = ToolSpec(
        name="odd", description="Odd.", args_schema=_Odd, handler=lambda *_: None
    )
    schema = spec.schema()
    properties = schema["function"]["parameters"]["properties"]
    assert properties["mode"] == {"type": "string", "enum": ["a", "b"]}
    assert properties["fixed"] == {"type": "string", "enum": ["x"]}
    assert properties["count"] == {"type": ["integer", "number"]}
    assert properties["tags"] == {"type": "array", "items": {"type": "string"}}
    assert properties["nested"] == {"type": "object", "description": "A nested thing"}
    assert properties["many"]["items"]["type"] == "object"
    assert "$defs" not in schema["function"]["parameters"]
    sent = Tool.model_validate(schema).model_dump(exclude_none=True)
    assert sent == schema
    assert _untyped(sent) == []


@pytest.fixture
async def assistant(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> MockConfigEntry:
    """The house and the assistant with every tool on (web and documents too)."""
    await async_setup_house(hass)
    entry = MockConfigEntry(
        domain=DOMAIN,
        title=MODEL,
        unique_id=fake_ollama.url,
        data={
            CONF_OLLAMA_URL: fake_ollama.url,
            CONF_MODEL: MODEL,
            CONF_EMBEDDING_MODEL: "nomic-embed-text",
        },
        # The model answers every message here ("Hi" is one HA's recognizer
        # would answer itself).
        options={CONF_REQUEST_TIMEOUT: 10, CONF_FAST_PATH: False},
    )
    entry.add_to_hass(hass)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    return entry


async def test_every_parameter_on_the_wire_has_a_type(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """The /api/chat body Ollama receives types every parameter, byte-stable."""
    fake_ollama.reply("Hello.").reply("Hello again.")
    # Words HA's own intents do not answer (the fast path takes "Hi").
    await telegram.send_text("Tell me something nice")
    await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    await telegram.send_text("And one more")
    await telegram.wait_for_sent(2, chat_id=ALICE_ID)

    first, second = fake_ollama.chat_requests[-2:]
    tools = first["tools"]
    assert [tool["function"]["name"] for tool in tools] == list(ALL_TOOLS)
    problems = [problem for tool in tools for problem in _untyped(tool)]
    assert problems == []
    # Every property reached the server whole: nothing the model needs was dropped.
    by_name = {spec.name: spec.schema() for spec in _specs()}
    for tool in tools:
        assert tool == by_name[tool["function"]["name"]]
    entity_id = tools[2]["function"]["parameters"]["properties"]["entity_id"]
    assert entity_id["type"] == ["string", "array"]
    assert entity_id["items"] == {"type": "string"}
    assert json.dumps(second["tools"]) == json.dumps(tools)
