"""A due task's action: judged when it fires, as its maker, then run, asked or refused.

The action is judged at that moment by the permission layer
(``evaluate_call``) against the exposure and policy of that moment, as the
person who made it: their mapped HA user, else the integration's acting
user. A restricted action never runs unattended: the maker gets the usual
Confirm message with the usual expiry. Every judged action is audited.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..const import LOGGER
from ..policy.judge import evaluate_call
from ..policy.people import is_known
from ..policy.verdict import Decision
from ..security.confirm_text import async_summarize, one_line
from ..store.actions import AuditRow, add_audit
from ..tools.ha import async_run_calls
from ..tools.registry import ToolError
from .describe import action_call
from .store import TaskStatus
from .telling import telegram_user

if TYPE_CHECKING:
    from collections.abc import Callable

    from homeassistant.core import HomeAssistant

    from ..i18n import Texts
    from ..policy.rules import Policy
    from ..policy.verdict import Verdict
    from ..store.database import Database
    from .store import Task
    from .telling import TaskGateway, Teller


@dataclass(frozen=True, slots=True)
class Firing:
    """How a firing went, for the stored outcome and the event."""

    status: str
    outcome: str
    # Told the maker, ran the action, or asked to confirm (fires the event).
    fired: bool = True


class Acting:
    """Runs, asks for or refuses a due task's action."""

    def __init__(
        self,
        hass: HomeAssistant,
        database: Database,
        *,
        policy: Policy | None,
        teller: Teller,
        gateway: Callable[[], TaskGateway | None],
    ) -> None:
        """Judge under ``policy``; ask and check makers through ``gateway()``."""
        self.hass = hass
        self.database = database
        self.policy = policy
        self._teller = teller
        self._gateway = gateway

    async def async_act(
        self, task: Task, texts: Texts, header: list[str], footer: str
    ) -> Firing:
        """Judge the action now, as its maker, and run it, ask, or refuse."""
        assert task.action is not None  # noqa: S101 - checked by the caller
        tell = self._teller.async_tell
        may_act, ha_user_id = await self._maker(task)
        if not may_act:
            refused = texts("task_maker_may_not_act", task=task.id)
            await tell(task, *header, refused, footer)
            return Firing(TaskStatus.FAILED, "maker may no longer act")
        domain, service, data = action_call(task.action)
        verdict = evaluate_call(self.hass, domain, service, data, policy=self.policy)
        name = f"{domain}.{service}"
        if verdict.decision is Decision.BLOCK:
            await self._async_audit(task, verdict, name, ha_user_id, "refused")
            refused = texts(
                "task_action_refused",
                task=task.id,
                reason=one_line(verdict.reason, 200),
            )
            await tell(task, *header, refused, footer)
            return Firing(TaskStatus.FAILED, "refused")
        if verdict.decision is Decision.CONFIRM:
            return await self._async_ask(task, verdict, header, footer, ha_user_id)
        summary = await async_summarize(self.hass, verdict.calls, texts)
        try:
            await async_run_calls(self.hass, verdict.calls, ha_user_id, task.owner)
        except ToolError as err:
            await self._async_audit(task, verdict, name, ha_user_id, "failed")
            failed = texts("failed", summary=summary, error=one_line(str(err), 300))
            await tell(task, *header, failed, footer)
            return Firing(TaskStatus.FAILED, "failed")
        await self._async_audit(task, verdict, name, ha_user_id, "executed")
        await tell(task, *header, texts("done", summary=summary), footer)
        return Firing(TaskStatus.DONE, "done")

    async def _async_ask(
        self,
        task: Task,
        verdict: Verdict,
        header: list[str],
        footer: str,
        ha_user_id: str | None,
    ) -> Firing:
        """Ask the maker to confirm a restricted action: it never runs unattended."""
        texts = await self._teller.async_texts(task)
        gateway = self._gateway()
        if gateway is None or task.bot_entry_id is None or task.chat_id is None:
            refused = texts("task_needs_telegram", task=task.id)
            await self._teller.async_tell(task, *header, refused, footer)
            return Firing(TaskStatus.FAILED, "needs a confirmation")
        due = texts("task_due_confirm", task=task.id)
        await self._teller.async_tell(task, *header, due, footer)
        await gateway.async_request_confirmation(
            bot_entry_id=task.bot_entry_id,
            chat_id=task.chat_id,
            person=task.owner,
            ha_user_id=ha_user_id,
            proposals=[verdict],
            language=texts.language,
        )
        return Firing(TaskStatus.DONE, "asked to confirm")

    async def _maker(self, task: Task) -> tuple[bool, str | None]:
        """Tell whether the maker may still act, and as which HA user (now)."""
        telegram_id = telegram_user(task.owner)
        if telegram_id is not None:
            gateway = self._gateway()
            if gateway is None:
                return False, None
            if gateway.allowed_user_ids and telegram_id not in gateway.allowed_user_ids:
                return False, None
            known = is_known(
                self.hass,
                bot_entry_id=task.bot_entry_id or "",
                user_id=telegram_id,
                allowed_user_ids=gateway.allowed_user_ids,
                user_mapping=gateway.user_mapping,
            )
            return known, gateway.user_mapping.get(str(telegram_id)) or None
        if task.owner.startswith("ha:"):
            user_id = task.owner.removeprefix("ha:")
            user = await self.hass.auth.async_get_user(user_id)
            return bool(user is not None and user.is_active), user_id
        # A voice satellite without a user acts as the integration's own user.
        return True, None

    async def _async_audit(
        self,
        task: Task,
        verdict: Verdict,
        name: str,
        ha_user_id: str | None,
        outcome: str,
    ) -> None:
        row = AuditRow(
            ts=time.time(),
            telegram_user=task.owner,
            chat_id=task.chat_id,
            ha_user_id=ha_user_id,
            entities=verdict.targets,
            service=name,
            policy=str(verdict.decision),
            confirmation="scheduled",
            outcome=outcome,
        )
        try:
            await self.database.async_run(lambda conn: add_audit(conn, row))
        except sqlite3.Error as err:
            LOGGER.warning("Could not write the action audit log: %s", err)
