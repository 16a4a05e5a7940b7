"""Tools that read and control the Home Assistant entities exposed to Assist."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import time
from typing import TYPE_CHECKING, Any, Final

import voluptuous as vol
from homeassistant.components.homeassistant.exposed_entities import (
    async_should_expose,
)
from homeassistant.const import ATTR_ENTITY_ID, ATTR_FRIENDLY_NAME
from homeassistant.core import Context, valid_entity_id
from homeassistant.exceptions import HomeAssistantError, Unauthorized, UnknownUser
from homeassistant.helpers import area_registry as ar
from homeassistant.helpers import device_registry as dr
from homeassistant.helpers import entity_registry as er
from pydantic import BaseModel

from ..agent.satellite import with_default_area
from ..const import EVENT_ACTION_EXECUTED, LOGGER
from ..policy.confirmations import require_confirmation
from ..policy.judge import evaluate_call
from ..policy.people import acting_user_id
from ..policy.verdict import Decision, ResolvedCall, Verdict
from ..policy.visibility import ASSISTANT, NOT_VISIBLE, is_visible
from ..security.firewall import mark_untrusted_parts
from ..security.names import NAME_PLACEHOLDER, name_is_trusted
from ..security.trust import (
    STATE_PLACEHOLDER,
    attribute_is_trusted,
    state_is_trusted,
)
from ..store.actions import AuditRow, add_audit
from .registry import ToolContext, ToolError, ToolSpec

if TYPE_CHECKING:
    from collections.abc import Sequence

    from homeassistant.core import HomeAssistant, State

# What get_state and list_entities show in place of a value written outside
# the house; the value itself follows, fenced, after the JSON.
FENCED_VALUE: Final = "(outside text: see the data below)"
SERVICE_CALL_TIMEOUT: Final = 30  # seconds
# A list is read by the model in full: at most this many lines (about 12
# tokens each), the active ones first; the rest is counted.
MAX_LISTED_ENTITIES: Final = 20
LIST_FORMAT: Final = "entity_id | name | state | area"
# States in which a device is at rest: listed after the others, so "which
# lights are on?" finds its answer within the first lines of a big house.
AT_REST: Final = frozenset(
    {"off", "closed", "locked", "idle", "standby", "paused", "docked", "not_home",
     "unavailable", "unknown"}
)  # fmt: skip
MAX_ATTRIBUTE_CHARS: Final = 300
# Attributes that cost tokens and tell the model nothing.
HIDDEN_ATTRIBUTES: Final = frozenset(
    {"entity_picture", "icon", "supported_features", "attribution", "access_token"}
)
_KEY: Final = re.compile(r"[\w.-]{1,64}")


def is_exposed(hass: HomeAssistant, entity_id: str) -> bool:
    """Tell whether the user exposed this entity to Assist."""
    return async_should_expose(hass, ASSISTANT, entity_id)


def exposed_states(hass: HomeAssistant) -> list[State]:
    """Return the states of every entity the assistant may see, sorted by id.

    Exposed to Assist, and reaching no hidden entity: a group or scene with a
    hidden member is left out like the member itself (policy/visibility.py).
    """
    return sorted(
        (
            s
            for s in hass.states.async_all()
            if is_exposed(hass, s.entity_id) and is_visible(hass, s.entity_id)
        ),
        key=lambda s: s.entity_id,
    )


def area_name(hass: HomeAssistant, entity_id: str) -> str | None:
    """Return the name of the entity's area, from the entity or its device."""
    entry = er.async_get(hass).async_get(entity_id)
    if entry is None:
        return None
    area_id = entry.area_id
    if area_id is None and entry.device_id is not None:
        device = dr.async_get(hass).async_get(entry.device_id)
        area_id = device.area_id if device is not None else None
    if area_id is None:
        return None
    area = ar.async_get(hass).async_get_area(area_id)
    return area.name if area is not None else None


# A tool's refusal of an entity that is hidden or does not exist.
NOT_VISIBLE_REPLY: Final = f"{NOT_VISIBLE[0].upper()}{NOT_VISIBLE[1:]}."


def _visible_state(hass: HomeAssistant, entity_id: str) -> State:
    """Return the state of an exposed entity, or refuse in words the model can use."""
    state = hass.states.get(entity_id)
    if state is None or not is_visible(hass, entity_id):
        # The same answer for both, naming nothing, so the model cannot probe
        # for hidden entities.
        raise ToolError(NOT_VISIBLE_REPLY)
    return state


