"""The assistant on a server speaking OpenAI's API (llama-server, vLLM, LM Studio).

Everything runs against tests/fake_openai.py: the ``openai`` package and
langchain-openai's ChatOpenAI talk to it over real HTTP on loopback.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
from typing import TYPE_CHECKING, Any

import openai
import pytest
from homeassistant import config_entries
from homeassistant.config_entries import ConfigEntryState
from homeassistant.data_entry_flow import FlowResultType
from homeassistant.helpers import issue_registry as ir
from pytest_homeassistant_custom_component.common import (  # type: ignore[import-untyped]
    MockConfigEntry,
)

from custom_components.ha_personal_assistant.const import (
    CONF_API_KEY,
    CONF_BACKEND,
    CONF_BASE_URL,
    CONF_MODEL,
    CONF_REQUEST_TIMEOUT,
    CONF_VISION_MODEL,
    DOMAIN,
)
from custom_components.ha_personal_assistant.diagnostics import (
    async_get_config_entry_diagnostics,
)
from custom_components.ha_personal_assistant.model_server import (
    async_is_private_url,
)
from custom_components.ha_personal_assistant.monitor import ModelStatus

from .common import MODEL, async_setup_assistant, async_setup_house, fixed_text
from .telegram_harness import ALICE_ID, media_update

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant

    from .fake_openai import FakeOpenAI
    from .telegram_harness import TelegramHarness

KEY = "sk-local-secret-key"


async def _open_openai_form(hass: HomeAssistant) -> dict[str, Any]:
    result = await hass.config_entries.flow.async_init(
        DOMAIN, context={"source": config_entries.SOURCE_USER}
    )
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_BACKEND: "openai_compatible"}
    )
    assert result["type"] is FlowResultType.FORM
    assert result["step_id"] == "openai_compatible"
    return result


def _options(result: dict[str, Any], field: str) -> list[str]:
    for key, selector in result["data_schema"].schema.items():
        if key.schema == field:
            return [option["value"] for option in selector.config["options"]]
    msg = f"No field {field}"
    raise AssertionError(msg)


# The config flow.


@pytest.mark.usefixtures("core", "mock_setup_entry")
async def test_flow_lists_the_servers_models_and_creates_the_entry(
    hass: HomeAssistant, fake_openai: FakeOpenAI
) -> None:
    """Base URL and key, then a chat and an embedding model from /v1/models."""
    fake_openai.api_key = KEY
    result = await _open_openai_form(hass)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_BASE_URL: fake_openai.url, CONF_API_KEY: KEY}
    )
    assert result["step_id"] == "model"
    assert _options(result, CONF_MODEL) == sorted(fake_openai.models)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"],
        {CONF_MODEL: MODEL, "embedding_model": "nomic-embed-text:latest"},
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY
    # A URL without a path gets /v1, where every such server serves its API.
    assert result["data"] == {
        CONF_BACKEND: "openai_compatible",
        CONF_BASE_URL: fake_openai.base_url,
        CONF_API_KEY: KEY,
        CONF_MODEL: MODEL,
        "embedding_model": "nomic-embed-text:latest",
    }
    assert result["result"].unique_id == fake_openai.base_url
    # The tool check asked for one token with one tool; the embedding check
    # embedded a word.
    [probe] = fake_openai.openai_requests
    assert probe["tools"]
    assert probe["max_tokens"] == 1
    assert fake_openai.embed_requests[-1]["model"] == "nomic-embed-text:latest"


@pytest.mark.usefixtures("core", "mock_setup_entry")
async def test_a_wrong_key_is_shown_on_the_key_field(
    hass: HomeAssistant, fake_openai: FakeOpenAI
) -> None:
    """The server answers 401: the form asks for the key again."""
    fake_openai.api_key = KEY
    result = await _open_openai_form(hass)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_BASE_URL: fake_openai.base_url, CONF_API_KEY: "nope"}
    )
    assert result["step_id"] == "openai_compatible"
    assert result["errors"] == {CONF_API_KEY: "invalid_auth"}
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_BASE_URL: fake_openai.base_url, CONF_API_KEY: KEY}
    )
    assert result["step_id"] == "model"


@pytest.mark.usefixtures("core", "mock_setup_entry")
async def test_an_unreachable_server_shows_cannot_connect(
    hass: HomeAssistant, fake_openai: FakeOpenAI
) -> None:
    """Nothing listens at the address: the form says so and keeps the URL."""
    url = fake_openai.base_url
    await fake_openai.stop()
    result = await _open_openai_form(hass)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_BASE_URL: url}
    )
    assert result["step_id"] == "openai_compatible"
    assert result["errors"] == {"base": "cannot_connect_openai"}


@pytest.mark.parametrize(
    "url",
    [
        "gpu-box:8000/v1",
        "ftp://gpu-box/v1",
        "http://",
        # URLs that do not even parse: a port that is no number, a bracket left open.
        "http://gpu-box:port/v1",
        "http://[fd00::5/v1",
    ],
)
@pytest.mark.usefixtures("core", "mock_setup_entry")
async def test_an_invalid_url_is_shown_on_the_field(
    hass: HomeAssistant, fake_openai: FakeOpenAI, url: str
) -> None:
    """An address without http(s) or host is refused before contacting anything."""
    result = await _open_openai_form(hass)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_BASE_URL: url}
    )
    assert result["step_id"] == "openai_compatible"
    assert result["errors"] == {CONF_BASE_URL: "invalid_url"}
    assert fake_openai.requests == []


@pytest.mark.usefixtures("core", "mock_setup_entry")
async def test_a_model_without_tool_support_is_refused(
    hass: HomeAssistant, fake_openai: FakeOpenAI
) -> None:
    """The server refuses tools for the model (vLLM without auto tool choice)."""
    result = await _open_openai_form(hass)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_BASE_URL: fake_openai.base_url}
    )
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_MODEL: "gemma:2b"}
    )
    assert result["step_id"] == "model"
    assert result["errors"] == {CONF_MODEL: "model_no_tools_openai"}
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_MODEL: MODEL, "embedding_model": MODEL}
    )
    # A chat model cannot embed: the embedding check says so.
    assert result["errors"] == {"embedding_model": "not_embedding_model_openai"}


@pytest.mark.usefixtures("core", "mock_setup_entry")
async def test_a_server_outside_the_home_asks_before_anything_is_sent(
    hass: HomeAssistant, fake_openai: FakeOpenAI
) -> None:
    """A public address shows the warning step before any request is made."""
    result = await _open_openai_form(hass)
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_BASE_URL: "https://models.example.invalid/v1"}
    )
    assert result["type"] is FlowResultType.FORM
    assert result["step_id"] == "public_server"
    assert result["description_placeholders"] == {
        "url": "https://models.example.invalid/v1"
    }
    assert fake_openai.requests == []


@pytest.mark.parametrize(
    ("url", "private"),
    [
        ("http://127.0.0.1:8080/v1", True),
        ("http://192.168.1.20:8000/v1", True),
        ("http://[fd00::5]:8000/v1", True),
        ("http://gpu-box:8000/v1", True),
        ("http://gpu-box.local:1234/v1", True),
        ("http://gpu.home.arpa/v1", True),
        ("http://8.8.8.8/v1", False),
        ("https://models.example.invalid/v1", False),
        # No host at all: nothing says it stays home.
        ("http:///v1", False),
    ],
)
async def test_which_addresses_count_as_the_home_network(
    url: str, *, private: bool
) -> None:
    """IP ranges and home-network names stay; the rest leaves the home."""
    assert await async_is_private_url(url) is private


@pytest.mark.usefixtures("core", "mock_setup_entry")
async def test_reconfigure_changes_the_url_and_the_key(
    hass: HomeAssistant, fake_openai: FakeOpenAI
) -> None:
    """Reconfigure asks for URL and key again, then the models."""
    entry = MockConfigEntry(
        domain=DOMAIN,
        title=f"{MODEL} on 192.168.1.20",
        unique_id="http://192.168.1.20:8000/v1",
        data={
            CONF_BACKEND: "openai_compatible",
            CONF_BASE_URL: "http://192.168.1.20:8000/v1",
            CONF_MODEL: MODEL,
        },
    )
    entry.add_to_hass(hass)
    fake_openai.api_key = KEY
    result = await entry.start_reconfigure_flow(hass)
    assert result["step_id"] == "reconfigure_openai"
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_BASE_URL: fake_openai.base_url, CONF_API_KEY: KEY}
    )
    assert result["step_id"] == "model"
    result = await hass.config_entries.flow.async_configure(
        result["flow_id"], {CONF_MODEL: MODEL}
    )
    assert result["type"] is FlowResultType.ABORT
    assert result["reason"] == "reconfigure_successful"
    assert entry.data[CONF_BASE_URL] == fake_openai.base_url
    assert entry.data[CONF_API_KEY] == KEY
    assert entry.unique_id == fake_openai.base_url
    assert entry.title == "Personal Assistant"


# The running assistant.


@pytest.fixture
async def assistant(
    hass: HomeAssistant, telegram: TelegramHarness, fake_openai: FakeOpenAI
) -> MockConfigEntry:
    """The demo house, the Telegram bot and the assistant on the fake server."""
    fake_openai.api_key = KEY
    await async_setup_house(hass)
    return await async_setup_assistant(hass, fake_openai)


async def test_a_message_is_answered_through_the_openai_api(
    assistant: MockConfigEntry, telegram: TelegramHarness, fake_openai: FakeOpenAI
) -> None:
    """The chat goes to /v1/chat/completions, streamed, with tools and a cap."""
    assert assistant.state is ConfigEntryState.LOADED
    fake_openai.reply("Hello Alice, the house is quiet.")
    await telegram.send_text("Hi, how is the house?")
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[-1]["text"] == "Hello Alice, the house is quiet."
    [request] = fake_openai.openai_requests
    assert request["model"] == MODEL
    assert request["stream"] is True
    assert request["stream_options"] == {"include_usage": True}
    assert request["max_tokens"] == 512
    assert request["chat_template_kwargs"] == {"enable_thinking": False}
    assert {tool["function"]["name"] for tool in request["tools"]} >= {
        "call_service",
        "get_state",
    }
    assert request["messages"][0]["role"] == "system"
    assert request["messages"][-1]["role"] == "user"


async def test_a_tool_call_turns_on_a_light(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_openai: FakeOpenAI,
) -> None:
    """Streamed tool_calls deltas become one call; its result goes back."""
    fake_openai.tool_call(
        "call_service",
        {"domain": "light", "service": "turn_on", "entity_id": "light.bed_light"},
    ).reply("The bed light is on.")
    await hass.services.async_call(
        "light", "turn_off", {"entity_id": "light.bed_light"}, blocking=True
    )
    await telegram.send_text("Turn on the bed light")
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[-1]["text"] == "The bed light is on."
    assert hass.states.get("light.bed_light").state == "on"
    second = fake_openai.openai_requests[1]["messages"]
    call = next(m for m in second if m["role"] == "assistant")
    [tool_call] = call["tool_calls"]
    assert tool_call["function"]["name"] == "call_service"
    result = next(m for m in second if m["role"] == "tool")
    assert result["tool_call_id"] == tool_call["id"]


async def test_an_unlock_waits_for_the_confirm_button(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_openai: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A restricted call asks for Confirm; pressing it unlocks the door."""
    monkeypatch.setattr("homeassistant.components.demo.lock.LOCK_UNLOCK_DELAY", 0)
    fake_openai.tool_call(
        "call_service",
        {"domain": "lock", "service": "unlock", "entity_id": "lock.front_door"},
    ).reply("Please confirm.")
    await telegram.send_text("Unlock the front door")
    await telegram.wait_for_sent(2, chat_id=ALICE_ID)
    request = next(
        m for m in reversed(telegram.bot_messages(ALICE_ID)) if m.get("reply_markup")
    )
    assert hass.states.get("lock.front_door").state == "locked"
    buttons = request["reply_markup"]["inline_keyboard"][0]
    await telegram.press_button(
        buttons[0]["callback_data"], message_id=request["message_id"]
    )
    # The press is handled in the background (block_till_done does not wait
    # for it): poll in real time, not in event-loop turns.
    for _ in range(200):
        await hass.async_block_till_done()
        if hass.states.get("lock.front_door").state == "unlocked":
            break
        await asyncio.sleep(0.05)
    assert hass.states.get("lock.front_door").state == "unlocked"


