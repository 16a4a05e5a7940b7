"""Services of the integration: documents, and what it knows about people."""

from __future__ import annotations

import functools
import re
import sqlite3
from typing import TYPE_CHECKING, Any, Final

from homeassistant.core import ServiceCall, ServiceResponse, SupportsResponse, callback
from homeassistant.exceptions import HomeAssistantError, ServiceValidationError
from homeassistant.helpers import config_validation as cv
from homeassistant.helpers.service import async_register_admin_service

from .const import (
    ADD_DOCUMENT_WAIT,
    DOMAIN,
    MAX_DOCUMENT_CHARS,
    MAX_DOCUMENT_TITLE_CHARS,
)
from .executor import ExecutorShutDownError
from .memory.profile import ProfileMemory
from .store.history import clear_interactions

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    # At run time HA aliases voluptuous to probatio, whose types its service
    # helpers expect; the voluptuous stubs would not match them.
    import probatio as vol
    from homeassistant.core import HomeAssistant

    from .data import PersonalAssistantConfigEntry
    from .documents.index import DocumentIndex
else:
    import voluptuous as vol

SERVICE_CLEAR_HISTORY: Final = "clear_history"
SERVICE_CLEAR_PROFILE: Final = "clear_profile"
SERVICE_EXPORT_PROFILE: Final = "export_profile"
SERVICE_ADD_DOCUMENT: Final = "add_document"
SERVICE_REINDEX: Final = "reindex"
ATTR_TITLE: Final = "title"
ATTR_CONTENT: Final = "content"
ATTR_PERSON: Final = "person"
ATTR_CHAT_ID: Final = "chat_id"
# A profile key: the mapped HA user, or the Telegram user (see Speaker).
PROFILE_KEY: Final = re.compile(r"^(?:telegram:-?\d+|ha:[0-9A-Za-z_-]+)$")

CLEAR_HISTORY_SCHEMA: Final = vol.Schema({vol.Optional(ATTR_CHAT_ID): vol.Coerce(int)})
CLEAR_PROFILE_SCHEMA: Final = vol.Schema({vol.Optional(ATTR_PERSON): cv.string})
EXPORT_PROFILE_SCHEMA: Final = vol.Schema({vol.Required(ATTR_PERSON): cv.string})
ADD_DOCUMENT_SCHEMA: Final = vol.Schema(
    {vol.Required(ATTR_TITLE): cv.string, vol.Required(ATTR_CONTENT): cv.string}
)
REINDEX_SCHEMA: Final = vol.Schema({})


def _profile_key(value: Any) -> str:
    """Return a valid profile key, or raise a translated error."""
    person = str(value).strip()
    if not PROFILE_KEY.match(person):
        raise ServiceValidationError(
            translation_domain=DOMAIN,
            translation_key="invalid_person",
            translation_placeholders={"person": person},
        )
    return person


def _memory(hass: HomeAssistant) -> ProfileMemory:
    """Return the profile store of a loaded entry (all share one database)."""
    loaded: list[PersonalAssistantConfigEntry] = (
        hass.config_entries.async_loaded_entries(DOMAIN)
    )
    for entry in loaded:
        memory = entry.runtime_data.assistant.memory
        if isinstance(memory, ProfileMemory):
            return memory
    raise ServiceValidationError(
        translation_domain=DOMAIN, translation_key="not_loaded"
    )


async def _async_clear_history(call: ServiceCall) -> ServiceResponse:
    """Forget the conversations of one chat, or of every chat."""
    chat_id: int | None = call.data.get(ATTR_CHAT_ID)
    for entry in call.hass.config_entries.async_loaded_entries(DOMAIN):
        data = entry.runtime_data
        history = data.assistant.history
        if history is None:
            continue
        # One database for every entry: clearing through one clears all.
        sessions = await history.async_clear(chat_id, data.storage.checkpoints)
        await data.assistant.database.async_run(
            lambda conn: clear_interactions(conn, chat_id)
        )
        return {"sessions": sessions}
    raise ServiceValidationError(
        translation_domain=DOMAIN, translation_key="not_loaded"
    )


async def _async_clear_profile(call: ServiceCall) -> ServiceResponse:
    """Forget one person's profile, or everyone's."""
    person = _profile_key(call.data[ATTR_PERSON]) if ATTR_PERSON in call.data else None
    removed = await _memory(call.hass).async_clear(person)
    return {"removed": removed}


async def _async_export_profile(call: ServiceCall) -> ServiceResponse:
    """Return everything known about one person."""
    person = _profile_key(call.data[ATTR_PERSON])
    return await _memory(call.hass).async_export(person)