def _short(value: Any) -> Any:
    text = value if isinstance(value, (int, float, bool)) else str(value)
    if isinstance(text, str) and len(text) > MAX_ATTRIBUTE_CHARS:
        text = text[:MAX_ATTRIBUTE_CHARS] + "…"
    return text


class OutsideText:
    """Values written outside the house that a tool result is about to show.

    The result shows :data:`FENCED_VALUE` in their place and the values
    themselves after it, fenced and datamarked by the firewall; the turn is
    tainted by the entity they belong to.
    """

    def __init__(self) -> None:
        """Start with nothing collected."""
        self.labels: list[str] = []
        self.texts: list[str] = []
        self.entities: list[str] = []

    def add(self, entity_id: str, label: str, text: str) -> str:
        """Collect one value; return what the JSON shows instead."""
        self.labels.append(label)
        self.texts.append(text)
        if entity_id not in self.entities:
            self.entities.append(entity_id)
        return FENCED_VALUE

    def result(self, ctx: ToolContext, info: dict[str, Any], source: str) -> Any:
        """Return ``info`` as is, or with the collected values fenced after it."""
        if not self.texts:
            return info
        for entity_id in self.entities:
            # The taint rule: text from outside the house is now in the prompt.
            ctx.mark_tainted(f"text of {entity_id}")
        block, withheld = mark_untrusted_parts(
            self.texts, source=source, labels=self.labels
        )
        lines = [json.dumps(info, ensure_ascii=False, separators=(",", ":"))]
        if withheld:
            lines.append(f"{withheld} value(s) were withheld as unsafe.")
        lines.append(block)
        return "\n".join(lines)


def _names_hidden(hass: HomeAssistant, value: object) -> bool:
    """Tell whether an attribute value is the id of an entity the assistant may not see.

    A group lists its members, a media player the players it plays with, a
    person their trackers: a hidden one must not be named through them.
    """
    if not isinstance(value, str):
        return False
    text = value.strip().lower()
    return (
        valid_entity_id(text)
        and hass.states.get(text) is not None
        and not is_visible(hass, text)
    )


def _attributes(
    hass: HomeAssistant, state: State, outside: OutsideText | None
) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, raw in state.attributes.items():
        if key in HIDDEN_ATTRIBUTES or key == ATTR_FRIENDLY_NAME:
            continue
        if not _KEY.fullmatch(key):
            # A key that is not an identifier was written by a service, not
            # by an integration's code: not shown at all.
            continue
        if _names_hidden(hass, raw):
            continue
        value = (
            [item for item in raw if not _names_hidden(hass, item)]
            if isinstance(raw, (list, tuple))
            else raw
        )
        if attribute_is_trusted(state, key, value):
            result[key] = _short(value)
        elif outside is not None:
            result[key] = outside.add(
                state.entity_id, f"{state.entity_id} {key}", str(_short(value))
            )
        else:
            result[key] = STATE_PLACEHOLDER
    return result


def describe(
    hass: HomeAssistant,
    state: State,
    *,
    full: bool,
    outside: OutsideText | None = None,
) -> dict[str, Any]:
    """Describe an entity for the model.

    A state or attribute written outside the house (see security/trust.py)
    goes to ``outside`` to be fenced; without one it is left out, replaced by
    a placeholder that says how to read it.
    """
    value = state.state
    if not state_is_trusted(state, hass):
        value = (
            outside.add(state.entity_id, f"{state.entity_id} state", value)
            if outside is not None
            else STATE_PLACEHOLDER
        )
    name = state.name
    if not name_is_trusted(hass, state.entity_id):
        # A name the device chose (security/names.py): outside text.
        name = (
            outside.add(state.entity_id, f"{state.entity_id} name", name)
            if outside is not None
            else NAME_PLACEHOLDER
        )
    info: dict[str, Any] = {
        "entity_id": state.entity_id,
        "name": name,
        "state": value,
    }
    if (area := area_name(hass, state.entity_id)) is not None:
        info["area"] = area
    if full:
        info["attributes"] = _attributes(hass, state, outside)
        info["last_changed"] = state.last_changed.isoformat(timespec="seconds")
    return info


class GetStateArgs(BaseModel):
    """Arguments of get_state."""

    entity_id: str


