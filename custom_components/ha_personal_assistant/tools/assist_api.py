"""Home Assistant's own Assist tools in our agent: timers, to-do, calendar, broadcast.

Option ``ha_tools``. Only this curated set joins, never HA's device-control
intents (call_service covers those under the policy). Each tool here has a
fixed schema of its own, so the tool list (the cached prompt prefix) is the
same bytes on every turn whatever lists, calendars or devices exist; at call
time it runs HA's tool of the Assist API for the asking device and user.
State-changing ones are judged first, like call_service: the policy on the
equivalent service call, the taint rule, and Confirm; to-do and calendar
text is outside text, fenced, and taints the turn.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

import voluptuous as vol
from homeassistant.components.homeassistant.exposed_entities import (
    async_should_expose,
)
from homeassistant.const import ATTR_ENTITY_ID
from homeassistant.core import Context
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers import device_registry as dr
from homeassistant.helpers import intent, llm
from pydantic import BaseModel, Field

from ..const import DOMAIN
from ..policy.judge import evaluate_call
from ..policy.people import acting_user_id
from ..policy.rules import DEFAULT_POLICY
from ..policy.verdict import Decision, ResolvedCall, Verdict
from ..security.firewall import mark_untrusted_parts
from .ha import hold_for_confirmation
from .registry import ToolContext, ToolError, ToolSpec

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from homeassistant.core import HomeAssistant

    from ..store.actions import PendingAction

ASSISTANT: Final = "conversation"
# How the policy names the timer intents: entries "intent" or
# "intent.start_timer" block them or make them wait for Confirm.
INTENT_DOMAIN: Final = "intent"
# Timer actions confirmed later run through HA's tool again, on the device.
TIMER_SERVICES: Final = ("start_timer", "cancel_timer")
# Where a timer action keeps HA's arguments until it is confirmed.
TIMER_ARGS: Final = "timer"
MAX_NAME_CHARS: Final = 40
# What the model is told of a held call (Telegram buttons or Assist's yes).
HELD_NOTE: Final = (
    "Nothing was done yet. The user is asked to confirm; tell "
    "them to confirm if they want this."
)
NOT_EVERY_SATELLITE: Final = (
    "a broadcast reaches every voice satellite, and not all of them are "
    "shared with the assistant"
)
NO_TIMERS: Final = (
    "Timers run on the voice satellite that was asked, and this conversation "
    "has none (or it cannot run timers). Use schedule for a reminder instead."
)


class TimerStartArgs(BaseModel):
    """Arguments of timer_start."""

    hours: int | None = None
    minutes: int | None = None
    seconds: int | None = None
    name: str | None = Field(default=None, description="Timer name, e.g. pasta")


class TimerNameArgs(BaseModel):
    """Arguments of timer_cancel and timer_status."""

    name: str | None = Field(default=None, description="Timer name, if it has one")


class TodoItemsArgs(BaseModel):
    """Arguments of todo_items."""

    todo_list: str = Field(description="To-do list name")
    status: Literal["needs_action", "completed", "all"] | None = None


class TodoItemArgs(BaseModel):
    """Arguments of todo_add and todo_complete."""

    todo_list: str = Field(description="To-do list name")
    item: str


class CalendarEventsArgs(BaseModel):
    """Arguments of calendar_events."""

    calendar: str = Field(description="Calendar name")
    range: Literal["today", "week"]


class BroadcastArgs(BaseModel):
    """Arguments of broadcast."""

    message: str = Field(description="What every voice satellite says")


type Judge = Callable[[ToolContext, dict[str, Any]], Verdict]


@dataclass(frozen=True, slots=True)
class HaTool:
    """One of HA's Assist tools, as our agent sees it and how it is judged."""

    name: str
    description: str
    args_schema: type[BaseModel]
    # HA's name of the tool in the Assist API.
    ha_name: str
    # Turns our arguments into HA's.
    ha_args: Callable[[dict[str, Any]], dict[str, Any]]
    # State-changing tools: the equivalent call, judged by the policy.
    judge: Judge | None = None
    # Returns text written outside the house (to-do items, calendar events).
    untrusted: bool = False

    def spec(self) -> ToolSpec:
        """Return the tool for the registry."""

        async def handler(ctx: ToolContext, args: BaseModel) -> Any:
            return await self._async_run(ctx, args.model_dump(exclude_none=True))

        return ToolSpec(
            name=self.name,
            description=self.description,
            args_schema=self.args_schema,
            handler=handler,
            changes_state=self.judge is not None,
            untrusted_output=self.untrusted,
        )

    async def _async_run(self, ctx: ToolContext, args: dict[str, Any]) -> Any:
        if self.judge is not None:
            verdict = self.judge(ctx, args)
            if verdict.decision is Decision.BLOCK:
                msg = f"Refused: {verdict.reason}."
                raise ToolError(msg)
            # The taint rule and Confirm, as for call_service.
            if (held := hold_for_confirmation(ctx, verdict, HELD_NOTE)) is not None:
                return held
        data = await async_call_ha_tool(
            ctx.hass,
            self.ha_name,
            self.ha_args(args),
            user_id=ctx.ha_user_id,
            device_id=ctx.device_id,
            language=ctx.texts.language,
        )
        if not self.untrusted:
            return data
        # Item names, event titles and descriptions: anyone who can write to
        # a shared list or send an invitation wrote them. Each item is judged
        # on its own: one poisoned event is withheld, the others stay.
        parts = _parts(data)
        block, withheld = mark_untrusted_parts(
            [json.dumps(part, ensure_ascii=False, default=str) for part in parts],
            source=f"{self.name} results",
        )
        note = f"\n{withheld} of {len(parts)} withheld as unsafe." if withheld else ""
        return f"{block}{note}" if parts else "[]"


