"""Assist's chat log: a turn's text, tool calls, results and token figures."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from homeassistant.helpers import llm

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator

    from homeassistant.components import conversation
    from langchain_core.messages import ToolCall

    from ..models import TokenFigures
    from ..tools.registry import ToolOutcome

# What ends a question, in the scripts households write in: Latin and
# Cyrillic "?", the full-width one (Chinese, Japanese), the small one, the
# Arabic one, the Greek question mark (U+037E, and the semicolon that looks
# like it), the Armenian, Ethiopic and reversed ones.
QUESTION_MARKS: Final = (
    "?", "\uff1f", "\ufe56", "\u061f", "\u037e", ";", "\u055e", "\u1367", "\u2e2e",
)  # fmt: skip
# What may follow the question mark: spaces, closing quotes and brackets
# (ASCII, typographic and full-width), and Markdown emphasis.
_TRAILING: Final = " \t\n\"'*_)]\u00bb\u00ab\u201d\u201c\u2019\uff09\u300d\u300f"


def asks_question(reply: str) -> bool:
    """Tell whether a reply ends by asking something (Assist keeps listening)."""
    return reply.rstrip(_TRAILING).endswith(QUESTION_MARKS)


@dataclass(frozen=True, slots=True)
class ToolEvent:
    """One finished tool call of the turn, as the chat log shows it."""

    call_id: str
    name: str
    args: dict[str, Any]
    content: str
    ok: bool

    @classmethod
    def of(cls, call: ToolCall, outcome: ToolOutcome) -> ToolEvent:
        """Describe a call the graph ran and what it returned."""
        args = call["args"]
        return cls(
            call_id=call["id"] or f"{call['name']}-{id(call)}",
            name=call["name"],
            args=dict(args) if isinstance(args, dict) else {"arguments": args},
            content=outcome.content,
            ok=outcome.ok,
        )

    def result(self) -> llm.ToolResult:
        """Return the result as HA's LLM helpers hold one."""
        try:
            data = json.loads(self.content)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            data = {"result": self.content}
        return llm.ToolResult(data=data, error=not self.ok)


class ChatLogFeed:
    """What a turn tells the chat log while it runs: text so far and tool calls."""

    def __init__(self) -> None:
        """Start empty."""
        self._queue: asyncio.Queue[str | ToolEvent | None] = asyncio.Queue()

    def text(self, text: str) -> None:
        """Take the filtered answer written so far."""
        self._queue.put_nowait(text)

    def tool(self, call: ToolCall, outcome: ToolOutcome) -> None:
        """Take a tool call that finished."""
        self._queue.put_nowait(ToolEvent.of(call, outcome))

    def close(self) -> None:
        """Say the turn is over."""
        self._queue.put_nowait(None)

    async def deltas(
        self, turn: asyncio.Future[tuple[str, bool]]
    ) -> AsyncGenerator[
        conversation.AssistantContentDeltaDict | conversation.ToolResultContentDeltaDict
    ]:
        """Turn what the turn reported into chat-log deltas, then end on the reply.

        Only whole words are streamed: a link is judged by the reply filter
        once it is complete, so a half-written one could read differently
        later. When the text no longer continues what was streamed (a new
        model call, or the filter changed a word), a new message starts; the
        last one is the reply. Tool calls ran in our agent, under our
        permission layer: they are external to HA's LLM API, each followed by
        its result.
        """
        yield {"role": "assistant"}
        streamed = ""
        while (item := await self._queue.get()) is not None:
            if isinstance(item, ToolEvent):
                yield {
                    "role": "assistant",
                    "tool_calls": [
                        llm.ToolInput(
                            tool_name=item.name,
                            tool_args=item.args,
                            id=item.call_id,
                            external=True,
                        )
                    ],
                }
                yield {
                    "role": "tool_result",
                    "tool_call_id": item.call_id,
                    "tool_name": item.name,
                    "result": item.result(),
                }
                yield {"role": "assistant"}
                streamed = ""
                continue
            cut = max(item.rfind(" "), item.rfind("\n"))
            words = item[: cut + 1] if cut >= 0 else ""
            if not words.startswith(streamed):
                yield {"role": "assistant"}
                streamed = ""
            if len(words) > len(streamed):
                yield {"content": words[len(streamed) :]}
                streamed = words
        reply, _ = await turn
        if streamed and not reply.startswith(streamed):
            yield {"role": "assistant"}
            streamed = ""
        if rest := reply[len(streamed) :]:
            yield {"content": rest}


def trace_tokens(chat_log: conversation.ChatLog, tokens: TokenFigures | None) -> None:
    """Add the turn's token figures to the conversation trace (Anthropic's keys)."""
    if tokens is None:
        return
    stats: dict[str, int] = {
        "input_tokens": tokens.prompt,
        "output_tokens": tokens.generated,
        "requests": tokens.requests,
    }
    if tokens.cached is not None:
        stats["cached_input_tokens"] = tokens.cached
    chat_log.async_trace({"stats": stats})
