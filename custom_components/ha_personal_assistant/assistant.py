"""One conversation turn: session, context, the agent run, and errors in plain words."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from typing import TYPE_CHECKING, Any, Final

import httpx
from homeassistant.core import callback
from langchain_core.messages import AIMessage
from langgraph.errors import GraphRecursionError

from .agent.assembler import (
    ContextAssembler,
    DocumentChunk,
    TurnContext,
    fence_chunks,
)
from .agent.budget import SHARES, TRIM_TO
from .agent.entity_index import EntityIndex
from .agent.fast_path import (
    async_record_fast_turn,
    fast_context,
    takes_fast_path,
)
from .agent.graph import (
    AgentState,
    TurnRuntime,
    message_text,
    new_turn_id,
    partial_text,
)
from .agent.home import describe_home, describe_moment
from .agent.prefix import CachedPrefix
from .const import LOGGER, RECURSION_LIMIT
from .i18n import Texts, async_texts
from .model_queue import ModelQueue
from .model_server import (
    Backend,
    ModelNotFound,
    ServerTimeout,
    ServerUnreachable,
)
from .models import (
    AfterReply,
    DocumentSource,
    Interaction,
    MemorySource,
    Speaker,
    TokenFigures,
    TurnResult,
)
from .policy.people import NOT_KNOWN_SOURCE
from .security.links import filter_reply, find_links
from .stats import TurnStats
from .store.database import Session
from .tools.registry import ToolContext

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Sequence

    from homeassistant.core import HomeAssistant
    from langchain_core.messages import AnyMessage, ToolCall
    from langchain_core.runnables import Runnable
    from langgraph.graph.state import CompiledStateGraph

    from .agent.budget import Budget
    from .agent.fast_path import FastPath
    from .agent.satellite import Satellite
    from .executor import BlockingExecutor
    from .model_server import ModelBackend
    from .monitor import ServerMonitor
    from .policy.rules import Policy
    from .sessions import SessionKeeper
    from .store.checkpoints import CheckpointStore
    from .store.database import Database
    from .tokens import TokenCounter
    from .tools.registry import ToolOutcome, ToolRegistry

    # Starts background work (runtime's: the entry's unload ends it).
    type Spawn = Callable[[Coroutine[Any, Any, None], str], object]
    # The vision model with the tools bound, and without.
    type VisionModels = tuple[
        Runnable[list[AnyMessage], AIMessage], Runnable[list[AnyMessage], AIMessage]
    ]

# Automatic document context: one retrieval per turn, given up after this long.
RETRIEVAL_TIMEOUT: Final = 3.0
AUTO_CONTEXT_HITS: Final = 5
AUTO_CONTEXT_MIN_SCORE: Final = 0.45
# Characters a profile token takes at most (the profile is read by characters).
PROFILE_CHARS_PER_TOKEN: Final = 4
# What an answer stream that ended without a chunk raises: LangChain's
# astream (whichever server), and the graph's and ChatOllama's own words.
_EMPTY_STREAM: Final = ("No generation chunks were returned", "No data received")


class Assistant:
    """Runs turns of the agent for any chat, Telegram or otherwise."""

    def __init__(  # noqa: PLR0913 - keyword-only wiring
        self,
        hass: HomeAssistant,
        *,
        graph: CompiledStateGraph[AgentState, TurnRuntime, AgentState, AgentState],
        model: Runnable[list[AnyMessage], AIMessage],
        registry: ToolRegistry,
        database: Database,
        checkpoints: CheckpointStore,
        model_name: str,
        health: ServerMonitor,
        num_ctx: int,
        session_timeout: float,
        request_timeout: float,
        model_slots: asyncio.Semaphore,
        policy: Policy | None = None,
        executor: BlockingExecutor | None = None,
        model_queue: ModelQueue | None = None,
        backend: ModelBackend | None = None,
        prefix: CachedPrefix | None = None,
        history: SessionKeeper | None = None,
        memory: MemorySource | None = None,
        documents: DocumentSource | None = None,
        fast_path: FastPath | None = None,
        vision_models: VisionModels | None = None,
        vision_model_name: str | None = None,
        after_reply: Sequence[AfterReply] = (),
        spawn: Spawn | None = None,
    ) -> None:
        """Keep what every turn needs; ``backend`` absent: the monitor's.

        ``prefix`` absent: the system prompt and this registry's tools.
        ``history`` keeps the turns and summaries; ``memory`` the profiles;
        ``documents`` the index for the automatic context (with an embedding
        model). ``fast_path`` answers what HA's intent recognizer understands
        (option fast_path). ``vision_models`` read photos (option
        vision_model): with the tools bound, and without (for a model that
        cannot call tools). ``after_reply`` is the background work after a
        reply, started by ``spawn`` (runtime makes the entry's unload end it
        before the storage closes).
        """
        self.hass = hass
        self.graph = graph
        self.model = model
        self.registry = registry
        self.database = database
        self.checkpoints = checkpoints
        self.model_name = model_name
        self.num_ctx = num_ctx
        self.session_timeout = session_timeout
        self.request_timeout = request_timeout
        self.model_slots = model_slots
        # The one health tracker of the model server: told how each call
        # went (it logs outages once and raises repairs).
        self.health = health
        # The model server: what is loading, and what a failed call means.
        self.backend: ModelBackend = backend or health.backend
        self.policy = policy
        # The integration's own pool for blocking work (the firewall on chunks).
        self.executor = executor
        self.memory = memory
        # Background work started after the reply was sent (never before).
        self.after_reply: list[AfterReply] = list(after_reply)
        self.spawn: Spawn = spawn or hass.async_create_background_task
        self.history = history
        self.documents = documents
        # The system prompt with the catalogue and the tool schemas: the same
        # bytes on every request, shared with the background calls.
        self.prefix = prefix or CachedPrefix(
            num_ctx=num_ctx, tool_schemas=registry.schemas()
        )
        # Background calls (summaries, learning) wait for quiet.
        self.model_queue = model_queue or ModelQueue(model_slots)
        # The words that point at each entity, kept between turns.
        self.entities = EntityIndex()
        # Recent latencies and errors, for the sensors and diagnostics.
        self.stats = TurnStats()
        self.vision_models = vision_models
        self.vision_model_name = vision_model_name
        self.fast_path = fast_path

    @property
    def system_prompt(self) -> str:
        """Return the system prompt as the next request sends it."""
        return self.prefix.system_prompt

    @property
    def budget(self) -> Budget:
        """Return how the next request's context window is divided."""
        return self.prefix.budget

    @property
    def counter(self) -> TokenCounter:
        """Return the token counter that learns from the server's counts."""
        return self.prefix.counter

    async def async_new_session(self, conversation_key: str) -> None:
        """Start a fresh conversation for this chat."""
        await self.database.async_new_session(conversation_key, time.time())
        if self.history is not None:
            # The ended session's summary opens the next one; written in the
            # background when the chats are quiet, never in a reply's way.
            self.history.async_schedule_sweep()

    async def async_turn(  # noqa: PLR0913 - the message and how it came
        self,
        conversation_key: str,
        text: str,
        speaker: Speaker,
        *,
        on_text: Callable[[str], None] | None = None,
        images: Sequence[str] = (),
        sources: Sequence[str] = (),
        model: Runnable[list[AnyMessage], AIMessage] | None = None,
        on_tool: Callable[[ToolCall, ToolOutcome], None] | None = None,
        satellite: Satellite | None = None,
    ) -> TurnResult:
        """Answer one message; never raises for model, tool or storage trouble.

        ``on_text`` gets the answer so far while the model writes it, through
        the same filters as the final reply. Background model calls wait
        until the turn is over (and the chats were quiet for a while).
        ``images`` (base64) go to the vision model with this message only;
        ``sources`` name untrusted text the message carries (text in a photo);
        ``model`` answers instead of the chat model (the vision model);
        ``on_tool`` is told of each tool call and its outcome (Assist's chat
        log); ``satellite`` is the Assist device that asked (its area, its
        timers, instructions an automation added).
        """
        async with self.model_queue.turn():
            return await self._async_turn(
                conversation_key,
                text,
                speaker,
                on_text,
                images=tuple(images),
                sources=tuple(sources),
                model=model,
                on_tool=on_tool,
                satellite=satellite,
            )

    async def async_refresh_catalogue(self) -> None:
        """Bring the catalogue and the system prompt up to date without a turn."""
        await self.entities.async_rank(self.hass, "")
        # The catalogue is refreshed by ranking; the prompt follows it.
        self.prefix.refresh(*self.entities.catalogue())

    async def _async_turn(  # noqa: PLR0913, PLR0915 - the message and how it came
        self,
        conversation_key: str,
        text: str,
        speaker: Speaker,
        on_text: Callable[[str], None] | None,
        *,
        images: tuple[str, ...] = (),
        sources: tuple[str, ...] = (),
        model: Runnable[list[AnyMessage], AIMessage] | None = None,
        on_tool: Callable[[ToolCall, ToolOutcome], None] | None = None,
        satellite: Satellite | None = None,
    ) -> TurnResult:
        stored = True
        try:
            session = await self.database.async_current_session(
                conversation_key, time.time(), self.session_timeout
            )
        except sqlite3.Error as err:
            # The database is locked, full or damaged: answer anyway, as a new
            # conversation that is not saved (the outage is logged once).
            LOGGER.debug("Answering %s without history: %s", conversation_key, err)
            stored = False
            session = Session(
                thread_id=f"{conversation_key}:unsaved:{new_turn_id()}",
                started_at=time.time(),
                is_new=True,
            )
            self.checkpoints.skip_saving(session.thread_id)
        turn_id = new_turn_id()
        texts = await async_texts(self.hass, speaker.language)
        if stored and (
            fast := await self._async_fast_turn(
                conversation_key, session, text, speaker, texts, images, sources
            )
        ):
            return fast
        runtime = TurnRuntime(
            model=self.model,
            registry=self.registry,
            tools=ToolContext(
                hass=self.hass,
                database=self.database,
                person=speaker.person,
                ha_user_id=speaker.ha_user_id,
                chat_id=speaker.chat_id,
                conversation_key=conversation_key,
                policy=self.policy,
                profile_key=speaker.profile_key,
                user_name=speaker.name,
                may_act=speaker.may_act,
                texts=texts,
                device_id=satellite.device_id if satellite else None,
                default_area=satellite.area_id if satellite else None,
            ),
            model_slots=self.model_slots,
            request_timeout=self.request_timeout,
            loading=self._async_model_loading,
            on_tool=on_tool,
        )
        text_sources: list[str] = []
        if not speaker.may_act:
            # Someone the household did not let in wrote this: outside text,
            # for as long as the message stays in the prompt.
            runtime.tools.mark_tainted(NOT_KNOWN_SOURCE)
            text_sources.append(NOT_KNOWN_SOURCE)
        # Instructions an automation added to an Assist request: outside text.
        for source in (*sources, *(satellite.sources if satellite else ())):
            # Text in a photo can carry instructions: outside text too.
            runtime.tools.mark_tainted(source)
            text_sources.append(source)
        if model is not None:
            runtime.model = model
        runtime.images = images
        entities = await self.entities.async_rank(self.hass, text)
        self.prefix.refresh(*self.entities.catalogue())
        runtime.assembler = ContextAssembler(
            budget=self.budget,
            counter=self.counter,
            system_prompt=self.system_prompt,
            turn=TurnContext(
                header=[
                    *describe_moment(self.hass, speaker.name),
                    *(satellite.header() if satellite else ()),
                ],
                session=describe_home(self.hass),
                entities=entities,
                profile=await self._async_profile(speaker, text),
                documents=await self._async_documents(text),
                catalogued=self.prefix.catalogued,
            ),
        )

        def shown(raw: str) -> str:
            # Links only from this turn's search results (or the user's message).
            return filter_reply(
                raw,
                [*runtime.tools.allowed_urls, *find_links(text)],
                texts("link_removed"),
            )

        if on_text is not None:
            check = self.registry.reply_check

            def partial(raw: str) -> None:
                if draft := shown(partial_text(raw, check)).strip():
                    on_text(draft)

            runtime.on_text = partial
        state: AgentState = {
            "turn_id": turn_id,
            "text": text,
            "text_sources": text_sources,
            "summary_update": None,
        }
        if stored and self.history is not None:
            opening, update = await self.history.async_openings(
                session, conversation_key
            )
            state["session_opening"] = opening
            state["summary_update"] = update
        config: Any = {
            "configurable": {"thread_id": session.thread_id},
            "recursion_limit": RECURSION_LIMIT,
        }
        try:
            result = await self.graph.ainvoke(
                state, config, context=runtime, durability="exit"
            )
        except Exception as err:  # noqa: BLE001 - every failure gets a reply
            # A restricted action proposed before the failure still gets its
            # confirmation request: the user asked for it, the policy resolved it.
            self.checkpoints.turn_ended(session.thread_id)
            return TurnResult(
                self._explain(err, texts),
                ok=False,
                model_seconds=sum(runtime.model_calls),
                proposals=tuple(runtime.tools.proposals),
                context_tokens=runtime.context_tokens,
                tokens=TokenFigures.from_usage(runtime.usage),
            )
        self.checkpoints.turn_ended(session.thread_id)
        self.health.succeeded()
        if stored:
            self.hass.async_create_background_task(
                self.checkpoints.async_prune(session.thread_id),
                f"prune checkpoints of {conversation_key}",
            )
        reply = shown(_answer(result.get("messages", []), turn_id, texts))
        room = runtime.assembler.history_room(self.counter.count(text))
        if runtime.tools.notices:
            reply = "\n\n".join([reply, *dict.fromkeys(runtime.tools.notices)])
        # Nothing to learn from or keep when the database is unavailable.
        interaction = (
            Interaction(
                conversation_key=conversation_key,
                session_id=session.id,
                thread_id=session.thread_id,
                speaker=speaker,
                user_text=text,
                reply=reply,
                tainted=runtime.tools.tainted,
                turn_id=turn_id,
                history_pressure=runtime.assembler.history_tokens(
                    result.get("messages", []), result.get("opening", "")
                )
                / max(1, room),
                history_target=int(room * TRIM_TO),
            )
            if stored
            else None
        )
        if interaction is not None and self.history is not None:
            # Before the reply goes out: whoever got the answer finds it in
            # the history (the checkpoint already has it), even if Home
            # Assistant dies right after sending. The after-reply hook tries
            # again if this failed (it is written once per turn id).
            await self.history.async_store_turn(interaction)
        return TurnResult(
            reply,
            ok=True,
            model_seconds=sum(runtime.model_calls),
            proposals=tuple(runtime.tools.proposals),
            context_tokens=runtime.context_tokens,
            interaction=interaction,
            taint_sources=tuple(runtime.tools.taint_sources),
            tokens=TokenFigures.from_usage(runtime.usage),
        )

    async def _async_fast_turn(  # noqa: PLR0913, PLR0917 - the message and how it came
        self,
        conversation_key: str,
        session: Session,
        text: str,
        speaker: Speaker,
        texts: Texts,
        images: Sequence[str],
        sources: Sequence[str],
    ) -> TurnResult | None:
        """Answer through HA's intent recognizer, or None for the model."""
        if self.fast_path is None or not takes_fast_path(
            images=images, sources=sources, may_act=speaker.may_act
        ):
            return None
        ctx = fast_context(
            self.hass,
            database=self.database,
            policy=self.policy,
            conversation_key=conversation_key,
            speaker=speaker,
            texts=texts,
        )
        answer = await self.fast_path.async_answer(text, texts.language, ctx)
        if answer is None:
            return None
        return await async_record_fast_turn(
            self.graph,
            self.history,
            conversation_key=conversation_key,
            session=session,
            text=text,
            speaker=speaker,
            answer=answer,
        )

    async def _async_model_loading(self) -> bool:
        """Tell whether the server is still loading the model (Ollama's /api/ps)."""
        return await self.backend.async_loading(self.model_name)

    async def _async_profile(self, speaker: Speaker, text: str) -> str:
        """Return the speaker's relevant profile entries, or nothing if unavailable."""
        if self.memory is None:
            return ""
        try:
            return await self.memory.async_context(
                speaker.profile_key, text, self._profile_chars()
            )
        except sqlite3.Error as err:
            LOGGER.warning("Could not read the profile: %s", err)
            return ""

    def _profile_chars(self) -> int:
        """Return the most profile text worth reading, lent room included."""
        room = max(0, self.budget.limit - self.budget.fixed)
        share = SHARES["profile"] + SHARES["documents"]
        return int(room * share * PROFILE_CHARS_PER_TOKEN)

    async def _async_documents(self, text: str) -> list[DocumentChunk]:
        """Return the chunks relevant enough to enter the context by themselves."""
        if self.documents is None:
            return []
        try:
            async with asyncio.timeout(RETRIEVAL_TIMEOUT):
                hits = await self.documents.async_search(text, AUTO_CONTEXT_HITS)
        except Exception as err:  # noqa: BLE001 - the answer comes without them
            LOGGER.debug("Automatic document context skipped: %s", err)
            return []
        chunks = [
            DocumentChunk(title=hit.title, content=hit.content, trusted=hit.trusted)
            for hit in hits
            if hit.score >= AUTO_CONTEXT_MIN_SCORE
        ]
        if self.executor is None or all(chunk.trusted for chunk in chunks):
            return chunks
        # The firewall takes milliseconds per chunk: not on the event loop.
        return await self.executor.run(fence_chunks, chunks)

    @callback
    def async_after_reply(self, result: TurnResult) -> None:
        """Start the background work of a turn; call it after the reply was sent."""
        self.model_queue.reply_sent()
        if result.interaction is None:
            return
        for hook in self.after_reply:
            self.spawn(hook(result.interaction), "ha_personal_assistant after reply")

    def server_key(self, key: str) -> str:
        """Return the text key that names this kind of server (Ollama's: plain)."""
        if self.backend.backend is Backend.OPENAI_COMPATIBLE:
            return f"{key}_openai"
        return key

    def _explain(self, err: Exception, texts: Texts) -> str:  # noqa: PLR0911 - a reply per failure
        """Turn a failure into a short reply, logging each outage once."""
        if isinstance(err, GraphRecursionError):
            return texts("too_many_steps")
        if isinstance(err, TimeoutError | httpx.TimeoutException):
            self.health.failed("no answer within the request timeout")
            return texts("model_timeout")
        if isinstance(err, ConnectionError | httpx.TransportError):
            self.health.failed(f"connection failed ({type(err).__name__})")
            return texts(self.server_key("unreachable"))
        if (error := self.backend.chat_error(err)) is not None:
            if isinstance(error, ModelNotFound):
                self.health.failed(f"model {self.model_name} not found")
                return texts(self.server_key("model_missing"), model=self.model_name)
            self.health.failed(str(error), error)
            if isinstance(error, ServerTimeout):
                return texts("model_timeout")
            if isinstance(error, ServerUnreachable):
                return texts(self.server_key("unreachable"))
            return texts("model_error")
        if isinstance(err, ValueError) and any(
            words in str(err) for words in _EMPTY_STREAM
        ):
            self.health.failed("the stream ended without data")
            return texts("model_error")
        LOGGER.exception("A turn failed", exc_info=err)
        return texts("internal_error")


def _answer(messages: list[AnyMessage], turn_id: str, texts: Texts) -> str:
    """Return the final answer of the turn ``turn_id``."""
    start = next((i for i, m in enumerate(messages) if m.id == turn_id), 0)
    for message in reversed(messages[start:]):
        if isinstance(message, AIMessage) and not message.tool_calls:
            if text := message_text(message):
                return text
            break
    return texts("gave_up")
