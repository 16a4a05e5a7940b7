"""Tests of the config, reconfigure and options flows and the Ollama client."""

from __future__ import annotations

import asyncio
import json
from copy import deepcopy
from pathlib import Path
from typing import TYPE_CHECKING, Any
from unittest.mock import AsyncMock, patch

import httpx
import pytest
import respx
from homeassistant import config_entries
from homeassistant.config_entries import ConfigSubentryData
from homeassistant.data_entry_flow import FlowResultType, InvalidData
from homeassistant.helpers import issue_registry as ir
from homeassistant.setup import async_setup_component
from pytest_homeassistant_custom_component.common import MockConfigEntry, MockUser
from yarl import URL

from custom_components.ha_personal_assistant.backends import (
    OllamaBackend,
    normalize_ollama_url,
)
from custom_components.ha_personal_assistant.const import DOMAIN
from custom_components.ha_personal_assistant.model_server import (
    InvalidUrl,
    ModelNotFound,
    ModelServerError,
    ServerModel,
    ServerTimeout,
    ServerUnreachable,
    url_without_credentials,
)
from custom_components.ha_personal_assistant.policy.rules import (
    DEFAULT_BLOCKED_SERVICES,
    DEFAULT_CONFIRM_SERVICES,
    Policy,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from homeassistant.core import HomeAssistant

OLLAMA_URL = "http://192.168.1.10:11434"
OTHER_URL = "http://192.168.1.20:11434"

DEFAULT_OPTIONS = {
    "confirmation_timeout": 300,
    "session_timeout": 30,
    "num_ctx": 8192,
    "num_predict": 512,
    "keep_alive": -1,
    "request_timeout": 120,
    "warm_cache": True,
    "web_search": True,
    "ha_tools": False,
    "fast_path": True,
    "allowed_user_ids": [],
    "user_mapping": {},
    "stt_engine": "",
    "voice_replies": False,
    "vision_model": "",
    "night_hours": "22:00-07:00",
    "open_minutes": 30,
    "notice_user_ids": [],
}

# What /api/tags and /api/show answer, trimmed to the fields we read.
TAGS = {
    "gemma2:2b": {"family": "gemma2", "parameter_size": "2.6B"},
    "nomic-embed-text:latest": {"family": "nomic-bert", "parameter_size": "137M"},
    "qwen3:8b": {"family": "qwen3", "parameter_size": "8.2B"},
    "llama3.1:8b": {"family": "llama", "parameter_size": "8.0B"},
}
SHOW = {
    "gemma2:2b": {
        "capabilities": ["completion"],
        "model_info": {"general.architecture": "gemma2", "gemma2.context_length": 8192},
    },
    "nomic-embed-text:latest": {
        "capabilities": ["embedding"],
        "model_info": {
            "general.architecture": "nomic-bert",
            "nomic-bert.context_length": 2048,
        },
    },
    "qwen3:8b": {
        "capabilities": ["completion", "tools", "thinking"],
        "model_info": {"general.architecture": "qwen3", "qwen3.context_length": 40960},
    },
    "llama3.1:8b": {
        "capabilities": ["completion", "tools"],
        "model_info": {
            "general.architecture": "llama",
            "llama.context_length": 131072,
        },
    },
}


class MockedOllama:
    """An Ollama server speaking /api/tags and /api/show, at the httpx boundary."""

    def __init__(
        self,
        router: respx.MockRouter,
        url: str = OLLAMA_URL,
        models: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        """Serve the given models (name to /api/show answer) at url."""
        self.show = deepcopy(SHOW if models is None else models)
        router.get(f"{url}/api/tags").mock(side_effect=self.answer_tags)
        router.post(f"{url}/api/show").mock(side_effect=self.answer_show)

    def answer_tags(self, _request: httpx.Request) -> httpx.Response:
        """Answer GET /api/tags."""
        models = [
            {
                "name": name,
                "model": name,
                "size": 4_920_753_328,
                "details": {"format": "gguf", **TAGS.get(name, {})},
            }
            for name in self.show
        ]
        return httpx.Response(200, json={"models": models})

    def answer_show(self, request: httpx.Request) -> httpx.Response:
        """Answer POST /api/show like Ollama, 404 for a model it does not have."""
        name = json.loads(request.content)["model"]
        if name not in self.show:
            return httpx.Response(404, json={"error": f"model '{name}' not found"})
        return httpx.Response(200, json=self.show[name])


@pytest.fixture(autouse=True)
async def setup_homeassistant(hass: HomeAssistant) -> None:
    """Set up HA's core integration, which conversation (our dependency) needs."""
    assert await async_setup_component(hass, "homeassistant", {})


@pytest.fixture
def ollama_http() -> Iterator[respx.MockRouter]:
    """Answer the ``ollama`` client's requests to the LAN servers of these tests.

    Loopback traffic passes through untouched (the fake servers); any other
    request that no test answers fails.
    """
    router = respx.MockRouter(assert_all_called=False, assert_all_mocked=True)
    for host in ("127.0.0.1", "localhost", "::1"):
        router.route(host=host).pass_through()
    with router:
        yield router


@pytest.fixture
def ollama(ollama_http: respx.MockRouter) -> MockedOllama:
    """Serve the standard set of models at OLLAMA_URL."""
    return MockedOllama(ollama_http)


def suggested(result: dict[str, Any], field: str) -> Any:
    """Return the value a form shows prefilled in a field."""
    for key in result["data_schema"].schema:
        if key.schema == field:
            return (key.description or {}).get("suggested_value")
    msg = f"No field {field}"
    raise AssertionError(msg)


def select_options(
    result: dict[str, Any], field: str, part: str = "value"
) -> list[str]:
    """Return the values (or labels) a form offers in a drop-down."""
    for key, selector in result["data_schema"].schema.items():
        if key.schema == field:
            return [option[part] for option in selector.config["options"]]
    msg = f"No field {field}"
    raise AssertionError(msg)


async def start_user_flow(hass: HomeAssistant) -> dict[str, Any]:
    """Open the config flow the way the Add Integration dialog does; keep Ollama."""
    result = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_USER}
    )
    assert result["type"] is FlowResultType.FORM
    assert result["step_id"] == "user"
    result = await hass.config_entries.flow.async_configure(result["flow_id"], {})
    assert result["type"] is FlowResultType.FORM
    assert result["step_id"] == "ollama"
    return result


async def submit_url(hass: HomeAssistant, url: str = OLLAMA_URL) -> dict[str, Any]:
    """Start the config flow and submit the Ollama URL."""
    result = await start_user_flow(hass)
    return await hass.config_entries.flow.async_configure(
        result["flow_id"], {"ollama_url": url}
    )