async def test_the_answer_streams_as_drafts(
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_openai: FakeOpenAI,
) -> None:
    """Partial text from the SSE stream reaches Telegram as drafts first."""
    text = "The kitchen is warm, the doors are locked, and the lights are off."
    fake_openai.reply(text, text_chunks=6, chunk_delay=0.7)
    await telegram.send_text("How is the house?")
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID, timeout=15)
    assert sent[-1]["text"] == text
    drafts = telegram.calls("sendMessageDraft")
    assert drafts
    assert all(text.startswith(draft["text"]) for draft in drafts)
    assert drafts[0]["text"] != text


async def test_documents_are_embedded_through_v1_embeddings(
    hass: HomeAssistant, telegram: TelegramHarness, fake_openai: FakeOpenAI
) -> None:
    """With an embedding model, add_document embeds through /v1/embeddings."""
    await async_setup_house(hass)
    entry = MockConfigEntry(
        domain=DOMAIN,
        title=MODEL,
        unique_id=fake_openai.base_url,
        data={
            CONF_BACKEND: "openai_compatible",
            CONF_BASE_URL: fake_openai.base_url,
            CONF_MODEL: MODEL,
            "embedding_model": "nomic-embed-text:latest",
        },
        options={CONF_REQUEST_TIMEOUT: 10},
    )
    entry.add_to_hass(hass)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    assert telegram is not None
    await hass.services.async_call(
        DOMAIN,
        "add_document",
        {"title": "Boiler", "content": "The boiler service is due every May."},
        blocking=True,
        return_response=True,
    )
    assert any(
        request.path == "/v1/embeddings"
        for request in fake_openai.requests
        if request.method == "POST"
    )
    hits = await entry.runtime_data.documents.async_search("boiler service", 3)
    assert hits
    assert hits[0].title == "Boiler"


