"""One registry of tools: name, description, arguments and the flags safety reads."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from ..agent.reply_check import ReplyCheck
from ..const import LOGGER
from ..i18n import Texts
from ..policy.people import NOT_KNOWN_TOOL

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant

    from ..policy.rules import Policy
    from ..policy.verdict import Verdict
    from ..store.database import Database


class ToolError(Exception):
    """A tool refused or failed; the message is shown to the model."""


@dataclass(slots=True)
class ToolContext:
    """Who is asking, and what the tools may use to answer."""

    hass: HomeAssistant
    database: Database | None
    person: str
    ha_user_id: str | None = None
    chat_id: int | None = None
    # The conversation the turn belongs to ("telegram:<bot entry>:<chat>" or
    # "assist:<id>"): where a scheduled task tells its maker.
    conversation_key: str | None = None
    # Whose profile remember/forget act on (the mapped HA user, else Telegram).
    profile_key: str | None = None
    # The permission policy from the entry's options (None: the defaults).
    policy: Policy | None = None
    # Set while untrusted text is part of what the model reads (the taint
    # rule reads it); set it with mark_tainted, which says where it came from.
    tainted: bool = False
    # What the untrusted text is, in words for the user ("web search results"),
    # oldest first, without repeats: the Confirm message says why it asks.
    taint_sources: list[str] = field(default_factory=list)
    # Actions that wait for the user's confirmation, sent after the turn.
    proposals: list[Verdict] = field(default_factory=list)
    # The speaker's first name (the PII sanitizer keeps it out of queries).
    user_name: str | None = None
    # URLs the turn's search results showed: the only ones a reply may carry.
    allowed_urls: set[str] = field(default_factory=set)
    # Facts the user must hear whatever the model writes, added to the reply.
    notices: list[str] = field(default_factory=list)
    # The fixed texts in the speaker's language (notices are written in it).
    texts: Texts = field(default_factory=Texts)
    # Whether the speaker may change state and memory: a known person (see
    # policy/people.py). Off unless the caller says so; the registry refuses
    # every state-changing or memory-writing tool without it.
    may_act: bool = False
    # The user's own words of every turn in the prompt (the remember rule).
    user_texts: list[str] = field(default_factory=list)
    # Untrusted text the running tool call returned (the registry resets it).
    call_sources: list[str] = field(default_factory=list)
    # The Assist device that asked (a voice satellite): HA's timers run on it.
    device_id: str | None = None
    # Its area: the target of a call_service that names none.
    default_area: str | None = None

    def mark_tainted(self, source: str) -> None:
        """Record that untrusted text from ``source`` is now in the prompt."""
        self.tainted = True
        if source not in self.taint_sources:
            self.taint_sources.append(source)
        if source not in self.call_sources:
            self.call_sources.append(source)


type ToolHandler = Callable[[ToolContext, Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the model sees it, plus the flags the safety layers read."""

    name: str
    description: str
    args_schema: type[BaseModel]
    handler: ToolHandler
    changes_state: bool = False
    untrusted_output: bool = False
    # Writes the person's profile: refused once untrusted text entered the turn.
    writes_memory: bool = False

    def schema(self) -> dict[str, Any]:
        """Return the tool in the function-calling format Ollama expects."""
        params = self.args_schema.model_json_schema()
        # A tool whose name and arguments say it all (get_state(entity_id))
        # has no description: none is sent rather than an empty one.
        described = {"description": self.description} if self.description else {}
        return {
            "type": "function",
            "function": {
                "name": self.name,
                **described,
                "parameters": _compact_schema(params),
            },
        }

    def texts(self) -> list[str]:
        """Return the descriptions the model reads: the tool's and its arguments'."""
        properties = self.schema()["function"]["parameters"].get("properties", {})
        texts = [self.description] if self.description else []
        return [
            *texts,
            *(str(p["description"]) for p in properties.values() if "description" in p),
        ]


