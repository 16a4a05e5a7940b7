"""The Personal Assistant integration: talk to your house over Telegram."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from typing import TYPE_CHECKING, Final

from homeassistant.const import EVENT_HOMEASSISTANT_STOP, Platform
from homeassistant.exceptions import (
    ConfigEntryAuthFailed,
    ConfigEntryError,
    ConfigEntryNotReady,
)
from homeassistant.helpers import config_validation as cv
from homeassistant.helpers.importlib import async_import_module

from .agent.warmup import async_track_recovery
from .backends import async_create_backend
from .const import (
    CHECKPOINT_FILE,
    CONF_MODEL,
    DATABASE_FILE,
    DOMAIN,
    LOGGER,
)
from .local_intents import LocalIntentsWatch, async_delete_local_intents_issues
from .media import remove_transfer_dir, transfer_dir
from .model_server import AuthFailed, ModelServerError
from .naming import async_rename_generated_title
from .policy.people import async_ensure_acting_user, async_remove_acting_user
from .repairs import (
    async_check_policy,
    async_delete_policy_issue,
    async_raise_damaged_file_issue,
)
from .security.injection_model import async_load_model
from .security.service_fields import async_warm as async_warm_descriptions
from .services import async_setup_services
from .store.storage import Storage, storage_dir
from .telegram.watch import EarlyUpdates

if TYPE_CHECKING:
    from pathlib import Path

    from homeassistant.core import Event, HomeAssistant
    from homeassistant.helpers.typing import ConfigType

    from .data import PersonalAssistantConfigEntry

CONFIG_SCHEMA = cv.config_entry_only_config_schema(DOMAIN)
PLATFORMS: list[Platform] = [
    Platform.AI_TASK,
    Platform.CONVERSATION,
    Platform.SENSOR,
    Platform.TODO,
]
# HA waits about 30 s for stop listeners; ours finish well within that.
SHUTDOWN_TIMEOUT: Final = 15  # seconds


async def async_setup(hass: HomeAssistant, config: ConfigType) -> bool:  # noqa: ARG001
    """Register the services once; they act on whichever entry is loaded."""
    async_setup_services(hass)
    return True


async def async_setup_entry(
    hass: HomeAssistant, entry: PersonalAssistantConfigEntry
) -> bool:
    """Probe the model server, open storage, build the agent and start listening."""
    if hass.config_entries.async_loaded_entries(DOMAIN):
        # One entry is allowed (single_config_entry); an older version let
        # people make two: the second would answer every message again.
        raise ConfigEntryError(
            translation_domain=DOMAIN, translation_key="another_entry_loaded"
        )
    model: str = entry.data[CONF_MODEL]
    # What telegram_bot delivers while this setup runs is kept for the
    # gateway (dropped if the setup fails).
    early = EarlyUpdates(hass)
    early.async_start()
    entry.async_on_unload(early.async_discard)
    backend = await async_create_backend(hass, entry.data)
    entry.async_on_unload(backend.async_close)
    try:
        models = await backend.async_list_models()
    except AuthFailed as err:
        # HA starts the reauthentication flow, which asks for the key.
        raise ConfigEntryAuthFailed(
            translation_domain=DOMAIN,
            translation_key="invalid_auth",
            translation_placeholders={"url": backend.where},
        ) from err
    except ModelServerError as err:
        raise ConfigEntryNotReady(
            translation_domain=DOMAIN,
            translation_key="cannot_connect",
            translation_placeholders={"url": backend.where},
        ) from err
    if not any(m.name in {model, f"{model}:latest"} for m in models):
        # Replies explain it to the user; the entry stays loaded so it recovers
        # as soon as the model is pulled.
        LOGGER.warning("The model %s is not installed on %s", model, backend.where)

    # LangGraph and LangChain take about a second to import: not on the loop.
    runtime = await async_import_module(hass, f"{__package__}.runtime")
    # The firewall's model file, read once per process in the executor before
    # any text is checked (a bad file is logged; the patterns then decide).
    await async_load_model(hass)
    async_rename_generated_title(hass, entry)
    await async_check_policy(hass, entry)
    # Every service call runs as an HA user: the mapped one, else this one.
    await async_ensure_acting_user(hass)
    storage = await _async_open_storage(hass)
    try:
        data = await runtime.async_build(hass, entry, storage, backend)
    except BaseException:
        await storage.async_close(hass)
        raise
    entry.runtime_data = data
    # The server came back (restarted, perhaps): its cache is empty.
    entry.async_on_unload(async_track_recovery(data.warmer, data.monitor))
    entry.async_on_unload(data.monitor.async_start())
    entry.async_on_unload(data.monitor.async_remove_issues)
    await hass.config_entries.async_forward_entry_setups(entry, PLATFORMS)
    # Pipelines where HA's own intents answer before our agent: a repair each.
    entry.async_on_unload(LocalIntentsWatch(hass, entry).async_start())
    await data.gateway.async_start(early)
    # Confirm messages name the fields of Home Assistant's service
    # descriptions: read now, in the background, not in a Confirm's way.
    entry.async_create_background_task(
        hass, async_warm_descriptions(hass), "ha_personal_assistant descriptions"
    )
    if data.tasks is not None:
        # Armed once Home Assistant has started (the entities they watch).
        data.tasks.async_start()

    async def _async_on_stop(_event: Event) -> None:
        # HA does not unload entries when it stops: end the turns in flight
        # and close the files now, so the stop is not held up and nothing is
        # half-written. Pending confirmations are already stored.
        try:
            async with asyncio.timeout(SHUTDOWN_TIMEOUT):
                await data.gateway.async_stop()
                if data.tasks is not None:
                    await data.tasks.async_stop()
                await data.storage.async_close(hass)
                await backend.async_close()
        except TimeoutError:
            LOGGER.warning("Stopping took longer than %s s", SHUTDOWN_TIMEOUT)

    # Not listen_once: removing a fired one-time listener on unload warns.
    entry.async_on_unload(
        hass.bus.async_listen(EVENT_HOMEASSISTANT_STOP, _async_on_stop)
    )
    return True


async def _async_open_storage(hass: HomeAssistant) -> Storage:
    """Open the databases, telling the user about a damaged file set aside."""
    try:
        storage = await Storage.async_open(hass)
    except sqlite3.Error as err:
        # Locked by another program or a full disk: the files are kept as
        # they are and HA retries the setup later.
        raise ConfigEntryNotReady(
            translation_domain=DOMAIN,
            translation_key="storage_busy",
            translation_placeholders={"error": str(err)},
        ) from err
    # A damaged file was moved aside and started afresh: the user must know.
    # Checkpoints: ongoing conversations start anew (pending confirmations live
    # in the assistant database). Database: history and profiles were reset.
    for key, aside in (
        ("checkpoints_recreated", storage.checkpoints.recreated_from),
        ("database_recreated", storage.database.recreated_from),
    ):
        if aside is not None:
            async_raise_damaged_file_issue(hass, key, aside)
    return storage


async def async_unload_entry(
    hass: HomeAssistant, entry: PersonalAssistantConfigEntry
) -> bool:
    """Stop listening, cancel turns in flight and close the storage."""
    if not await hass.config_entries.async_unload_platforms(entry, PLATFORMS):
        return False
    await entry.runtime_data.gateway.async_stop()
    if (tasks := entry.runtime_data.tasks) is not None:
        # Firings write to the database: ended before it closes.
        await tasks.async_stop()
    # Files on their way in or out: none is left behind. (After HA's stop the
    # storage and its executor are closed; the next setup empties the folder.)
    if not (executor := entry.runtime_data.storage.executor).closed:
        await executor.run(remove_transfer_dir, transfer_dir(hass))
    # Pruning, after-reply work (history, summaries, learning) writes to the
    # storage: end it before it closes. Work that ends may start more (a
    # learned turn starts the learner): cancelled in the next round.
    maintenance = entry.runtime_data.maintenance
    while maintenance:
        for task in maintenance:
            task.cancel()
        await asyncio.wait(set(maintenance))
    if (documents := entry.runtime_data.documents) is not None:
        # Indexing writes to the database: stop it before the database closes.
        await documents.async_stop()
    await entry.runtime_data.storage.async_close(hass)
    return True


async def async_remove_entry(
    hass: HomeAssistant, entry: PersonalAssistantConfigEntry
) -> None:
    """Drop the entry's repair issues, the user it acted as and the data.

    Removing the Personal Assistant entry deletes what the integration
    wrote: its two databases (conversations, profiles, pending confirmations,
    logs, the document index), their journals and any damaged copies it set
    aside, and the Home Assistant user it acted as. The documents folder holds
    the household's own files: it is kept (and the folder with it).
    """
    async_delete_policy_issue(hass, entry.entry_id)
    # No entry, no agent for a pipeline to bypass.
    async_delete_local_intents_issues(hass)
    if not hass.config_entries.async_entries(DOMAIN):
        await async_remove_acting_user(hass)
        removed = await hass.async_add_executor_job(remove_data, storage_dir(hass))
        LOGGER.info("Removed the assistant's data: %s", ", ".join(removed) or "none")


def remove_data(folder: Path) -> list[str]:
    """Delete the integration's own files in ``folder``; blocking (executor)."""
    removed: list[str] = []
    if not folder.is_dir():
        return removed
    for database in (DATABASE_FILE, CHECKPOINT_FILE):
        for path in sorted(folder.glob(f"{database}*")):
            # The file, its -wal and -shm journals and .corrupt-<time> copies.
            if path.is_file():
                path.unlink()
                removed.append(path.name)
    with contextlib.suppress(OSError):
        # Only when nothing of the household's is left in it.
        folder.rmdir()
    return removed
