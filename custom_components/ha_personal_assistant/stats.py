"""What recent turns cost and how they failed: read by sensors and diagnostics."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from homeassistant.core import CALLBACK_TYPE, callback

if TYPE_CHECKING:
    from collections.abc import Callable

    from .models import TurnResult

RECENT_TURNS: Final = 20


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """One answered turn: never its text, only what it cost."""

    ts: float
    source: str
    seconds: float
    model_seconds: float
    context_tokens: int
    ok: bool


class TurnStats:
    """The last turns of an entry, and who to tell when a new one is recorded."""

    def __init__(self) -> None:
        """Start empty."""
        self.turns: deque[TurnRecord] = deque(maxlen=RECENT_TURNS)
        self.errors: deque[tuple[float, str]] = deque(maxlen=RECENT_TURNS)
        self._listeners: list[Callable[[], None]] = []

    @property
    def last(self) -> TurnRecord | None:
        """Return the newest turn, if any."""
        return self.turns[-1] if self.turns else None

    @callback
    def async_record(  # noqa: PLR0913 - the figures of one turn
        self,
        source: str,
        *,
        seconds: float,
        model_seconds: float,
        context_tokens: int,
        ok: bool,
        error: str | None = None,
    ) -> None:
        """Record a turn and tell the listeners."""
        now = time.time()
        self.turns.append(
            TurnRecord(now, source, seconds, model_seconds, context_tokens, ok)
        )
        if error is not None:
            self.errors.append((now, error))
        self.async_notify()

    @callback
    def async_record_result(
        self, source: str, result: TurnResult, seconds: float
    ) -> None:
        """Record a finished turn; a failed one keeps its (fixed) explanation."""
        self.async_record(
            source,
            seconds=seconds,
            model_seconds=result.model_seconds,
            context_tokens=result.context_tokens,
            ok=result.ok,
            error=None if result.ok else result.reply,
        )

    @callback
    def async_notify(self) -> None:
        """Tell the listeners something changed."""
        for listener in list(self._listeners):
            listener()

    @callback
    def async_listen(self, listener: Callable[[], None]) -> CALLBACK_TYPE:
        """Call ``listener`` on every change; return the function that stops it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)
