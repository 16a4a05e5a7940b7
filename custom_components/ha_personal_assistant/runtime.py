"""Build the running assistant; imported off the event loop (LangChain is heavy)."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from homeassistant.core import callback
from homeassistant.helpers.event import async_track_time_interval

from .agent.background import BackgroundModel
from .agent.fast_path import FastPath
from .agent.graph import async_read_thread, bind_model, build_graph
from .agent.prefix import CachedPrefix
from .agent.warmup import async_setup_warmer
from .assistant import Assistant
from .const import (
    BACKGROUND_NUM_PREDICT,
    CONF_ADMIN_USER_IDS,
    CONF_ALLOWED_USER_IDS,
    CONF_CONFIRMATION_TIMEOUT,
    CONF_EMBEDDING_MODEL,
    CONF_FAST_PATH,
    CONF_HA_TOOLS,
    CONF_KEEP_ALIVE,
    CONF_MODEL,
    CONF_NIGHT_HOURS,
    CONF_NOTICE_USER_IDS,
    CONF_NUM_CTX,
    CONF_NUM_PREDICT,
    CONF_OPEN_MINUTES,
    CONF_REQUEST_TIMEOUT,
    CONF_SESSION_TIMEOUT,
    CONF_STT_ENGINE,
    CONF_USER_MAPPING,
    CONF_VISION_MODEL,
    CONF_VOICE_REPLIES,
    CONF_WARM_CACHE,
    CONF_WEB_SEARCH,
    DEFAULT_CONFIRMATION_TIMEOUT,
    DEFAULT_FAST_PATH,
    DEFAULT_HA_TOOLS,
    DEFAULT_KEEP_ALIVE,
    DEFAULT_NIGHT_HOURS,
    DEFAULT_NUM_CTX,
    DEFAULT_NUM_PREDICT,
    DEFAULT_OPEN_MINUTES,
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_SESSION_TIMEOUT,
    DEFAULT_VOICE_REPLIES,
    DEFAULT_WARM_CACHE,
    DEFAULT_WEB_SEARCH,
    DOCUMENTS_DIR,
    LOGGER,
    MAX_CONCURRENT_MODEL_CALLS,
)
from .data import PersonalAssistantData
from .documents.index import DocumentIndex
from .media import MediaSettings, prepare_transfer_dir, transfer_dir
from .memory.learner import Learner
from .memory.profile import ProfileMemory
from .model_queue import ModelQueue
from .model_server import ChatSettings
from .monitor import ServerMonitor
from .policy.rules import Policy
from .security.confirmations import ConfirmationManager
from .sessions import SessionKeeper
from .store.retention import async_prune
from .store.storage import storage_dir
from .store.vectors import VectorStore
from .tasks.briefing import Briefer
from .tasks.manager import TaskManager
from .tasks.notices import Notices, parse_night
from .tasks.tools import task_tools
from .telegram.gateway import TelegramGateway
from .telegram.outbox import Outbox
from .tools.assist_api import ha_tools, timer_runners
from .tools.documents import DOCUMENTS_OFF, document_tools
from .tools.ha import HA_TOOLS
from .tools.memory import memory_tools
from .tools.recorder import RECORDER_TOOLS
from .tools.registry import ToolRegistry
from .tools.web import WEB_SEARCH_OFF, web_tools

# Ended and idle sessions get their summary within this time.
SUMMARY_SWEEP_INTERVAL: Final = timedelta(minutes=10)
# Old sessions, checkpoints and log rows are pruned this often.
RETENTION_INTERVAL: Final = timedelta(hours=6)

# HA knowledge (entity names, areas, automations) is re-indexed this often.
HA_KNOWLEDGE_INTERVAL: Final = timedelta(days=1)

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from homeassistant.core import HomeAssistant
    from langchain_core.messages import AIMessage, AnyMessage
    from langchain_core.runnables import Runnable

    from .data import PersonalAssistantConfigEntry
    from .model_server import ModelBackend
    from .store.storage import Storage


def _bound_models(
    backend: ModelBackend,
    entry: PersonalAssistantConfigEntry,
    options: dict[str, Any],
    schemas: list[dict[str, Any]],
) -> tuple[
    Runnable[list[AnyMessage], AIMessage],
    Runnable[list[AnyMessage], AIMessage],
    Runnable[list[AnyMessage], AIMessage],
]:
    """Return the chat, background and warm-up models, tools bound; blocking.

    The clients and bind_tools import LangChain's modules on first use: both
    run in the executor, never on the event loop. Summaries and learning use
    the same model, settings and tools (the same cached prefix on the server)
    with a smaller output cap; the prefix warm-up with a cap of one token.
    """
    settings = chat_settings(options)
    name = entry.data[CONF_MODEL]
    chat = backend.build_chat_model(name, settings)
    background = backend.build_chat_model(
        name, replace(settings, num_predict=BACKGROUND_NUM_PREDICT)
    )
    warmup = backend.build_chat_model(name, replace(settings, num_predict=1))
    return (
        bind_model(chat, schemas),
        bind_model(background, schemas),
        bind_model(warmup, schemas),
    )


def chat_settings(options: dict[str, Any]) -> ChatSettings:
    """Return how every chat request is made, from the entry's options."""
    return ChatSettings(
        num_ctx=int(options.get(CONF_NUM_CTX, DEFAULT_NUM_CTX)),
        num_predict=int(options.get(CONF_NUM_PREDICT, DEFAULT_NUM_PREDICT)),
        keep_alive=int(options.get(CONF_KEEP_ALIVE, DEFAULT_KEEP_ALIVE)),
        timeout=float(options.get(CONF_REQUEST_TIMEOUT, DEFAULT_REQUEST_TIMEOUT)),
    )


