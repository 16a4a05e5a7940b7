"""Durable confirmations: a risky action runs once, only after its requester says so.

The model never confirms anything: a pending action is decided only by a
Telegram update from the person who asked (a button press or /confirm), or an
admin. Every state change is a conditional UPDATE committed together with its
audit row, so a double tap, a replayed update or a crash cannot run an action
twice or leave a decision unaudited.
"""

from __future__ import annotations

import json
import re
import secrets
import time
import unicodedata
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Final

from homeassistant.const import ATTR_ENTITY_ID

from ..const import LOGGER
from ..store import actions as store
from ..store.actions import AuditSummary, PendingAction, Status
from ..tools.ha import async_run_calls
from ..tools.registry import ToolError
from .people import NOT_KNOWN_DECISION
from .permissions import Decision, ResolvedCall, evaluate_call, scene_states

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from homeassistant.core import HomeAssistant

    from ..store.database import Database
    from .permissions import Policy, Verdict

# Readable verbs for the confirmation message; the rest are derived.
VERBS: Final = {
    ("lock", "unlock"): "Unlock",
    ("lock", "open"): "Open the door of",
    ("lock", "lock"): "Lock",
    ("cover", "open_cover"): "Open",
    ("cover", "close_cover"): "Close",
    ("cover", "set_cover_position"): "Move",
    ("cover", "toggle"): "Open or close",
    ("valve", "open_valve"): "Open",
    ("valve", "set_valve_position"): "Move",
    ("alarm_control_panel", "alarm_disarm"): "Disarm",
    ("alarm_control_panel", "alarm_arm_away"): "Arm (away)",
    ("alarm_control_panel", "alarm_arm_home"): "Arm (home)",
    ("alarm_control_panel", "alarm_arm_night"): "Arm (night)",
    ("alarm_control_panel", "alarm_arm_vacation"): "Arm (vacation)",
    ("alarm_control_panel", "alarm_trigger"): "Trigger",
    ("camera", "turn_off"): "Turn off",
    ("camera", "turn_on"): "Turn on",
    ("automation", "trigger"): "Run",
    ("scene", "turn_on"): "Activate",
}


class Outcome(StrEnum):
    """How a decision ended, as the gateway reports it."""

    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    NOT_FOUND = "not_found"
    NOT_YOURS = "not_yours"
    # The sender is not known (a guest in a group): may never decide.
    NOT_ALLOWED = "not_allowed"
    ALREADY = "already"


@dataclass(frozen=True, slots=True)
class DecisionResult:
    """The result of a press or a command, and what to tell the user."""

    outcome: Outcome
    text: str
    action: PendingAction | None = None


# Bounds of the confirmation message: one short line per value, and never
# more than Telegram's message can carry.
MAX_NAME_CHARS: Final = 60
MAX_VALUE_CHARS: Final = 80
MAX_KEY_CHARS: Final = 40
MAX_ENTITIES_SHOWN: Final = 10
MAX_VALUES_SHOWN: Final = 10
MAX_EFFECTS_SHOWN: Final = 10
MAX_CALLS_SHOWN: Final = 10
MAX_SOURCES_SHOWN: Final = 5
MAX_ERROR_CHARS: Final = 300
# Combining marks kept per character: more stack up over the lines around.
MAX_MARKS: Final = 2
# Unicode categories dropped: format characters (bidi overrides and isolates,
# zero-width spaces and joiners, soft hyphens, tags), private use, surrogates
# and unassigned code points.
_DROPPED: Final = frozenset({"Cf", "Co", "Cs", "Cn"})
# Control characters and line or paragraph separators become spaces.
_SPACES: Final = frozenset({"Cc", "Zl", "Zp", "Zs"})
_PLAIN_KEY: Final = re.compile(r"[a-z][a-z0-9_]*")
_PLAIN_STATE: Final = re.compile(r"[a-z0-9_]+")
# Data keys whose value is never echoed: lock and alarm codes, PINs, passwords.
_SECRET_WORDS: Final = frozenset(
    {"code", "pin", "pass", "password", "passwd", "pwd", "secret", "token", "otp"}
)
_SECRET_ENDINGS: Final = ("code", "pin", "pass", "password", "pwd", "secret", "token")
CODE_GIVEN: Final = "a code was given (not shown)"


def one_line(value: object, limit: int) -> str:
    """Reduce text to one line of at most ``limit`` characters.

    Newlines and control characters become spaces; bidi, zero-width and other
    invisible format characters are removed, so nothing can start a line of
    its own, reorder the text around it or hide inside it.
    """
    chars: list[str] = []
    marks = 0
    for char in str(value):
        category = unicodedata.category(char)
        if category in _DROPPED:
            continue
        if category in _SPACES:
            char = " "  # noqa: PLW2901 - the replacement is the point
        if category.startswith("M"):
            marks += 1
            if marks > MAX_MARKS:
                continue
        else:
            marks = 0
        chars.append(char)
    line = " ".join("".join(chars).split())
    if len(line) > limit:
        line = line[: limit - 1].rstrip() + "…"
    return line


