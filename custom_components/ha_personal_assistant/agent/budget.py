"""The token budget of a request: its limit, the shares of its parts, and fitting."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

from langchain_core.messages import AIMessage, ToolMessage

from ..tokens import MESSAGE_OVERHEAD

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from langchain_core.messages import AnyMessage

    from ..tokens import TokenCounter

# The answer needs room too: an eighth of the window, within these bounds.
ANSWER_SHARE: Final = 1 / 8
MIN_ANSWER_RESERVE: Final = 256
MAX_ANSWER_RESERVE: Final = 1024
# Estimates err high already; the margin covers what they still miss.
SAFETY_MARGIN: Final = 0.10
# What the model's chat template adds around the tools and each message.
TEMPLATE_OVERHEAD: Final = 150
# Shares of what is left after the fixed part and the user's message. A part
# that needs less lends the rest to the others, in proportion to their shares.
SHARES: Final[Mapping[str, float]] = MappingProxyType(
    {"history": 0.35, "entities": 0.35, "documents": 0.20, "profile": 0.10}
)
CUT_NOTE: Final = " … (cut to fit the context window)"
# Of the room after the fixed prefix and the user's message: the new turn's
# live context (states, profile, documents) and this turn's tool rounds.
LIVE_SHARE: Final = 0.30
TOOL_RESERVE: Final = 0.15
# A longer message is cut (and the user told): the rest needs room too.
MAX_USER_SHARE: Final = 0.5
# A history that outgrows its room is trimmed in one step to this share of
# it, so the following turns append again for a long while.
TRIM_TO: Final = 0.5
# Past this share of its room, a background summary of the older half is
# written (after the reply, when the chats are quiet), ready for the trim.
SUMMARIZE_AT: Final = 0.7
# The catalogue (ids, names, areas) may take this share of the request limit.
CATALOGUE_SHARE: Final = 0.2


@dataclass(frozen=True, slots=True)
class Budget:
    """How the context window of one request is divided."""

    num_ctx: int
    # System prompt, tool schemas and template: estimated once per session.
    fixed: int

    @property
    def answer_reserve(self) -> int:
        """Return the tokens kept free for the model's answer."""
        return min(
            MAX_ANSWER_RESERVE,
            max(MIN_ANSWER_RESERVE, int(self.num_ctx * ANSWER_SHARE)),
        )

    @property
    def limit(self) -> int:
        """Return the most tokens a request may hold."""
        return int((self.num_ctx - self.answer_reserve) * (1 - SAFETY_MARGIN))


def share_out(total: int, demands: Mapping[str, int]) -> dict[str, int]:
    """Split ``total`` by :data:`SHARES`; room a part does not need goes to others."""
    granted = dict.fromkeys(demands, 0)
    left = total
    wanting = {name for name, demand in demands.items() if demand > 0}
    while left > 0 and wanting:
        weight = sum(SHARES[name] for name in wanting)
        handed = 0
        for name in sorted(wanting):
            offer = int(left * SHARES[name] / weight)
            take = min(offer, demands[name] - granted[name])
            granted[name] += take
            handed += take
        wanting = {name for name in wanting if granted[name] < demands[name]}
        if handed == 0:
            break
        left -= handed
    return granted


def fit_lines(lines: Iterable[str], allowance: int, counter: TokenCounter) -> list[str]:
    """Return the first lines that fit ``allowance`` tokens, one more per line."""
    kept: list[str] = []
    used = 0
    for line in lines:
        cost = counter.count(line) + 1
        if used + cost > allowance:
            break
        kept.append(line)
        used += cost
    return kept


def shrink_tool_results(
    messages: Sequence[AnyMessage], excess: int, cost_of: Callable[[AnyMessage], int]
) -> list[AnyMessage]:
    """Return ``messages`` with the longest tool results cut by ``excess`` tokens."""
    result = list(messages)
    while excess > 0:
        tools = [
            (cost_of(message), index)
            for index, message in enumerate(result)
            if isinstance(message, ToolMessage)
            and len(str(message.content)) > len(CUT_NOTE)
        ]
        if not tools:
            break
        cost, index = max(tools)
        message = result[index]
        assert isinstance(message, ToolMessage)  # noqa: S101 - selected above
        text = str(message.content)
        keep = max(0, cost - excess - MESSAGE_OVERHEAD - len(CUT_NOTE)) / max(cost, 1)
        cut = text[: int(len(text) * keep)] + CUT_NOTE
        result[index] = ToolMessage(
            content=cut,
            tool_call_id=message.tool_call_id,
            name=message.name,
            status=message.status,
            id=message.id,
            additional_kwargs=dict(message.additional_kwargs),
        )
        excess -= cost - cost_of(result[index])
    return result


def message_cost(counter: TokenCounter) -> Callable[[AnyMessage], int]:
    """Return the estimate of a message's tokens, its tool calls included."""

    def cost(message: AnyMessage) -> int:
        content = message.content
        text = content if isinstance(content, str) else str(content)
        tokens = counter.count(text) + MESSAGE_OVERHEAD
        if isinstance(message, AIMessage) and message.tool_calls:
            tokens += sum(
                counter.count(str(call["args"])) + 8 for call in message.tool_calls
            )
        return tokens

    return cost