async def test_a_refused_key_at_setup_starts_reauthentication(
    hass: HomeAssistant, telegram: TelegramHarness, fake_openai: FakeOpenAI
) -> None:
    """401 at setup: the entry waits for a new key, which reloads it."""
    assert telegram is not None
    await async_setup_house(hass)
    fake_openai.api_key = KEY
    entry = MockConfigEntry(
        domain=DOMAIN,
        title=MODEL,
        unique_id=fake_openai.base_url,
        data={
            CONF_BACKEND: "openai_compatible",
            CONF_BASE_URL: fake_openai.base_url,
            CONF_API_KEY: "old-key",
            CONF_MODEL: MODEL,
        },
        options={CONF_REQUEST_TIMEOUT: 10},
    )
    entry.add_to_hass(hass)
    await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    assert entry.state is ConfigEntryState.SETUP_ERROR
    [flow] = hass.config_entries.flow.async_progress_by_handler(DOMAIN)
    assert flow["context"]["source"] == config_entries.SOURCE_REAUTH
    result = await hass.config_entries.flow.async_configure(
        flow["flow_id"], {CONF_API_KEY: "still-wrong"}
    )
    assert result["errors"] == {CONF_API_KEY: "invalid_auth"}
    result = await hass.config_entries.flow.async_configure(
        flow["flow_id"], {CONF_API_KEY: KEY}
    )
    assert result["type"] is FlowResultType.ABORT
    assert result["reason"] == "reauth_successful"
    await hass.async_block_till_done()
    assert entry.data[CONF_API_KEY] == KEY
    assert entry.state is ConfigEntryState.LOADED


