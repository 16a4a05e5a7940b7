"""The ReAct graph: model, tools, and a bounded, checkpointed message state."""

from __future__ import annotations

import asyncio
import contextlib
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
from pydantic import ValidationError

from ..const import LOGGER, MAX_FEEDBACK_ROUNDS, MAX_LOADING_WAIT, MAX_TOOL_ROUNDS
from ..model_server import is_bad_tool_call
from .prompts import (
    FEEDBACK_BAD_JSON,
    FEEDBACK_EMPTY,
    SYSTEM_PROMPT,
)
from .reply_check import (
    BASE_CHECK,
    ReplyCheck,
    check_reply,
    corrected_before,
    rejected_answer,
    shown_while_streaming,
)
from .reply_loop import loop_cut
from .turns import (
    FEEDBACK_PREFIX,
    TURN_PREFIX,
    USER_TEXT,
    drop_feedback,
    mark_message,
    sources_of,
    split_turns,
    user_texts,
    with_opening,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import ToolCall
    from langchain_core.messages.ai import UsageMetadata
    from langchain_core.runnables import Runnable
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.graph.state import CompiledStateGraph

    from ..tools.registry import ToolContext, ToolOutcome, ToolRegistry
    from .assembler import ContextAssembler, Prepared

_THINK_RE: Final = re.compile(r"<think>.*?</think>", re.DOTALL)
# A reasoning block still open at the end.
_OPEN_THINK_RE: Final = re.compile(r"<think>.*\Z", re.DOTALL)


class AgentState(TypedDict, total=False):
    """What the checkpointer keeps for a conversation thread (one session)."""

    # The session's history exactly as it was sent (each user message with the
    # context block it carried), then the current turn. Earlier turns keep
    # their bytes, so the model server reuses its cache for all of them.
    messages: Annotated[list[AnyMessage], add_messages]
    # Id of this turn's user message and the user's words (the input), and
    # what makes those words untrusted (someone the house does not know).
    turn_id: str
    text: str
    text_sources: list[str]
    # What opens the history: a summary of turns that left it, or of the last
    # session. Changes only at a trim.
    opening: str
    # A background summary ready to replace the turns up to a turn id, and
    # the last session's summary (it opens a session without history).
    summary_update: tuple[str, str] | None
    session_opening: str
    feedback_rounds: int
    tool_rounds: int
    route: str
    # Kept so that checkpoints written by earlier versions still load.
    context: str
    summary: str


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
    # What preparing the turn did to the history (trims, expired taint).
    prepared: Prepared | None = None
    # Tells whether the server is still loading the model (it then gets more
    # than the silence limit for its first word).
    loading: Callable[[], Awaitable[bool]] | None = None
    # Photos (base64 JPEG) sent with this turn's message to a vision model:
    # in the requests of this turn only, never in the checkpointed history.
    images: tuple[str, ...] = ()
    # Told of every tool call and its outcome, as it finishes (Assist's chat log).
    on_tool: Callable[[ToolCall, ToolOutcome], None] | None = None
    # What the server reported of each request (LangChain's usage metadata).
    usage: list[UsageMetadata] = field(default_factory=list)


def new_turn_id() -> str:
    """Return an id for a user's message that the graph recognizes as a turn."""
    return f"{TURN_PREFIX}{uuid.uuid4().hex}"


# Seconds an answer cut as a loop waits for its stream to close cleanly.
STOP_WAIT: Final = 2.0


def _feedback(text: str) -> HumanMessage:
    return HumanMessage(content=text, id=f"{FEEDBACK_PREFIX}{uuid.uuid4().hex}")


def _final(text: str) -> AIMessage:
    return AIMessage(content=text, id=f"final-{uuid.uuid4().hex}")


def message_text(message: AnyMessage) -> str:
    """Return the plain text of a message, without any reasoning block."""
    return _THINK_RE.sub("", message_text_raw(message)).strip()


def partial_text(text: str, check: ReplyCheck = BASE_CHECK) -> str:
    """Return what of a partial answer may be shown: no reasoning, no junk."""
    text = _OPEN_THINK_RE.sub("", _THINK_RE.sub("", text))
    return shown_while_streaming(text.lstrip(), check)


async def _stream(
    model: Runnable[list[AnyMessage], AIMessage],
    messages: list[AnyMessage],
    on_text: Callable[[str], None] | None,
    *,
    silence: float,
    loading: Callable[[], Awaitable[bool]] | None = None,
) -> AIMessage:
    """Stream the model's answer, reporting the text so far; return it whole.

    The time limit measures silence, not length: each chunk restarts the
    clock, so a slow writer is never cut off, and before the first chunk a
    model the server reports as still loading (``loading``) gets more time,
    up to :data:`MAX_LOADING_WAIT`. A model that says nothing for
    ``silence`` seconds otherwise is cut off (TimeoutError). An answer that
    loops (reply_loop.loop_cut) is stopped there: the request is closed, so
    the server stops writing, and the answer ends where the loop began.
    """
    chunks: asyncio.Queue[AIMessageChunk | BaseException | None] = asyncio.Queue()
    enough = asyncio.Event()
    reader = asyncio.create_task(
        _read_stream(model, messages, chunks, enough),
        name="ha_personal_assistant model stream",
    )
    loop = asyncio.get_running_loop()
    started = loop.time()
    merged: AIMessageChunk | None = None
    try:
        while True:
            try:
                async with asyncio.timeout(silence):
                    item = await chunks.get()
            except TimeoutError:
                if (
                    merged is None
                    and loading is not None
                    and loop.time() - started < MAX_LOADING_WAIT
                    and await loading()
                ):
                    continue
                raise
            if item is None:
                break
            if isinstance(item, BaseException):
                raise item
            merged = item if merged is None else merged + item
            if not item.content:
                continue
            text = message_text_raw(merged)
            if (cut := _loop_cut(merged, text)) is not None:
                merged = cut
                # The reader leaves at its next chunk, which comes soon from
                # a model that is still writing.
                enough.set()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(STOP_WAIT):
                        await asyncio.shield(reader)
                break
            if on_text is not None:
                on_text(text)
    finally:
        reader.cancel()
        # asyncio.wait, not ``await reader`` under suppress(CancelledError):
        # that would also swallow a cancel of this turn arriving meanwhile.
        await asyncio.wait({reader})
    if merged is None:
        # What ChatOllama raises for an empty stream; the assistant explains it.
        msg = "No data received from the model stream."
        raise ValueError(msg)
    message = message_chunk_to_message(merged)
    assert isinstance(message, AIMessage)  # noqa: S101 - an AI chunk merges to one
    return message


async def _read_stream(
    model: Runnable[list[AnyMessage], AIMessage],
    messages: list[AnyMessage],
    chunks: asyncio.Queue[AIMessageChunk | BaseException | None],
    enough: asyncio.Event,
) -> None:
    """Put the model's chunks on ``chunks``, then None or the error.

    Closed, not cancelled, when the answer is cut (``enough``): the HTTP
    response is then released to the client's pool. A cancelled read can
    leave its connection checked out, and enough of those stall every later
    request.
    """
    try:
        stream = model.astream(messages)
        try:
            async for chunk in stream:
                if enough.is_set():
                    break
                if isinstance(chunk, AIMessageChunk):
                    chunks.put_nowait(chunk)
        finally:
            # An async generator (LangChain's astream), typed as an iterator.
            if (aclose := getattr(stream, "aclose", None)) is not None:
                await aclose()
    except Exception as err:  # noqa: BLE001 - handed to the reader
        chunks.put_nowait(err)
    else:
        chunks.put_nowait(None)


def _loop_cut(merged: AIMessageChunk, text: str) -> AIMessageChunk | None:
    """Return the answer cut where it began to loop, or None if it does not."""
    if merged.tool_call_chunks or _OPEN_THINK_RE.search(_THINK_RE.sub("", text)):
        return None
    if (cut := loop_cut(text)) is None:
        return None
    LOGGER.debug(
        "The model repeats itself; its answer ends after %d of %d characters",
        cut,
        len(text),
    )
    return merged.model_copy(update={"content": text[:cut].rstrip()})


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
    """Build the request: fixed system prompt, the history as sent, this turn."""
    messages = state.get("messages", [])
    opening = state.get("opening", "")
    if turn.assembler is not None:
        request = turn.assembler.build(messages, opening=opening)
        turn.context_tokens = request.tokens
        turn.raw_tokens = request.raw_tokens
        result = request.messages
    else:
        result = [
            SystemMessage(content=SYSTEM_PROMPT),
            *with_opening(messages, opening),
        ]
    # The taint rule follows the prompt: untrusted text anywhere in what the
    # model reads (this turn's or an earlier turn's) taints this request.
    for source in sources_of(result):
        turn.tools.mark_tainted(source)
    # Facts may be remembered only from the user's own words in this prompt.
    turn.tools.user_texts = user_texts(result)
    if turn.images:
        turn_id = state.get("turn_id")
        result = [
            with_images(message, turn.images) if message.id == turn_id else message
            for message in result
        ]
    return result


def with_images(message: AnyMessage, images: Sequence[str]) -> AnyMessage:
    """Return a copy of the user's message carrying photos.

    LangChain's image parts with data URLs: ChatOllama sends them as Ollama's
    ``images``, ChatOpenAI as OpenAI's ``image_url`` content parts.
    """
    parts: list[str | dict[Any, Any]] = [
        {"type": "text", "text": message_text_raw(message)},
        *(
            {
                "type": "image_url",
                "image_url": {"url": f"data:image/jpeg;base64,{image}"},
            }
            for image in images
        ),
    ]
    return message.model_copy(update={"content": parts})


async def prepare(state: AgentState, runtime: Runtime[TurnRuntime]) -> dict[str, Any]:
    """Append the new message (with its live context) to the session's history."""
    turn = runtime.context
    turn_id = state.get("turn_id", "")
    text = state.get("text", "")
    history = list(state.get("messages", []))
    if turn.assembler is None:
        user = HumanMessage(
            content=text, id=turn_id, additional_kwargs={USER_TEXT: text}
        )
        return {
            "messages": [user],
            "summary_update": None,
            "feedback_rounds": 0,
            "tool_rounds": 0,
        }
    opening = state.get("opening", "")
    if not history and not opening:
        opening = state.get("session_opening", "")
    prepared = turn.assembler.prepare(
        history,
        opening=opening,
        text=text,
        turn_id=turn_id,
        summary=state.get("summary_update"),
    )
    turn.prepared = prepared
    if sources := state.get("text_sources"):
        mark_message(prepared.user, sources)
    if prepared.cut is not None:
        kept, total = prepared.cut
        turn.tools.notices.append(
            turn.tools.texts("message_cut", kept=f"{kept:,}", total=f"{total:,}")
        )
    return {
        "messages": [
            RemoveMessage(id=REMOVE_ALL_MESSAGES),
            *prepared.history,
            prepared.user,
            *prepared.documents,
        ],
        "opening": prepared.opening,
        "summary_update": None,
        "session_opening": "",
        "text_sources": [],
        "feedback_rounds": 0,
        "tool_rounds": 0,
    }


async def call_model(  # noqa: PLR0911, PLR0912 - one return per outcome
    state: AgentState, runtime: Runtime[TurnRuntime]
) -> dict[str, Any]:
    """Ask the model for the next step and check what it wrote."""
    turn = runtime.context
    feedback_rounds = state.get("feedback_rounds", 0)

    def retry(*messages: AnyMessage) -> dict[str, Any]:
        if feedback_rounds >= MAX_FEEDBACK_ROUNDS:
            return {
                "messages": [_final(turn.tools.texts("gave_up"))],
                "route": "finish",
            }
        return {
            "messages": list(messages),
            "feedback_rounds": feedback_rounds + 1,
            "route": "agent",
        }

    loop = asyncio.get_running_loop()
    async with turn.model_slots:
        started = loop.time()
        try:
            response = await _stream(
                turn.model,
                _model_messages(state, turn),
                turn.on_text,
                silence=turn.request_timeout,
                loading=turn.loading,
            )
        except OutputParserException, ValidationError:
            # Arguments that are not a JSON object fail LangChain's or the
            # Ollama client's parsing of the reply.
            return retry(_feedback(FEEDBACK_BAD_JSON))
        except Exception as err:
            # Ollama (and others) answer 500 when they cannot parse the
            # model's tool call.
            if not is_bad_tool_call(err):
                raise
            return retry(_feedback(FEEDBACK_BAD_JSON))
        finally:
            turn.model_calls.append(loop.time() - started)

    if turn.tools.tainted:
        # Written while untrusted text was in the prompt: the answer (or the
        # tool call) carries that taint for as long as it stays in the history.
        mark_message(response, turn.tools.taint_sources)
    if response.usage_metadata:
        turn.usage.append(response.usage_metadata)
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
    metadata = response.response_metadata
    if "length" in {metadata.get("done_reason"), metadata.get("finish_reason")}:
        # Cut at num_predict (Ollama's done_reason, OpenAI's finish_reason):
        # the user is told, in the integration's words.
        turn.tools.notices.append(turn.tools.texts("cut_at_limit"))
    if (junk := check_reply(text, turn.registry.reply_check)) is not None:
        # One correction, then an honest apology: never the junk itself.
        LOGGER.debug("The model wrote %s instead of an answer", junk.junk)
        if feedback_rounds >= MAX_FEEDBACK_ROUNDS or corrected_before(
            state.get("messages", []), state.get("turn_id")
        ):
            return {
                "messages": [_final(turn.tools.texts("unusable"))],
                "route": "finish",
            }
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
        if turn.on_tool is not None:
            turn.on_tool(tool_call, outcome)
        results.append(
            mark_message(
                ToolMessage(
                    content=outcome.content,
                    tool_call_id=tool_call["id"] or "",
                    name=tool_call["name"],
                    status="success" if outcome.ok else "error",
                    id=f"tool-{uuid.uuid4().hex}",
                ),
                outcome.untrusted,
            )
        )
    update: dict[str, Any] = {"messages": results, "route": "agent"}
    tool_rounds = state.get("tool_rounds", 0) + 1
    update["tool_rounds"] = tool_rounds
    if malformed:
        feedback_rounds = state.get("feedback_rounds", 0)
        if feedback_rounds >= MAX_FEEDBACK_ROUNDS:
            update["messages"] = [*results, _final(turn.tools.texts("gave_up"))]
            update["route"] = "finish"
            return update
        update["feedback_rounds"] = feedback_rounds + 1
    if tool_rounds >= MAX_TOOL_ROUNDS and update["route"] == "agent":
        update["messages"] = [*results, _final(turn.tools.texts("too_many_steps"))]
        update["route"] = "finish"
    return update


async def finish(state: AgentState) -> dict[str, Any]:
    """End the turn: it stays in the history as sent, without its corrections."""
    turns = split_turns(state.get("messages", []))
    if not turns:
        return {"route": ""}
    history = [message for turn in turns[:-1] for message in turn]
    return {
        "messages": [
            RemoveMessage(id=REMOVE_ALL_MESSAGES),
            *history,
            *drop_feedback(turns[-1]),
        ],
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
    graph.add_node("prepare", prepare)
    graph.add_node("agent", call_model)
    graph.add_node("tools", call_tools)
    graph.add_node("finish", finish)
    graph.add_edge(START, "prepare")
    graph.add_edge("prepare", "agent")
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


async def async_read_thread(
    graph: CompiledStateGraph[AgentState, TurnRuntime, AgentState, AgentState],
    thread_id: str,
) -> tuple[list[AnyMessage], str]:
    """Return a session's history as the model reads it, and its opening."""
    snapshot = await graph.aget_state({"configurable": {"thread_id": thread_id}})
    values = snapshot.values or {}
    return list(values.get("messages", [])), str(values.get("opening", ""))
