"""The context assembler: a turn's history and new message, fitted to the budget.

Everything after the cached prefix (system prompt and tool schemas): the
history as sent before, the new message with its live context (the time,
the states it names, the profile, documents), all within the turn's
:class:`~.budget.Budget`.
"""

from __future__ import annotations

import math
import re
import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from ..security.firewall import mark_untrusted
from ..tokens import MESSAGE_OVERHEAD
from .budget import (
    CATALOGUE_SHARE,
    LIVE_SHARE,
    MAX_USER_SHARE,
    TOOL_RESERVE,
    TRIM_TO,
    fit_lines,
    message_cost,
    share_out,
    shrink_tool_results,
)
from .entity_index import one_line
from .prompts import CONTEXT_HEADER
from .turns import (
    USER_TEXT,
    expire_taint,
    is_tainted_turn,
    mark_message,
    opening_after_trim,
    sources_of,
    split_turns,
    stub_turn,
    with_opening,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.messages import AnyMessage

    from ..tokens import TokenCounter
    from .budget import Budget
    from .entity_index import EntityLine

SEARCH_DOCUMENTS: Final = "search_documents"
AUTO_CONTEXT_CALL_ID: Final = "auto_context_documents"
ENTITIES_HEADER: Final = "Entities (entity_id | name | state | area):"
DOCUMENTS_HEADER: Final = "From the home's knowledge:"
PROFILE_HEADER: Final = "What you know about this user:"


@dataclass(frozen=True, slots=True)
class DocumentChunk:
    """A retrieved chunk, as the context shows it."""

    title: str
    content: str
    trusted: bool
    # Untrusted chunks, fenced and marked by the firewall (see fence_chunks).
    fenced: str = ""


def fence_chunks(chunks: Sequence[DocumentChunk]) -> list[DocumentChunk]:
    """Return the chunks with the untrusted ones fenced; blocking (milliseconds).

    The fence is random, so it is made once per turn and every request of the
    turn carries the same bytes.
    """
    return [
        chunk
        if chunk.trusted or chunk.fenced
        else replace(
            chunk,
            fenced=mark_untrusted(
                f"{chunk.title}\n{chunk.content}", source="documents"
            ),
        )
        for chunk in chunks
    ]


@dataclass(slots=True)
class TurnContext:
    """What one turn may add after the history, before the budget cuts it."""

    # Lines every message carries (the time, who is asking).
    header: list[str]
    entities: list[EntityLine]
    profile: str = ""
    documents: list[DocumentChunk] = field(default_factory=list)
    # Lines a session needs once (the home's name and time zone): repeated
    # only when they left the prompt.
    session: list[str] = field(default_factory=list)
    # The catalogue in the system prompt names every exposed entity and its
    # area: a state line then needs only the id and the state.
    catalogued: bool = False


@dataclass(slots=True)
class Prepared:
    """The history and the new message of a turn, as the model will read them."""

    history: list[AnyMessage]
    opening: str
    user: HumanMessage
    # Retrieved untrusted documents, as a search_documents call and its result.
    documents: list[AnyMessage]
    # The history was trimmed (the model server re-reads what follows the cut).
    trimmed: bool
    # Tainted turns left the prompt (reduced to the user's own words).
    expired: bool
    # The user's message was cut to fit: the characters kept, of how many.
    # The user is told with the reply.
    cut: tuple[int, int] | None = None


@dataclass(slots=True)
class Request:
    """The messages of one model request and their estimated size."""

    messages: list[AnyMessage]
    tokens: int
    # The sources of the untrusted text in the request (empty: none).
    untrusted: list[str]
    # The same without the learned correction, to compare with Ollama's count.
    raw_tokens: int


# When not every changed state fits, at most this many matched ones are
# shown: those scoring at least this share of the best match.
MAX_LIVE_ENTITIES: Final = 10
BEST_SHARE: Final = 0.75
CATALOGUE_HEADER: Final = "Entities you can see (entity_id | name | area):"
NO_CATALOGUE: Final = (
    "{count} entities are exposed to you. The [Context] of a message lists "
    "those it is about; use list_entities to find others."
)
_ENTITY_LINE_RE: Final = re.compile(
    r"^([a-z0-9_]+\.[a-z0-9_]+)(?: = | \| )", re.MULTILINE
)
_HISTORY_LINE_SEPARATOR: Final = "\n"


def build_system_prompt(
    base: str, catalogue: Sequence[str], limit: int, counter: TokenCounter
) -> tuple[str, bool]:
    """Return the system prompt with the catalogue, and whether it lists all.

    The catalogue changes only when an entity's exposure, name or area
    changes: it belongs to the cached prefix. In a house too big for its
    share, the prompt says how many entities there are instead.
    """
    if not catalogue:
        return f"{base}\n\nNo entities are exposed to you.", True
    text = "\n".join([CATALOGUE_HEADER, *catalogue])
    if counter.count(text) <= limit * CATALOGUE_SHARE:
        return f"{base}\n\n{text}", True
    return f"{base}\n\n{NO_CATALOGUE.format(count=len(catalogue))}", False


def _last_shown(history_text: str) -> dict[str, str]:
    """Return each entity's last state line in the history's context blocks."""
    shown: dict[str, str] = {}
    for match in _ENTITY_LINE_RE.finditer(history_text):
        end = history_text.find("\n", match.start())
        shown[match.group(1)] = history_text[
            match.start() : end if end != -1 else len(history_text)
        ]
    return shown


class ContextAssembler:
    """Builds the requests of one turn: the history as sent, then the new message."""

    def __init__(
        self,
        *,
        budget: Budget,
        counter: TokenCounter,
        system_prompt: str,
        turn: TurnContext,
    ) -> None:
        """Keep the turn's material; nothing is cut until the turn is prepared."""
        self.budget = budget
        self.counter = counter
        self.system_prompt = system_prompt
        self.turn = turn
        # Fenced in the executor by the caller; here only if it did not.
        self._fenced = [
            chunk.fenced for chunk in fence_chunks(turn.documents) if not chunk.trusted
        ]
        self._costs: dict[tuple[str | None, int, float], int] = {}

    def _cost(self, message: AnyMessage) -> int:
        """Return a message's estimate; a turn re-reads the same messages each round."""
        key = (message.id, len(str(message.content)), self.counter.correction)
        if message.id is None or key not in self._costs:
            cost = message_cost(self.counter)(message)
            if message.id is None:
                return cost
            self._costs[key] = cost
        return self._costs[key]

    def _room(self) -> int:
        """Return the tokens a request may hold after the fixed prefix."""
        fixed = self.counter.scale(self.budget.fixed)
        return max(0, self.budget.limit - fixed - 2 * MESSAGE_OVERHEAD)

    def history_room(self, user_tokens: int) -> int:
        """Return the room the history may fill beside a message this long."""
        room = self._room()
        live = int(max(0, room - user_tokens) * LIVE_SHARE)
        return max(0, room - user_tokens - live - int(room * TOOL_RESERVE))

    def history_tokens(self, messages: Sequence[AnyMessage], opening: str) -> int:
        """Return the estimated tokens of a history as it is sent."""
        return sum(self._cost(message) for message in with_opening(messages, opening))

    def prepare(
        self,
        history: Sequence[AnyMessage],
        *,
        opening: str,
        text: str,
        turn_id: str,
        summary: tuple[str, str] | None = None,
    ) -> Prepared:
        """Return the turn's history and its new message with the live context.

        The history keeps its bytes, except in these large, rare steps: a
        background summary replaces the turns it covers; tainted turns leave
        after :data:`TAINTED_TURNS_KEPT` later turns; a history that outgrew
        its room loses its older half (and every tainted turn) at once.
        """
        counter = self.counter
        turns = split_turns(history)
        trimmed = False
        if summary is not None:
            text_of_summary, upto = summary
            ids = [str(turn[0].id) for turn in turns]
            if upto in ids:
                turns = turns[ids.index(upto) + 1 :]
                opening = text_of_summary
                trimmed = True
        turns, expired = expire_taint(turns)
        room = self._room()
        cut = None
        max_user = int(room * MAX_USER_SHARE)
        if counter.count(text) > max_user:
            total = len(text)
            keep = max(1, int(total * max_user / max(counter.count(text), 1)))
            while keep > 1 and counter.count(text[:keep]) > max_user:
                keep = int(keep * 0.9)
            text = text[:keep]
            cut = (keep, total)
        user_tokens = counter.count(text)
        live_allowance = int(max(0, room - user_tokens) * LIVE_SHARE)
        history_room = self.history_room(user_tokens)
        flat = [message for turn in turns for message in turn]
        if self.history_tokens(flat, opening) > history_room:
            turns, opening = self._trim(turns, opening, int(history_room * TRIM_TO))
            trimmed = True
            flat = [message for turn in turns for message in turn]
        lines, documents = self._live(flat, opening, live_allowance)
        content = text
        if lines:
            content = f"{text}\n\n{CONTEXT_HEADER}\n" + "\n".join(lines)
        user = HumanMessage(
            content=content, id=turn_id, additional_kwargs={USER_TEXT: text}
        )
        return Prepared(
            history=flat,
            opening=opening,
            user=user,
            documents=_document_messages(text, documents) if documents else [],
            trimmed=trimmed,
            expired=expired,
            cut=cut,
        )

    def _trim(
        self, turns: list[list[AnyMessage]], opening: str, target: int
    ) -> tuple[list[list[AnyMessage]], str]:
        """Drop the oldest turns until the history fits ``target``; one step."""
        dropped: list[list[AnyMessage]] = []
        kept = list(turns)
        while kept:
            candidate = opening_after_trim(opening, dropped)
            flat = [message for turn in kept for message in turn]
            if self.history_tokens(flat, candidate) <= target:
                break
            dropped.append(kept.pop(0))
        # At a trim every tainted turn leaves as well: the bytes after the cut
        # are re-read anyway.
        kept = [stub_turn(turn) if is_tainted_turn(turn) else turn for turn in kept]
        return kept, opening_after_trim(opening, dropped)

    def _live(
        self, history: Sequence[AnyMessage], opening: str, allowance: int
    ) -> tuple[list[str], list[str]]:
        """Return the new turn's context lines and fenced documents.

        A line the history already holds is not repeated: the profile and
        knowledge lines it has, the session lines, and each entity's state
        as it was last shown. Only what is new or changed costs tokens.
        """
        counter = self.counter
        turn = self.turn
        history_text = _HISTORY_LINE_SEPARATOR.join(
            [
                opening,
                *(
                    str(message.content)
                    for message in history
                    if isinstance(message, HumanMessage)
                ),
            ]
        )
        shown = _last_shown(history_text)
        known = set(history_text.splitlines())
        # The date and the home once per conversation (until they change or
        # leave the prompt), the time every message, who is asking when it
        # is not the same person as last time.
        last_user = next(
            (
                line
                for line in reversed(history_text.splitlines())
                if line.startswith("User: ")
            ),
            None,
        )
        parts = [
            line
            for line in turn.header
            if not (line.startswith("Date: ") and line in known)
            and not (line.startswith("User: ") and line == last_user)
        ]
        parts.extend(line for line in turn.session if line not in known)
        profile = [
            line
            for line in turn.profile.splitlines()
            if line.strip() and line not in known
        ]
        trusted = [
            line
            for chunk in turn.documents
            if chunk.trusted
            and (line := f"- {one_line(chunk.title)}: {one_line(chunk.content)}")
            not in known
        ]

        def entity_text(line: EntityLine) -> str:
            return line.short if turn.catalogued and line.short else line.text

        changed = [
            line
            for line in turn.entities
            if shown.get(line.entity_id) != entity_text(line)
        ]
        entity_costs = {
            line.entity_id: counter.count(entity_text(line)) + 1 for line in changed
        }
        header_cost = sum(counter.count(line) + 1 for line in parts)
        demands = {
            "entities": sum(entity_costs.values()) + counter.count(ENTITIES_HEADER),
            "documents": sum(counter.count(line) + 1 for line in trusted)
            + sum(counter.count(text) + MESSAGE_OVERHEAD for text in self._fenced),
            "profile": sum(counter.count(line) + 1 for line in profile)
            + (counter.count(PROFILE_HEADER) if profile else 0),
        }
        granted = share_out(max(0, allowance - header_cost), demands)
        # With the catalogue in the cached prefix (every id, name and area),
        # a turn brings only the states it needs: who is home and what the
        # message names (the first message of a session costs itself, not the
        # whole house); list_entities and get_state read the rest.
        if granted["entities"] >= demands["entities"] and not turn.catalogued:
            entities = changed
        else:
            entities = _best_named(changed, turn.entities)
            if turn.catalogued:
                # A state shown earlier that changed is said again: the
                # model takes a shown state as true until a later line.
                entities += [
                    line
                    for line in changed
                    if line.entity_id in shown and line not in entities
                ]
        entity_lines = fit_lines(
            (entity_text(line) for line in entities),
            granted["entities"] - counter.count(ENTITIES_HEADER),
            counter,
        )
        if profile:
            fitted = fit_lines(
                profile, granted["profile"] - counter.count(PROFILE_HEADER), counter
            )
            if fitted:
                parts.append(PROFILE_HEADER)
                parts.extend(fitted)
        doc_room = granted["documents"]
        trusted_lines = fit_lines(trusted, doc_room, counter)
        doc_room -= sum(counter.count(line) + 1 for line in trusted_lines)
        if trusted_lines:
            parts.append(DOCUMENTS_HEADER)
            parts.extend(trusted_lines)
        fenced: list[str] = []
        for text in self._fenced:
            cost = counter.count(text) + MESSAGE_OVERHEAD
            if cost > doc_room:
                break
            fenced.append(text)
            doc_room -= cost
        if entity_lines:
            parts.append(ENTITIES_HEADER)
            parts.extend(entity_lines)
        if not turn.catalogued and (left := len(turn.entities) - len(entity_lines)):
            note = f"({left} more: use list_entities)"
            if note not in known:
                parts.append(note)
        return parts, fenced

    def build(self, messages: Sequence[AnyMessage], *, opening: str) -> Request:
        """Return the request for the current state, cut only if it cannot fit.

        The history and the new message were prepared to fit; only this turn's
        own tool results can still overflow. Then, in this order: retrieved
        documents, the oldest turns (for this request only), and the longest
        tool results are cut. The system prompt and the user's message never are.
        """
        counter = self.counter
        fixed = counter.scale(self.budget.fixed)
        cost_of = self._cost
        rendered = with_opening(messages, opening)
        total = sum(cost_of(message) for message in rendered)
        room = self.budget.limit - fixed
        if total > room:
            rendered = [
                message
                for message in rendered
                if getattr(message, "tool_call_id", None) != AUTO_CONTEXT_CALL_ID
                and not (
                    isinstance(message, AIMessage)
                    and any(
                        call["id"] == AUTO_CONTEXT_CALL_ID
                        for call in message.tool_calls
                    )
                )
            ]
            total = sum(cost_of(message) for message in rendered)
        if total > room:
            turns = split_turns(list(messages))
            while len(turns) > 1 and total > room:
                turns.pop(0)
                rendered = with_opening(
                    [message for turn in turns for message in turn], opening
                )
                total = sum(cost_of(message) for message in rendered)
        if total > room:
            turns = split_turns(rendered)
            current = turns[-1]
            head = [message for turn in turns[:-1] for message in turn]
            current[1:] = shrink_tool_results(current[1:], total - room, cost_of)
            rendered = [*head, *current]
            total = sum(cost_of(message) for message in rendered)
        result: list[AnyMessage] = [
            SystemMessage(content=self.system_prompt),
            *rendered,
        ]
        tokens = fixed + total
        return Request(
            result,
            tokens,
            untrusted=sources_of(rendered),
            raw_tokens=math.ceil(tokens / counter.correction),
        )


def _best_named(
    changed: Sequence[EntityLine], entities: Sequence[EntityLine]
) -> list[EntityLine]:
    """Return the lines worth sending when not every changed state fits.

    Who is home, and the entities the message names best (ties and near ties
    of the best score). A message whose best words fit more than
    MAX_LIVE_ENTITIES entities alike ("which lights are on?" in a house of
    a hundred lights, where "light" is in every name) names none in
    particular: list_entities answers that in full, better than an arbitrary
    ten here, and the turn costs no state lines the answer cannot use.
    """
    best = max((line.score for line in entities), default=0)

    def is_named(line: EntityLine) -> bool:
        return not line.always and bool(line.score) and line.score >= best * BEST_SHARE

    named = [line for line in changed if is_named(line)]
    if sum(1 for line in entities if is_named(line)) > MAX_LIVE_ENTITIES:
        named = []
    always = [line for line in changed if line.always]
    return [*always, *named][:MAX_LIVE_ENTITIES]


def _document_messages(query: str, documents: Sequence[str]) -> list[AnyMessage]:
    """Return retrieved untrusted chunks as if the model had searched for them."""
    source = ["documents found for your message"]
    return [
        mark_message(
            AIMessage(
                content="",
                tool_calls=[
                    {
                        "name": SEARCH_DOCUMENTS,
                        "args": {"query": query},
                        "id": AUTO_CONTEXT_CALL_ID,
                        "type": "tool_call",
                    }
                ],
                id=f"{AUTO_CONTEXT_CALL_ID}-{uuid.uuid4().hex}",
            ),
            source,
        ),
        mark_message(
            ToolMessage(
                content="\n\n".join(documents),
                tool_call_id=AUTO_CONTEXT_CALL_ID,
                name=SEARCH_DOCUMENTS,
                id=f"{AUTO_CONTEXT_CALL_ID}-result-{uuid.uuid4().hex}",
            ),
            source,
        ),
    ]