async def test_a_key_refused_while_running_starts_reauthentication(
    hass: HomeAssistant, assistant: MockConfigEntry, fake_openai: FakeOpenAI
) -> None:
    """The server's key changes: the next check shows the reauth flow."""
    fake_openai.api_key = "rotated"
    monitor = assistant.runtime_data.monitor
    await monitor.async_check()
    await hass.async_block_till_done()
    assert monitor.status is ModelStatus.AUTH_FAILED
    [flow] = hass.config_entries.flow.async_progress_by_handler(DOMAIN)
    assert flow["context"]["source"] == config_entries.SOURCE_REAUTH


async def test_an_unreachable_server_at_setup_retries_later(
    hass: HomeAssistant, fake_openai: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    """Setup waits for the server instead of failing for good."""
    await async_setup_house(hass)
    url = f"http://user:secret@127.0.0.1:{fake_openai.url.rsplit(':', 1)[1]}/v1"
    await fake_openai.stop()
    entry = MockConfigEntry(
        domain=DOMAIN,
        data={
            CONF_BACKEND: "openai_compatible",
            CONF_BASE_URL: url,
            CONF_MODEL: MODEL,
        },
    )
    entry.add_to_hass(hass)
    await hass.config_entries.async_setup(entry.entry_id)
    assert entry.state is ConfigEntryState.SETUP_RETRY
    assert "secret" not in caplog.text
    await hass.config_entries.async_unload(entry.entry_id)


async def test_a_missing_model_raises_the_servers_repair_issue(
    hass: HomeAssistant, assistant: MockConfigEntry, fake_openai: FakeOpenAI
) -> None:
    """The server stops serving the model: a repair says how to fix it."""
    fake_openai.remove_model(MODEL)
    await assistant.runtime_data.monitor.async_check()
    issue = ir.async_get(hass).async_get_issue(
        DOMAIN, f"model_missing_{assistant.entry_id}"
    )
    assert issue is not None
    assert issue.translation_key == "openai_model_missing"


async def test_an_outage_mid_chat_is_explained(
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_openai: FakeOpenAI,
) -> None:
    """An HTTP error from the server becomes the integration's own words."""
    fake_openai.error(500, "out of memory")
    await telegram.send_text("Hello?")
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert "out of memory" not in sent[-1]["text"]
    assert assistant.runtime_data.assistant.health.available is False


async def test_diagnostics_never_show_the_key(
    hass: HomeAssistant, assistant: MockConfigEntry
) -> None:
    """The API key is redacted; the URL is kept."""
    diagnostics = await async_get_config_entry_diagnostics(hass, assistant)
    assert diagnostics["entry"]["data"][CONF_API_KEY] == "**REDACTED**"
    assert diagnostics["entry"]["data"][CONF_BASE_URL].endswith("/v1")
    assert KEY not in str(diagnostics)


@pytest.mark.usefixtures("core", "mock_setup_entry")
async def test_options_leave_out_ollamas_keep_alive(hass: HomeAssistant) -> None:
    """The server keeps its model loaded: the options do not offer keep_alive."""
    entry = MockConfigEntry(
        domain=DOMAIN,
        title=MODEL,
        unique_id="http://192.168.1.20:8000/v1",
        data={
            CONF_BACKEND: "openai_compatible",
            CONF_BASE_URL: "http://192.168.1.20:8000/v1",
            CONF_MODEL: MODEL,
        },
    )
    entry.add_to_hass(hass)
    result = await hass.config_entries.options.async_init(entry.entry_id)
    fields = {key.schema for key in result["data_schema"].schema}
    assert "keep_alive" not in fields
    assert {"num_ctx", "num_predict", "request_timeout"} <= fields
    result = await hass.config_entries.options.async_configure(
        result["flow_id"], {"num_predict": 256}
    )
    assert result["type"] is FlowResultType.CREATE_ENTRY
    assert entry.options["num_predict"] == 256


async def test_a_server_that_stops_accepting_tools_raises_a_repair(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_openai: FakeOpenAI,
) -> None:
    """Restarted without tool calls: the reply apologises and a repair says why."""
    model = fake_openai.get_model(MODEL)
    assert model is not None
    model.capabilities.remove("tools")
    await telegram.send_text("Turn on the bed light")
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert "error" in sent[-1]["text"]
    monitor = assistant.runtime_data.monitor
    assert monitor.status is ModelStatus.NO_TOOLS
    issue_id = f"model_no_tools_{assistant.entry_id}"
    issue = ir.async_get(hass).async_get_issue(DOMAIN, issue_id)
    assert issue is not None
    assert issue.translation_key == "openai_model_no_tools"
    # A check while tools are still refused keeps the repair.
    await monitor.async_check()
    assert ir.async_get(hass).async_get_issue(DOMAIN, issue_id) is not None
    # The server accepts tools again: the next check clears it.
    model.capabilities.append("tools")
    await monitor.async_check()
    assert monitor.status is ModelStatus.OK
    assert ir.async_get(hass).async_get_issue(DOMAIN, issue_id) is None


async def test_a_key_refused_mid_chat_is_explained_and_reauth_follows(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_openai: FakeOpenAI,
) -> None:
    """401 on a chat: the user gets the integration's words, the admin a dialog."""
    fake_openai.api_key = "rotated"
    await telegram.send_text("Hello?")
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert "error" in sent[-1]["text"]
    health = assistant.runtime_data.assistant.health
    assert health.available is False
    assert "API key" in (health.last_error or "")
    assert KEY not in (health.last_error or "")
    # At once, not at the next check.
    await hass.async_block_till_done()
    assert assistant.runtime_data.monitor.status is ModelStatus.AUTH_FAILED
    [flow] = hass.config_entries.flow.async_progress_by_handler(DOMAIN)
    assert flow["context"]["source"] == config_entries.SOURCE_REAUTH


# The fake speaks the protocol the real client expects.


async def _client(server: FakeOpenAI, key: str = "no-key") -> openai.AsyncOpenAI:
    """Return the openai package's own client; built off the loop (SSL setup)."""
    return await asyncio.to_thread(
        functools.partial(
            openai.AsyncOpenAI, base_url=server.base_url, api_key=key, max_retries=0
        )
    )


async def test_the_fake_streams_tool_calls_the_openai_client_reassembles(
    fake_openai: FakeOpenAI,
) -> None:
    """SSE chunks with tool_calls deltas and a usage chunk, as the client reads them."""
    client = await _client(fake_openai)
    fake_openai.tool_call("get_state", {"entity_id": "light.bed_light"})
    stream = await client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Is the bed light on?"}],
        tools=[
            {
                "type": "function",
                "function": {"name": "get_state", "parameters": {"type": "object"}},
            }
        ],
        stream=True,
        stream_options={"include_usage": True},
    )
    name, arguments, finish, usage = "", "", None, None
    async for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            for call in choice.delta.tool_calls or []:
                assert call.function is not None
                name += call.function.name or ""
                arguments += call.function.arguments or ""
            finish = choice.finish_reason or finish
    await client.close()
    assert name == "get_state"
    assert json.loads(arguments) == {"entity_id": "light.bed_light"}
    assert finish == "tool_calls"
    assert usage is not None
    assert usage.prompt_tokens > 0


