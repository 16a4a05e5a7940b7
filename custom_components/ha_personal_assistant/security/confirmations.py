"""Durable confirmations: a risky action runs once, only after its requester says so.

The model never confirms anything: a pending action is decided only by a
Telegram update from the person who asked (a button press or /confirm), or an
admin. Every state change is a conditional UPDATE committed together with its
audit row, so a double tap, a replayed update or a crash cannot run an action
twice or leave a decision unaudited.
"""

from __future__ import annotations

import secrets
import time
import uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Final

from homeassistant.const import ATTR_ENTITY_ID

from ..const import DOMAIN, LOGGER
from ..policy.judge import evaluate_call
from ..policy.verdict import Decision, ResolvedCall
from ..store import actions as store
from ..store.actions import AuditSummary, PendingAction, Status
from ..tools.ha import async_run_calls
from ..tools.registry import ToolError
from .confirm_text import MAX_ERROR_CHARS, async_summarize, one_line, taint_reason

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from homeassistant.core import HomeAssistant

    from ..i18n import Texts
    from ..policy.rules import Policy
    from ..policy.verdict import Verdict
    from ..store.database import Database


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


# Runs a call that is the integration's own, not a Home Assistant service
# (confirming a task made while outside text was in the prompt).
type InternalHandler = Callable[[PendingAction, ResolvedCall], Awaitable[None]]
# Pending actions of the integration's own (not a Home Assistant service):
# run by a runner the gateway registers, on the same Confirm and with the
# same once-only claim.
ADD_FILE: Final = "add_file"

type Runner = Callable[[ResolvedCall, "Texts"], Awaitable[None]]


def is_internal(call: ResolvedCall) -> bool:
    """Tell a pending action of the integration's own from a service call."""
    return call.domain == DOMAIN


def _no_fault(_step: str) -> None:
    """Do nothing; tests replace it to crash the path at a named step."""