def add_entry(
    hass: HomeAssistant,
    *,
    url: str = OLLAMA_URL,
    data: dict[str, str] | None = None,
    title: str | None = None,
    options: dict[str, Any] | None = None,
) -> MockConfigEntry:
    """Add an already configured entry; data adds to or replaces the defaults."""
    data = {"ollama_url": url, "model": "qwen3:8b", **(data or {})}
    entry = MockConfigEntry(
        domain=DOMAIN,
        title=title or f"{data['model']} on {URL(url).host}",
        data=data,
        options=DEFAULT_OPTIONS if options is None else options,
        unique_id=url,
    )
    entry.add_to_hass(hass)
    return entry


# The config flow.


async def test_first_form_offers_ollama_first(hass: HomeAssistant) -> None:
    """The first form asks which kind of server, with Ollama as the default."""
    result = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_USER}
    )
    [(key, selector)] = result["data_schema"].schema.items()
    assert key.schema == "backend"
    assert key.default() == "ollama"
    assert selector.config["options"] == ["ollama", "openai_compatible"]


async def test_user_form_suggests_localhost(hass: HomeAssistant) -> None:
    """The Ollama form asks for the URL with Ollama's default address."""
    result = await start_user_flow(hass)
    assert result["errors"] == {}
    key = next(iter(result["data_schema"].schema))
    assert key.schema == "ollama_url"
    assert key.default() == "http://localhost:11434"


@pytest.mark.usefixtures("mock_setup_entry")
async def test_full_flow_with_embedding_model(
    hass: HomeAssistant, ollama: MockedOllama
) -> None:
    """A user picks a chat and an embedding model and gets an entry with both."""
    result = await submit_url(hass, f" {OLLAMA_URL}/ ")
    assert result["type"] is FlowResultType.FORM
    assert result["step_id"] == "model"
    assert result["errors"] == {}
    assert result["description_placeholders"] == {"url": OLLAMA_URL}
    # Embedding-only models can't chat; tool-capable models come first.
    assert select_options(result, "model") == ["llama3.1:8b", "qwen3:8b", "gemma2:2b"]
    assert select_options(result, "model", "label") == [
        "llama3.1:8b (8.0B)",
        "qwen3:8b (8.2B)",
        "gemma2:2b (2.6B)",
    ]
    assert select_options(result, "embedding_model")[0] == "nomic-embed-text:latest"
    assert suggested(result, "model") == "llama3.1:8b"
    assert suggested(result, "embedding_model") == "nomic-embed-text:latest"

    result = await hass.config_entries.flow.async_configure(
        result["flow_id"],
        {"model": "qwen3:8b", "embedding_model": "nomic-embed-text:latest"},
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY
    # Titled as the device is named, not after the model.
    assert result["title"] == "Personal Assistant"
    assert result["data"] == {
        "ollama_url": OLLAMA_URL,
        "model": "qwen3:8b",
        "embedding_model": "nomic-embed-text:latest",
    }
    assert result["options"] == DEFAULT_OPTIONS
    assert result["result"].unique_id == OLLAMA_URL


@pytest.mark.usefixtures("mock_setup_entry")
async def test_full_flow_without_embedding_model(
    hass: HomeAssistant, ollama: MockedOllama
) -> None:
    """Leaving the embedding model empty stores no embedding model."""
    result = await submit_url(hass)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {"model": "llama3.1:8b"}
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY
    assert result["data"] == {"ollama_url": OLLAMA_URL, "model": "llama3.1:8b"}
    assert result["options"] == DEFAULT_OPTIONS


@pytest.mark.usefixtures("mock_setup_entry")
async def test_credentials_stay_out_of_unique_id_and_title(
    hass: HomeAssistant, ollama: MockedOllama
) -> None:
    """A URL with a password keeps it in data but shows and keys it without."""
    result = await submit_url(hass, "http://ha:secret@192.168.1.10:11434/api")
    assert result["description_placeholders"] == {"url": OLLAMA_URL}
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {"model": "qwen3:8b"}
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY
    assert result["data"]["ollama_url"] == "http://ha:secret@192.168.1.10:11434"
    assert result["result"].unique_id == OLLAMA_URL
    assert "secret" not in result["title"]


@pytest.mark.parametrize(
    "url", ["192.168.1.10:11434", "ftp://192.168.1.10", "http://", "http://h:99999"]
)
async def test_invalid_url_is_shown_on_the_field(
    hass: HomeAssistant, ollama_http: respx.MockRouter, url: str
) -> None:
    """An address without http(s) or host is refused before contacting anything."""
    result = await submit_url(hass, url)
    assert result["type"] is FlowResultType.FORM
    assert result["step_id"] == "ollama"
    assert result["errors"] == {"ollama_url": "invalid_url"}
    assert suggested(result, "ollama_url") == url
    assert ollama_http.calls.call_count == 0


@pytest.mark.parametrize(
    "failure",
    [
        {"side_effect": httpx.ConnectError("Connection refused")},
        {"side_effect": httpx.ReadTimeout("timed out")},
        {"return_value": httpx.Response(500, text="Internal Server Error")},
        {"return_value": httpx.Response(404, text="404 page not found")},
        {"return_value": httpx.Response(200, text="<html>Not Ollama</html>")},
    ],
    ids=["refused", "timeout", "http_500", "not_ollama", "not_json"],
)
async def test_unreachable_server_shows_cannot_connect(
    hass: HomeAssistant, ollama_http: respx.MockRouter, failure: dict[str, Any]
) -> None:
    """Every way of not reaching Ollama shows cannot_connect and keeps the URL."""
    ollama_http.get(f"{OLLAMA_URL}/api/tags").mock(**failure)
    result = await submit_url(hass)
    assert result["type"] is FlowResultType.FORM
    assert result["step_id"] == "ollama"
    assert result["errors"] == {"base": "cannot_connect"}
    assert suggested(result, "ollama_url") == OLLAMA_URL


async def test_unexpected_error_shows_unknown(
    hass: HomeAssistant,
    ollama_http: respx.MockRouter,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An unexpected failure shows unknown and logs the traceback."""
    ollama_http.get(f"{OLLAMA_URL}/api/tags").mock(side_effect=RuntimeError("boom"))
    result = await submit_url(hass)
    assert result["errors"] == {"base": "unknown"}
    assert "Unexpected error listing models at http://192.168.1.10:11434" in caplog.text
    assert "RuntimeError: boom" in caplog.text


@pytest.mark.usefixtures("mock_setup_entry")
async def test_server_recovers_after_cannot_connect(
    hass: HomeAssistant, ollama_http: respx.MockRouter
) -> None:
    """After fixing the server the same form moves on to the model step."""
    ollama_http.get(f"{OLLAMA_URL}/api/tags").mock(
        side_effect=httpx.ConnectError("Connection refused")
    )
    result = await submit_url(hass)
    assert result["errors"] == {"base": "cannot_connect"}

    MockedOllama(ollama_http)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {"ollama_url": OLLAMA_URL}
    )
    assert result["step_id"] == "model"


@pytest.mark.parametrize(
    "models",
    [{}, {"nomic-embed-text:latest": SHOW["nomic-embed-text:latest"]}],
    ids=["no_models", "only_embedding"],
)
async def test_server_without_chat_models_asks_to_pull_one(
    hass: HomeAssistant, ollama_http: respx.MockRouter, models: dict[str, Any]
) -> None:
    """A server with no chat model installed says so instead of offering nothing."""
    MockedOllama(ollama_http, models=models)
    result = await submit_url(hass)
    assert result["type"] is FlowResultType.FORM
    assert result["step_id"] == "ollama"
    assert result["errors"] == {"base": "no_models"}


@pytest.mark.usefixtures("mock_setup_entry")
async def test_model_without_tools_is_refused_then_a_tool_model_accepted(
    hass: HomeAssistant, ollama: MockedOllama
) -> None:
    """A model that can't call tools is refused; picking another one finishes."""
    result = await submit_url(hass)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {"model": "gemma2:2b"}
    )
    assert result["type"] is FlowResultType.FORM
    assert result["step_id"] == "model"
    assert result["errors"] == {"model": "model_no_tools"}
    assert suggested(result, "model") == "gemma2:2b"

    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {"model": "qwen3:8b"}
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY
    assert result["data"]["model"] == "qwen3:8b"


async def test_chat_model_as_embedding_model_is_refused(
    hass: HomeAssistant, ollama: MockedOllama
) -> None:
    """A chat model chosen as the embedding model is refused on that field."""
    result = await submit_url(hass)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {"model": "qwen3:8b", "embedding_model": "llama3.1:8b"}
    )
    assert result["type"] is FlowResultType.FORM
    assert result["errors"] == {"embedding_model": "not_embedding_model"}


