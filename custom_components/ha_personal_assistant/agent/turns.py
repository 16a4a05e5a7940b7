"""A session's history as turns: what each message is, and what the model reads.

Within a session the history only grows: every message keeps the bytes it
was sent with, so the model server reuses its cache for all of it. Two marks
ride on the messages (in ``additional_kwargs``, which the Ollama client never
sends):

- ``UNTRUSTED``: the sources of untrusted text in the message (a web result, a
  document, an answer written while such text was in the prompt). While any
  marked message is part of a request, the prompt is tainted: state changes
  need the user's Confirm and nothing is remembered (the taint rule follows
  the prompt, not the turn).
- ``USER_TEXT``: the user's own words of a turn's first message, without the
  context block the integration added to them.

Untrusted text leaves the prompt as early as the conversation allows: a turn
that read it, and the turns after it (their answers were written while it
was in the prompt), stay for :data:`TAINTED_TURNS_KEPT` more turns (for
follow-up questions); then all of them are reduced to the user's own messages
and a fixed note at once. At a trim every tainted turn is reduced; ``/new``
leaves all of it behind.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from langchain_core.messages import AnyMessage

TURN_PREFIX: Final = "turn-"
FEEDBACK_PREFIX: Final = "feedback-"
STUB_PREFIX: Final = "stub-"
UNTRUSTED: Final = "hapa_untrusted"
USER_TEXT: Final = "hapa_user_text"
# A tainted turn stays for this many later turns (a follow-up question can
# still use what it read), then leaves the prompt.
TAINTED_TURNS_KEPT: Final = 2
OPENING_HEADER: Final = "[Earlier in this conversation]"
STUB_ANSWER: Final = (
    "(My answer to this used text from outside the house ({sources}); it was "
    "removed from the conversation.)"
)
REMOVED_MESSAGE: Final = "(A message from someone this assistant does not know.)"
# A trim without a written summary keeps the user's own earlier questions.
MAX_OPENING_CHARS: Final = 1500
MAX_ASKED_CHARS: Final = 160
_SPACE_RE: Final = re.compile(r"\s+")


def is_turn_start(message: AnyMessage) -> bool:
    """Tell whether the message is a user's message that starts a turn."""
    return isinstance(message, HumanMessage) and str(message.id or "").startswith(
        TURN_PREFIX
    )


def split_turns(messages: Sequence[AnyMessage]) -> list[list[AnyMessage]]:
    """Return the messages grouped by turn (a turn starts at a user's message).

    Messages before the first turn (none in practice) form a turn of their own.
    """
    turns: list[list[AnyMessage]] = []
    for message in messages:
        if is_turn_start(message) or not turns:
            turns.append([message])
        else:
            turns[-1].append(message)
    return turns


def untrusted_sources(message: AnyMessage) -> list[str]:
    """Return the sources of untrusted text a message carries (empty: trusted)."""
    value = message.additional_kwargs.get(UNTRUSTED)
    if isinstance(value, list):
        return [str(item) for item in value]
    return []


def sources_of(messages: Iterable[AnyMessage]) -> list[str]:
    """Return every untrusted source in ``messages``, oldest first, no repeats."""
    found: dict[str, None] = {}
    for message in messages:
        for source in untrusted_sources(message):
            found.setdefault(source, None)
    return list(found)


def mark_message[M: AIMessage | HumanMessage | ToolMessage](
    message: M, sources: Iterable[str]
) -> M:
    """Return the message marked with ``sources`` (in place; returned for ease)."""
    merged = list(dict.fromkeys([*untrusted_sources(message), *sources]))
    if merged:
        message.additional_kwargs[UNTRUSTED] = merged
    return message


def user_text(message: AnyMessage) -> str:
    """Return the user's own words of a turn's first message."""
    value = message.additional_kwargs.get(USER_TEXT)
    if isinstance(value, str):
        return value
    content = message.content
    return content if isinstance(content, str) else str(content)


def user_texts(messages: Iterable[AnyMessage]) -> list[str]:
    """Return the user's own words of every turn in ``messages``."""
    return [user_text(message) for message in messages if is_turn_start(message)]


