"""Model servers that answer, but not as hoped: what the user and admin see.

An address that is no OpenAI-compatible API, a model that goes away or is
still loading while the config flow checks it, a server that embeds nothing,
an answer that ends before its first word, a server that cannot say whether
it is loading. Everything runs against the fake servers over real HTTP.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any
from unittest.mock import AsyncMock, patch

import pytest
from homeassistant import config_entries
from homeassistant.config_entries import ConfigEntryState
from homeassistant.setup import async_setup_component
from pytest_homeassistant_custom_component.common import (  # type: ignore[import-untyped]
    MockConfigEntry,
)

from custom_components.ha_personal_assistant.const import (
    CONF_BACKEND,
    CONF_BASE_URL,
    CONF_MODEL,
    DOMAIN,
)

from .common import (
    LOGGER_NAME,
    MODEL,
    async_setup_assistant,
    async_setup_house,
    errors_logged,
    fixed_text,
)
from .fake_ollama import OllamaReply
from .telegram_harness import ALICE_ID

if TYPE_CHECKING:
    from collections.abc import Generator

    from homeassistant.core import HomeAssistant

    from .fake_openai import FakeOpenAI
    from .telegram_harness import TelegramHarness

EMBEDDER = "nomic-embed-text:latest"


@pytest.fixture
def mock_setup_entry() -> Generator[AsyncMock]:
    """Keep created entries from starting the assistant."""
    with patch(
        "custom_components.ha_personal_assistant.async_setup_entry",
        return_value=True,
    ) as mock:
        yield mock


@pytest.fixture
async def core(hass: HomeAssistant) -> None:
    """Set up HA's core integration, which conversation (our dependency) needs."""
    assert await async_setup_component(hass, "homeassistant", {})


@pytest.fixture
def debug_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Capture the integration's debug lines, which say why a form failed."""
    caplog.set_level(logging.DEBUG, logger=LOGGER_NAME)
    return caplog


async def _submit_url(hass: HomeAssistant, url: str) -> dict[str, Any]:
    """Open the OpenAI-compatible flow and submit ``url``."""
    result = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_USER}
    )
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_BACKEND: "openai_compatible"}
    )
    return await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_BASE_URL: url}
    )


# ------------------------------------------------------------- config flow


@pytest.mark.parametrize(
    ("path", "web_pages", "reason"),
    [
        ("/api", set(), "has no /models"),
        ("/v1", {"/v1/models"}, "did not answer with a model list"),
    ],
    ids=["no_api_there", "web_page"],
)
@pytest.mark.usefixtures("core", "mock_setup_entry")
async def test_an_address_that_is_no_openai_api_shows_cannot_connect(
    hass: HomeAssistant,
    fake_openai: FakeOpenAI,
    debug_log: pytest.LogCaptureFixture,
    path: str,
    web_pages: set[str],
    reason: str,
) -> None:
    """A 404 at /models, or a web UI's HTML page: the form says it cannot connect.

    The debug log says why; nothing is logged as an error.
    """
    fake_openai.web_pages = web_pages
    result = await _submit_url(hass, f"{fake_openai.url}{path}")
    assert result["step_id"] == "openai_compatible"
    assert result["errors"] == {"base": "cannot_connect_openai"}
    assert reason in debug_log.text
    assert errors_logged(debug_log) == []


async def _model_form(hass: HomeAssistant, fake_openai: FakeOpenAI) -> str:
    """Return the flow id of the model form for the fake server."""
    result = await _submit_url(hass, fake_openai.base_url)
    assert result["step_id"] == "model"
    return str(result["flow_id"])


@pytest.mark.usefixtures("core", "mock_setup_entry")
async def test_embeddings_answered_with_a_web_page_are_refused(
    hass: HomeAssistant, fake_openai: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    """A proxy serves its web UI at /v1/embeddings: no embedding model, no traceback."""
    flow_id = await _model_form(hass, fake_openai)
    fake_openai.web_pages = {"/v1/embeddings"}
    result = await hass.config_entries.flow.async_configure(
        flow_id, {CONF_MODEL: MODEL, "embedding_model": EMBEDDER}
    )
    assert result["step_id"] == "model"
    assert result["errors"] == {"embedding_model": "not_embedding_model_openai"}
    assert errors_logged(caplog) == []


# ------------------------------------------------------------ at run time


async def test_a_web_page_at_setup_is_retried_later(
    hass: HomeAssistant, fake_openai: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    """The address answers with a web page: HA retries setup, no traceback."""
    fake_openai.web_pages = {"/v1/models"}
    await async_setup_house(hass)
    entry = MockConfigEntry(
        domain=DOMAIN,
        data={
            CONF_BACKEND: "openai_compatible",
            CONF_BASE_URL: fake_openai.base_url,
            CONF_MODEL: MODEL,
        },
    )
    entry.add_to_hass(hass)
    await hass.config_entries.async_setup(entry.entry_id)
    assert entry.state is ConfigEntryState.SETUP_RETRY
    assert "Error setting up entry" not in caplog.text
    await hass.config_entries.async_unload(entry.entry_id)


async def test_an_answer_that_ends_before_its_first_word_is_explained(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_server: FakeOpenAI,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A 200 whose stream holds nothing: "the model reported an error", no traceback.

    On both backends (an empty NDJSON body; an SSE stream of only [DONE]).
    """
    await async_setup_house(hass)
    await async_setup_assistant(hass, fake_server)
    fake_server.enqueue(OllamaReply(content="Hello there", end_after=0))
    await telegram.send_text("Hello?")
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[-1]["text"] == fixed_text("model_error")
    assert errors_logged(caplog) == []