def _parts(data: dict[str, Any]) -> list[Any]:
    """Return the items of a to-do or calendar answer, one part each."""
    for key in ("events", "items"):
        if isinstance(value := data.get(key), list):
            return value
    return [data]


async def async_call_ha_tool(  # noqa: PLR0913 - who, where and what
    hass: HomeAssistant,
    name: str,
    args: dict[str, Any],
    *,
    user_id: str | None,
    device_id: str | None,
    language: str | None,
) -> dict[str, Any]:
    """Run one of HA's Assist API tools as the user, for the device; raise ToolError.

    The tools of HA's API see only entities exposed to Assist; timers exist
    only for a device registered for them.
    """
    acting = user_id or acting_user_id(hass)
    if acting is None:
        msg = "there is no Home Assistant user to act as, so nothing was done"
        raise ToolError(msg)
    context = llm.LLMContext(
        platform=DOMAIN,
        context=Context(user_id=acting),
        language=language,
        assistant=ASSISTANT,
        device_id=device_id,
    )
    try:
        api = await llm.async_get_api(hass, llm.LLM_API_ASSIST, context)
    except HomeAssistantError as err:
        msg = f"Home Assistant's tools are unavailable: {err}"
        raise ToolError(msg) from err
    if not any(tool.name == name for tool in api.tools):
        if name.startswith("intent__"):
            raise ToolError(NO_TIMERS)
        msg = "nothing of that kind is shared with the assistant"
        raise ToolError(msg)
    try:
        result = await api.async_call_tool(
            llm.ToolInput(tool_name=name, tool_args=args)
        )
    except (HomeAssistantError, vol.Invalid, ValueError) as err:
        msg = f"Home Assistant could not do it: {err}"
        raise ToolError(msg) from err
    data: dict[str, Any] = dict(result.data)
    if result.error or data.get("response_type") == "error":
        msg = f"Home Assistant could not do it: {data.get('error') or _speech(data)}"
        raise ToolError(msg)
    return data


