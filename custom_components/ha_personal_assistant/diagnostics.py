"""Diagnostics: versions, settings, counts, latencies and errors; nothing personal."""

from __future__ import annotations

import platform
import sqlite3
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any, Final

from homeassistant.components.diagnostics import async_redact_data
from homeassistant.const import __version__ as HA_VERSION  # noqa: N812
from homeassistant.loader import async_get_integration

from .const import (
    CONF_ADMIN_USER_IDS,
    CONF_ALLOWED_USER_IDS,
    CONF_API_KEY,
    CONF_BASE_URL,
    CONF_NOTICE_USER_IDS,
    CONF_OLLAMA_URL,
    CONF_USER_MAPPING,
    DOMAIN,
)
from .media import MAX_AUDIO_BYTES, MAX_FILE_BYTES, MAX_IMAGE_BYTES, MAX_PDF_PAGES
from .model_server import url_without_credentials
from .naming import assistant_name
from .speech import resolve_engines

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant

    from .data import PersonalAssistantConfigEntry, PersonalAssistantData

# Who may talk to the bot and who they are in HA: personal, never shown.
TO_REDACT: Final = {
    CONF_ALLOWED_USER_IDS,
    CONF_ADMIN_USER_IDS,
    CONF_NOTICE_USER_IDS,
    CONF_USER_MAPPING,
    "token",
    CONF_API_KEY,
    "password",
}
PACKAGES: Final = (
    "langchain-core",
    "langchain-ollama",
    "langchain-openai",
    "langgraph",
    "langgraph-checkpoint-sqlite",
    "ollama",
    "openai",
    "sqlite-vec",
    "ddgs",
    "pypdf",
)


def _package_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


# Read once, when HA imports this platform (in its executor): reading a
# package's metadata opens files, which must not happen on the event loop.
PACKAGE_VERSIONS: Final = {name: _package_version(name) for name in PACKAGES}


def _counts(conn: sqlite3.Connection) -> dict[str, int]:
    """Count the rows of every table; their contents stay in the database."""
    names = [
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'"
            " AND name NOT LIKE 'sqlite_%' ORDER BY name"
        )
    ]
    counts: dict[str, int] = {}
    for name in names:
        try:
            counts[name] = int(
                conn.execute(f'SELECT COUNT(*) FROM "{name}"').fetchone()[0]  # noqa: S608 - names from sqlite_master
            )
        except sqlite3.Error:
            # A virtual table whose module is not loaded (sqlite-vec).
            continue
    return counts


def _documents(index: Any) -> dict[str, Any] | None:
    """Describe the vector search: engine, size, and why sqlite-vec is off."""
    if index is None:
        return None
    vectors = index.vectors
    return {
        "embedding_model": index.model,
        "vectors": len(vectors),
        "dimensions": vectors.dim,
        "engine": str(vectors.engine),
        "sqlite_vec": "loaded" if vectors.extension_loaded else vectors.extension_error,
        "rescore_pool": vectors.pool,
        "binary_recall": vectors.binary_recall,
        "embed_error": index.embed_error,
    }


def _media(hass: HomeAssistant, data: PersonalAssistantData) -> dict[str, Any]:
    """Name the engines voice notes and photos go to (engine ids, no content)."""
    media = data.gateway.media
    engines = resolve_engines(hass, media.stt_engine)
    return {
        "stt_engine": engines.stt,
        "stt_engine_from": "option" if media.stt_engine else "default",
        "stt_language": engines.stt_language,
        "voice_replies": media.voice_replies,
        "tts_engine": engines.tts if media.voice_replies else None,
        "vision_model": media.vision_model,
        "limits": {
            "file_bytes": MAX_FILE_BYTES,
            "pdf_pages": MAX_PDF_PAGES,
            "audio_bytes": MAX_AUDIO_BYTES,
            "image_bytes": MAX_IMAGE_BYTES,
        },
    }


def _redact_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """Redact personal keys; keep URLs but without their credentials."""
    redacted = async_redact_data(settings, TO_REDACT)
    for key in (CONF_OLLAMA_URL, CONF_BASE_URL):
        if isinstance(url := redacted.get(key), str):
            redacted[key] = url_without_credentials(url)
    return redacted


async def async_get_config_entry_diagnostics(
    hass: HomeAssistant, entry: PersonalAssistantConfigEntry
) -> dict[str, Any]:
    """Return what helps to debug an entry, with nothing secret or personal."""
    integration = await async_get_integration(hass, DOMAIN)
    data = entry.runtime_data
    assistant = data.assistant
    try:
        counts: dict[str, int] | str = await assistant.database.async_run(_counts)
    except sqlite3.Error as err:
        counts = f"unavailable: {type(err).__name__}"
    monitor = data.monitor
    return {
        "versions": {
            "integration": str(integration.version),
            "home_assistant": HA_VERSION,
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
            **PACKAGE_VERSIONS,
        },
        "entry": {
            "name": assistant_name(hass, entry.entry_id),
            "data": _redact_settings(dict(entry.data)),
            "options": _redact_settings(dict(entry.options)),
        },
        "model": {
            "status": monitor.status.value,
            "checked_at": (
                monitor.checked_at.isoformat()
                if monitor.checked_at is not None
                else None
            ),
            "available": monitor.available,
            "last_error": monitor.last_error,
            "num_ctx": assistant.num_ctx,
        },
        "tools": list(assistant.registry.names),
        # Each as "entry: text key", e.g. "lock.unlock: weakened_confirm".
        "policy_weakened": [
            f"{problem.entry}: {problem.key}"
            for problem in (
                assistant.policy.weakened() if assistant.policy is not None else []
            )
        ],
        "counts": counts,
        "documents": _documents(data.documents),
        "media": _media(hass, data),
        "recent_turns": [
            {
                "ts": turn.ts,
                "source": turn.source,
                "seconds": round(turn.seconds, 3),
                "model_seconds": round(turn.model_seconds, 3),
                "context_tokens": turn.context_tokens,
                "ok": turn.ok,
            }
            for turn in assistant.stats.turns
        ],
        "recent_errors": [
            {"ts": ts, "error": error} for ts, error in assistant.stats.errors
        ],
    }
