"""Background model calls (summaries, learning) that share the chat's cached prefix."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from langchain_core.messages import SystemMessage

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from langchain_core.messages import AIMessage, AnyMessage
    from langchain_core.runnables import Runnable

    from ..model_queue import ModelQueue
    from ..tokens import TokenCounter
    from .budget import Budget
    from .prefix import CachedPrefix


class BackgroundModel:
    """Asks the model for a summary or what a chat taught, never during a turn.

    Each request starts with the chat's own system prompt and tools (the
    server's cached prefix stays, and the request costs only what follows
    it), through the model queue that waits for quiet chats.
    """

    def __init__(
        self,
        *,
        model: Runnable[list[AnyMessage], AIMessage],
        prefix: CachedPrefix,
        model_queue: ModelQueue,
        request_timeout: float,
    ) -> None:
        """Keep the model (the chat's tools bound, a small output cap)."""
        self.model = model
        self.prefix = prefix
        self.model_queue = model_queue
        self.request_timeout = request_timeout

    @property
    def counter(self) -> TokenCounter:
        """Return the chat's token counter."""
        return self.prefix.counter

    @property
    def budget(self) -> Budget:
        """Return the chat's current budget (its fixed part included)."""
        return self.prefix.budget

    async def async_run[T](
        self, job: Callable[[], Awaitable[T]], name: str
    ) -> T | None:
        """Run ``job`` when the chats are quiet; None if turns kept it waiting."""
        return await self.model_queue.async_run(job, name)

    async def async_ask(self, messages: Sequence[AnyMessage]) -> AIMessage:
        """Return the model's answer to ``messages`` after the system prompt.

        Raises what the model raises, and TimeoutError after the request
        timeout: the callers log it and give up (never worth an error).
        """
        request: list[AnyMessage] = [
            SystemMessage(content=self.prefix.system_prompt),
            *messages,
        ]
        async with asyncio.timeout(self.request_timeout):
            return await self.model.ainvoke(request)
