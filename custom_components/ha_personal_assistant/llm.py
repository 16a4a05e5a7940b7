"""Our read-only tools in HA's Assist API, for every agent and MCP client."""

from __future__ import annotations

import json
import types
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Union, get_args, get_origin, override

from homeassistant.auth.permissions.const import POLICY_READ
from homeassistant.components.llm import LLMTools
from homeassistant.core import callback
from homeassistant.helpers.llm import (
    LLM_API_ASSIST,
    LLMContext,
    Tool,
    ToolAnnotations,
    ToolInput,
    ToolResult,
)

from .const import DOMAIN
from .i18n import async_texts, pick_language
from .tools.ha import NOT_VISIBLE_REPLY
from .tools.registry import ToolContext, ToolOutcome

if TYPE_CHECKING:
    # At run time HA aliases voluptuous to probatio, whose types HA's LLM
    # helpers expect; the voluptuous stubs would not match them.
    import probatio as vol
    from homeassistant.core import HomeAssistant
    from pydantic import BaseModel

    from .data import PersonalAssistantConfigEntry
    from .tools.registry import ToolSpec
else:
    import voluptuous as vol

# Who calls without an HA user (an automation, a satellite): the same person
# our own Assist agent answers as.
NO_USER_PERSON: Final = "assist"


@dataclass(frozen=True, slots=True)
class Shared:
    """One of our tools as other agents get it."""

    title: str
    annotations: ToolAnnotations


# Only tools that neither change state nor write memory. Other agents have
# no Confirm step and no taint rule, so nothing they call may act.
SHARED: Final = {
    "search_documents": Shared(
        title="Search the household's documents",
        # The household's own index on its own model server: a closed world.
        annotations=ToolAnnotations(
            read_only=True, destructive=False, idempotent=True, open_world=False
        ),
    ),
    "get_history": Shared(
        title="Get an entity's history",
        annotations=ToolAnnotations(
            read_only=True, destructive=False, idempotent=True, open_world=False
        ),
    ),
    "list_tasks": Shared(
        title="List the user's reminders and watches",
        annotations=ToolAnnotations(
            read_only=True, destructive=False, idempotent=True, open_world=False
        ),
    ),
}
_TYPES: Final[dict[Any, Any]] = {
    str: str,
    int: vol.Coerce(int),
    float: vol.Coerce(float),
}


def parameters(model: type[BaseModel]) -> vol.Schema:
    """Return a tool's pydantic arguments as the voluptuous schema HA's API reads.

    Only for the schema other agents are shown; the registry validates the
    call with the pydantic model itself.
    """
    fields: dict[Any, Any] = {}
    for name, info in model.model_fields.items():
        kind: Any = info.annotation
        if get_origin(kind) in {Union, types.UnionType}:
            kind = next((a for a in get_args(kind) if a is not type(None)), str)
        marker = vol.Required if info.is_required() else vol.Optional
        fields[marker(name, description=info.description)] = _TYPES.get(kind, str)
    return vol.Schema(fields)


def _loaded_entry(hass: HomeAssistant) -> PersonalAssistantConfigEntry | None:
    entries: list[PersonalAssistantConfigEntry] = (
        hass.config_entries.async_loaded_entries(DOMAIN)
    )
    return entries[0] if entries else None


class SharedTool(Tool):
    """Runs one of our tools through our registry, as the user who asked."""

    integration = DOMAIN

    def __init__(self, spec: ToolSpec, shared: Shared) -> None:
        """Describe the tool as our agent's model reads it, prefixed."""
        self.tool_name = spec.name
        self.name = f"{DOMAIN}__{spec.name}"
        self.title = shared.title
        # Our model reads some tools by name alone; other agents get a title.
        self.description = spec.description or shared.title
        self.parameters = parameters(spec.args_schema)
        self.annotations = shared.annotations

    @override
    async def async_call(
        self, hass: HomeAssistant, tool_input: ToolInput, llm_context: LLMContext
    ) -> ToolResult:
        """Run the tool for the calling HA user; fence outside text."""
        entry = _loaded_entry(hass)
        if entry is None:
            return ToolResult(
                data={"error": "The Personal Assistant is not running."}, error=True
            )
        user_id = llm_context.context.user_id if llm_context.context else None
        user = await hass.auth.async_get_user(user_id) if user_id else None
        if user_id is not None and (user is None or not user.is_active):
            return ToolResult(data={"error": "Unknown user."}, error=True)
        args = tool_input.tool_args
        entity_id = args.get("entity_id")
        if (
            user is not None
            and isinstance(entity_id, str)
            and not user.permissions.check_entity(
                entity_id.strip().lower(), POLICY_READ
            )
        ):
            # What the user may not read gets the answer of what does not exist.
            return _result(ToolOutcome(f"Error: {NOT_VISIBLE_REPLY}", ok=False))
        assistant = entry.runtime_data.assistant
        ctx = ToolContext(
            hass=hass,
            database=assistant.database,
            person=f"ha:{user_id}" if user_id else NO_USER_PERSON,
            ha_user_id=user_id,
            policy=assistant.policy,
            user_name=user.name if user is not None else None,
            texts=await async_texts(
                hass, pick_language(llm_context.language, hass.config.language)
            ),
            # Never acts, whatever a tool would do (none shared does).
            may_act=False,
        )
        # Validated, run and logged as for our own agent; each tool fences the
        # outside text in its answer (documents, entity states, task messages
        # written while outside text was in a prompt).
        return _result(await assistant.registry.async_call(ctx, self.tool_name, args))


def _result(outcome: ToolOutcome) -> ToolResult:
    """Return the outcome as HA's API passes it on: an object, or the text."""
    if not outcome.ok:
        return ToolResult(data={"error": outcome.content}, error=True)
    try:
        data = json.loads(outcome.content)
    except ValueError:
        data = None
    if isinstance(data, dict):
        return ToolResult(data=data)
    return ToolResult(data={"result": outcome.content})


@callback
def async_get_tools(
    hass: HomeAssistant,
    llm_context: LLMContext,  # noqa: ARG001 - the user is read when a tool runs
    api_id: str,
) -> LLMTools | None:
    """Return our read-only tools for the Assist API, while the assistant runs."""
    if api_id != LLM_API_ASSIST or (entry := _loaded_entry(hass)) is None:
        return None
    registry = entry.runtime_data.assistant.registry
    tools: list[Tool] = [
        SharedTool(spec, shared)
        for name, shared in SHARED.items()
        if (spec := registry.get(name)) is not None
        and not (spec.changes_state or spec.writes_memory)
    ]
    return LLMTools(tools=tools) if tools else None