def _vision_models(
    backend: ModelBackend,
    options: dict[str, Any],
    schemas: list[dict[str, Any]],
) -> tuple[
    Runnable[list[AnyMessage], AIMessage], Runnable[list[AnyMessage], AIMessage]
]:
    """Return the vision model with the tools bound and without; blocking.

    The same server as the chat model: photos go as image parts of the
    message (Ollama's ``images``, OpenAI's ``image_url`` data URLs).
    """
    model = backend.build_chat_model(
        str(options[CONF_VISION_MODEL]), chat_settings(options)
    )
    return bind_model(model, schemas), model


async def _async_setup_media(
    hass: HomeAssistant,
    entry: PersonalAssistantConfigEntry,
    storage: Storage,
    backend: ModelBackend,
    schemas: list[dict[str, Any]],
) -> tuple[
    MediaSettings,
    tuple[Runnable[list[AnyMessage], AIMessage], Runnable[list[AnyMessage], AIMessage]]
    | None,
]:
    """Read the voice and photo options; prepare the vision models and folder."""
    options: dict[str, Any] = dict(entry.options)
    media = MediaSettings(
        stt_engine=options.get(CONF_STT_ENGINE) or None,
        voice_replies=bool(options.get(CONF_VOICE_REPLIES, DEFAULT_VOICE_REPLIES)),
        vision_model=options.get(CONF_VISION_MODEL) or None,
    )
    vision_models = (
        await storage.executor.run(_vision_models, backend, options, schemas)
        if media.vision_model
        else None
    )
    # Files pass through this folder on their way in and out, and are
    # deleted at once; what a crash left there goes now. telegram_bot's
    # download_file and send_voice read and write only allowed folders.
    folder = transfer_dir(hass)
    if left := await storage.executor.run(prepare_transfer_dir, folder):
        LOGGER.debug("Removed %s file(s) left in %s", len(left), folder)
    hass.config.allowlist_external_dirs.add(str(folder))
    entry.async_on_unload(
        lambda: hass.config.allowlist_external_dirs.discard(str(folder))
    )
    return media, vision_models