async def get_state(ctx: ToolContext, args: GetStateArgs) -> Any:
    """Return the state and attributes of one exposed entity.

    Values written outside the house (a news headline, release notes, a song
    title) come fenced after the JSON, and only then is the turn tainted.
    """
    state = _visible_state(ctx.hass, args.entity_id.strip().lower())
    outside = OutsideText()
    info = describe(ctx.hass, state, full=True, outside=outside)
    return outside.result(ctx, info, f"the state and attributes of {state.entity_id}")


class ListEntitiesArgs(BaseModel):
    """Arguments of list_entities."""

    domain: str | None = None
    area: str | None = None


async def list_entities(ctx: ToolContext, args: ListEntitiesArgs) -> Any:
    """List the exposed entities, optionally of one domain or in one area."""
    hass = ctx.hass
    domain = (args.domain or "").strip().lower() or None
    area = (args.area or "").strip().casefold() or None
    matching = [
        state
        for state in exposed_states(hass)
        if (domain is None or state.domain == domain)
        and (
            area is None
            or str(area_name(hass, state.entity_id) or "").casefold() == area
        )
    ]
    # Active devices first (stable within each group), then those at rest.
    matching.sort(key=lambda state: state.state in AT_REST)
    # Only what is listed is described: a value written outside the house
    # taints the turn only when it is really shown.
    outside = OutsideText()
    result: dict[str, Any] = {
        "format": LIST_FORMAT,
        "entities": [
            _list_line(describe(hass, state, full=False, outside=outside))
            for state in matching[:MAX_LISTED_ENTITIES]
        ],
    }
    if len(matching) > MAX_LISTED_ENTITIES:
        at_rest = sum(state.state in AT_REST for state in matching)
        result["note"] = (
            f"Only {MAX_LISTED_ENTITIES} of {len(matching)} are listed, active "
            f"ones first ({len(matching) - at_rest} active, {at_rest} off, "
            "closed or idle); filter by domain or area for the others."
        )
    if not matching:
        result["note"] = "No exposed entity matches."
    return outside.result(ctx, result, "entity states written outside the house")


def _list_line(info: dict[str, Any]) -> str:
    """Return an entity as one list line: id | name | state | area."""
    parts = [info["entity_id"], " ".join(str(info["name"]).split()), str(info["state"])]
    if "area" in info:
        parts.append(" ".join(str(info["area"]).split()))
    return " | ".join(parts)


class CallServiceArgs(BaseModel):
    """Arguments of call_service."""

    domain: str
    service: str
    entity_id: str | list[str] | None = None
    data: dict[str, Any] | None = None


def _entity_ids(value: object) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [part.strip().lower() for part in value.split(",") if part.strip()]
    if isinstance(value, (list, tuple)):
        return [str(part).strip().lower() for part in value if str(part).strip()]
    msg = "entity_id must be an entity id or a list of them"
    raise ToolError(msg)


async def async_run_calls(
    hass: HomeAssistant,
    calls: Sequence[ResolvedCall],
    ha_user_id: str | None,
    person: str | None = None,
) -> None:
    """Run resolved calls one after the other, as an HA user, never as the system.

    The user is ``ha_user_id`` (the person's mapped HA user), else the
    integration's own non-admin user; without either nothing runs. Each
    executed call fires ``ha_personal_assistant_action_executed`` with the
    resolved action, for automations and the logbook. Raises ToolError with a
    sentence the model or the user can read.
    """
    acting = ha_user_id or acting_user_id(hass)
    if acting is None:
        # A Context without a user is the system: HA would check nothing.
        msg = "there is no Home Assistant user to act as, so nothing was done"
        raise ToolError(msg)
    context = Context(user_id=acting)
    for call in calls:
        name = f"{call.domain}.{call.service}"
        try:
            async with asyncio.timeout(SERVICE_CALL_TIMEOUT):
                await hass.services.async_call(
                    call.domain,
                    call.service,
                    {**call.data, ATTR_ENTITY_ID: list(call.entity_ids)},
                    blocking=True,
                    context=context,
                )
        except TimeoutError as err:
            msg = f"{name} did not finish within {SERVICE_CALL_TIMEOUT} s"
            raise ToolError(msg) from err
        except (Unauthorized, UnknownUser) as err:
            msg = "the user's Home Assistant account may not do this"
            raise ToolError(msg) from err
        except (HomeAssistantError, vol.Invalid, ValueError) as err:
            # HA's error may quote the data's keys, which the model wrote: a
            # key that is not a plain identifier may be prose, never shown.
            msg = (
                f"{name} failed: {err}"
                if all(isinstance(k, str) and _KEY.fullmatch(k) for k in call.data)
                else f"{name} failed: Home Assistant refused fields it does not know"
            )
            raise ToolError(msg) from err
        hass.bus.async_fire(
            EVENT_ACTION_EXECUTED,
            {
                "domain": call.domain,
                "service": call.service,
                "entity_ids": list(call.entity_ids),
                "user": person,
                "ha_user_id": acting,
            },
            context=context,
        )


