"""Typed runtime data of a config entry."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from homeassistant.config_entries import ConfigEntry

if TYPE_CHECKING:
    import asyncio

    from .agent.warmup import PrefixWarmer
    from .assistant import Assistant
    from .documents import DocumentIndex
    from .monitor import ServerMonitor
    from .store.shared import SharedStorage
    from .tasks.manager import TaskManager
    from .telegram.gateway import TelegramGateway


@dataclass(slots=True)
class PersonalAssistantData:
    """What a loaded entry runs on."""

    assistant: Assistant
    gateway: TelegramGateway
    storage: SharedStorage
    # Watches the model server for the model status sensor and the repairs.
    monitor: ServerMonitor | None = None
    # Documents and vectors; None without an embedding model.
    documents: DocumentIndex | None = None
    # Scheduled pruning and summaries in progress (they hold the database).
    maintenance: set[asyncio.Task[None]] = field(default_factory=set)
    # Reminders, timers and watches.
    tasks: TaskManager | None = None
    # Keeps the prompt prefix in the model server's cache (option warm_cache).
    warmer: PrefixWarmer | None = None


type PersonalAssistantConfigEntry = ConfigEntry[PersonalAssistantData]