async def async_build(  # noqa: PLR0915 - the wiring of every part
    hass: HomeAssistant,
    entry: PersonalAssistantConfigEntry,
    storage: Storage,
    backend: ModelBackend,
) -> PersonalAssistantData:
    """Create the model, graph, assistant and gateway of an entry."""
    options: dict[str, Any] = dict(entry.options)
    num_ctx = int(options.get(CONF_NUM_CTX, DEFAULT_NUM_CTX))
    request_timeout = float(options.get(CONF_REQUEST_TIMEOUT, DEFAULT_REQUEST_TIMEOUT))
    # One bound on model calls: a home Ollama server answers one or two
    # requests at a time; more would only queue there, uncancellable.
    # Background model calls wait for quiet and give way to turns.
    model_slots = asyncio.Semaphore(MAX_CONCURRENT_MODEL_CALLS)
    model_queue = ModelQueue(model_slots)
    # Profiles live in the database; remember and forget come after the
    # HA tools, always in the same order (the prompt prefix must not change).
    memory = ProfileMemory(storage.database)
    # web_search only when switched on; a call to it anyway gets a polite no.
    web_on = bool(options.get(CONF_WEB_SEARCH, DEFAULT_WEB_SEARCH))
    # Documents only with an embedding model; search_documents says so otherwise.
    documents = _document_index(hass, entry, storage, backend)
    disabled: dict[str, str] = {}
    if not web_on:
        disabled["web_search"] = WEB_SEARCH_OFF
    if documents is None:
        disabled["search_documents"] = DOCUMENTS_OFF
    policy = Policy.from_options(options)
    confirmation_timeout = float(
        options.get(CONF_CONFIRMATION_TIMEOUT, DEFAULT_CONFIRMATION_TIMEOUT)
    )
    confirmations = ConfirmationManager(
        hass,
        storage.database,
        timeout=confirmation_timeout,
        admins=frozenset(
            f"telegram:{int(user_id)}"
            for user_id in options.get(CONF_ADMIN_USER_IDS, [])
        ),
        policy=policy,
        # A confirmed timer action runs HA's timer tool on the satellite.
        internal=timer_runners(hass),
    )
    # What sends texts and asks for Confirm on Telegram: the tasks, the
    # notices and the gateway (built last, with them) all use it.
    outbox = Outbox(
        hass,
        confirmations=confirmations,
        allowed_user_ids=frozenset(
            int(user_id) for user_id in options.get(CONF_ALLOWED_USER_IDS, [])
        ),
        user_mapping=options.get(CONF_USER_MAPPING, {}),
    )
    # Reminders, timers and watches; their tools come last (a fixed order).
    # Tasks tell their makers through the outbox and ask through the same
    # confirmations as a turn.
    tasks = TaskManager(
        hass,
        entry,
        storage.database,
        policy=policy,
        confirmation_timeout=confirmation_timeout,
        gateway=outbox,
        confirmations=confirmations,
        briefer=Briefer(
            hass,
            backend=backend,
            model_name=entry.data[CONF_MODEL],
            settings=chat_settings(options),
            model_queue=model_queue,
            run_blocking=storage.executor.run,
            timeout=request_timeout,
        ),
    )
    registry = ToolRegistry(
        [
            *HA_TOOLS,
            *RECORDER_TOOLS,
            *(web_tools(storage.executor) if web_on else ()),
            *(document_tools(documents) if documents is not None else ()),
            *memory_tools(memory),
            *task_tools(tasks),
            # Last, sorted, fixed schemas: switching them on changes the
            # cached prefix once.
            *(ha_tools() if options.get(CONF_HA_TOOLS, DEFAULT_HA_TOOLS) else ()),
        ],
        disabled=disabled,
    )
    bound, bound_background, bound_warmup = await storage.executor.run(
        _bound_models, backend, entry, options, registry.schemas()
    )
    session_timeout = 60.0 * float(
        options.get(CONF_SESSION_TIMEOUT, DEFAULT_SESSION_TIMEOUT)
    )
    graph = build_graph(storage.checkpoints.saver)
    # The system prompt and the tools: the same bytes at the start of every
    # request, turns and background calls alike (the server's cache).
    prefix = CachedPrefix(num_ctx=num_ctx, tool_schemas=registry.schemas())
    # Summaries and learning: the same prefix, a smaller output cap, and
    # only when the chats are quiet.
    background = BackgroundModel(
        model=bound_background,
        prefix=prefix,
        model_queue=model_queue,
        request_timeout=request_timeout,
    )
    # Scheduled work that holds the database: ended before the storage closes.
    maintenance: set[asyncio.Task[None]] = set()
    _async_maintain = _maintainer(hass, entry, maintenance)
    # History and summaries: written after replies and when the chats are quiet.
    history = SessionKeeper(
        hass,
        storage.database,
        background=background,
        read_thread=partial(async_read_thread, graph),
        session_timeout=session_timeout,
        spawn=_async_maintain,
    )
    # Profile memory: read into each turn's context; learned from after replies.
    learner = Learner(hass, entry, memory, background, spawn=_async_maintain)
    media, vision_models = await _async_setup_media(
        hass, entry, storage, backend, registry.schemas()
    )
    # The one health tracker of the model server, told how each chat call went.
    monitor = ServerMonitor(hass, entry, backend)
    assistant = Assistant(
        hass,
        graph=graph,
        model=bound,
        registry=registry,
        database=storage.database,
        checkpoints=storage.checkpoints,
        model_name=entry.data[CONF_MODEL],
        health=monitor,
        backend=backend,
        num_ctx=num_ctx,
        session_timeout=session_timeout,
        request_timeout=request_timeout,
        model_slots=model_slots,
        policy=policy,
        executor=storage.executor,
        model_queue=model_queue,
        prefix=prefix,
        history=history,
        memory=memory,
        documents=documents,
        fast_path=(
            FastPath(hass, registry, policy)
            if bool(options.get(CONF_FAST_PATH, DEFAULT_FAST_PATH))
            else None
        ),
        vision_models=vision_models,
        vision_model_name=media.vision_model if vision_models else None,
        # After the reply was sent, never before; the unload ends them (and
        # waits for them) before the storage closes.
        after_reply=(history.async_after_reply, learner.async_after_reply),
        spawn=_async_maintain,
    )
    # Settle what a restart interrupted before anything new can be decided.
    await confirmations.async_recover()
    notices = Notices(
        hass,
        confirmations=confirmations,
        gateway=outbox,
        policy=policy,
        night=parse_night(options.get(CONF_NIGHT_HOURS, DEFAULT_NIGHT_HOURS)),
        open_minutes=float(options.get(CONF_OPEN_MINUTES, DEFAULT_OPEN_MINUTES)),
        listed=frozenset(
            int(user_id) for user_id in options.get(CONF_NOTICE_USER_IDS, [])
        ),
        user_mapping=options.get(CONF_USER_MAPPING, {}),
    )
    await notices.async_start()
    entry.async_on_unload(notices.async_stop)
    # /tasks lists the tasks; files sent are added to the documents.
    gateway = TelegramGateway(
        hass,
        entry,
        assistant,
        outbox=outbox,
        tasks=tasks,
        notices=notices,
        documents=documents,
        media=media,
        executor=storage.executor,
    )

    @callback
    def _async_sweep(_now: datetime) -> None:
        history.async_schedule_sweep()

    entry.async_on_unload(
        async_track_time_interval(
            hass,
            _async_sweep,
            SUMMARY_SWEEP_INTERVAL,
            name="ha_personal_assistant summaries",
            cancel_on_shutdown=True,
        )
    )

    async def _async_prune_storage() -> None:
        try:
            await async_prune(
                storage.database,
                storage.checkpoints,
                session_timeout=assistant.session_timeout,
            )
        except (sqlite3.Error, TimeoutError) as err:
            # The file is busy or full: the next round tries again.
            LOGGER.debug("Could not prune the storage: %s", err)

    @callback
    def _async_retention(_now: datetime) -> None:
        _async_maintain(_async_prune_storage(), "ha_personal_assistant retention")

    entry.async_on_unload(
        async_track_time_interval(
            hass,
            _async_retention,
            RETENTION_INTERVAL,
            name="ha_personal_assistant retention",
            cancel_on_shutdown=True,
        )
    )
    entry.async_on_unload(learner.async_start())
    # Turns logged before a restart and not learned from yet.
    _async_maintain(_async_requeue(learner), "ha_personal_assistant learning queue")
    if documents is not None:
        _async_start_documents(hass, entry, documents)
    warmer = (
        async_setup_warmer(hass, entry, assistant, bound_warmup, _async_maintain)
        if options.get(CONF_WARM_CACHE, DEFAULT_WARM_CACHE)
        else None
    )
    return PersonalAssistantData(
        monitor=monitor,
        warmer=warmer,
        assistant=assistant,
        gateway=gateway,
        storage=storage,
        documents=documents,
        maintenance=maintenance,
        tasks=tasks,
    )