def _documents(hass: HomeAssistant) -> DocumentIndex:
    """Return the document index of a loaded entry, or say why there is none."""
    loaded: list[PersonalAssistantConfigEntry] = (
        hass.config_entries.async_loaded_entries(DOMAIN)
    )
    if not loaded:
        raise ServiceValidationError(
            translation_domain=DOMAIN, translation_key="not_loaded"
        )
    for entry in loaded:
        if (documents := entry.runtime_data.documents) is not None:
            return documents
    raise ServiceValidationError(
        translation_domain=DOMAIN, translation_key="documents_off"
    )


def _text(value: Any, field: str, limit: int) -> str:
    """Return the stripped text of a field, or raise a translated error."""
    text = str(value).strip()
    if not text:
        raise ServiceValidationError(
            translation_domain=DOMAIN,
            translation_key="document_empty",
            translation_placeholders={"field": field},
        )
    if len(text) > limit:
        raise ServiceValidationError(
            translation_domain=DOMAIN,
            translation_key="document_too_long",
            translation_placeholders={
                "field": field,
                "length": str(len(text)),
                "limit": str(limit),
            },
        )
    return text


async def _async_add_document(call: ServiceCall) -> ServiceResponse:
    """Store a document and answer once it is searchable.

    A document that cannot be embedded within ADD_DOCUMENT_WAIT seconds (a
    long one on a slow server, or Ollama down) is answered as queued: its
    remaining chunks are embedded in the background, and search_documents
    says it is still indexing meanwhile.
    """
    title = " ".join(
        _text(call.data[ATTR_TITLE], ATTR_TITLE, MAX_DOCUMENT_TITLE_CHARS).split()
    )
    content = _text(call.data[ATTR_CONTENT], ATTR_CONTENT, MAX_DOCUMENT_CHARS)
    result = await _documents(call.hass).async_add(
        title, content, wait=ADD_DOCUMENT_WAIT
    )
    return {
        "document_id": result.document_id,
        "chunks": result.chunks,
        "duplicate": result.duplicate,
        "status": "searchable" if result.searchable else "queued",
        "searchable_chunks": result.embedded,
    }


async def _async_reindex(call: ServiceCall) -> ServiceResponse:
    """Re-read the documents folder and HA knowledge; embedding follows."""
    results = await _documents(call.hass).async_reindex()
    return {
        source: {
            "added": result.added,
            "removed": result.removed,
            "unchanged": result.unchanged,
        }
        for source, result in results.items()
    }


def _storage_errors(
    handler: Callable[[ServiceCall], Coroutine[Any, Any, ServiceResponse]],
) -> Callable[[ServiceCall], Coroutine[Any, Any, ServiceResponse]]:
    """Turn a locked, full or closed storage into a translated error.

    Every service reads or writes the assistant's database: a backup holding
    the file, a full disk, or Home Assistant stopping (the storage is closed)
    must reach the caller as a message, not as an unexpected error.
    """

    @functools.wraps(handler)
    async def _handle(call: ServiceCall) -> ServiceResponse:
        try:
            return await handler(call)
        except (sqlite3.Error, ExecutorShutDownError) as err:
            raise HomeAssistantError(
                translation_domain=DOMAIN,
                translation_key="storage_unavailable_service",
                translation_placeholders={"error": str(err)},
            ) from err

    return _handle


@callback
def async_setup_services(hass: HomeAssistant) -> None:
    """Register the services; admins only (profiles are personal, documents shared)."""
    async_register_admin_service(
        hass,
        DOMAIN,
        SERVICE_ADD_DOCUMENT,
        _storage_errors(_async_add_document),
        ADD_DOCUMENT_SCHEMA,
        SupportsResponse.OPTIONAL,
    )
    async_register_admin_service(
        hass,
        DOMAIN,
        SERVICE_REINDEX,
        _storage_errors(_async_reindex),
        REINDEX_SCHEMA,
        SupportsResponse.OPTIONAL,
    )
    async_register_admin_service(
        hass,
        DOMAIN,
        SERVICE_CLEAR_HISTORY,
        _storage_errors(_async_clear_history),
        CLEAR_HISTORY_SCHEMA,
        SupportsResponse.OPTIONAL,
    )
    async_register_admin_service(
        hass,
        DOMAIN,
        SERVICE_CLEAR_PROFILE,
        _storage_errors(_async_clear_profile),
        CLEAR_PROFILE_SCHEMA,
        SupportsResponse.OPTIONAL,
    )
    async_register_admin_service(
        hass,
        DOMAIN,
        SERVICE_EXPORT_PROFILE,
        _storage_errors(_async_export_profile),
        EXPORT_PROFILE_SCHEMA,
        SupportsResponse.ONLY,
    )
