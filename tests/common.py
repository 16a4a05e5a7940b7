"""Helpers shared by the integration's end-to-end tests."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from unittest.mock import patch

from homeassistant.components.homeassistant.exposed_entities import (
    async_expose_entity,
)
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers import event
from homeassistant.setup import async_setup_component
from homeassistant.util import dt as dt_util
from homeassistant.util.async_ import get_scheduled_timer_handles
from pytest_homeassistant_custom_component.common import (  # type: ignore[import-untyped]
    MockConfigEntry,
)

from custom_components.ha_personal_assistant.const import (
    CONF_API_KEY,
    CONF_BACKEND,
    CONF_BASE_URL,
    CONF_FAST_PATH,
    CONF_MODEL,
    CONF_OLLAMA_URL,
    CONF_REQUEST_TIMEOUT,
    DOMAIN,
)
from custom_components.ha_personal_assistant.i18n import TEXTS_DIR, Texts, load_texts

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    import pytest
    from homeassistant.core import HomeAssistant

    from .fake_ollama import FakeOllama

# The logger of the integration and all its modules.
LOGGER_NAME = "custom_components.ha_personal_assistant"

MODEL = "qwen3:4b"
EXPOSED = (
    "light.kitchen_lights",
    "light.bed_light",
    "lock.front_door",
    "cover.garage_door",
    "cover.kitchen_window",
)
HIDDEN = "light.ceiling_lights"
INTEGRATION = Path(__file__).parent.parent / "custom_components/ha_personal_assistant"
TRANSLATIONS = INTEGRATION / "translations"


@cache
def _messages(language: str) -> dict[str, str]:
    """Return the chat texts and the raised errors' messages of a language."""
    data = json.loads((TRANSLATIONS / f"{language}.json").read_text("utf-8"))
    errors = {key: value["message"] for key, value in data["exceptions"].items()}
    return errors | load_texts(TEXTS_DIR, language)


def fixed_text(key: str, language: str = "en", **placeholders: Any) -> str:
    """Return one of the integration's fixed texts, as a user reads it."""
    return _messages(language)[key].format(**placeholders)


def texts(language: str = "en") -> Texts:
    """Return the chat texts of a language as the integration loads them."""
    return Texts(language, load_texts(TEXTS_DIR, language))


async def async_setup_house(hass: HomeAssistant) -> None:
    """Set up HA's core and the demo house, exposing some entities to Assist."""
    assert await async_setup_component(hass, "homeassistant", {})
    assert await async_setup_component(hass, "demo", {})
    await hass.async_block_till_done()
    for entity_id in hass.states.async_entity_ids():
        async_expose_entity(hass, "conversation", entity_id, entity_id in EXPOSED)


async def async_setup_assistant(
    hass: HomeAssistant, ollama: FakeOllama, **options: Any
) -> MockConfigEntry:
    """Add and set up the integration against the fake server.

    A server with ``backend`` "openai_compatible" (tests/fake_openai.py) is
    set up through its OpenAI-compatible API, with its API key if it has one;
    any other through Ollama's API.
    """
    data: dict[str, Any] = {CONF_OLLAMA_URL: ollama.url, CONF_MODEL: MODEL}
    unique_id = ollama.url
    if getattr(ollama, "backend", "ollama") == "openai_compatible":
        unique_id = f"{ollama.url}/v1"
        data = {
            CONF_BACKEND: "openai_compatible",
            CONF_BASE_URL: unique_id,
            CONF_MODEL: MODEL,
        }
        if api_key := getattr(ollama, "api_key", None):
            data[CONF_API_KEY] = api_key
    entry = MockConfigEntry(
        domain=DOMAIN,
        title=MODEL,
        unique_id=unique_id,
        data=data,
        # The fast path off unless a test asks for it: these tests script
        # what the model does with sentences HA would otherwise answer.
        options={CONF_REQUEST_TIMEOUT: 10, CONF_FAST_PATH: False, **options},
    )
    entry.add_to_hass(hass)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    return entry


def last_user_content(request: dict[str, Any]) -> str:
    """Return the text of the last user message of an Ollama chat request."""
    return next(
        m["content"] for m in reversed(request["messages"]) if m["role"] == "user"
    )


def tool_results(request: dict[str, Any]) -> list[str]:
    """Return the tool results the model was given in a chat request."""
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def errors_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Return what the integration logged at ERROR or above."""
    return [
        record.getMessage()
        for record in caplog.records
        if record.name.startswith(LOGGER_NAME) and record.levelno >= logging.ERROR
    ]


def _is_deadline(handle: asyncio.TimerHandle) -> bool:
    """Tell an ``asyncio.timeout`` deadline from a timer HA schedules."""
    owner = getattr(handle._callback, "__self__", None)
    return isinstance(owner, asyncio.Timeout)


def fire_time_changed(hass: HomeAssistant, when: datetime) -> None:
    """Move HA's clock to ``when``: run HA's timers due by then, not I/O deadlines.

    ``async_fire_time_changed`` runs every loop timer due by ``when``, also
    the ``asyncio.timeout`` of a database call or model request that happens
    to be in flight: that call then "times out" at once and the database is
    skipped for a while, which no real clock can cause. This runs the same
    timers (debounces, intervals, ``async_call_later``) and leaves the
    deadlines to real time.
    """
    utc = dt_util.as_utc(when) + timedelta(microseconds=event.RANDOM_MICROSECOND_MAX)
    timestamp = utc.timestamp()
    resolution = time.get_clock_info("monotonic").resolution
    for handle in list(get_scheduled_timer_handles(hass.loop)):
        if not isinstance(handle, asyncio.TimerHandle) or handle.cancelled():
            continue
        if _is_deadline(handle):
            continue
        ahead = timestamp - time.time()
        if ahead >= handle.when() - (hass.loop.time() + resolution):
            with (
                patch(
                    "homeassistant.helpers.event.time_tracker_utcnow",
                    return_value=utc,
                ),
                patch(
                    "homeassistant.helpers.event.time_tracker_timestamp",
                    return_value=timestamp,
                ),
            ):
                handle._run()
                handle.cancel()


async def wait_until(
    predicate: Callable[[], bool],
    seconds: float = 10.0,
) -> None:
    """Poll ``predicate`` in real time until it holds; fail after ``seconds``."""
    for _ in range(int(seconds / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
    msg = "condition not met in time"
    raise AssertionError(msg)


def name_by_household(hass: HomeAssistant, entity_id: str, name: str) -> None:
    """Give an entity a registry entry with the name the household chose.

    A state set with no registry entry and no integration behind it has a
    name anyone could have written: the assistant treats it as outside text
    (security/names.py). Tests that stand in for the household's own
    entities name them like the household does.
    """
    domain, _, object_id = entity_id.partition(".")
    registry = er.async_get(hass)
    entry = registry.async_get(entity_id) or registry.async_get_or_create(
        domain, "test", entity_id, suggested_object_id=object_id
    )
    assert entry.entity_id == entity_id
    if entry.name != name:
        registry.async_update_entity(entity_id, name=name)


def async_set_named(
    hass: HomeAssistant,
    entity_id: str,
    state: str,
    attributes: Mapping[str, Any] | None = None,
) -> None:
    """Set a state whose name the household gave (see name_by_household)."""
    attributes = dict(attributes or {})
    name = attributes.get("friendly_name") or entity_id.partition(".")[2].replace(
        "_", " "
    )
    name_by_household(hass, entity_id, name)
    hass.states.async_set(entity_id, state, {**attributes, "friendly_name": name})