CONFIRM_NOTE: Final = (
    "Nothing was done yet. The user gets a message with Confirm and "
    "Cancel buttons; tell them to press Confirm if they want this."
)


def hold_for_confirmation(
    ctx: ToolContext, verdict: Verdict, note: str
) -> dict[str, Any] | None:
    """Hold a state change that needs the user's Confirm; None: it may run.

    The taint rule first: text from the web or a document is in this turn,
    so nothing changes on the model's word alone, whatever the policy says.
    What that text is goes with the proposal: the request says why. A held
    call never runs here: the user confirms (a Telegram button, Assist's
    yes), which the model cannot do; the request is sent after this turn.
    """
    if ctx.tainted:
        verdict = require_confirmation(verdict, ctx.taint_sources)
    if verdict.decision is not Decision.CONFIRM:
        return None
    if not any(p.calls == verdict.calls for p in ctx.proposals):
        ctx.proposals.append(verdict)
    return {
        "result": "waiting_for_confirmation",
        "reason": verdict.reason,
        "note": note,
    }


async def _audit(ctx: ToolContext, verdict: Verdict, name: str, outcome: str) -> None:
    if ctx.database is None:
        return
    row = AuditRow(
        ts=time.time(),
        telegram_user=ctx.person,
        chat_id=ctx.chat_id,
        ha_user_id=ctx.ha_user_id,
        entities=verdict.targets,
        service=name,
        policy=str(verdict.decision),
        confirmation="not_needed" if verdict.decision is Decision.ALLOW else "none",
        outcome=outcome,
    )
    try:
        await ctx.database.async_run(lambda conn: add_audit(conn, row))
    except sqlite3.Error as err:
        LOGGER.warning("Could not write the action audit log: %s", err)


async def call_service(ctx: ToolContext, args: CallServiceArgs) -> dict[str, Any]:
    """Call a service on exposed entities, within the permission policy."""
    hass = ctx.hass
    domain = args.domain.strip().lower()
    service = args.service.strip().lower()
    if "." in service and not domain:
        domain, service = service.split(".", 1)
    name = f"{domain}.{service}"
    data = dict(args.data or {})
    entity_ids = _entity_ids(args.entity_id) + _entity_ids(
        data.pop(ATTR_ENTITY_ID, None)
    )
    if entity_ids:
        data[ATTR_ENTITY_ID] = list(dict.fromkeys(entity_ids))
    # Said to a voice satellite without naming a place: the satellite's room.
    data = with_default_area(domain, data, ctx.default_area)
    verdict = evaluate_call(hass, domain, service, data, policy=ctx.policy)
    if verdict.decision is Decision.BLOCK:
        await _audit(ctx, verdict, name, "refused")
        msg = f"Refused: {verdict.reason}."
        raise ToolError(msg)
    if (held := hold_for_confirmation(ctx, verdict, CONFIRM_NOTE)) is not None:
        return held
    try:
        await async_run_calls(hass, verdict.calls, ctx.ha_user_id, ctx.person)
    except ToolError:
        await _audit(ctx, verdict, name, "failed")
        raise
    await _audit(ctx, verdict, name, "executed")
    return {
        "result": "done",
        "service": name,
        "states": [
            describe(hass, state, full=False)
            for entity_id in verdict.targets
            if (state := hass.states.get(entity_id)) is not None
        ],
    }


HA_TOOLS: Final = (
    ToolSpec(
        name="get_state",
        description="",  # its name and arguments say it
        args_schema=GetStateArgs,
        handler=get_state,
    ),
    ToolSpec(
        name="list_entities",
        description="",  # its name and arguments say it
        args_schema=ListEntitiesArgs,
        handler=list_entities,
    ),
    ToolSpec(
        name="call_service",
        description="Call a service (light.turn_on).",
        args_schema=CallServiceArgs,
        handler=call_service,
        changes_state=True,
    ),
)