async def test_the_fake_answers_errors_as_the_client_classifies_them(
    fake_openai: FakeOpenAI,
) -> None:
    """401 without the key, 404 for an unknown model, 400 for refused tools."""
    fake_openai.api_key = KEY
    client = await _client(fake_openai, "wrong")
    with pytest.raises(openai.AuthenticationError):
        await client.models.list()
    await client.close()
    client = await _client(fake_openai, KEY)
    with pytest.raises(openai.NotFoundError):
        await client.chat.completions.create(
            model="llama9", messages=[{"role": "user", "content": "hi"}]
        )
    with pytest.raises(openai.BadRequestError, match="auto-tool-choice"):
        await client.chat.completions.create(
            model="gemma:2b",
            messages=[{"role": "user", "content": "hi"}],
            tools=[{"type": "function", "function": {"name": "x", "parameters": {}}}],
        )
    await client.close()


async def test_the_fake_embeds_in_base64_as_the_client_asks_by_default(
    fake_openai: FakeOpenAI,
) -> None:
    """The package asks for base64 unless told otherwise; both decode alike."""
    client = await _client(fake_openai)
    response = await client.embeddings.create(
        model="nomic-embed-text:latest", input=["boiler service"]
    )
    await client.close()
    expected = fake_openai.embedding_for("boiler service")
    assert response.data[0].embedding == pytest.approx(expected, rel=1e-5)


