"""A small dedicated executor for the integration's blocking work."""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from .const import DOMAIN, EXECUTOR_WORKERS

if TYPE_CHECKING:
    from collections.abc import Callable


class ExecutorShutDownError(RuntimeError):
    """The pool is shut down: Home Assistant stops, or the entry was unloaded."""


class BlockingExecutor:
    """Run SQLite, sqlite-vec, ddgs and file work off HA's event loop.

    HA's shared executor also serves every other integration; a slow disk or a
    stuck web search must not starve it, so this integration uses its own pool.
    """

    def __init__(self, workers: int = EXECUTOR_WORKERS) -> None:
        """Create the pool; threads start lazily on the first job."""
        self._pool = ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix=f"{DOMAIN}_worker"
        )
        self._closed = False

    @property
    def closed(self) -> bool:
        """Tell whether the pool was shut down (HA stopped or the entry unloaded)."""
        return self._closed

    async def run[**P, T](
        self, func: Callable[P, T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """Run ``func`` in the pool and return its result."""
        if self._closed:
            msg = "The executor is shut down"
            raise ExecutorShutDownError(msg)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._pool, functools.partial(func, *args, **kwargs)
        )

    def shutdown(self) -> None:
        """Stop the pool and wait for running jobs; blocking, call it in a thread."""
        self._closed = True
        self._pool.shutdown(wait=True, cancel_futures=True)
