"""The data a turn hands between the gateways, the assistant and background work."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .policy.verdict import Verdict


@dataclass(frozen=True, slots=True)
class Speaker:
    """Who wrote the message, and as which HA user they act."""

    person: str
    name: str | None
    ha_user_id: str | None
    chat_id: int | None = None
    # A known person (policy/people.py): may change state and memory. The
    # Telegram gateway decides it for every update; Assist users are HA users.
    may_act: bool = True
    # The language of the fixed texts this person reads (i18n.pick_language);
    # None: Home Assistant's.
    language: str | None = None

    @property
    def profile_key(self) -> str:
        """Return whose profile this is: the mapped HA user, else the Telegram user."""
        return f"ha:{self.ha_user_id}" if self.ha_user_id else self.person


@dataclass(frozen=True, slots=True)
class Interaction:
    """A finished turn, handed to background work after the reply went out."""

    conversation_key: str
    session_id: int
    thread_id: str
    speaker: Speaker
    user_text: str
    reply: str
    # Untrusted text was in the prompt: nothing may be learned from the turn.
    tainted: bool
    turn_id: str = ""
    # How full the session's history is, as a share of its room (a background
    # summary is written past SUMMARIZE_AT, ready for the next trim), and
    # how many tokens of it may stay after that trim.
    history_pressure: float = 0.0
    history_target: int = 0


type AfterReply = Callable[[Interaction], Coroutine[Any, Any, None]]


class MemorySource(Protocol):
    """What the assistant asks of the profile store for each turn."""

    async def async_context(self, person: str, text: str, max_chars: int) -> str:
        """Return the person's profile entries relevant to ``text``."""
        ...


class DocumentHitLike(Protocol):
    """A retrieved chunk, as the document index returns it."""

    @property
    def title(self) -> str:
        """Return the document's title."""
        ...

    @property
    def content(self) -> str:
        """Return the chunk's text."""
        ...

    @property
    def score(self) -> float:
        """Return the similarity to the query, 0 to 1."""
        ...

    @property
    def trusted(self) -> bool:
        """Tell whether the house wrote it (HA knowledge) rather than outsiders."""
        ...


class DocumentSource(Protocol):
    """What the assistant asks of the document index for each turn."""

    async def async_search(self, query: str, k: int = 5) -> Sequence[DocumentHitLike]:
        """Return the chunks most similar to ``query``, best first."""
        ...


@dataclass(frozen=True, slots=True)
class TurnResult:
    """The reply and what it cost."""

    reply: str
    ok: bool
    model_seconds: float
    # Restricted actions the model asked for, waiting for the user's confirmation.
    proposals: tuple[Verdict, ...] = ()
    # Set when the turn finished: background work runs on it after the reply.
    interaction: Interaction | None = None
    # Estimated prompt tokens of the turn's last model request (the budget).
    context_tokens: int = 0
    # What untrusted text was in the prompt (why a state change needs Confirm).
    taint_sources: tuple[str, ...] = ()
    # What the model server reported for the turn's requests, summed.
    tokens: TokenFigures | None = None


@dataclass(frozen=True, slots=True)
class TokenFigures:
    """Tokens a turn's model requests cost, as the server reported them."""

    # Prompt tokens, summed over the turn's requests.
    prompt: int
    # Of those, served from the server's cache (None: the server does not say).
    cached: int | None
    # Tokens the model wrote.
    generated: int
    requests: int

    @classmethod
    def from_usage(cls, usage: Sequence[Mapping[str, Any]]) -> TokenFigures | None:
        """Sum LangChain's usage metadata of a turn's requests (None: none reported).

        The cached share is the servers' ``cache_read`` (OpenAI-compatible
        servers' ``cached_tokens``); Ollama does not report it.
        """
        if not usage:
            return None
        cached = [
            int(details["cache_read"])
            for item in usage
            if isinstance(details := item.get("input_token_details"), Mapping)
            and details.get("cache_read") is not None
        ]
        return cls(
            prompt=sum(int(item.get("input_tokens") or 0) for item in usage),
            cached=sum(cached) if cached else None,
            generated=sum(int(item.get("output_tokens") or 0) for item in usage),
            requests=len(usage),
        )