def is_tainted_turn(turn: Sequence[AnyMessage]) -> bool:
    """Tell whether any message of the turn carries untrusted text."""
    return any(untrusted_sources(message) for message in turn)


def stub_turn(turn: Sequence[AnyMessage]) -> list[AnyMessage]:
    """Return the turn without its untrusted text: the user's message and a note.

    The user's message keeps its bytes (it never carries untrusted text: the
    context block holds only the house's own facts), so the server's cache
    still covers everything up to it.
    """
    first = turn[0]
    sources = ", ".join(sources_of(turn)) or "outside text"
    note = AIMessage(
        content=STUB_ANSWER.format(sources=sources),
        id=f"{STUB_PREFIX}{first.id}",
    )
    if untrusted_sources(first):
        # The message itself was outside text (someone the house does not
        # know wrote it): a fixed stand-in, none of its words.
        first = HumanMessage(
            content=REMOVED_MESSAGE, id=first.id, additional_kwargs={USER_TEXT: ""}
        )
    return [first, note]


def expire_taint(
    turns: list[list[AnyMessage]], kept_after: int = TAINTED_TURNS_KEPT
) -> tuple[list[list[AnyMessage]], bool]:
    """End the taint window once ``kept_after`` turns followed its first turn.

    A turn that read untrusted text taints every answer written after it (the
    model read it), so the turns that follow are tainted too: the window is
    the first tainted turn and everything after it. Once ``kept_after`` turns
    followed that first one, every tainted turn in the window is reduced to
    the user's own message at once, and the prompt is clean again.

    Returns the turns and whether any changed.
    """
    first = next(
        (index for index, turn in enumerate(turns) if is_tainted_turn(turn)), None
    )
    if first is None or len(turns) - first - 1 < kept_after:
        return turns, False
    return [
        stub_turn(turn) if index >= first and is_tainted_turn(turn) else turn
        for index, turn in enumerate(turns)
    ], True


def asked_line(turn: Sequence[AnyMessage]) -> str:
    """Return one line naming what the user asked in a turn (their own words)."""
    text = _SPACE_RE.sub(" ", user_text(turn[0])).strip()
    if len(text) > MAX_ASKED_CHARS:
        text = text[: MAX_ASKED_CHARS - 1].rstrip() + "…"
    return f"- The user asked: {text}"


def opening_after_trim(opening: str, dropped: Sequence[Sequence[AnyMessage]]) -> str:
    """Return the opening for a trim without a written summary.

    It keeps only the user's own words (trusted), newest last, within
    :data:`MAX_OPENING_CHARS`: the oldest lines go first.
    """
    lines = [line for line in opening.splitlines() if line.strip()]
    lines.extend(
        asked_line(turn) for turn in dropped if turn and is_turn_start(turn[0])
    )
    while lines and len("\n".join(lines)) > MAX_OPENING_CHARS:
        lines.pop(0)
    return "\n".join(lines)


def with_opening(messages: Sequence[AnyMessage], opening: str) -> list[AnyMessage]:
    """Return the messages with the opening in front of the first user's message.

    The opening is rendered the same way on every request of the session, so
    its bytes stay the same until a trim replaces it.
    """
    result = list(messages)
    if not opening:
        return result
    for index, message in enumerate(result):
        if isinstance(message, HumanMessage):
            content = message.content if isinstance(message.content, str) else ""
            result[index] = HumanMessage(
                content=f"{OPENING_HEADER}\n{opening}\n\n{content}",
                id=message.id,
                additional_kwargs=dict(message.additional_kwargs),
            )
            break
    return result


def drop_feedback(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """Return the messages without corrections and the answers they corrected.

    A rejected answer (junk, a tool call written as text) and the note that
    rejected it teach a small model nothing good; they leave with the turn.
    """
    result: list[AnyMessage] = []
    for message in messages:
        if str(message.id or "").startswith(FEEDBACK_PREFIX):
            if (
                result
                and isinstance(result[-1], AIMessage)
                and not result[-1].tool_calls
            ):
                result.pop()
            continue
        result.append(message)
    return result


def plain_copy(message: AnyMessage, **changes: Any) -> AnyMessage:
    """Return a copy of ``message`` with ``changes`` (marks are kept)."""
    return message.model_copy(update=changes)
