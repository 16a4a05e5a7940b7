"""The remember and forget tools: the person's profile, written on their word."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from pydantic.json_schema import SkipJsonSchema  # noqa: TC002 - pydantic reads it

from ..memory.profile import MemoryRefusedError
from ..memory.text import grounded, tokens
from ..store.profile import SaveOutcome
from .registry import ToolContext, ToolError, ToolSpec

if TYPE_CHECKING:
    from ..memory.profile import ProfileMemory


class RememberArgs(BaseModel):
    """Arguments of remember."""

    fact: str
    # Not shown to the model (prompt tokens on every request): the category
    # is read from the fact when absent; a model that sends one is heard.
    category: SkipJsonSchema[str | None] = None


class ForgetArgs(BaseModel):
    """Arguments of forget."""

    fact: str


def _person(ctx: ToolContext) -> str:
    return ctx.profile_key or ctx.person


def memory_tools(memory: ProfileMemory) -> tuple[ToolSpec, ...]:
    """Return remember and forget, bound to the profile store, in a fixed order."""

    async def remember(ctx: ToolContext, args: RememberArgs) -> dict[str, Any]:
        """Save what the user asked to be remembered, in their own words."""
        if tokens(args.fact) and not grounded(args.fact, ctx.user_texts):
            # The rule for facts stored without asking: they come from the
            # user's own words in this (untainted) conversation, never from
            # what the model or a page wrote.
            msg = (
                "Refused: a fact is remembered only in the user's own words "
                "from this conversation. Write it with the words the user "
                "used, or ask the user to say what to remember."
            )
            raise ToolError(msg)
        try:
            result = await memory.async_remember(_person(ctx), args.fact, args.category)
        except MemoryRefusedError as err:
            msg = f"Refused: {err}."
            raise ToolError(msg) from err
        if result.entry is None:
            msg = "the profile is full; the user can remove entries with /forget"
            raise ToolError(msg)
        return {
            "result": {
                SaveOutcome.ADDED: "remembered",
                SaveOutcome.REINFORCED: "already_known",
                SaveOutcome.UPDATED: "updated",
            }.get(result.outcome, "remembered"),
            "fact": result.entry.content,
        }

    async def forget(ctx: ToolContext, args: ForgetArgs) -> dict[str, Any]:
        """Remove the entries closest to what the user named."""
        removed = await memory.async_forget(_person(ctx), args.fact)
        if not removed:
            return {
                "result": "nothing_found",
                "note": "Nothing remembered about the user matches; nothing changed.",
            }
        return {"result": "forgotten", "removed": [entry.content for entry in removed]}

    return (
        ToolSpec(
            name="remember",
            description="Remember what the user asks, in their words.",
            args_schema=RememberArgs,
            handler=remember,
            writes_memory=True,
        ),
        ToolSpec(
            name="forget",
            description="",  # its name and arguments say it
            args_schema=ForgetArgs,
            handler=forget,
            writes_memory=True,
        ),
    )