async def test_model_removed_before_submit_is_reported(
    hass: HomeAssistant, ollama: MockedOllama
) -> None:
    """A model deleted on the server after the list was shown is reported."""
    result = await submit_url(hass)
    del ollama.show["qwen3:8b"]
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {"model": "qwen3:8b"}
    )
    assert result["errors"] == {"model": "model_not_found"}


@pytest.mark.parametrize(
    ("failure", "error"),
    [
        ({"return_value": httpx.Response(500)}, "cannot_connect"),
        ({"side_effect": httpx.ConnectError("Connection refused")}, "cannot_connect"),
        ({"side_effect": RuntimeError("boom")}, "unknown"),
    ],
    ids=["http_500", "refused", "unexpected"],
)
async def test_model_check_failure_is_shown_and_all_models_offered(
    hass: HomeAssistant,
    ollama_http: respx.MockRouter,
    failure: dict[str, Any],
    error: str,
) -> None:
    """If /api/show fails, every model is offered and the submit shows the error."""
    MockedOllama(ollama_http)
    ollama_http.post(f"{OLLAMA_URL}/api/show").mock(**failure)

    result = await submit_url(hass)
    assert result["step_id"] == "model"
    assert sorted(select_options(result, "model")) == sorted(SHOW)
    assert suggested(result, "model") is None
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {"model": "qwen3:8b"}
    )
    assert result["type"] is FlowResultType.FORM
    assert result["errors"] == {"base": error}


@pytest.mark.usefixtures("mock_setup_entry")
async def test_old_ollama_without_capabilities_accepts_the_choice(
    hass: HomeAssistant, ollama_http: respx.MockRouter
) -> None:
    """Servers older than Ollama 0.6.4 report no capabilities: trust the user."""
    models = {
        name: {key: value for key, value in show.items() if key != "capabilities"}
        for name, show in SHOW.items()
    }
    models["mystery:latest"] = {}
    MockedOllama(ollama_http, models=models)
    result = await submit_url(hass)
    assert sorted(select_options(result, "model")) == sorted(models)
    assert "mystery:latest" in select_options(result, "model", "label")
    assert suggested(result, "model") is None
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {"model": "gemma2:2b", "embedding_model": "gemma2:2b"}
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY


async def test_a_second_entry_is_refused_whatever_the_server(
    hass: HomeAssistant, ollama_http: respx.MockRouter
) -> None:
    """One entry answers Telegram: a second is refused before any question.

    Whatever the URL (the same server as ``localhost``, ``127.0.0.1`` or
    another server): the existing entry's Reconfigure changes it.
    """
    add_entry(hass)
    result = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_USER}
    )
    assert result["type"] is FlowResultType.ABORT
    assert result["reason"] == "single_instance_allowed"
    assert ollama_http.calls.call_count == 0


# Reconfigure.


async def test_reconfigure_moves_to_another_server(
    hass: HomeAssistant,
    ollama_http: respx.MockRouter,
    mock_setup_entry: AsyncMock,
) -> None:
    """Reconfigure prefills the current values, then moves the entry and reloads."""
    entry = add_entry(hass, data={"model": "llama3.1:8b"})
    MockedOllama(ollama_http)
    MockedOllama(ollama_http, url=OTHER_URL)

    result = await entry.start_reconfigure_flow(hass)
    assert result["type"] is FlowResultType.FORM
    assert result["step_id"] == "reconfigure"
    assert suggested(result, "ollama_url") == OLLAMA_URL

    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {"ollama_url": f"{OTHER_URL}/"}
    )
    assert result["step_id"] == "model"
    assert suggested(result, "model") == "llama3.1:8b"
    assert suggested(result, "embedding_model") is None

    result = await hass.config_entries.flow.async_configure(
        result["flow_id"],
        {"model": "qwen3:8b", "embedding_model": "nomic-embed-text:latest"},
    )
    await hass.async_block_till_done()
    assert result["type"] is FlowResultType.ABORT
    assert result["reason"] == "reconfigure_successful"
    assert entry.data == {
        "ollama_url": OTHER_URL,
        "model": "qwen3:8b",
        "embedding_model": "nomic-embed-text:latest",
    }
    assert entry.unique_id == OTHER_URL
    # The title generated from the old model and server becomes the device's name.
    assert entry.title == "Personal Assistant"
    assert entry.options == DEFAULT_OPTIONS
    assert len(mock_setup_entry.mock_calls) == 1