class ConfirmationManager:
    """Creates, decides and executes pending actions."""

    def __init__(  # noqa: PLR0913 - keyword-only wiring
        self,
        hass: HomeAssistant,
        database: Database,
        *,
        timeout: float,
        admins: frozenset[str],
        policy: Policy | None,
        internal: Mapping[tuple[str, str], InternalHandler] | None = None,
    ) -> None:
        """Keep the storage, the settings and the integration's own calls.

        ``internal`` holds the calls known when the manager is built (HA's
        timer tools on a satellite); the task manager and the media handler,
        built after it, register theirs (task create/cancel, adding a file)
        as they are built, the way HA's services register.
        """
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
        self.internal: dict[tuple[str, str], InternalHandler] = dict(internal or {})
        # The integration's own kinds of action (ADD_FILE) -> what runs them.
        self.runners: dict[str, Runner] = {}

    def _is_own(self, call: ResolvedCall) -> bool:
        """Tell a call the integration runs itself from a Home Assistant service."""
        return (call.domain, call.service) in self.internal or is_internal(call)

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
        texts: Texts,
    ) -> PendingAction:
        """Store one pending action covering every proposal of a turn.

        Its summary is written once, in the requester's language ``texts``.
        """
        # Never one of the integration's own kinds (an added file) from the
        # model's calls: those are proposed by the integration alone
        # (async_propose_internal). Task proposals come from the task tools,
        # whose handlers are registered in ``internal``.
        calls = tuple(
            call
            for verdict in verdicts
            for call in verdict.calls
            if not is_internal(call) or (call.domain, call.service) in self.internal
        )
        now = time.time()
        summary = await async_summarize(self.hass, calls, texts)
        reason = taint_reason(verdicts, texts)
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

    async def async_propose_internal(  # noqa: PLR0913 - who asked, where, and what
        self,
        *,
        conversation_key: str,
        bot_entry_id: str | None,
        chat_id: int | None,
        requester: str,
        call: ResolvedCall,
        summary: str,
    ) -> PendingAction:
        """Store one of the integration's own actions, to run on Confirm.

        ``summary`` is written by the integration (never by the model).
        """
        now = time.time()
        return await self.database.async_run(
            lambda conn: store.insert_action(
                conn,
                token=secrets.token_hex(8),
                conversation_key=conversation_key,
                bot_entry_id=bot_entry_id,
                chat_id=chat_id,
                requester=requester,
                ha_user_id=None,
                calls=(call,),
                summary=summary,
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
        texts: Texts,
    ) -> DecisionResult:
        """Confirm or cancel an action for ``user``; runs it at most once.

        ``may_act`` says whether ``user`` is a known person: anyone else never
        confirms or cancels, not even as an admin. ``texts`` are in the
        language of the person deciding.
        """
        if not may_act:
            return DecisionResult(
                Outcome.NOT_ALLOWED, texts("not_known_decision"), action
            )
        if action is None:
            return DecisionResult(Outcome.NOT_FOUND, texts("nothing_waiting"))
        if user != action.requester and user not in self.admins:
            return DecisionResult(Outcome.NOT_YOURS, texts("not_yours"), action)
        if action.status != Status.PENDING:
            return DecisionResult(Outcome.ALREADY, _already_text(action, texts), action)
        self.fault("before_expiry_check")
        now = time.time()
        if now > action.expires_at:
            return await self._async_close(
                action,
                user,
                now,
                (
                    Status.EXPIRED,
                    "late",
                    Outcome.EXPIRED,
                    texts("expired", summary=action.summary),
                ),
                texts,
            )
        if not confirm:
            return await self._async_close(
                action,
                user,
                now,
                (
                    Status.CANCELLED,
                    "cancelled",
                    Outcome.CANCELLED,
                    texts("cancelled", summary=action.summary),
                ),
                texts,
            )
        return await self._async_execute(action, user, now, texts)

    async def _async_close(
        self,
        action: PendingAction,
        user: str,
        now: float,
        how: tuple[str, str, Outcome, str],
        texts: Texts,
    ) -> DecisionResult:
        """End a pending action without running it (cancelled or expired).

        ``how`` is the status, the audit's confirmation, the outcome and the
        text to show.
        """
        status, confirmation, outcome, text = how
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
            return await self._async_already(action, texts)
        return DecisionResult(outcome, text, action)

    async def _async_already(
        self, action: PendingAction, texts: Texts
    ) -> DecisionResult:
        fresh = await self.database.async_run(
            lambda conn: store.get_action(conn, action.id)
        )
        return DecisionResult(
            Outcome.ALREADY, _already_text(fresh or action, texts), fresh or action
        )

    async def _async_execute(
        self, action: PendingAction, user: str, now: float, texts: Texts
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
            return await self._async_already(action, texts)
        self.fault("after_claim")
        started = time.monotonic()
        ok = True
        outcome = "executed"
        try:
            self.fault("before_recheck")
            services = [call for call in action.calls if not self._is_own(call)]
            self._recheck(services)
            self.fault("before_service_call")
            for call in action.calls:
                if (
                    handler := self.internal.get((call.domain, call.service))
                ) is not None:
                    await handler(action, call)
                elif is_internal(call):
                    await self._async_run_internal([call], texts)
                else:
                    await async_run_calls(
                        self.hass, [call], action.ha_user_id, action.requester
                    )
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
            return DecisionResult(
                Outcome.DONE, texts("done", summary=action.summary), action
            )
        # The error comes from Home Assistant or the device, not from us: one
        # bounded line, like every other value in the message.
        return DecisionResult(
            Outcome.FAILED,
            texts(
                "failed",
                summary=action.summary,
                error=one_line(outcome, MAX_ERROR_CHARS),
            ),
            action,
        )

    async def _async_run_internal(
        self, calls: Sequence[ResolvedCall], texts: Texts
    ) -> None:
        """Run the integration's own kinds of action; raise ToolError."""
        for call in calls:
            runner = self.runners.get(call.service)
            if runner is None:
                msg = "This kind of request cannot be run now."
                raise ToolError(msg)
            await runner(call, texts)

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


def _already_text(action: PendingAction, texts: Texts) -> str:
    keys = {
        Status.DONE: "already_done",
        Status.FAILED: "already_failed",
        Status.CANCELLED: "already_cancelled",
        Status.EXPIRED: "already_expired",
        Status.EXECUTING: "already_running",
        Status.INTERRUPTED: "already_interrupted",
    }
    return texts(keys.get(action.status, "already_handled"))
