"""The tools the model uses for tasks: schedule, watch, list_tasks, cancel_task.

Each tool is a thin layer over the task manager: it reads what the model
wrote, checks the action against the permission policy now (a blocked action
is refused at once; a restricted one is allowed to be scheduled and asks for
Confirm when it fires), and stores the task. Made while outside text is in
the prompt, a task (or a cancellation) waits for the person's Confirm.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

from homeassistant.util import dt as dt_util
from pydantic import BaseModel, ValidationError

from ..const import DOMAIN
from ..i18n import ENGLISH, async_texts
from ..policy.judge import evaluate_call
from ..policy.verdict import Decision, ResolvedCall, Verdict
from ..policy.visibility import is_visible
from ..security.confirm_text import TASKS_SOURCE
from ..security.firewall import mark_untrusted_parts
from ..tools.ha import FENCED_VALUE, CallServiceArgs
from ..tools.registry import ToolContext, ToolError, ToolSpec
from .describe import (
    action_call,
    clean_message,
    model_view,
    summary_line,
)
from .manager import INTERNAL_CANCEL, INTERNAL_CREATE
from .store import NewTask, Task, TaskKind, TaskStatus
from .when import (
    Repeat,
    WhenError,
    first_occurrence,
    parse_at,
    parse_condition,
    parse_repeat,
)

if TYPE_CHECKING:
    from .manager import TaskManager

# Longest a watch may wait for its condition to hold.
MAX_FOR_MINUTES: Final = 7 * 24 * 60
CONFIRM_NOTE: Final = (
    "Nothing is set up yet: outside text is in this conversation, so the user "
    "gets a message with Confirm and Cancel buttons; it happens only if they "
    "press Confirm. Tell them so."
)
ACTION_HELP: Final = (
    "action must hold call_service's arguments: domain, service, entity_id "
    'and optional data, e.g. {"domain": "light", "service": "turn_off", '
    '"entity_id": "light.kitchen"}'
)


# schedule's message that asks for the daily briefing (tasks/briefing.py).
BRIEFING: Final = "BRIEFING"


class ScheduleArgs(BaseModel):
    """Arguments of schedule."""

    # BRIEFING (the tool's description says so): a daily briefing is a task.
    message: str
    at: str
    repeat: str | None = None
    action: dict[str, Any] | None = None


class WatchArgs(BaseModel):
    """Arguments of watch."""

    entity_id: str
    state: str
    message: str | None = None
    for_minutes: float | None = None
    action: dict[str, Any] | None = None
    at: str | None = None
    until: str | None = None


class ListTasksArgs(BaseModel):
    """list_tasks takes no arguments."""


class CancelTaskArgs(BaseModel):
    """Arguments of cancel_task."""

    task_id: int


def _json(info: dict[str, Any]) -> str:
    return json.dumps(info, ensure_ascii=False, separators=(",", ":"))


def _where(ctx: ToolContext) -> tuple[str | None, int | None]:
    """Return the telegram_bot entry and chat the turn came from, if Telegram."""
    kind, _, rest = (ctx.conversation_key or "").partition(":")
    if kind != "telegram" or ctx.chat_id is None:
        return None, None
    bot_entry_id, _, _chat = rest.rpartition(":")
    return bot_entry_id or None, ctx.chat_id


def _action(
    ctx: ToolContext, raw: dict[str, Any] | None
) -> tuple[dict[str, Any] | None, Verdict | None]:
    """Read and judge an action now; a blocked one is refused at once."""
    if not raw:
        return None, None
    try:
        args = CallServiceArgs.model_validate(raw)
    except ValidationError as err:
        raise ToolError(ACTION_HELP) from err
    action: dict[str, Any] = {
        "domain": args.domain,
        "service": args.service,
        "entity_id": args.entity_id,
        "data": dict(args.data or {}),
    }
    domain, service, data = action_call(action)
    action = {
        "domain": domain,
        "service": service,
        "entity_id": list(data.get("entity_id", [])),
        "data": {k: v for k, v in data.items() if k != "entity_id"},
    }
    verdict = evaluate_call(ctx.hass, domain, service, data, policy=ctx.policy)
    if verdict.decision is Decision.BLOCK:
        msg = f"Refused: {verdict.reason}. Nothing was scheduled."
        raise ToolError(msg)
    return action, verdict


def _proposal(ctx: ToolContext, service: str, data: dict[str, Any]) -> Verdict:
    """Return a task operation that waits for the person's Confirm (taint rule)."""
    return Verdict(
        Decision.CONFIRM,
        "outside text is in this conversation",
        (),
        (ResolvedCall(DOMAIN, service, (), data),),
        taint_sources=tuple(ctx.taint_sources),
        because_of_taint=True,
    )


