"""The entry's storage: one executor, the assistant database, the checkpoint saver."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from homeassistant.core import callback
from homeassistant.helpers import issue_registry as ir
from homeassistant.helpers.importlib import async_import_module

from ..const import CHECKPOINT_FILE, DATABASE_FILE, DOMAIN, STORAGE_DIR
from ..executor import BlockingExecutor
from .database import Database

STORAGE_UNAVAILABLE = "storage_unavailable"

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant

    from .checkpoints import CheckpointStore
    from .faults import FaultGate


def storage_dir(hass: HomeAssistant) -> Path:
    """Return ``<config>/ha_personal_assistant``."""
    return Path(hass.config.path(STORAGE_DIR))


def storage_issue_id(file: str) -> str:
    """Return the repair issue id of a file: ``database`` or ``checkpoints``."""
    return f"{STORAGE_UNAVAILABLE}_{file}"


@dataclass(slots=True)
class Storage:
    """The files and their executor, opened at setup and closed at unload.

    The entry's runtime data holds it; HA's stop closes it before the
    unload, which then finds it closed.
    """

    executor: BlockingExecutor
    database: Database
    checkpoints: CheckpointStore

    @classmethod
    async def async_open(cls, hass: HomeAssistant) -> Storage:
        """Open the database and the checkpoints; a repair follows each file."""
        executor = BlockingExecutor()
        directory = storage_dir(hass)
        database = Database(directory / DATABASE_FILE, executor)
        # aiosqlite and LangGraph's saver are heavy imports: not on the loop.
        module = await async_import_module(hass, f"{__package__}.checkpoints")
        checkpoints: CheckpointStore = module.CheckpointStore(
            directory / CHECKPOINT_FILE
        )
        storage = cls(executor, database, checkpoints)
        try:
            await database.async_open()
            await checkpoints.async_open()
        except BaseException:
            await storage.async_close(hass)
            raise
        _watch(hass, database.gate, "database", database.path)
        _watch(hass, checkpoints.gate, "checkpoints", checkpoints.path)
        return storage

    async def async_close(self, hass: HomeAssistant) -> None:
        """Close the files and stop the executor; once (later calls do nothing)."""
        if self.executor.closed:
            return
        try:
            try:
                await self.checkpoints.async_close()
            finally:
                # Closed even when the checkpoint file failed to close.
                await self.database.async_close()
        finally:
            await hass.async_add_executor_job(self.executor.shutdown)


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