@pytest.mark.usefixtures("mock_setup_entry")
async def test_reconfigure_same_server_keeps_a_custom_title(
    hass: HomeAssistant, ollama: MockedOllama
) -> None:
    """Changing only the model keeps the unique id and a title the user chose."""
    entry = add_entry(
        hass,
        title="House brain",
        data={"embedding_model": "nomic-embed-text:latest"},
    )
    result = await entry.start_reconfigure_flow(hass)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {"ollama_url": OLLAMA_URL}
    )
    assert suggested(result, "model") == "qwen3:8b"
    assert suggested(result, "embedding_model") == "nomic-embed-text:latest"
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {"model": "llama3.1:8b"}
    )
    await hass.async_block_till_done()
    assert result["reason"] == "reconfigure_successful"
    assert entry.data == {"ollama_url": OLLAMA_URL, "model": "llama3.1:8b"}
    assert entry.unique_id == OLLAMA_URL
    assert entry.title == "House brain"


async def test_reconfigure_onto_a_configured_server_aborts(
    hass: HomeAssistant, ollama_http: respx.MockRouter
) -> None:
    """Moving an entry to a server another entry uses aborts and changes nothing."""
    entry = add_entry(hass)
    add_entry(hass, url=OTHER_URL)
    result = await entry.start_reconfigure_flow(hass)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {"ollama_url": f"{OTHER_URL}/"}
    )
    assert result["type"] is FlowResultType.ABORT
    assert result["reason"] == "already_configured"
    assert entry.data["ollama_url"] == OLLAMA_URL
    assert entry.unique_id == OLLAMA_URL


async def test_reconfigure_shows_errors_on_its_own_form(
    hass: HomeAssistant, ollama_http: respx.MockRouter
) -> None:
    """A bad URL during reconfigure re-shows the reconfigure form."""
    entry = add_entry(hass)
    result = await entry.start_reconfigure_flow(hass)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {"ollama_url": "192.168.1.30"}
    )
    assert result["type"] is FlowResultType.FORM
    assert result["step_id"] == "reconfigure"
    assert result["errors"] == {"ollama_url": "invalid_url"}
    assert suggested(result, "ollama_url") == "192.168.1.30"


# The options flow.


async def test_options_form_shows_current_values(hass: HomeAssistant) -> None:
    """The options form is prefilled with what is stored, ids as text."""
    entry = add_entry(
        hass,
        options={**DEFAULT_OPTIONS, "num_ctx": 16384, "allowed_user_ids": [42]},
    )
    result = await hass.config_entries.options.async_init(entry.entry_id)
    assert result["type"] is FlowResultType.FORM
    assert result["step_id"] == "init"
    assert suggested(result, "num_ctx") == 16384
    assert suggested(result, "web_search") is True
    assert suggested(result, "fast_path") is True
    assert suggested(result, "allowed_user_ids") == ["42"]


@pytest.mark.usefixtures("mock_setup_entry")
async def test_options_without_allowed_ids_are_saved_as_typed_values(
    hass: HomeAssistant,
) -> None:
    """Without allowed ids the form saves at once, numbers as ints, other keys kept."""
    entry = add_entry(
        hass,
        options={
            **DEFAULT_OPTIONS,
            "allowed_user_ids": [42],
            "user_mapping": {"42": "abc"},
            "blocked_services": ["lock.unlock"],
        },
    )
    result = await hass.config_entries.options.async_init(entry.entry_id)
    result = await hass.config_entries.options.async_configure(
        result["flow_id"],
        {
            "confirmation_timeout": 600.0,
            "session_timeout": 15,
            "num_ctx": 32768,
            "num_predict": 512,
            "keep_alive": 0,
            "request_timeout": 300,
            "web_search": False,
        },
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY
    assert entry.options == {
        "confirmation_timeout": 600,
        "session_timeout": 15,
        "num_ctx": 32768,
        "num_predict": 512,
        "keep_alive": 0,
        "request_timeout": 300,
        "warm_cache": True,
        "web_search": False,
        "ha_tools": False,
        "fast_path": True,
        "allowed_user_ids": [],
        "user_mapping": {},
        "blocked_services": ["lock.unlock"],
        "stt_engine": "",
        "voice_replies": False,
        "vision_model": "",
        "night_hours": "22:00-07:00",
        "open_minutes": 30,
        "notice_user_ids": [],
    }
    assert isinstance(entry.options["confirmation_timeout"], int)


@pytest.mark.usefixtures("mock_setup_entry")
async def test_options_fill_in_defaults_for_missing_keys(hass: HomeAssistant) -> None:
    """An entry with no options gets every option when the form is saved."""
    entry = add_entry(hass, options={})
    result = await hass.config_entries.options.async_init(entry.entry_id)
    assert suggested(result, "confirmation_timeout") == 300
    result = await hass.config_entries.options.async_configure(result["flow_id"], {})
    assert result["type"] is FlowResultType.CREATE_ENTRY
    assert entry.options == DEFAULT_OPTIONS


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("confirmation_timeout", 29),
        ("confirmation_timeout", 3601),
        ("session_timeout", 0),
        ("session_timeout", 1441),
        ("num_ctx", 1024),
        ("num_ctx", 262144),
        ("keep_alive", -2),
        ("request_timeout", 0),
        ("request_timeout", 601),
    ],
)
async def test_options_out_of_range_are_refused(
    hass: HomeAssistant, field: str, value: int
) -> None:
    """Numbers outside their range are refused by the form."""
    entry = add_entry(hass)
    result = await hass.config_entries.options.async_init(entry.entry_id)
    with pytest.raises(InvalidData):
        await hass.config_entries.options.async_configure(
            result["flow_id"], {field: value}
        )
    assert entry.options == DEFAULT_OPTIONS


@pytest.mark.parametrize("bad_id", ["@alice", "12a", "-5", "0", "1_000", "²"])
async def test_invalid_telegram_id_is_refused_then_fixed(
    hass: HomeAssistant, hass_admin_user: MockUser, bad_id: str
) -> None:
    """A user name instead of a numeric id is refused and the input kept."""
    entry = add_entry(hass)
    result = await hass.config_entries.options.async_init(entry.entry_id)
    result = await hass.config_entries.options.async_configure(
        result["flow_id"], {"allowed_user_ids": ["123456789", bad_id]}
    )
    assert result["type"] is FlowResultType.FORM
    assert result["step_id"] == "init"
    assert result["errors"] == {"allowed_user_ids": "invalid_user_id"}
    assert suggested(result, "allowed_user_ids") == ["123456789", bad_id]

    result = await hass.config_entries.options.async_configure(
        result["flow_id"], {"allowed_user_ids": ["123456789"]}
    )
    assert result["step_id"] == "user_mapping"


