"""Typed runtime data of a config entry."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from homeassistant.config_entries import ConfigEntry

if TYPE_CHECKING:
    import asyncio

    from .agent.warmup import PrefixWarmer
    from .assistant import Assistant
    from .documents.index import DocumentIndex
    from .monitor import ServerMonitor
    from .store.storage import Storage
    from .tasks.manager import TaskManager
    from .telegram.gateway import TelegramGateway


@dataclass(slots=True)
class PersonalAssistantData:
    """What a loaded entry runs on."""

    assistant: Assistant
    gateway: TelegramGateway
    storage: Storage
    # The model server's one health tracker: the model status sensor, the
    # repairs, and how the chat calls went.
    monitor: ServerMonitor
    # Documents and vectors; None without an embedding model.
    documents: DocumentIndex | None = None
    # Scheduled pruning and summaries in progress (they hold the database).
    maintenance: set[asyncio.Task[None]] = field(default_factory=set)
    # Reminders, timers and watches.
    tasks: TaskManager | None = None
    # Keeps the prompt prefix in the model server's cache (option warm_cache).
    warmer: PrefixWarmer | None = None


type PersonalAssistantConfigEntry = ConfigEntry[PersonalAssistantData]