def _compact_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Return the argument schema in the shape Ollama's client sends whole.

    The ollama client's ``Tool`` model keeps only ``type``, ``items``,
    ``description`` and ``enum`` of a property and drops the rest (``anyOf``,
    ``$ref``, ``default``, ``additionalProperties``) before the request is
    sent: a pydantic ``str | None`` would reach the model with no type at all.
    So every property is written in those four keys: ``X | None`` becomes X's
    type, other unions a list of types (``["string", "array"]``, with the
    array's ``items``), references to nested models are resolved. Pydantic's
    titles go too: prompt tokens that tell the model nothing.
    """
    defs: dict[str, Any] = schema.get("$defs", {})
    result: dict[str, Any] = {"type": "object"}
    properties = schema.get("properties", {})
    if properties:
        result["properties"] = {
            name: _compact_property(prop, defs) for name, prop in properties.items()
        }
    # A tool's only argument is required by nature: saying so costs prompt
    # tokens on every request and tells the model nothing (it is validated
    # here all the same).
    if schema.get("required") and len(properties) > 1:
        result["required"] = list(schema["required"])
    return result


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Return ``schema`` with a ``$ref`` to one of ``defs`` replaced by its target."""
    ref = schema.get("$ref")
    if not isinstance(ref, str):
        return schema
    target = defs.get(ref.rsplit("/", 1)[-1], {})
    return {**target, **{k: v for k, v in schema.items() if k != "$ref"}}


def _compact_property(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Return one property with a type the Ollama client keeps."""
    schema = _resolve(schema, defs)
    variants = [
        _resolve(variant, defs)
        for variant in schema.get("anyOf", schema.get("oneOf", [schema]))
    ]
    variants = [v for v in variants if v.get("type") != "null"] or variants
    types: list[str] = []
    merged: dict[str, Any] = {}
    for variant in variants:
        kind = variant.get("type") or (
            "object"
            if "properties" in variant
            else "array"
            if "items" in variant
            else None
        )
        for name in kind if isinstance(kind, list) else [kind]:
            if isinstance(name, str) and name != "null" and name not in types:
                types.append(name)
        if "items" in variant and "items" not in merged:
            merged["items"] = _compact_property(variant["items"], defs)
        values = variant.get("enum", [variant["const"]] if "const" in variant else [])
        if values:
            merged.setdefault("enum", [])
            merged["enum"] += [v for v in values if v not in merged["enum"]]
    result: dict[str, Any] = {}
    if types:
        result["type"] = types[0] if len(types) == 1 else types
    if "array" in types and "items" not in merged:
        merged["items"] = {}
    if "items" in merged:
        result["items"] = merged["items"]
    if description := schema.get("description") or (
        variants[0].get("description") if len(variants) == 1 else None
    ):
        result["description"] = description
    if "enum" in merged:
        result["enum"] = merged["enum"]
    return result


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What a tool call produced, as the model will read it."""

    content: str
    ok: bool
    # True when the call never reached a tool (unknown name, bad arguments).
    malformed: bool = False
    # Where the untrusted text in ``content`` came from (empty: none).
    untrusted: tuple[str, ...] = ()


class ToolRegistry:
    """The enabled tools, in a fixed order so the prompt prefix never changes."""

    def __init__(
        self, tools: Iterable[ToolSpec], disabled: Mapping[str, str] | None = None
    ) -> None:
        """Index the tools by name, keeping their order.

        ``disabled`` maps tools switched off in the options to what the model
        is told when it calls one anyway.
        """
        self._tools = {tool.name: tool for tool in tools}
        self._disabled = dict(disabled or {})
        # What the model reads about its tools is what its answers must not
        # repeat; a disabled tool may still be written out as a call.
        self.reply_check = ReplyCheck.with_tools(
            [*self._tools, *self._disabled],
            [text for tool in self._tools.values() for text in tool.texts()],
        )

    def __contains__(self, name: object) -> bool:
        """Tell whether a tool of that name is enabled."""
        return name in self._tools

    def get(self, name: str) -> ToolSpec | None:
        """Return the tool of that name."""
        return self._tools.get(name)

    @property
    def names(self) -> list[str]:
        """Return the tool names in registry order."""
        return list(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        """Return every tool's schema, in registry order."""
        return [tool.schema() for tool in self._tools.values()]

    async def async_call(  # noqa: PLR0912 - an outcome per kind of failure
        self, ctx: ToolContext, name: str, args: object
    ) -> ToolOutcome:
        """Validate and run one tool call, log it, and describe the result."""
        tool = self._tools.get(name)
        if tool is None and name in self._disabled:
            return ToolOutcome(self._disabled[name], ok=False)
        if tool is None:
            return ToolOutcome(
                f"Error: there is no tool named {name!r}. "
                f"Available tools: {', '.join(self._tools)}.",
                ok=False,
                malformed=True,
            )
        if not isinstance(args, dict):
            return ToolOutcome(
                f"Error: the arguments of {name} must be a JSON object.",
                ok=False,
                malformed=True,
            )
        try:
            parsed = tool.args_schema.model_validate(args)
        except ValidationError as err:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in err.errors()
            )
            return ToolOutcome(
                f"Error: invalid arguments for {name}: {problems}.",
                ok=False,
                malformed=True,
            )
        start = time.monotonic()
        ctx.call_sources = []
        try:
            if (tool.changes_state or tool.writes_memory) and not ctx.may_act:
                # A guest in a group: answers, never actions, whatever the
                # model was talked into. The user hears it from us, not the model.
                if (notice := ctx.texts("not_known_reply")) not in ctx.notices:
                    ctx.notices.append(notice)
                raise ToolError(NOT_KNOWN_TOOL)  # noqa: TRY301 - refused like a tool refuses
            if tool.writes_memory and ctx.tainted:
                # The taint rule, here rather than in each tool: text from the
                # web or a document must never end up in someone's profile.
                msg = (
                    "Refused: text from outside the house is in this conversation "
                    f"({', '.join(ctx.taint_sources)}), so nothing may be "
                    "remembered or forgotten now. Tell the user to say it again "
                    "after /new."
                )
                raise ToolError(msg)  # noqa: TRY301 - refused like a tool refuses
            try:
                result = await tool.handler(ctx, parsed)
            finally:
                if tool.untrusted_output:
                    # The taint rule: from here on, this turn has read text
                    # nobody in the house wrote (set even if the tool failed
                    # part-way: some of it may have entered).
                    ctx.mark_tainted(f"{tool.name} results")
        except ToolError as err:
            outcome = ToolOutcome(f"Error: {err}", ok=False)
            status = "refused"
        except sqlite3.Error:
            # The database is locked or full; its outage is logged once.
            outcome = ToolOutcome(
                f"Error: {name} needs storage that is unavailable right now; tell"
                " the user it did not work and to try again later.",
                ok=False,
            )
            status = "error"
        except Exception:  # noqa: BLE001 - the model is told, the log has details
            LOGGER.exception("The tool %s failed", name)
            outcome = ToolOutcome(
                f"Error: {name} failed unexpectedly; tell the user it did not work.",
                ok=False,
            )
            status = "error"
        else:
            outcome = ToolOutcome(_to_text(result), ok=True)
            status = "ok"
        if ctx.call_sources:
            outcome = replace(outcome, untrusted=tuple(ctx.call_sources))
        duration_ms = (time.monotonic() - start) * 1000
        if ctx.database is not None:
            try:
                await ctx.database.async_log_tool_call(
                    name, ctx.person, duration_ms, status
                )
            except Exception as err:  # noqa: BLE001
                # The log must never cost the user their answer.
                LOGGER.debug("Could not log the tool call: %s", err)
        return outcome


def _to_text(result: Any) -> str:
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False, separators=(",", ":"), default=str)