def _speech(data: dict[str, Any]) -> str:
    """Return the spoken text of an intent response (its error message)."""
    speech = data.get("speech")
    plain = speech.get("plain") if isinstance(speech, dict) else None
    return str(plain.get("speech", "")) if isinstance(plain, dict) else ""


def _entity_named(hass: HomeAssistant, domain: str, name: str) -> str:
    """Return the exposed entity of ``domain`` the household calls ``name``.

    A hidden one and a missing one get the same answer.
    """
    match = intent.async_match_targets(
        hass,
        intent.MatchTargetsConstraints(
            name=name, domains=[domain], assistant=ASSISTANT
        ),
    )
    if not match.is_match or not match.states:
        msg = f"there is no {domain.replace('_', '-')} list or calendar named {name!r}"
        raise ToolError(msg)
    return match.states[0].entity_id


def _judge_todo(service: str, extra: dict[str, Any]) -> Judge:
    """Judge a to-do change as the todo service that does the same."""

    def judge(ctx: ToolContext, args: dict[str, Any]) -> Verdict:
        entity_id = _entity_named(ctx.hass, "todo", args["todo_list"])
        data = {ATTR_ENTITY_ID: entity_id, "item": args["item"], **extra}
        return evaluate_call(ctx.hass, "todo", service, data, policy=ctx.policy)

    return judge


def _judge_broadcast(ctx: ToolContext, args: dict[str, Any]) -> Verdict:
    """Judge a broadcast as an announcement on every voice satellite."""
    satellites = ctx.hass.states.async_entity_ids("assist_satellite")
    if not satellites:
        msg = "there is no voice satellite to broadcast to"
        raise ToolError(msg)
    data = {ATTR_ENTITY_ID: satellites, "message": args["message"]}
    verdict = evaluate_call(
        ctx.hass, "assist_satellite", "announce", data, policy=ctx.policy
    )
    if verdict.decision is Decision.BLOCK and not _all_shared(ctx.hass, satellites):
        # The model gave no entity id: the policy's answer about one would
        # send it looking for the satellite (list_entities), which it cannot
        # see. Say why, naming none.
        return Verdict(Decision.BLOCK, NOT_EVERY_SATELLITE, verdict.targets)
    return verdict


def _all_shared(hass: HomeAssistant, entity_ids: list[str]) -> bool:
    """Tell whether every one of ``entity_ids`` is exposed to the assistant."""
    return all(async_should_expose(hass, ASSISTANT, e) for e in entity_ids)


def _judge_timer(service: str) -> Judge:
    """Judge a timer action: the policy's "intent" entries, on the asking device."""

    def judge(ctx: ToolContext, args: dict[str, Any]) -> Verdict:
        if ctx.device_id is None:
            raise ToolError(NO_TIMERS)
        device = dr.async_get(ctx.hass).async_get(ctx.device_id)
        # What the Confirm message shows (confirm_text.TASK_VERBS): the
        # device as the household named it, the duration and the name.
        shown = {
            "task": (device.name_by_user or device.name) if device else None,
            "summary": _duration(args),
        }
        call = ResolvedCall(
            DOMAIN,
            service,
            (),
            {TIMER_ARGS: args, "device_id": ctx.device_id, **shown},
        )
        policy = ctx.policy or DEFAULT_POLICY
        if policy.is_blocked(INTENT_DOMAIN, service):
            return Verdict(Decision.BLOCK, f"{INTENT_DOMAIN}.{service} is blocked", ())
        if policy.needs_confirmation(INTENT_DOMAIN, service):
            return Verdict(
                Decision.CONFIRM,
                f"{INTENT_DOMAIN}.{service} needs confirmation",
                (),
                (call,),
            )
        return Verdict(Decision.ALLOW, "allowed", (), (call,))

    return judge