@pytest.mark.usefixtures("mock_setup_entry")
async def test_allowed_ids_lead_to_mapping_that_stores_chosen_users(
    hass: HomeAssistant, hass_admin_user: MockUser, hass_owner_user: MockUser
) -> None:
    """Each allowed id gets a choice of real HA users; only chosen links are kept."""
    MockUser(name="Supervisor", system_generated=True).add_to_hass(hass)
    MockUser(name="Former tenant", is_active=False).add_to_hass(hass)
    entry = add_entry(
        hass,
        options={
            **DEFAULT_OPTIONS,
            "allowed_user_ids": [111],
            "user_mapping": {"111": hass_owner_user.id, "333": "gone-user"},
        },
    )

    result = await hass.config_entries.options.async_init(entry.entry_id)
    result = await hass.config_entries.options.async_configure(
        result["flow_id"],
        {"allowed_user_ids": [" 111 ", "", "222", "111"], "web_search": False},
    )
    assert result["type"] is FlowResultType.FORM
    assert result["step_id"] == "user_mapping"
    assert [key.schema for key in result["data_schema"].schema] == ["111", "222"]
    offered = select_options(result, "111")
    assert sorted(offered) == sorted([hass_admin_user.id, hass_owner_user.id])
    assert suggested(result, "111") == hass_owner_user.id
    assert suggested(result, "222") is None

    result = await hass.config_entries.options.async_configure(
        result["flow_id"], {"111": hass_admin_user.id}
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY
    assert entry.options["allowed_user_ids"] == [111, 222]
    assert entry.options["user_mapping"] == {"111": hass_admin_user.id}
    assert entry.options["web_search"] is False


@pytest.mark.usefixtures("mock_setup_entry")
async def test_mapping_step_with_nobody_linked_stores_an_empty_mapping(
    hass: HomeAssistant, hass_admin_user: MockUser
) -> None:
    """Leaving every Telegram user unlinked stores an empty mapping."""
    entry = add_entry(hass)
    result = await hass.config_entries.options.async_init(entry.entry_id)
    result = await hass.config_entries.options.async_configure(
        result["flow_id"], {"allowed_user_ids": ["555"]}
    )
    result = await hass.config_entries.options.async_configure(result["flow_id"], {})
    assert result["type"] is FlowResultType.CREATE_ENTRY
    assert entry.options["allowed_user_ids"] == [555]
    assert entry.options["user_mapping"] == {}


async def test_mapping_refuses_a_user_that_is_not_offered(
    hass: HomeAssistant, hass_admin_user: MockUser
) -> None:
    """Only listed HA users can be linked."""
    entry = add_entry(hass)
    result = await hass.config_entries.options.async_init(entry.entry_id)
    result = await hass.config_entries.options.async_configure(
        result["flow_id"], {"allowed_user_ids": ["555"]}
    )
    with pytest.raises(InvalidData):
        await hass.config_entries.options.async_configure(
            result["flow_id"], {"555": "not-a-user"}
        )


def add_telegram_bot(hass: HomeAssistant, chats: dict[int, str]) -> MockConfigEntry:
    """Add a telegram_bot entry whose allowed chats have these titles."""
    entry = MockConfigEntry(
        domain="telegram_bot",
        title="@house_bot",
        data={"platform": "webhooks"},
        subentries_data=[
            ConfigSubentryData(
                data={"chat_id": chat_id},
                subentry_type="allowed_chat_ids",
                title=title,
                unique_id=str(chat_id),
            )
            for chat_id, title in chats.items()
        ],
    )
    entry.add_to_hass(hass)
    return entry


@pytest.mark.usefixtures("mock_setup_entry")
async def test_mapping_labels_people_by_the_name_telegram_gave_their_chat(
    hass: HomeAssistant, hass_admin_user: MockUser, hass_owner_user: MockUser
) -> None:
    """A private chat the bot allows names its user; others keep their bare id.

    A group's title (negative id), and a title that is only the id (Telegram
    had no name), name nobody.
    """
    add_telegram_bot(
        hass, {111: "Anna", 222: "222", -100123: "Family", 333: "  Ben Miller "}
    )
    entry = add_entry(
        hass,
        options={**DEFAULT_OPTIONS, "user_mapping": {"333": hass_owner_user.id}},
    )
    result = await hass.config_entries.options.async_init(entry.entry_id)
    result = await hass.config_entries.options.async_configure(
        result["flow_id"], {"allowed_user_ids": ["111", "222", "333", "444"]}
    )
    assert result["step_id"] == "user_mapping"
    labels = [key.schema for key in result["data_schema"].schema]
    assert labels == ["Anna (111)", "222", "Ben Miller (333)", "444"]
    assert suggested(result, "Ben Miller (333)") == hass_owner_user.id

    result = await hass.config_entries.options.async_configure(
        result["flow_id"],
        {"Anna (111)": hass_admin_user.id, "Ben Miller (333)": hass_owner_user.id},
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY
    # The id is what is stored, whatever the label.
    assert entry.options["user_mapping"] == {
        "111": hass_admin_user.id,
        "333": hass_owner_user.id,
    }


# normalize_ollama_url and the Ollama backend's client.


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://192.168.1.10:11434", "http://192.168.1.10:11434"),
        ("  http://192.168.1.10:11434/  ", "http://192.168.1.10:11434"),
        ("http://192.168.1.10:11434/api", "http://192.168.1.10:11434"),
        ("http://192.168.1.10:11434/api/tags?x=1#top", "http://192.168.1.10:11434"),
        ("HTTP://Ollama.LAN:11434", "http://ollama.lan:11434"),
        ("https://ollama.example.com", "https://ollama.example.com"),
        ("https://ollama.example.com:443/", "https://ollama.example.com"),
        ("http://[fd00::10]:11434", "http://[fd00::10]:11434"),
        ("http://ha:s3cret@ollama.lan:11434/", "http://ha:s3cret@ollama.lan:11434"),
    ],
)
def test_normalize_url(url: str, expected: str) -> None:
    """URLs are reduced to scheme, credentials, host and non-default port."""
    assert normalize_ollama_url(url) == expected


@pytest.mark.parametrize(
    "url",
    [
        "",
        "192.168.1.10:11434",
        "localhost",
        "ftp://192.168.1.10",
        "http://",
        "http:///api",
        "http://exa mple.com",
        "http://host:99999",
        "http://host:port",
    ],
)
def test_normalize_url_refuses(url: str) -> None:
    """Anything but an http(s) URL with a host is refused."""
    with pytest.raises(InvalidUrl):
        normalize_ollama_url(url)