def _maintainer(
    hass: HomeAssistant,
    entry: PersonalAssistantConfigEntry,
    maintenance: set[asyncio.Task[None]],
) -> Callable[..., asyncio.Task[None]]:
    """Return what starts background work that the unload ends, in ``maintenance``."""

    @callback
    def _async_maintain(
        coro: Coroutine[Any, Any, None], name: str, *, eager_start: bool = True
    ) -> asyncio.Task[None]:
        task = entry.async_create_background_task(
            hass, coro, name, eager_start=eager_start
        )
        maintenance.add(task)
        task.add_done_callback(maintenance.discard)
        return task

    return _async_maintain


async def _async_requeue(learner: Learner) -> None:
    await learner.async_requeue()


def _document_index(
    hass: HomeAssistant,
    entry: PersonalAssistantConfigEntry,
    storage: Storage,
    backend: ModelBackend,
) -> DocumentIndex | None:
    """Return the entry's document index, or None without an embedding model."""
    model: str | None = entry.data.get(CONF_EMBEDDING_MODEL)
    if not model:
        return None
    return DocumentIndex(
        hass,
        entry,
        storage.database,
        VectorStore(storage.database, storage.executor),
        backend=backend,
        model=model,
        folder=storage_dir(hass) / DOCUMENTS_DIR,
    )


def _async_start_documents(
    hass: HomeAssistant, entry: PersonalAssistantConfigEntry, documents: DocumentIndex
) -> None:
    """Index files and HA knowledge in the background, then daily."""
    documents.start()

    @callback
    def _async_refresh(_now: datetime) -> None:
        documents.refresh_ha()

    entry.async_on_unload(
        async_track_time_interval(
            hass,
            _async_refresh,
            HA_KNOWLEDGE_INTERVAL,
            name="ha_personal_assistant HA knowledge",
            cancel_on_shutdown=True,
        )
    )