def quoted(value: object, limit: int) -> str:
    """Return text as one bounded line in double quotes, inner quotes escaped."""
    return json.dumps(one_line(value, limit), ensure_ascii=False)


def is_secret_key(key: str) -> bool:
    """Tell whether a data key names a code, PIN or password (never echoed)."""
    words = re.split(r"[^a-z0-9]+", key.lower())
    return any(
        word in _SECRET_WORDS or word.endswith(_SECRET_ENDINGS) for word in words
    )


def _key_text(key: object) -> str:
    text = str(key)
    if _PLAIN_KEY.fullmatch(text) and len(text) <= MAX_KEY_CHARS:
        return text
    return quoted(text, MAX_KEY_CHARS)


def _cleaned(value: object) -> object:
    """Return a list or mapping with its texts one-lined and its codes hidden."""
    if isinstance(value, Mapping):
        return {
            one_line(key, MAX_KEY_CHARS): (
                "(not shown)" if is_secret_key(str(key)) else _cleaned(item)
            )
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_cleaned(item) for item in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return one_line(value, MAX_VALUE_CHARS)


def describe_value(key: str, value: object) -> str:
    """Render one service data value as one bounded line; text quoted, codes hidden."""
    if is_secret_key(key):
        return CODE_GIVEN
    if value is None or isinstance(value, (bool, int, float)):
        return json.dumps(value)
    if isinstance(value, str):
        return quoted(value, MAX_VALUE_CHARS)
    text = json.dumps(
        _cleaned(value), ensure_ascii=False, separators=(", ", ": "), default=str
    )
    return one_line(text, MAX_VALUE_CHARS)


def entity_label(hass: HomeAssistant, entity_id: str) -> str:
    """Name an entity as HA names it, on one bounded line, with its id."""
    state = hass.states.get(entity_id)
    name = one_line(state.name, MAX_NAME_CHARS) if state is not None else ""
    return f"{name} ({entity_id})" if name else entity_id


def _scene_effects(hass: HomeAssistant, scene_id: str) -> list[str]:
    """Describe what a scene of HA's own sets, one member per line."""
    states = scene_states(hass, scene_id)
    if not states:
        return []
    lines = []
    for entity_id, state in list(states.items())[:MAX_EFFECTS_SHOWN]:
        value = state.state
        shown = (
            value
            if _PLAIN_STATE.fullmatch(value) and len(value) <= MAX_KEY_CHARS
            else quoted(value, MAX_VALUE_CHARS)
        )
        lines.append(f"sets {entity_label(hass, entity_id)} to {shown}")
    if len(states) > MAX_EFFECTS_SHOWN:
        lines.append(f"and {len(states) - MAX_EFFECTS_SHOWN} more")
    return lines


def describe_call(hass: HomeAssistant, call: ResolvedCall) -> str:
    """Describe a resolved call from the entities it touches, never from model prose.

    The first line is the action and its entities (names from HA, one-lined);
    then one bounded line per data value (text in quotes, codes never shown)
    and, for a scene, one line per entity it sets.
    """
    verb = VERBS.get(
        (call.domain, call.service), call.service.replace("_", " ").capitalize()
    )
    names = [entity_label(hass, e) for e in call.entity_ids[:MAX_ENTITIES_SHOWN]]
    if len(call.entity_ids) > MAX_ENTITIES_SHOWN:
        names.append(f"and {len(call.entity_ids) - MAX_ENTITIES_SHOWN} more")
    lines = [f"{verb} {', '.join(names)}".rstrip()]
    details = sorted(
        ((str(k), v) for k, v in call.data.items() if k != ATTR_ENTITY_ID),
        key=lambda item: item[0],
    )
    lines.extend(
        f"{_key_text(key)}: {describe_value(key, value)}"
        for key, value in details[:MAX_VALUES_SHOWN]
    )
    if len(details) > MAX_VALUES_SHOWN:
        lines.append(f"and {len(details) - MAX_VALUES_SHOWN} more values")
    if (call.domain, call.service) == ("scene", "turn_on"):
        for scene_id in call.entity_ids[:MAX_ENTITIES_SHOWN]:
            lines.extend(_scene_effects(hass, scene_id))
    return "\n  ".join(lines)


def summarize(hass: HomeAssistant, calls: Sequence[ResolvedCall]) -> str:
    """Describe every call of a pending action, one per line when several."""
    lines = [describe_call(hass, call) for call in calls[:MAX_CALLS_SHOWN]]
    if len(calls) > MAX_CALLS_SHOWN:
        lines.append(f"and {len(calls) - MAX_CALLS_SHOWN} more actions")
    if len(lines) == 1:
        return lines[0]
    return "\n".join(f"• {line}" for line in lines)


def taint_reason(verdicts: Sequence[Verdict]) -> str | None:
    """Say, in the integration's words, why outside text makes this ask.

    None when no outside text was in the conversation. The sources are the
    integration's own descriptions (ToolContext.taint_sources), one-lined.
    """
    sources = list(
        dict.fromkeys(
            line
            for verdict in verdicts
            for source in verdict.taint_sources
            if (line := one_line(source, MAX_NAME_CHARS))
        )
    )
    if not sources:
        return None
    listed = ", ".join(sources[:MAX_SOURCES_SHOWN])
    if len(sources) > MAX_SOURCES_SHOWN:
        listed += f" and {len(sources) - MAX_SOURCES_SHOWN} more"
    if any(verdict.because_of_taint for verdict in verdicts):
        return (
            "I ask because text from outside the house is still in this "
            f"conversation ({listed})."
        )
    return (
        "Text from outside the house is still in this conversation "
        f"({listed}): make sure this is what you asked for."
    )


# Runs a call that is the integration's own, not a Home Assistant service
# (confirming a task made while outside text was in the prompt).
type InternalHandler = Callable[[PendingAction, ResolvedCall], Awaitable[None]]


def _no_fault(_step: str) -> None:
    """Do nothing; tests replace it to crash the path at a named step."""


class ConfirmationManager:
    """Creates, decides and executes pending actions."""

    def __init__(
        self,
        hass: HomeAssistant,
        database: Database,
        *,
        timeout: float,
        admins: frozenset[str],
        policy: Policy | None,
    ) -> None:
        """Keep the storage and the settings."""
        self.hass = hass
        self.database = database
        self.timeout = timeout
        self.admins = admins
        self.policy = policy
        # A crash-injection seam: called with a step name before each step
        # between a decision and its audit row.
        self.fault: Callable[[str], None] = _no_fault
        # Calls of the integration's own, by (domain, service): run by their
        # handler instead of Home Assistant, after the same Confirm.
        self.internal: dict[tuple[str, str], InternalHandler] = {}

    async def async_recover(self) -> list[PendingAction]:
        """Settle what a crash or restart left half done."""
        settled = await self.database.async_run(
            lambda conn: store.recover(conn, time.time())
        )
        for action in settled:
            LOGGER.warning(
                "Action %s was %s when Home Assistant stopped; it is not run again",
                action.id,
                "running" if action.status == Status.EXECUTING else "pending",
            )
        return settled

    async def async_propose(  # noqa: PLR0913 - who asked, where, and what
        self,
        *,
        conversation_key: str,
        bot_entry_id: str | None,
        chat_id: int | None,
        requester: str,
        ha_user_id: str | None,
        verdicts: Sequence[Verdict],
    ) -> PendingAction:
        """Store one pending action covering every proposal of a turn."""
        calls = tuple(call for verdict in verdicts for call in verdict.calls)
        now = time.time()
        summary = summarize(self.hass, calls)
        reason = taint_reason(verdicts)
        return await self.database.async_run(
            lambda conn: store.insert_action(
                conn,
                token=secrets.token_hex(8),
                conversation_key=conversation_key,
                bot_entry_id=bot_entry_id,
                chat_id=chat_id,
                requester=requester,
                ha_user_id=ha_user_id,
                calls=calls,
                summary=summary,
                reason=reason,
                now=now,
                expires_at=now + self.timeout,
            )
        )

    async def async_attach_message(
        self, action: PendingAction, message_id: int
    ) -> None:
        """Remember the Telegram message that carries the buttons."""
        await self.database.async_run(
            lambda conn: store.set_message_id(conn, action.id, message_id)
        )

    async def async_find(
        self, *, token: str | None, conversation_key: str, user: str
    ) -> PendingAction | None:
        """Return the action a button names, or the sender's newest pending one."""
        self.fault("before_find")
        if token is not None:
            return await self.database.async_run(
                lambda conn: store.get_by_token(conn, token)
            )
        return await self.database.async_run(
            lambda conn: store.newest_pending(conn, conversation_key, user)
        )

    async def async_decide(  # noqa: PLR0911 - an outcome per reason
        self,
        action: PendingAction | None,
        *,
        user: str,
        confirm: bool,
        may_act: bool,
    ) -> DecisionResult:
        """Confirm or cancel an action for ``user``; runs it at most once.

        ``may_act`` says whether ``user`` is a known person: anyone else never
        confirms or cancels, not even as an admin.
        """
        if not may_act:
            return DecisionResult(Outcome.NOT_ALLOWED, NOT_KNOWN_DECISION, action)
        if action is None:
            return DecisionResult(
                Outcome.NOT_FOUND, "Nothing is waiting for your confirmation."
            )
        if user != action.requester and user not in self.admins:
            return DecisionResult(
                Outcome.NOT_YOURS,
                "Only the person who asked can confirm or cancel this.",
                action,
            )
        if action.status != Status.PENDING:
            return DecisionResult(Outcome.ALREADY, _already_text(action), action)
        self.fault("before_expiry_check")
        now = time.time()
        if now > action.expires_at:
            return await self._async_close(
                action,
                user,
                now,
                (Status.EXPIRED, "late", Outcome.EXPIRED),
                f"This request expired, so nothing was done: {action.summary}",
            )
        if not confirm:
            return await self._async_close(
                action,
                user,
                now,
                (Status.CANCELLED, "cancelled", Outcome.CANCELLED),
                f"Cancelled: {action.summary}",
            )
        return await self._async_execute(action, user, now)

    async def _async_close(
        self,
        action: PendingAction,
        user: str,
        now: float,
        how: tuple[str, str, Outcome],
        text: str,
    ) -> DecisionResult:
        """End a pending action without running it (cancelled or expired)."""
        status, confirmation, outcome = how
        closed = await self.database.async_run(
            lambda conn: store.close_pending(
                conn,
                action,
                status=status,
                decided_by=user,
                now=now,
                confirmation=confirmation,
            )
        )
        if not closed:
            return await self._async_already(action)
        return DecisionResult(outcome, text, action)

    async def _async_already(self, action: PendingAction) -> DecisionResult:
        fresh = await self.database.async_run(
            lambda conn: store.get_action(conn, action.id)
        )
        return DecisionResult(
            Outcome.ALREADY, _already_text(fresh or action), fresh or action
        )

    async def _async_execute(
        self, action: PendingAction, user: str, now: float
    ) -> DecisionResult:
        """Claim, run and record an action; the claim makes it run at most once."""
        self.fault("before_claim")
        key = uuid.uuid4().hex
        claimed = await self.database.async_run(
            lambda conn: store.claim(
                conn, action, decided_by=user, now=now, idempotency_key=key
            )
        )
        if not claimed:
            return await self._async_already(action)
        self.fault("after_claim")
        started = time.monotonic()
        ok = True
        outcome = "executed"
        try:
            self.fault("before_recheck")
            self._recheck(
                [c for c in action.calls if (c.domain, c.service) not in self.internal]
            )
            self.fault("before_service_call")
            for call in action.calls:
                if (handler := self.internal.get((call.domain, call.service))) is None:
                    await async_run_calls(
                        self.hass, [call], action.ha_user_id, action.requester
                    )
                else:
                    await handler(action, call)
            self.fault("after_service_call")
        except ToolError as err:
            ok = False
            outcome = str(err)
        latency_ms = (time.monotonic() - started) * 1000
        self.fault("before_finish")
        await self.database.async_run(
            lambda conn: store.finish(
                conn,
                action,
                ok=ok,
                outcome=outcome,
                now=time.time(),
                latency_ms=latency_ms,
            )
        )
        self.fault("after_finish")
        if ok:
            return DecisionResult(Outcome.DONE, f"Done: {action.summary}", action)
        # The error comes from Home Assistant or the device, not from us: one
        # bounded line, like every other value in the message.
        return DecisionResult(
            Outcome.FAILED,
            f"It did not work: {action.summary}\n{one_line(outcome, MAX_ERROR_CHARS)}",
            action,
        )

    def _recheck(self, calls: Sequence[ResolvedCall]) -> None:
        """Refuse calls the policy blocks now (e.g. an entity unexposed since)."""
        for call in calls:
            verdict = evaluate_call(
                self.hass,
                call.domain,
                call.service,
                {**call.data, ATTR_ENTITY_ID: list(call.entity_ids)},
                policy=self.policy,
            )
            if verdict.decision is Decision.BLOCK:
                msg = f"Refused now: {verdict.reason}."
                raise ToolError(msg)

    async def async_recent(self, user: str, limit: int = 10) -> list[AuditSummary]:
        """Return the user's latest audited actions."""
        return await self.database.async_run(
            lambda conn: store.recent_audit(conn, user, limit)
        )


def _already_text(action: PendingAction) -> str:
    texts = {
        Status.DONE: "This was already done.",
        Status.FAILED: "This was already tried and did not work.",
        Status.CANCELLED: "This was cancelled.",
        Status.EXPIRED: "This request expired, so nothing was done.",
        Status.EXECUTING: "This is being done right now.",
        Status.INTERRUPTED: (
            "This was interrupted by a restart and was not run again. "
            "Check the device and ask again if needed."
        ),
    }
    return texts.get(action.status, "This was already handled.")