def test_url_without_credentials() -> None:
    """Credentials are removed for display and logs."""
    assert url_without_credentials("http://a:b@h:1") == "http://h:1"
    assert url_without_credentials("http://h:1") == "http://h:1"


async def test_list_models_reads_tags(ollama_http: respx.MockRouter) -> None:
    """Models are read from /api/tags, labelled with their size; nameless skipped."""
    ollama_http.get(f"{OLLAMA_URL}/api/tags").respond(
        json={
            "models": [
                {
                    "name": "qwen3:8b",
                    "model": "qwen3:8b",
                    "size": 5_225_376_047,
                    "details": {"family": "qwen3", "parameter_size": "8.2B"},
                },
                {"model": "tiny:latest", "size": True, "details": None},
                {"name": ""},
            ]
        },
    )
    models = await OllamaBackend(OLLAMA_URL).async_list_models()
    assert models == [
        ServerModel("qwen3:8b", "qwen3:8b (8.2B)"),
        ServerModel("tiny:latest", "tiny:latest"),
    ]


async def test_show_model_reads_capabilities(
    ollama_http: respx.MockRouter, ollama: MockedOllama
) -> None:
    """Capabilities come from /api/show, asked for by the model's name."""
    backend = OllamaBackend(OLLAMA_URL)
    assert await backend.async_capabilities("qwen3:8b") == (
        "completion",
        "tools",
        "thinking",
    )
    assert await backend.async_capabilities("nomic-embed-text:latest") == ("embedding",)
    request = ollama_http.calls.last.request
    assert json.loads(request.content) == {"model": "nomic-embed-text:latest"}


@pytest.mark.parametrize(
    "body",
    [
        {"capabilities": "tools", "model_info": {"llama.context_length": 8192}},
        {"model_info": {"general.architecture": "llama"}},
        {"model_info": None},
        {},
    ],
)
async def test_show_model_tolerates_missing_details(
    ollama_http: respx.MockRouter, body: dict[str, Any]
) -> None:
    """Missing or odd details give no capabilities: the server does not say."""
    ollama_http.post(f"{OLLAMA_URL}/api/show").respond(json=body)
    backend = OllamaBackend(OLLAMA_URL)
    assert await backend.async_capabilities("m") == ()
    assert await backend.async_supports_tools("m")


async def test_show_model_not_found(
    ollama_http: respx.MockRouter, ollama: MockedOllama
) -> None:
    """A 404 from /api/show means the model is not installed."""
    with pytest.raises(ModelNotFound, match="missing:latest"):
        await OllamaBackend(OLLAMA_URL).async_capabilities("missing:latest")


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ({"side_effect": httpx.ConnectError("refused")}, ServerUnreachable),
        ({"side_effect": httpx.ReadTimeout("timed out")}, ServerUnreachable),
        ({"return_value": httpx.Response(502)}, ServerUnreachable),
        ({"return_value": httpx.Response(200, text="not json")}, ServerUnreachable),
        ({"return_value": httpx.Response(401)}, ModelServerError),
        ({"return_value": httpx.Response(404)}, ModelServerError),
        ({"return_value": httpx.Response(200, json=["a", "list"])}, ModelServerError),
        (
            {"return_value": httpx.Response(200, json={"models": None})},
            ModelServerError,
        ),
    ],
)
async def test_list_models_errors(
    ollama_http: respx.MockRouter,
    answer: dict[str, Any],
    error: type[ModelServerError],
) -> None:
    """Failures map to ServerUnreachable (retry later) or ModelServerError."""
    ollama_http.get(f"{OLLAMA_URL}/api/tags").mock(**answer)
    with pytest.raises(error) as exc_info:
        await OllamaBackend(OLLAMA_URL).async_list_models()
    assert not isinstance(exc_info.value, ModelNotFound)
    if error is ModelServerError:
        assert not isinstance(exc_info.value, ServerUnreachable)


async def test_show_model_unexpected_answer(ollama_http: respx.MockRouter) -> None:
    """An answer that is not an object is a ModelServerError."""
    ollama_http.post(f"{OLLAMA_URL}/api/show").respond(json=["nope"])
    with pytest.raises(ModelServerError):
        await OllamaBackend(OLLAMA_URL).async_capabilities("m")


