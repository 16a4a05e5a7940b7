"""Model servers that answer, but not as hoped: what the user and admin see.

An address that is no OpenAI-compatible API, a model that goes away or is
still loading while the config flow checks it, a server that embeds nothing,
an answer that ends before its first word, a server that cannot say whether
it is loading. Everything runs against the fake servers over real HTTP.
"""

from __future__ import annotations

import logging
import socket
import time
from typing import TYPE_CHECKING, Any

import pytest
from homeassistant import config_entries
from homeassistant.config_entries import ConfigEntryState
from homeassistant.data_entry_flow import FlowResultType
from pytest_homeassistant_custom_component.common import (  # type: ignore[import-untyped]
    MockConfigEntry,
)

from custom_components.ha_personal_assistant.const import (
    CONF_BACKEND,
    CONF_BASE_URL,
    CONF_MODEL,
    CONF_REQUEST_TIMEOUT,
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
    from homeassistant.core import HomeAssistant

    from .fake_openai import FakeOpenAI
    from .telegram_harness import TelegramHarness

EMBEDDER = "nomic-embed-text:latest"


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
async def test_a_model_still_loading_at_the_check_can_be_chosen_again(
    hass: HomeAssistant, fake_openai: FakeOpenAI, debug_log: pytest.LogCaptureFixture
) -> None:
    """llama-server's 503 "Loading model" at the tool check: try again later.

    The form says it cannot connect (not that the model cannot call tools),
    and the same choice works once the model is loaded.
    """
    flow_id = await _model_form(hass, fake_openai)
    fake_openai.error(503, "Loading model")
    result = await hass.config_entries.flow.async_configure(
        flow_id, {CONF_MODEL: MODEL}
    )
    assert result["step_id"] == "model"
    assert result["errors"] == {"base": "cannot_connect_openai"}
    assert "answered HTTP 503" in debug_log.text
    result = await hass.config_entries.flow.async_configure(
        flow_id, {CONF_MODEL: MODEL}
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY


@pytest.mark.usefixtures("core", "mock_setup_entry")
async def test_a_model_removed_after_the_list_is_shown_on_the_model_field(
    hass: HomeAssistant, fake_openai: FakeOpenAI
) -> None:
    """The server stops serving the model while the form is open: 404 at the check."""
    flow_id = await _model_form(hass, fake_openai)
    fake_openai.remove_model(MODEL)
    result = await hass.config_entries.flow.async_configure(
        flow_id, {CONF_MODEL: MODEL}
    )
    assert result["step_id"] == "model"
    assert result["errors"] == {CONF_MODEL: "model_not_found_openai"}


@pytest.mark.usefixtures("core", "mock_setup_entry")
async def test_a_server_gone_after_the_list_shows_cannot_connect(
    hass: HomeAssistant, fake_openai: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    """The server stops while the model form is open: a form error, no traceback."""
    flow_id = await _model_form(hass, fake_openai)
    await fake_openai.stop()
    result = await hass.config_entries.flow.async_configure(
        flow_id, {CONF_MODEL: MODEL}
    )
    assert result["step_id"] == "model"
    assert result["errors"] == {"base": "cannot_connect_openai"}
    assert errors_logged(caplog) == []


@pytest.mark.usefixtures("core", "mock_setup_entry")
async def test_an_embedding_model_that_returns_empty_vectors_is_refused(
    hass: HomeAssistant, fake_openai: FakeOpenAI
) -> None:
    """The check embeds a word; an empty vector is no embedding model."""
    flow_id = await _model_form(hass, fake_openai)
    fake_openai.empty_embeddings = True
    result = await hass.config_entries.flow.async_configure(
        flow_id, {CONF_MODEL: MODEL, "embedding_model": EMBEDDER}
    )
    assert result["step_id"] == "model"
    assert result["errors"] == {"embedding_model": "not_embedding_model_openai"}


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


@pytest.mark.usefixtures("core", "mock_setup_entry")
async def test_a_name_is_judged_by_the_addresses_it_resolves_to(
    hass: HomeAssistant, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name resolving into the home goes on; one that also leaves it asks first."""
    real_getaddrinfo = socket.getaddrinfo
    answers = {
        "llm.example.com": ["127.0.0.1"],
        "mixed.example.com": ["192.168.1.20", "8.8.4.4"],
    }

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        # anyio (httpx's connections) asks with the IDNA-encoded name.
        name = host.decode() if isinstance(host, bytes) else host
        if name not in answers:
            return real_getaddrinfo(host, port, *args, **kwargs)
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port or 0)))
            for address in answers[name]
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    port = fake_openai.url.rsplit(":", 1)[1]
    result = await _submit_url(hass, f"http://llm.example.com:{port}/v1")
    # Straight to the models, which came from the fake at that name.
    assert result["step_id"] == "model"
    assert any(r.path == "/v1/models" for r in fake_openai.requests)
    result = await _submit_url(hass, "http://mixed.example.com:8000/v1")
    assert result["step_id"] == "public_server"


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


async def test_documents_on_a_server_without_embeddings_warn_once(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_openai: FakeOpenAI,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """llama-server started without --embeddings: one warning names its answer."""
    assert telegram is not None
    fake_openai.no_embeddings = True
    await async_setup_house(hass)
    entry = MockConfigEntry(
        domain=DOMAIN,
        title=MODEL,
        unique_id=fake_openai.base_url,
        data={
            CONF_BACKEND: "openai_compatible",
            CONF_BASE_URL: fake_openai.base_url,
            CONF_MODEL: MODEL,
            "embedding_model": EMBEDDER,
        },
        options={CONF_REQUEST_TIMEOUT: 10},
    )
    entry.add_to_hass(hass)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    for title in ("Boiler", "Heat pump"):
        await hass.services.async_call(
            DOMAIN,
            "add_document",
            {"title": title, "content": f"The {title} service is due every May."},
            blocking=True,
            return_response=True,
        )
        await hass.async_block_till_done()
    warnings = [
        record.getMessage()
        for record in caplog.records
        if record.name == LOGGER_NAME
        and "Documents cannot be embedded" in record.getMessage()
    ]
    assert len(warnings) == 1
    assert (
        f"{fake_openai.base_url.removeprefix('http://')} answered HTTP 501"
        in (warnings[0])
    )
    assert errors_logged(caplog) == []


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


async def test_a_server_that_cannot_say_it_is_loading_gets_the_silence_limit(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_server: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No /api/ps (an old Ollama), or a /health that never answers: not loading.

    The model that says nothing is cut off after the silence limit, as a
    loaded one is, instead of being waited for as if it were loading.
    """
    monkeypatch.setattr(
        "custom_components.ha_personal_assistant.backends.OLLAMA_PROBE_TIMEOUT", 0.2
    )
    fake_server.no_ps = True
    fake_server.health_hangs = True
    await async_setup_house(hass)
    await async_setup_assistant(hass, fake_server, **{CONF_REQUEST_TIMEOUT: 0.5})
    fake_server.hang()
    started = time.monotonic()
    await telegram.send_text("Are you there?")
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID, timeout=10)
    assert sent[-1]["text"] == fixed_text("model_timeout")
    assert time.monotonic() - started < 3
    # It did ask.
    assert any(r.path in {"/api/ps", "/health"} for r in fake_server.requests)