def _shown(ctx: ToolContext, task: Task) -> dict[str, Any]:
    """Return what the Confirm message says about a task, in the person's words.

    The integration's own description (``summary_line``), in the language
    the person reads; the task's id is what the Confirm acts on.
    """
    # Described as it will be once confirmed (not "waiting for your Confirm").
    armed = replace(task, status=TaskStatus.PENDING)
    return {"task": task.id, "summary": summary_line(ctx.hass, armed, ctx.texts)}


async def _async_store(
    ctx: ToolContext, manager: TaskManager, new: NewTask, verdict: Verdict | None
) -> dict[str, Any]:
    task = await manager.async_create(new, suspended=ctx.tainted)
    if ctx.tainted:
        ctx.proposals.append(_proposal(ctx, INTERNAL_CREATE[1], _shown(ctx, task)))
        return {
            "result": "waiting_for_confirmation",
            "task_id": task.id,
            "note": CONFIRM_NOTE,
        }
    english = await async_texts(ctx.hass, ENGLISH)
    result: dict[str, Any] = {
        "result": "scheduled",
        "task_id": task.id,
        "task": summary_line(ctx.hass, task, english, time.time()),
    }
    if verdict is not None and verdict.decision is Decision.CONFIRM:
        result["note"] = (
            "The action needs the user's confirmation: when the task is due, "
            "they get a Confirm button; it does not run by itself."
        )
    return result