# -------------------------------------------------------------------- photos

VISION = "gemma3:12b"
JPEG = b"\xff\xd8\xff\xe0fake jpeg of a label\xff\xd9"


async def test_a_photo_goes_as_an_image_part_through_the_openai_api(
    hass: HomeAssistant, telegram: TelegramHarness, fake_openai: FakeOpenAI
) -> None:
    """The vision model gets the photo as a data: URL image part of the message."""
    fake_openai.add_model(VISION, ["completion", "tools"])
    await async_setup_house(hass)
    await async_setup_assistant(hass, fake_openai, **{CONF_VISION_MODEL: VISION})
    fake_openai.reply("That is a 10 A fuse.")
    update = media_update(telegram, "photo", JPEG, caption="What fuse is this?")
    assert await telegram.post_update(update) == 200
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[-1]["text"] == "That is a 10 A fuse."
    [request] = fake_openai.openai_requests
    assert request["model"] == VISION
    assert request["tools"]
    parts = request["messages"][-1]["content"]
    image = base64.b64encode(JPEG).decode()
    assert {
        "type": "image_url",
        "image_url": {"url": f"data:image/jpeg;base64,{image}"},
    } in parts
    assert any(
        "What fuse is this?" in part["text"] for part in parts if part["type"] == "text"
    )
    # The next message goes to the chat model, as plain text.
    fake_openai.reply("You're welcome.")
    await telegram.send_text("Thanks")
    await telegram.wait_for_sent(2, chat_id=ALICE_ID)
    last = fake_openai.openai_requests[-1]
    assert last["model"] == MODEL
    assert all(
        isinstance(message["content"], str) or message["role"] != "user"
        for message in last["messages"]
    )