async def test_timeout_is_enforced_and_errors_hide_credentials(
    ollama_http: respx.MockRouter,
) -> None:
    """A server slower than the timeout fails fast; messages carry no password."""

    async def hang(_request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(10)
        raise AssertionError  # pragma: no cover

    ollama_http.get(f"{OLLAMA_URL}/api/tags").mock(side_effect=hang)
    backend = OllamaBackend("http://ha:s3cret@192.168.1.10:11434", probe_timeout=0.01)
    with pytest.raises(ServerTimeout) as exc_info:
        await backend.async_list_models()
    assert "s3cret" not in str(exc_info.value)
    assert "192.168.1.10" in str(exc_info.value)


async def test_credentials_in_the_url_are_sent_as_basic_auth(
    ollama_http: respx.MockRouter, ollama: MockedOllama
) -> None:
    """A user name and password in the URL reach Ollama (a proxy in front of it)."""
    backend = OllamaBackend("http://ha:s3cret@192.168.1.10:11434")
    assert await backend.async_list_models()
    request = ollama_http.calls.last.request
    assert request.url.host == "192.168.1.10"
    assert request.headers["authorization"] == "Basic aGE6czNjcmV0"


# The permission policy in the options flow.


# Each permission list is a folded section of its own, named after the list.
SECTIONS = {
    "confirm_services": "confirm",
    "blocked_services": "blocked",
    "allowed_scripts": "scripts",
    "admin_user_ids": "admins",
}


def section_field(result: dict[str, Any], field: str) -> tuple[Any, Any]:
    """Return the key and selector of a field in its permission section."""
    for key, value in result["data_schema"].schema.items():
        if key.schema == SECTIONS[field]:
            for inner_key, selector in value.schema.schema.items():
                if inner_key.schema == field:
                    return inner_key, selector
    msg = f"No field {field} in the section {SECTIONS[field]}"
    raise AssertionError(msg)


def section_suggested(result: dict[str, Any], field: str) -> Any:
    """Return the value a permission section shows prefilled in a field."""
    key, _selector = section_field(result, field)
    return (key.description or {}).get("suggested_value")


def sections(**fields: Any) -> dict[str, Any]:
    """Return a submission of permission fields, each in its section."""
    return {SECTIONS[field]: {field: value} for field, value in fields.items()}


def unsafe_issue(hass: HomeAssistant, entry: MockConfigEntry) -> ir.IssueEntry | None:
    """Return the entry's unsafe-permissions repair issue, if raised."""
    return ir.async_get(hass).async_get_issue(
        DOMAIN, f"unsafe_permissions_{entry.entry_id}"
    )


async def test_options_form_shows_the_default_permissions(
    hass: HomeAssistant,
) -> None:
    """A folded Permissions section is prefilled with the defaults of DESIGN §3."""
    entry = add_entry(hass)
    result = await hass.config_entries.options.async_init(entry.entry_id)
    assert section_suggested(result, "confirm_services") == sorted(
        DEFAULT_CONFIRM_SERVICES
    )
    assert section_suggested(result, "blocked_services") == sorted(
        DEFAULT_BLOCKED_SERVICES
    )
    assert section_suggested(result, "allowed_scripts") == []
    assert section_suggested(result, "admin_user_ids") == []
    _key, scripts = section_field(result, "allowed_scripts")
    assert scripts.config["domain"] == ["script"]
    assert scripts.config["multiple"] is True
    folded = {
        key.schema: value.options["collapsed"]
        for key, value in result["data_schema"].schema.items()
        if key.schema in SECTIONS.values()
    }
    assert folded == dict.fromkeys(("confirm", "blocked", "scripts", "admins"), True)


async def test_options_form_shows_the_stored_permissions(hass: HomeAssistant) -> None:
    """Stored entries are prefilled, and custom ones are offered in the list."""
    entry = add_entry(
        hass,
        options={
            **DEFAULT_OPTIONS,
            "confirm_services": ["lock.unlock", "light"],
            "blocked_services": ["shell_command"],
            "allowed_scripts": ["script.goodnight"],
            "admin_user_ids": [42],
        },
    )
    result = await hass.config_entries.options.async_init(entry.entry_id)
    assert section_suggested(result, "confirm_services") == ["light", "lock.unlock"]
    assert section_suggested(result, "blocked_services") == ["shell_command"]
    assert section_suggested(result, "allowed_scripts") == ["script.goodnight"]
    assert section_suggested(result, "admin_user_ids") == ["42"]
    _key, confirm = section_field(result, "confirm_services")
    assert "light" in confirm.config["options"]
    assert "lock.open" in confirm.config["options"]


@pytest.mark.usefixtures("mock_setup_entry")
async def test_permissions_are_saved_as_flat_options(hass: HomeAssistant) -> None:
    """The section's fields are stored next to the other options, cleaned up."""
    entry = add_entry(hass)
    result = await hass.config_entries.options.async_init(entry.entry_id)
    result = await hass.config_entries.options.async_configure(
        result["flow_id"],
        {
            "num_ctx": 16384,
            "num_predict": 512,
            **sections(
                confirm_services=[*sorted(DEFAULT_CONFIRM_SERVICES), " light "],
                blocked_services=[*sorted(DEFAULT_BLOCKED_SERVICES), "input_text"],
                allowed_scripts=["script.goodnight"],
                admin_user_ids=[" 42 ", "", "7", "42"],
            ),
        },
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY
    assert entry.options == {
        **DEFAULT_OPTIONS,
        "num_ctx": 16384,
        "num_predict": 512,
        "confirm_services": sorted({*DEFAULT_CONFIRM_SERVICES, "light"}),
        "blocked_services": sorted({*DEFAULT_BLOCKED_SERVICES, "input_text"}),
        "allowed_scripts": ["script.goodnight"],
        "admin_user_ids": [42, 7],
    }
    assert Policy.from_options(entry.options).allowed_scripts == {"script.goodnight"}
    assert unsafe_issue(hass, entry) is None


@pytest.mark.usefixtures("mock_setup_entry")
async def test_emptied_permission_fields_are_saved_empty(hass: HomeAssistant) -> None:
    """A field the user clears arrives without its key and is stored empty."""
    entry = add_entry(hass)
    result = await hass.config_entries.options.async_init(entry.entry_id)
    result = await hass.config_entries.options.async_configure(
        result["flow_id"], {name: {} for name in SECTIONS.values()}
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY
    assert entry.options["confirm_services"] == []
    assert entry.options["blocked_services"] == []
    assert entry.options["allowed_scripts"] == []
    assert entry.options["admin_user_ids"] == []


@pytest.mark.parametrize(
    "bad", ["Lock.unlock", "lock.", "lock unlock", "lock.unlock.now", "*", "light;"]
)
async def test_a_malformed_service_entry_is_refused_then_fixed(
    hass: HomeAssistant, bad: str
) -> None:
    """Entries must be domain or domain.service in lower case; input is kept."""
    entry = add_entry(hass)
    result = await hass.config_entries.options.async_init(entry.entry_id)
    permissions = sections(confirm_services=["lock.unlock"], blocked_services=[bad])
    result = await hass.config_entries.options.async_configure(
        result["flow_id"], permissions
    )
    assert result["type"] is FlowResultType.FORM
    assert result["errors"] == {"blocked": "invalid_service"}
    assert section_suggested(result, "blocked_services") == [bad]
    assert entry.options == DEFAULT_OPTIONS

    with patch(
        "custom_components.ha_personal_assistant.async_setup_entry", return_value=True
    ):
        result = await hass.config_entries.options.async_configure(
            result["flow_id"],
            {**permissions, **sections(blocked_services=["shell_command"])},
        )
    assert result["type"] is FlowResultType.CREATE_ENTRY
    assert entry.options["blocked_services"] == ["shell_command"]


async def test_a_malformed_admin_id_is_refused(hass: HomeAssistant) -> None:
    """Admin ids are Telegram user ids: whole numbers."""
    entry = add_entry(hass)
    result = await hass.config_entries.options.async_init(entry.entry_id)
    result = await hass.config_entries.options.async_configure(
        result["flow_id"],
        sections(
            confirm_services=sorted(DEFAULT_CONFIRM_SERVICES),
            blocked_services=sorted(DEFAULT_BLOCKED_SERVICES),
            admin_user_ids=["@alice"],
        ),
    )
    assert result["type"] is FlowResultType.FORM
    assert result["errors"] == {"admins": "invalid_user_id"}


@pytest.mark.usefixtures("mock_setup_entry")
async def test_unsafe_permissions_raise_a_repair_until_restored(
    hass: HomeAssistant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dropping lock.unlock's confirmation or unblocking scripts warns in Repairs."""
    # Each save reloads the entry, which the mocked setup never really started.
    monkeypatch.setattr(
        "custom_components.ha_personal_assistant.async_unload_entry",
        AsyncMock(return_value=True),
    )
    entry = add_entry(hass)
    result = await hass.config_entries.options.async_init(entry.entry_id)
    await hass.config_entries.options.async_configure(
        result["flow_id"],
        sections(
            confirm_services=sorted(DEFAULT_CONFIRM_SERVICES - {"lock.unlock"}),
            blocked_services=sorted(DEFAULT_BLOCKED_SERVICES - {"script"}),
        ),
    )
    issue = unsafe_issue(hass, entry)
    assert issue is not None
    assert issue.severity is ir.IssueSeverity.WARNING
    assert not issue.is_fixable
    assert issue.translation_key == "unsafe_permissions"
    assert issue.translation_placeholders == {
        "settings": "lock.unlock runs without confirmation; "
        "script is no longer blocked",
        "name": "Personal Assistant",
    }

    # Saving other options keeps the unsafe policy, and the warning.
    result = await hass.config_entries.options.async_init(entry.entry_id)
    await hass.config_entries.options.async_configure(
        result["flow_id"], {"web_search": False}
    )
    assert unsafe_issue(hass, entry) is not None

    result = await hass.config_entries.options.async_init(entry.entry_id)
    await hass.config_entries.options.async_configure(
        result["flow_id"],
        sections(
            confirm_services=sorted(DEFAULT_CONFIRM_SERVICES),
            blocked_services=sorted(DEFAULT_BLOCKED_SERVICES),
        ),
    )
    assert unsafe_issue(hass, entry) is None


@pytest.mark.usefixtures("mock_setup_entry")
async def test_permissions_survive_the_user_mapping_step(
    hass: HomeAssistant, hass_admin_user: MockUser
) -> None:
    """With allowed users, the policy is stored after the mapping step."""
    entry = add_entry(hass)
    result = await hass.config_entries.options.async_init(entry.entry_id)
    result = await hass.config_entries.options.async_configure(
        result["flow_id"],
        {
            "allowed_user_ids": ["555"],
            **sections(
                confirm_services=["lock.unlock"],
                blocked_services=sorted(DEFAULT_BLOCKED_SERVICES),
                admin_user_ids=["555"],
            ),
        },
    )
    assert result["step_id"] == "user_mapping"
    assert unsafe_issue(hass, entry) is None
    result = await hass.config_entries.options.async_configure(
        result["flow_id"], {"555": hass_admin_user.id}
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY
    assert entry.options["confirm_services"] == ["lock.unlock"]
    assert entry.options["admin_user_ids"] == [555]
    assert entry.options["user_mapping"] == {"555": hass_admin_user.id}
    issue = unsafe_issue(hass, entry)
    assert issue is not None
    assert (
        "lock.open runs without confirmation"
        in (issue.translation_placeholders or {})["settings"]
    )


def test_repair_strings_exist() -> None:
    """The issue and the new fields have literal English text."""
    strings = json.loads(
        (
            Path(__file__).parents[1]
            / "custom_components/ha_personal_assistant/translations/en.json"
        ).read_text(encoding="utf-8")
    )
    issue = strings["issues"]["unsafe_permissions"]
    assert "{settings}" in issue["description"]
    assert "{name}" in issue["description"]
    for field, name in SECTIONS.items():
        section = strings["options"]["step"]["init"]["sections"][name]
        assert section["name"].startswith("Permissions: ")
        assert section["description"]
        assert set(section["data"]) == {field}
        assert set(section["data_description"]) == {field}
    assert "invalid_service" in strings["options"]["error"]
    assert "[%key:" not in json.dumps(strings)


@pytest.mark.usefixtures("mock_setup_entry")
async def test_voice_and_photo_options_are_saved_and_can_be_emptied(
    hass: HomeAssistant,
    mock_setup_entry: AsyncMock,
) -> None:
    """stt_engine, voice_replies and vision_model; an emptied field clears it.

    Saving reloads the entry: its setup is mocked (no server to probe).
    """
    entry = add_entry(hass)
    result = await hass.config_entries.options.async_init(entry.entry_id)
    result = await hass.config_entries.options.async_configure(
        result["flow_id"],
        {
            "stt_engine": "stt.whisper",
            "voice_replies": True,
            "vision_model": " llava:7b ",
        },
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY
    assert entry.options["stt_engine"] == "stt.whisper"
    assert entry.options["voice_replies"] is True
    assert entry.options["vision_model"] == "llava:7b"
    result = await hass.config_entries.options.async_init(entry.entry_id)
    result = await hass.config_entries.options.async_configure(
        result["flow_id"], {"voice_replies": False}
    )
    assert entry.options["stt_engine"] == ""
    assert entry.options["vision_model"] == ""
    assert entry.options["voice_replies"] is False


@pytest.mark.usefixtures("mock_setup_entry")
async def test_home_assistants_tools_are_switched_on_in_the_options(
    hass: HomeAssistant,
) -> None:
    """The "Use Home Assistant's tools" switch is offered, off, and saved."""
    entry = add_entry(hass, options=DEFAULT_OPTIONS)
    result = await hass.config_entries.options.async_init(entry.entry_id)
    assert suggested(result, "ha_tools") is False
    result = await hass.config_entries.options.async_configure(
        result["flow_id"], {"ha_tools": True}
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY
    assert entry.options["ha_tools"] is True


@pytest.mark.usefixtures("mock_setup_entry")
async def test_night_hours_must_read_as_start_and_end(hass: HomeAssistant) -> None:
    """Notices' night hours: unreadable is refused; spaces are dropped."""
    entry = add_entry(hass)
    result = await hass.config_entries.options.async_init(entry.entry_id)
    result = await hass.config_entries.options.async_configure(
        result["flow_id"], {"night_hours": "late"}
    )
    assert result["errors"] == {"night_hours": "invalid_night_hours"}
    result = await hass.config_entries.options.async_configure(
        result["flow_id"], {"night_hours": "23:00 - 06:30", "open_minutes": 15}
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY
    assert entry.options["night_hours"] == "23:00-06:30"
    assert entry.options["open_minutes"] == 15


@pytest.mark.usefixtures("mock_setup_entry")
async def test_notice_user_ids_must_be_numeric_and_are_shown_again(
    hass: HomeAssistant,
) -> None:
    """Who gets notices: numeric ids only, saved as numbers, shown as typed."""
    entry = add_entry(hass)
    result = await hass.config_entries.options.async_init(entry.entry_id)
    result = await hass.config_entries.options.async_configure(
        result["flow_id"], {"notice_user_ids": ["alice"]}
    )
    assert result["errors"] == {"notice_user_ids": "invalid_user_id"}
    result = await hass.config_entries.options.async_configure(
        result["flow_id"], {"notice_user_ids": [" 42 ", "", "7", "42"]}
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY
    assert entry.options["notice_user_ids"] == [42, 7]
    result = await hass.config_entries.options.async_init(entry.entry_id)
    assert suggested(result, "notice_user_ids") == ["42", "7"]
