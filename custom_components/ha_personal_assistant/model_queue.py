"""The queue of model calls: background calls wait for quiet and give way to turns.

A home model server (Ollama's default: one slot) serves one request at a
time and keeps the KV cache of the last prompt only. A summary or a learning
call that runs while someone waits for an answer costs them its whole
length, and one with another prompt evicts the chat's cached prefix. So:

- no background call starts while any turn is in flight, nor within
  :data:`QUIET_SECONDS` of the end of the last reply;
- a turn that starts while a background call runs cancels it (closing the
  HTTP request stops the generation on the server); the call is tried again
  after the next quiet period.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final

from .const import LOGGER

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

# Quiet needed after the last reply before a background call starts.
QUIET_SECONDS: Final = 60.0
# A background call that keeps giving way is dropped after this many tries;
# the durable queues it came from try it again later.
MAX_ATTEMPTS: Final = 5


class ModelQueue:
    """Tracks the turns in flight and runs background model calls around them."""

    def __init__(
        self, slots: asyncio.Semaphore, quiet_seconds: float | None = None
    ) -> None:
        """Share ``slots`` (the model's concurrency bound) with the turns."""
        self.slots = slots
        self.quiet_seconds = QUIET_SECONDS if quiet_seconds is None else quiet_seconds
        self._active = 0
        # A start counts as activity: after a restart people are likely to
        # write soon, and the turns come first.
        self._last_end = time.monotonic()
        self._changed = asyncio.Event()
        self._running: set[asyncio.Task[object]] = set()
        # Told the name of each background call that ran to its end (the
        # prefix warm-up puts the chat's prefix back after it).
        self.after_call: list[Callable[[str], None]] = []
        # For tests and diagnostics: background calls started and given way.
        self.started = 0
        self.gave_way = 0

    @property
    def busy(self) -> bool:
        """Tell whether a user's turn is in flight."""
        return self._active > 0

    def quiet_left(self) -> float:
        """Return the seconds of quiet still needed before a background call."""
        return self._last_end + self.quiet_seconds - time.monotonic()

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Mark a user's turn in flight; background calls give way meanwhile."""
        self._active += 1
        for task in list(self._running):
            task.cancel()
        self._notify()
        try:
            yield
        finally:
            self._active -= 1
            self._last_end = time.monotonic()
            self._notify()

    def reply_sent(self) -> None:
        """Start the quiet period again: a reply (or a button's outcome) went out."""
        self._last_end = time.monotonic()
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _async_wait_quiet(self) -> None:
        while True:
            changed = self._changed
            if self._active:
                await changed.wait()
                continue
            left = self.quiet_left()
            if left <= 0:
                return
            try:
                async with asyncio.timeout(left):
                    await changed.wait()
            except TimeoutError:
                continue

    async def async_run[T](
        self, factory: Callable[[], Awaitable[T]], name: str
    ) -> T | None:
        """Run one background model call when the chats are quiet.

        Returns its result, or None when it gave way too often. The call must
        be safe to cancel and to run again.
        """
        for _attempt in range(MAX_ATTEMPTS):
            await self._async_wait_quiet()
            async with self.slots:
                if self._active or self.quiet_left() > 0:
                    # A turn came while this call waited for a slot.
                    continue
                task: asyncio.Task[T] = asyncio.ensure_future(factory())
                self._running.add(task)
                self.started += 1
                try:
                    result = await asyncio.shield(task)
                except asyncio.CancelledError:
                    if not task.cancelled() or (
                        (current := asyncio.current_task()) is not None
                        and current.cancelling()
                    ):
                        task.cancel()
                        raise
                    # A user's turn started: this call gave way; try later.
                    self.gave_way += 1
                    LOGGER.debug("The background call %s gave way to a turn", name)
                else:
                    for listener in list(self.after_call):
                        listener(name)
                    return result
                finally:
                    self._running.discard(task)
        LOGGER.debug("The background call %s gave way too often; dropped", name)
        return None