async def test_a_vision_model_the_server_does_not_serve_is_explained(
    hass: HomeAssistant, telegram: TelegramHarness, fake_openai: FakeOpenAI
) -> None:
    """The reply names the model server, not Ollama; nothing is downloaded."""
    await async_setup_house(hass)
    await async_setup_assistant(hass, fake_openai, **{CONF_VISION_MODEL: VISION})
    await telegram.post_update(media_update(telegram, "photo", JPEG))
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[-1]["text"] == fixed_text("vision_missing_openai", model=VISION)
    assert "Ollama" not in sent[-1]["text"]
    assert not fake_openai.openai_requests
    assert not telegram.api.downloads


async def test_without_a_vision_model_a_photo_gets_the_servers_how_to(
    hass: HomeAssistant, telegram: TelegramHarness, fake_openai: FakeOpenAI
) -> None:
    """The how-to speaks of the model server's vision models."""
    await async_setup_house(hass)
    await async_setup_assistant(hass, fake_openai)
    await telegram.post_update(media_update(telegram, "photo", JPEG))
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[-1]["text"] == fixed_text("photo_no_vision_openai")
    assert not fake_openai.openai_requests


async def test_a_chat_model_the_server_does_not_serve_is_explained(
    hass: HomeAssistant, telegram: TelegramHarness, fake_openai: FakeOpenAI
) -> None:
    """A 404 from the server: the reply names the model server, not Ollama."""
    await async_setup_house(hass)
    await async_setup_assistant(hass, fake_openai)
    del fake_openai.models[MODEL]
    await telegram.send_text("Hello")
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[-1]["text"] == fixed_text("model_missing_openai", model=MODEL)


async def test_tool_arguments_that_are_not_json_are_fed_back(
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_openai: FakeOpenAI,
) -> None:
    """Arguments that are no JSON object: nothing runs, the model is told why.

    (A model that wrote the entity id alone. Cut-off JSON is completed by
    LangChain's partial parser instead and then fails the tool's schema.)
    """
    fake_openai.raw_arguments.append("light.bed_light")
    fake_openai.tool_call("get_state", {}).reply("The bed light is on.")
    await telegram.send_text("Is the bed light on?")
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[-1]["text"] == "The bed light is on."
    assert len(fake_openai.openai_requests) == 2
    last = fake_openai.openai_requests[-1]["messages"][-1]
    assert "not valid JSON" in last["content"]
