"""The ReAct graph: model, tools, and a bounded, checkpointed message state."""

from __future__ import annotations

import asyncio
import re
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal, TypedDict

from langchain_core.exceptions import OutputParserException
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    AnyMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    message_chunk_to_message,
)
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages
from langgraph.runtime import Runtime  # noqa: TC002 - LangGraph reads node hints
from ollama import ResponseError
from pydantic import ValidationError

from ..const import KEPT_TURNS, LOGGER, MAX_FEEDBACK_ROUNDS, MAX_TOOL_ROUNDS
from .prompts import (
    CONTEXT_HEADER,
    FEEDBACK_BAD_JSON,
    FEEDBACK_EMPTY,
    REPLY_GAVE_UP,
    REPLY_TOO_MANY_STEPS,
    REPLY_UNUSABLE,
    SUMMARY_HEADER,
    SYSTEM_PROMPT,
)
from .reply_check import (
    check_reply,
    corrected_before,
    rejected_answer,
    shown_while_streaming,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from langchain_core.language_models import BaseChatModel
    from langchain_core.runnables import Runnable
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.graph.state import CompiledStateGraph

    from ..context import ContextAssembler
    from ..tools.registry import ToolContext, ToolRegistry

TURN_PREFIX: Final = "turn-"
FEEDBACK_PREFIX: Final = "feedback-"
_THINK_RE: Final = re.compile(r"<think>.*?</think>", re.DOTALL)
# A reasoning block still open at the end.
_OPEN_THINK_RE: Final = re.compile(r"<think>.*\Z", re.DOTALL)


class AgentState(TypedDict, total=False):
    """What the checkpointer keeps for a conversation thread."""

    messages: Annotated[list[AnyMessage], add_messages]
    # Id of this turn's user message, and the live context added to it when the
    # model is called. The context is not stored in the message, so history
    # stays small and earlier turns keep their bytes (Ollama's prompt cache).
    turn_id: str
    context: str
    # A summary of the turns that left the prompt (or of the last session).
    summary: str
    feedback_rounds: int
    tool_rounds: int
    route: str


@dataclass(slots=True)
class TurnRuntime:
    """What one turn needs besides its state; never checkpointed."""

    model: Runnable[list[AnyMessage], AIMessage]
    registry: ToolRegistry
    tools: ToolContext
    model_slots: asyncio.Semaphore
    request_timeout: float
    model_calls: list[float] = field(default_factory=list)
    # Builds each request within the token budget (None: no budget, tests).
    assembler: ContextAssembler | None = None
    # Estimated tokens of the turn's last request, with and without correction.
    context_tokens: int = 0
    raw_tokens: int = 0
    # Called with the text written so far while the model streams its answer.
    on_text: Callable[[str], None] | None = None


def new_turn_id() -> str:
    """Return an id for a user's message that the graph recognizes as a turn."""
    return f"{TURN_PREFIX}{uuid.uuid4().hex}"


def _feedback(text: str) -> HumanMessage:
    return HumanMessage(content=text, id=f"{FEEDBACK_PREFIX}{uuid.uuid4().hex}")


def _final(text: str) -> AIMessage:
    return AIMessage(content=text, id=f"final-{uuid.uuid4().hex}")


def message_text(message: AnyMessage) -> str:
    """Return the plain text of a message, without any reasoning block."""
    return _THINK_RE.sub("", message_text_raw(message)).strip()


def partial_text(text: str) -> str:
    """Return what of a partial answer may be shown: no reasoning, no junk."""
    text = _OPEN_THINK_RE.sub("", _THINK_RE.sub("", text))
    return shown_while_streaming(text.lstrip())


async def _stream(
    model: Runnable[list[AnyMessage], AIMessage],
    messages: list[AnyMessage],
    on_text: Callable[[str], None],
) -> AIMessage:
    """Stream the model's answer, reporting the text so far; return it whole."""
    merged: AIMessageChunk | None = None
    async for chunk in model.astream(messages):
        if not isinstance(chunk, AIMessageChunk):
            continue
        merged = chunk if merged is None else merged + chunk
        if chunk.content:
            on_text(message_text_raw(merged))
    if merged is None:
        # What ChatOllama raises for an empty stream; the assistant explains it.
        msg = "No data received from Ollama stream."
        raise ValueError(msg)
    message = message_chunk_to_message(merged)
    assert isinstance(message, AIMessage)  # noqa: S101 - an AI chunk merges to one
    return message


def message_text_raw(message: AnyMessage) -> str:
    """Return the text of a message as written, reasoning blocks included."""
    content = message.content
    if isinstance(content, list):
        content = "".join(
            part if isinstance(part, str) else str(part.get("text", ""))
            for part in content
        )
    return content


def _model_messages(state: AgentState, turn: TurnRuntime) -> list[AnyMessage]:
    """Build the request: fixed system prompt, history, then the live context."""
    turn_id = state.get("turn_id")
    summary = state.get("summary", "")
    if turn.assembler is not None:
        request = turn.assembler.build(
            state.get("messages", []),
            turn_id=turn_id,
            summary=summary,
            text_of=message_text,
        )
        if request.untrusted:
            # The taint rule: retrieved documents entered the turn.
            turn.tools.mark_tainted("documents found for your message")
        turn.context_tokens = request.tokens
        turn.raw_tokens = request.raw_tokens
        return request.messages
    context = state.get("context", "")
    if summary:
        # Never in the system message: the prefix must stay byte-identical.
        context = f"{context}\n{SUMMARY_HEADER}\n{summary}".strip()
    result: list[AnyMessage] = [SystemMessage(content=SYSTEM_PROMPT)]
    for message in state.get("messages", []):
        if context and message.id == turn_id:
            result.append(
                HumanMessage(
                    content=f"{message_text(message)}\n\n{CONTEXT_HEADER}\n{context}",
                    id=message.id,
                )
            )
        else:
            result.append(message)
    return result


async def call_model(  # noqa: PLR0911 - one return per outcome
    state: AgentState, runtime: Runtime[TurnRuntime]
) -> dict[str, Any]:
    """Ask the model for the next step and check what it wrote."""
    turn = runtime.context
    feedback_rounds = state.get("feedback_rounds", 0)

    def retry(*messages: AnyMessage) -> dict[str, Any]:
        if feedback_rounds >= MAX_FEEDBACK_ROUNDS:
            return {"messages": [_final(REPLY_GAVE_UP)], "route": "finish"}
        return {
            "messages": list(messages),
            "feedback_rounds": feedback_rounds + 1,
            "route": "agent",
        }

    loop = asyncio.get_running_loop()
    async with turn.model_slots:
        started = loop.time()
        try:
            async with asyncio.timeout(turn.request_timeout):
                messages = _model_messages(state, turn)
                if turn.on_text is None:
                    response = await turn.model.ainvoke(messages)
                else:
                    response = await _stream(turn.model, messages, turn.on_text)
        except OutputParserException, ValidationError:
            # Arguments that are not a JSON object fail LangChain's or the
            # Ollama client's parsing of the reply.
            return retry(_feedback(FEEDBACK_BAD_JSON))
        except ResponseError as err:
            # Ollama answers 500 when it cannot parse the model's tool call.
            if "tool call" not in str(err.error):
                raise
            return retry(_feedback(FEEDBACK_BAD_JSON))
        finally:
            turn.model_calls.append(loop.time() - started)

    if turn.assembler is not None and response.usage_metadata:
        # Ollama's prompt_eval_count: the real size of what was just sent.
        turn.assembler.counter.observe(
            turn.raw_tokens, response.usage_metadata["input_tokens"]
        )
    if response.invalid_tool_calls:
        return retry(_feedback(FEEDBACK_BAD_JSON))
    if response.tool_calls:
        return {"messages": [response], "route": "tools"}
    text = message_text(response)
    if not text:
        return retry(_feedback(FEEDBACK_EMPTY))
    if (junk := check_reply(text)) is not None:
        # One correction, then an honest apology: never the junk itself.
        LOGGER.debug("The model wrote %s instead of an answer", junk.junk)
        if feedback_rounds >= MAX_FEEDBACK_ROUNDS or corrected_before(
            state.get("messages", []), state.get("turn_id")
        ):
            return {"messages": [_final(REPLY_UNUSABLE)], "route": "finish"}
        return retry(rejected_answer(response, text), _feedback(junk.feedback))
    return {"messages": [response], "route": "finish"}


async def call_tools(
    state: AgentState, runtime: Runtime[TurnRuntime]
) -> dict[str, Any]:
    """Run the tool calls of the model's last message, one after the other."""
    turn = runtime.context
    last = state["messages"][-1]
    assert isinstance(last, AIMessage)  # noqa: S101 - the router guarantees it
    results: list[AnyMessage] = []
    malformed = False
    # Sequential on purpose: calls may depend on each other (turn on, then read).
    for tool_call in last.tool_calls:
        outcome = await turn.registry.async_call(
            turn.tools, tool_call["name"], tool_call["args"]
        )
        malformed = malformed or outcome.malformed
        results.append(
            ToolMessage(
                content=outcome.content,
                tool_call_id=tool_call["id"] or "",
                name=tool_call["name"],
                status="success" if outcome.ok else "error",
            )
        )
    update: dict[str, Any] = {"messages": results, "route": "agent"}
    tool_rounds = state.get("tool_rounds", 0) + 1
    update["tool_rounds"] = tool_rounds
    if malformed:
        feedback_rounds = state.get("feedback_rounds", 0)
        if feedback_rounds >= MAX_FEEDBACK_ROUNDS:
            update["messages"] = [*results, _final(REPLY_GAVE_UP)]
            update["route"] = "finish"
            return update
        update["feedback_rounds"] = feedback_rounds + 1
    if tool_rounds >= MAX_TOOL_ROUNDS and update["route"] == "agent":
        update["messages"] = [*results, _final(REPLY_TOO_MANY_STEPS)]
        update["route"] = "finish"
    return update


def compact_history(messages: list[AnyMessage], kept_turns: int) -> list[AnyMessage]:
    """Keep each turn's user message and final answer, for the last turns only.

    Tool calls, tool results and corrections of finished turns are dropped: the
    answer already says what they achieved, and every kept byte is re-read by
    the model and re-written by the checkpointer on each turn.
    """
    turns: list[list[AnyMessage]] = []
    for message in messages:
        if isinstance(message, HumanMessage) and str(message.id or "").startswith(
            TURN_PREFIX
        ):
            turns.append([message])
        elif turns and isinstance(message, AIMessage) and not message.tool_calls:
            answer = AIMessage(content=message_text(message), id=message.id)
            turns[-1][1:] = [answer]
    kept = turns[-kept_turns:] if kept_turns > 0 else []
    return [message for turn in kept for message in turn]


async def finish(state: AgentState) -> dict[str, Any]:
    """Trim the state to a bounded history before the checkpoint is written."""
    kept = compact_history(state.get("messages", []), KEPT_TURNS)
    return {
        "messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *kept],
        "context": "",
        "summary": "",
        "route": "",
    }


def _route(state: AgentState) -> Literal["agent", "tools", "finish"]:
    route = state.get("route")
    if route == "tools":
        return "tools"
    if route == "agent":
        return "agent"
    return "finish"


def build_graph(
    checkpointer: BaseCheckpointSaver[Any] | None,
) -> CompiledStateGraph[AgentState, TurnRuntime, AgentState, AgentState]:
    """Compile the agent graph; the model and tools come with each turn's runtime."""
    graph = StateGraph(AgentState, context_schema=TurnRuntime)
    graph.add_node("agent", call_model)
    graph.add_node("tools", call_tools)
    graph.add_node("finish", finish)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", _route, ["agent", "tools", "finish"])
    graph.add_conditional_edges("tools", _route, ["agent", "finish"])
    graph.add_edge("finish", END)
    return graph.compile(checkpointer=checkpointer)


def bind_model(
    model: BaseChatModel, schemas: list[dict[str, Any]]
) -> Runnable[list[AnyMessage], AIMessage]:
    """Bind the tools once; the same list in the same order on every request."""
    if not schemas:
        return model
    return model.bind_tools(schemas)
