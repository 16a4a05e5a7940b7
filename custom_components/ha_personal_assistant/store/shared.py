"""Storage shared by every config entry: one executor, one database, one saver."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from homeassistant.core import callback
from homeassistant.helpers import issue_registry as ir
from homeassistant.helpers.importlib import async_import_module
from homeassistant.util.hass_dict import HassKey

from ..const import (
    CHECKPOINT_FILE,
    DATABASE_FILE,
    DOMAIN,
    MAX_CONCURRENT_MODEL_CALLS,
    STORAGE_DIR,
)
from ..executor import BlockingExecutor
from ..model_queue import ModelQueue
from .database import Database, FaultGate

STORAGE_UNAVAILABLE = "storage_unavailable"

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant

    from .checkpoints import CheckpointStore


@dataclass(slots=True)
class SharedStorage:
    """The files and the executor, opened once however many entries there are."""

    executor: BlockingExecutor
    database: Database
    checkpoints: CheckpointStore
    # One bound for the whole integration: a home Ollama server answers one or
    # two requests at a time; more would only queue there, uncancellable.
    model_slots: asyncio.Semaphore = field(
        default_factory=lambda: asyncio.Semaphore(MAX_CONCURRENT_MODEL_CALLS)
    )
    # Background model calls wait for quiet and give way to turns, across
    # every entry (they share the model server).
    scheduler: ModelQueue = field(init=False)

    def __post_init__(self) -> None:
        """Share the model slots with the scheduler."""
        self.scheduler = ModelQueue(self.model_slots)


@dataclass(slots=True)
class _Holder:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    storage: SharedStorage | None = None
    users: int = 0
    # The entry that answers Telegram. One entry is allowed, but entries made
    # by older versions can be two: each message would then be answered twice.
    telegram_owner: str | None = None


# Entries (one now; older versions allowed more) never open a SQLite file twice:
# the saver keeps one connection per file, so it is shared and ref-counted.
DATA_STORAGE: HassKey[_Holder] = HassKey(f"{DOMAIN}_storage")


def storage_dir(hass: HomeAssistant) -> Path:
    """Return ``<config>/ha_personal_assistant``."""
    return Path(hass.config.path(STORAGE_DIR))


async def async_acquire_storage(hass: HomeAssistant) -> SharedStorage:
    """Open the shared storage, or take another reference to it."""
    holder = hass.data.setdefault(DATA_STORAGE, _Holder())
    async with holder.lock:
        if holder.storage is None:
            holder.storage = await _async_open(hass)
        holder.users += 1
        return holder.storage


async def async_release_storage(hass: HomeAssistant) -> None:
    """Drop a reference; the last one closes the files and stops the executor."""
    holder = hass.data.get(DATA_STORAGE)
    if holder is None:
        return
    async with holder.lock:
        holder.users = max(0, holder.users - 1)
        if holder.users > 0 or holder.storage is None:
            return
        storage, holder.storage = holder.storage, None
    await _async_close(hass, storage)


async def async_shutdown_storage(hass: HomeAssistant) -> None:
    """Close the files and the executor now, whoever still holds them (HA stops)."""
    holder = hass.data.get(DATA_STORAGE)
    if holder is None:
        return
    async with holder.lock:
        holder.users = 0
        if holder.storage is None:
            return
        storage, holder.storage = holder.storage, None
    await _async_close(hass, storage)


def async_claim_telegram(hass: HomeAssistant, entry_id: str) -> bool:
    """Let one entry answer Telegram; False when another entry already does."""
    holder = hass.data.setdefault(DATA_STORAGE, _Holder())
    if holder.telegram_owner not in (None, entry_id):
        return False
    holder.telegram_owner = entry_id
    return True


def async_release_telegram(hass: HomeAssistant, entry_id: str) -> None:
    """Give up answering Telegram."""
    holder = hass.data.get(DATA_STORAGE)
    if holder is not None and holder.telegram_owner == entry_id:
        holder.telegram_owner = None


async def _async_open(hass: HomeAssistant) -> SharedStorage:
    executor = BlockingExecutor()
    directory = storage_dir(hass)
    database = Database(directory / DATABASE_FILE, executor)
    # aiosqlite and LangGraph's saver are heavy imports: not on the loop.
    module = await async_import_module(hass, f"{__package__}.checkpoints")
    checkpoints: CheckpointStore = module.CheckpointStore(directory / CHECKPOINT_FILE)
    try:
        await database.async_open()
        await checkpoints.async_open()
    except BaseException:
        await _async_close(hass, SharedStorage(executor, database, checkpoints))
        raise
    _watch(hass, database.gate, "database", database.path)
    _watch(hass, checkpoints.gate, "checkpoints", checkpoints.path)
    return SharedStorage(executor, database, checkpoints)


def storage_issue_id(file: str) -> str:
    """Return the repair issue id of a file: ``database`` or ``checkpoints``."""
    return f"{STORAGE_UNAVAILABLE}_{file}"


def _watch(hass: HomeAssistant, gate: FaultGate, file: str, path: Path) -> None:
    """Raise a repair issue while a file fails, and remove it when it works."""
    issue_id = storage_issue_id(file)
    # A previous run's issue is stale: the file just opened fine.
    ir.async_delete_issue(hass, DOMAIN, issue_id)

    @callback
    def _changed(working: bool, reason: str) -> None:  # noqa: FBT001
        if working:
            ir.async_delete_issue(hass, DOMAIN, issue_id)
            return
        ir.async_create_issue(
            hass,
            DOMAIN,
            issue_id,
            is_fixable=False,
            severity=ir.IssueSeverity.ERROR,
            translation_key=STORAGE_UNAVAILABLE,
            translation_placeholders={"path": str(path), "error": reason},
        )

    gate.on_change = _changed


async def _async_close(hass: HomeAssistant, storage: SharedStorage) -> None:
    try:
        try:
            await storage.checkpoints.async_close()
        finally:
            # Closed even when the checkpoint file failed to close.
            await storage.database.async_close()
    finally:
        await hass.async_add_executor_job(storage.executor.shutdown)