def _duration(args: dict[str, Any]) -> str:
    """Return a timer's length as H:MM:SS, and its name quoted if it has one."""
    seconds = (
        int(args.get("hours") or 0) * 3600
        + int(args.get("minutes") or 0) * 60
        + int(args.get("seconds") or 0)
    )
    hours, rest = divmod(seconds, 3600)
    text = f"{hours}:{rest // 60:02}:{rest % 60:02}" if seconds else ""
    if name := args.get("name"):
        text = f'{text} "{" ".join(str(name).split())[:MAX_NAME_CHARS]}"'.strip()
    return text


def _same(args: dict[str, Any]) -> dict[str, Any]:
    return args


def _todo_item(args: dict[str, Any]) -> dict[str, Any]:
    return {"name": args["todo_list"], "item": args["item"]}


HA_TOOLS: Final = (
    HaTool(
        name="broadcast",
        description="Say a message on every voice satellite in the house.",
        args_schema=BroadcastArgs,
        ha_name="assist_satellite__HassBroadcast",
        ha_args=_same,
        judge=_judge_broadcast,
    ),
    HaTool(
        name="calendar_events",
        description="Get a calendar's events of today or this week.",
        args_schema=CalendarEventsArgs,
        ha_name="calendar__get_events",
        ha_args=_same,
        untrusted=True,
    ),
    HaTool(
        name="timer_cancel",
        description="Cancel a timer on the voice satellite that was asked.",
        args_schema=TimerNameArgs,
        ha_name="intent__HassCancelTimer",
        ha_args=_same,
        judge=_judge_timer("cancel_timer"),
    ),
    HaTool(
        name="timer_start",
        description=(
            "Start a timer on the voice satellite that was asked; it rings there."
        ),
        args_schema=TimerStartArgs,
        ha_name="intent__HassStartTimer",
        ha_args=_same,
        judge=_judge_timer("start_timer"),
    ),
    HaTool(
        name="timer_status",
        description="Tell how long the timers of the asking satellite have left.",
        args_schema=TimerNameArgs,
        ha_name="intent__HassTimerStatus",
        ha_args=_same,
    ),
    HaTool(
        name="todo_add",
        description="Add an item to a to-do or shopping list.",
        args_schema=TodoItemArgs,
        ha_name="todo__HassListAddItem",
        ha_args=_todo_item,
        judge=_judge_todo("add_item", {}),
    ),
    HaTool(
        name="todo_complete",
        description="Check off an item of a to-do or shopping list.",
        args_schema=TodoItemArgs,
        ha_name="todo__HassListCompleteItem",
        ha_args=_todo_item,
        judge=_judge_todo("update_item", {"status": "completed"}),
    ),
    HaTool(
        name="todo_items",
        description="Get the items of a to-do or shopping list.",
        args_schema=TodoItemsArgs,
        ha_name="todo__get_items",
        ha_args=_same,
        untrusted=True,
    ),
)


def ha_tools() -> list[ToolSpec]:
    """Return HA's curated tools for the registry, sorted by name (a fixed prefix)."""
    return [tool.spec() for tool in sorted(HA_TOOLS, key=lambda tool: tool.name)]


def timer_runners(
    hass: HomeAssistant,
) -> dict[tuple[str, str], Callable[[PendingAction, ResolvedCall], Awaitable[None]]]:
    """Return what runs a confirmed timer action: HA's tool again, on the device."""
    tools = {tool.ha_name: tool for tool in HA_TOOLS}
    by_service = {
        "start_timer": tools["intent__HassStartTimer"],
        "cancel_timer": tools["intent__HassCancelTimer"],
    }

    def runner(
        tool: HaTool,
    ) -> Callable[[PendingAction, ResolvedCall], Awaitable[None]]:
        async def run(action: PendingAction, call: ResolvedCall) -> None:
            args = dict(call.data.get(TIMER_ARGS) or {})
            await async_call_ha_tool(
                hass,
                tool.ha_name,
                tool.ha_args(args),
                user_id=action.ha_user_id,
                device_id=call.data.get("device_id"),
                language=None,
            )

        return run

    return {(DOMAIN, service): runner(tool) for service, tool in by_service.items()}