def task_tools(manager: TaskManager) -> tuple[ToolSpec, ...]:  # noqa: PLR0915 - four tools
    """Return schedule, watch, list_tasks and cancel_task, in a fixed order."""

    async def schedule(ctx: ToolContext, args: ScheduleArgs) -> dict[str, Any]:
        """Remind the user, or run an action, at a time (once or repeating)."""
        action, verdict = _action(ctx, args.action)
        message = clean_message(args.message)
        if not message and action is None:
            msg = "give a message, an action, or both"
            raise ToolError(msg)
        try:
            when = parse_at(args.at, dt_util.now())
            repeat = parse_repeat(args.repeat)
        except WhenError as err:
            raise ToolError(str(err)) from err
        kind = TaskKind.SCHEDULE
        if action is None and (message or "").strip().upper() == BRIEFING:
            # "Brief me every morning at 7:30": a daily briefing task (the
            # integration gathers and writes it when it fires).
            kind, message, repeat = TaskKind.BRIEFING, None, Repeat.DAILY
        first = first_occurrence(when, repeat)
        clock = (when.clock or first.time()).replace(microsecond=0, tzinfo=None)
        bot_entry_id, chat_id = _where(ctx)
        new = NewTask(
            kind=kind,
            owner=ctx.person,
            owner_name=ctx.user_name,
            ha_user_id=ctx.ha_user_id,
            conversation_key=ctx.conversation_key,
            bot_entry_id=bot_entry_id,
            chat_id=chat_id,
            message=message,
            action=action,
            fire_at=first.timestamp(),
            repeat=str(repeat),
            clock=clock.isoformat() if repeat is not Repeat.NONE else None,
            tainted=ctx.tainted,
            language=ctx.texts.language,
        )
        return await _async_store(ctx, manager, new, verdict)

    async def watch(ctx: ToolContext, args: WatchArgs) -> dict[str, Any]:
        """Tell the user (or act) when an entity reaches a state."""
        hass = ctx.hass
        entity_id = args.entity_id.strip().lower()
        state = hass.states.get(entity_id)
        if state is None or not is_visible(hass, entity_id):
            msg = (
                "an entity_id you gave is not an entity you can see; use "
                "list_entities to find the right one"
            )
            raise ToolError(msg)
        action, verdict = _action(ctx, args.action)
        now = dt_util.now()
        try:
            condition = parse_condition(args.state, state.domain)
            at = parse_at(args.at, now).at if args.at else None
            until = parse_at(args.until, now).at if args.until else None
        except WhenError as err:
            raise ToolError(str(err)) from err
        if at is not None and until is not None:
            msg = "give either at (check once) or until (a time limit), not both"
            raise ToolError(msg)
        minutes = args.for_minutes or None
        if minutes is not None and not 0 < minutes <= MAX_FOR_MINUTES:
            msg = f"for_minutes must be between 0 and {MAX_FOR_MINUTES}"
            raise ToolError(msg)
        bot_entry_id, chat_id = _where(ctx)
        new = NewTask(
            kind=TaskKind.WATCH,
            owner=ctx.person,
            owner_name=ctx.user_name,
            ha_user_id=ctx.ha_user_id,
            conversation_key=ctx.conversation_key,
            bot_entry_id=bot_entry_id,
            chat_id=chat_id,
            message=clean_message(args.message),
            action=action,
            fire_at=at.timestamp() if at is not None else None,
            entity_id=entity_id,
            condition=args.state.strip(),
            for_minutes=minutes,
            until=until.timestamp() if until is not None else None,
            tainted=ctx.tainted,
            language=ctx.texts.language,
        )
        result = await _async_store(ctx, manager, new, verdict)
        if at is None and not minutes and condition.matches(state.state):
            result["note"] = (
                f"{entity_id} is {condition.describe()} already; the watch "
                "fires the next time it becomes so."
            )
        return result

    async def list_tasks(
        ctx: ToolContext, _args: ListTasksArgs
    ) -> dict[str, Any] | str:
        """List the user's open tasks."""
        mine = manager.open_tasks(ctx.person)
        if not mine:
            return {"tasks": [], "note": "The user has no open tasks."}
        english = await async_texts(ctx.hass, ENGLISH)
        views = [model_view(ctx.hass, task, english) for task in mine]
        outside = [
            (view, task)
            for view, task in zip(views, mine, strict=True)
            if task.tainted and "message" in view
        ]
        if not outside:
            return {"tasks": views}
        # Their messages were written while outside text was in a prompt:
        # fenced after the list, like an entity's outside text.
        ctx.mark_tainted(TASKS_SOURCE)
        for view, _task in outside:
            view["message"] = FENCED_VALUE
        block, withheld = mark_untrusted_parts(
            [task.message or "" for _view, task in outside],
            source=TASKS_SOURCE,
            labels=[f"task {task.id} message" for _view, task in outside],
        )
        lines = [_json({"tasks": views})]
        if withheld:
            lines.append(f"{withheld} message(s) were withheld as unsafe.")
        lines.append(block)
        return "\n".join(lines)

    async def cancel_task(ctx: ToolContext, args: CancelTaskArgs) -> dict[str, Any]:
        """Cancel one of the user's tasks (an admin may cancel anyone's)."""
        task = await manager.async_owned(
            args.task_id, person=ctx.person, ha_user_id=ctx.ha_user_id
        )
        if ctx.tainted:
            ctx.proposals.append(_proposal(ctx, INTERNAL_CANCEL[1], _shown(ctx, task)))
            return {
                "result": "waiting_for_confirmation",
                "task_id": task.id,
                "note": CONFIRM_NOTE,
            }
        await manager.async_cancel(
            task.id, person=ctx.person, ha_user_id=ctx.ha_user_id
        )
        return {"result": "cancelled", "task_id": task.id}

    return (
        ToolSpec(
            name="schedule",
            description=(
                "Remind or act at a time. repeat: none, daily, weekdays or "
                "weekly. message BRIEFING: a daily briefing."
            ),
            args_schema=ScheduleArgs,
            handler=schedule,
            changes_state=True,
        ),
        ToolSpec(
            name="watch",
            description=(
                "Tell or act when an entity reaches a state (on, >25). "
                "at: check once; until: give up."
            ),
            args_schema=WatchArgs,
            handler=watch,
            changes_state=True,
        ),
        ToolSpec(
            name="list_tasks",
            description="",  # its name and arguments say it
            args_schema=ListTasksArgs,
            handler=list_tasks,
        ),
        ToolSpec(
            name="cancel_task",
            description="",  # its name and arguments say it
            args_schema=CancelTaskArgs,
            handler=cancel_task,
            changes_state=True,
        ),
    )
