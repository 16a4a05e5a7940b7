"""What a user sees when Ollama or the model misbehaves: a short, clear reply."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

import pytest
from homeassistant.const import EVENT_CALL_SERVICE

from custom_components.ha_personal_assistant.const import MAX_TOOL_ROUNDS

from .common import (
    LOGGER_NAME,
    async_setup_assistant,
    async_setup_house,
    errors_logged,
    fixed_text,
    tool_results,
)
from .fake_ollama import OllamaReply, stall_reply
from .telegram_harness import ALICE_ID

if TYPE_CHECKING:
    from collections.abc import Iterator

    from homeassistant.core import Event, HomeAssistant
    from pytest_homeassistant_custom_component.common import MockConfigEntry

    from .fake_ollama import FakeOllama
    from .telegram_harness import TelegramHarness

TURN_OFF_KITCHEN = {
    "domain": "light",
    "service": "turn_off",
    "entity_id": "light.kitchen_lights",
}


@pytest.fixture
def fake_ollama(fake_server: FakeOllama) -> FakeOllama:
    """Run every test here over Ollama's API and over OpenAI's (both fakes)."""
    return fake_server


@pytest.fixture(autouse=True)
def no_errors_logged(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """A model fault is a reply and at most a warning, never a logged error."""
    yield
    assert errors_logged(caplog) == []


@pytest.fixture
def light_calls(hass: HomeAssistant) -> list[Event[Any]]:
    """Every light service call HA executes."""
    calls: list[Event[Any]] = []

    def record(event: Event[Any]) -> None:
        if event.data["domain"] == "light":
            calls.append(event)

    hass.bus.async_listen(EVENT_CALL_SERVICE, record)
    return calls


@pytest.fixture
async def assistant(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> MockConfigEntry:
    """The house, the bot and the assistant with a 2 s request timeout."""
    await async_setup_house(hass)
    return await async_setup_assistant(hass, fake_ollama, request_timeout=2)


async def _ask(telegram: TelegramHarness, text: str = "Hello?") -> str:
    before = len(telegram.sent_messages(ALICE_ID))
    await telegram.send_text(text)
    sent = await telegram.wait_for_sent(before + 1, chat_id=ALICE_ID)
    return sent[-1]["text"]


async def test_ollama_down_is_explained_logged_once_and_recovers(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """While Ollama is down each message gets a clear reply; one warning per outage."""
    port = int(fake_ollama.url.rsplit(":", 1)[1])
    await fake_ollama.stop()
    started = time.monotonic()
    assert "can't reach the language model" in await _ask(telegram)
    assert time.monotonic() - started < 5
    assert "can't reach the language model" in await _ask(telegram, "Still there?")
    warnings = [
        r
        for r in caplog.records
        if r.name == LOGGER_NAME and r.levelno == logging.WARNING
    ]
    assert len(warnings) == 1
    assert "unavailable" in warnings[0].getMessage()
    assert "Traceback" not in caplog.text

    await fake_ollama.start(port)
    fake_ollama.reply("I'm back.")
    assert await _ask(telegram, "And now?") == "I'm back."
    assert "is available again" in caplog.text
    assert assistant.state.value == "loaded"


def _model_missing(fake_ollama: FakeOllama) -> str:
    """Return what the reply to a missing chat model says on this backend."""
    if getattr(fake_ollama, "backend", "ollama") == "openai_compatible":
        return "model server does not serve"
    return "not installed on the Ollama server"


async def test_a_slow_model_gets_a_timeout_reply(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """A model that does not answer within request_timeout is reported as slow."""
    fake_ollama.hang()
    started = time.monotonic()
    assert "taking too long" in await _ask(telegram)
    assert time.monotonic() - started < 6


@pytest.mark.parametrize(
    ("status", "error", "expected"),
    [
        (404, "model 'qwen3:4b' not found", "model missing"),
        (500, "llama runner process has terminated", "reported an error"),
        (503, "server busy", "reported an error"),
    ],
)
async def test_http_errors_are_explained(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    status: int,
    error: str,
    expected: str,
) -> None:
    """A missing model or a failing server gets a reply that says so."""
    fake_ollama.error(status, error)
    reply = await _ask(telegram)
    if expected == "model missing":
        # The reply names the kind of server (Ollama's own words, or not).
        expected = _model_missing(fake_ollama)
    assert expected in reply
    assert error not in reply or status == 404


async def test_a_stream_cut_in_the_middle_is_explained(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """A dropped connection mid-answer is not shown as a half answer."""
    fake_ollama.cut("The lights are")
    reply = await _ask(telegram)
    assert "can't reach the language model" in reply


async def test_an_unknown_tool_is_fed_back_and_then_answered(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """The model learns the tool does not exist and recovers."""
    fake_ollama.tool_call("open_pod_bay_doors", {}).reply("I can't do that.")
    assert await _ask(telegram) == "I can't do that."
    feedback = tool_results(fake_ollama.chat_requests[-1])[0]
    assert "no tool named 'open_pod_bay_doors'" in feedback
    assert "call_service" in feedback


async def test_bad_arguments_are_fed_back(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Missing or mistyped arguments are explained to the model, nothing runs."""
    fake_ollama.tool_call("get_state", {"entity": "light.bed_light"}).reply("Sorry.")
    assert await _ask(telegram) == "Sorry."
    feedback = tool_results(fake_ollama.chat_requests[-1])[0]
    assert "invalid arguments for get_state" in feedback
    assert "entity_id" in feedback


async def test_a_tool_call_written_as_text_is_corrected(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """JSON in the answer is not sent to the user; the model is told to use tools."""
    fake_ollama.reply(
        '{"name": "get_state", "arguments": {"entity_id": "light.bed_light"}}'
    ).reply("The bed light is on.")
    assert await _ask(telegram) == "The bed light is on."
    last = fake_ollama.chat_requests[-1]["messages"][-1]
    assert last["role"] == "user"
    assert "tool-calling interface" in last["content"]


async def test_an_empty_answer_is_retried(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """An empty answer is never sent to Telegram."""
    fake_ollama.reply("").reply("Here I am.")
    assert await _ask(telegram) == "Here I am."
    assert len(fake_ollama.chat_requests) == 2


async def test_mistakes_are_fed_back_at_most_twice(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """After two corrections the user gets a friendly reply, not a loop."""
    fake_ollama.reply("").reply("").reply("").reply("never used")
    reply = await _ask(telegram)
    assert "could not work that out" in reply
    assert len(fake_ollama.chat_requests) == 3


async def test_wrong_tool_calls_are_fed_back_at_most_twice(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """A model that keeps calling a tool that does not exist is stopped kindly."""
    for _ in range(3):
        fake_ollama.tool_call("open_pod_bay_doors", {})
    fake_ollama.reply("never used")
    assert await _ask(telegram) == fixed_text("gave_up")
    assert len(fake_ollama.chat_requests) == 3


async def test_invalid_json_arguments_are_fed_back(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Ollama's 'error parsing tool call' is a model mistake, fed back once."""
    fake_ollama.error(
        500, "error parsing tool call: raw='{\"entity_id\": light.bed', err=invalid"
    ).reply("Let me try again: the bed light is on.")
    assert await _ask(telegram) == "Let me try again: the bed light is on."
    last = fake_ollama.chat_requests[-1]["messages"][-1]
    assert "not valid JSON" in last["content"]


async def test_a_tool_call_the_server_cannot_parse_is_fed_back(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """llama-server's words for a malformed call: also a model mistake."""
    fake_ollama.error(
        500, 'Failed to parse input at pos 11: <tool_call>{"name": "get_state"'
    ).reply("Let me try again: the bed light is on.")
    assert await _ask(telegram) == "Let me try again: the bed light is on."
    last = fake_ollama.chat_requests[-1]["messages"][-1]
    assert "not valid JSON" in last["content"]


async def test_tool_calls_that_repeat_forever_are_stopped(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """A model that keeps calling tools is stopped after a bounded number of rounds."""

    def again(_request: dict[str, object]) -> object:
        from .fake_ollama import tool_call_reply

        return tool_call_reply([("get_state", {"entity_id": "light.bed_light"})])

    fake_ollama.default = again
    reply = await _ask(telegram)
    assert "too many steps" in reply
    assert len(fake_ollama.chat_requests) == MAX_TOOL_ROUNDS


async def test_a_telegram_outage_is_logged_once(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A failed send is logged once, and the next success says it recovered."""
    # Telegram refuses for good (nothing a retry could fix): tried once.
    telegram.api.fail_next(
        "sendMessage", "Forbidden: bot was blocked by the user", error_code=403
    )
    fake_ollama.reply("lost")
    await telegram.send_text("first")
    await telegram.wait_for_calls("sendMessage", 1)
    await asyncio.sleep(0.1)
    assert caplog.text.count("Could not send to Telegram") == 1
    assert len(telegram.calls("sendMessage")) == 1
    fake_ollama.reply("delivered")
    assert await _ask(telegram, "second") == "delivered"
    assert "Sending to Telegram works again" in caplog.text


async def test_a_stream_that_hangs_midway_gets_a_timeout_reply(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Ollama starts answering, then stops sending: the half answer is not shown."""
    fake_ollama.enqueue(stall_reply("The lights are"))
    started = time.monotonic()
    reply = await _ask(telegram)
    assert "taking too long" in reply
    assert "The lights are" not in reply
    # The request timeout is 2 s; generous for a loaded machine.
    assert time.monotonic() - started < 15


@pytest.mark.parametrize(
    ("broken", "expected"),
    [
        (
            OllamaReply(tool_calls=(("call_service", TURN_OFF_KITCHEN),), cut_after=1),
            "can't reach the language model",
        ),
        (
            OllamaReply(
                tool_calls=(("call_service", TURN_OFF_KITCHEN),), stall_after=1
            ),
            "taking too long",
        ),
    ],
    ids=["cut", "hang"],
)
async def test_a_tool_call_from_a_broken_stream_is_not_executed(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    light_calls: list[Event[Any]],
    broken: OllamaReply,
    expected: str,
) -> None:
    """A tool call whose answer never completed does not run."""
    before = hass.states.get("light.kitchen_lights")
    assert before is not None
    fake_ollama.enqueue(broken)
    assert expected in await _ask(telegram, "Turn off the kitchen lights")
    await hass.async_block_till_done()
    assert light_calls == []
    after = hass.states.get("light.kitchen_lights")
    assert after is not None
    assert after.state == before.state
    # Nothing was fed back to the model as a tool result either.
    assert all(not tool_results(request) for request in fake_ollama.chat_requests)


async def test_every_fault_in_a_row_gets_exactly_one_reply(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Faults one after the other: one reply per message, in order, then recovery."""
    fake_ollama.error(500, "boom").error(503, "busy").error(404, "model not found")
    fake_ollama.cut("The lights are").enqueue(stall_reply("The door is")).reply(
        "All good."
    )
    expected = [
        "reported an error",
        "reported an error",
        _model_missing(fake_ollama),
        "can't reach the language model",
        "taking too long",
        "All good.",
    ]
    for number, fragment in enumerate(expected):
        before = len(telegram.sent_messages(ALICE_ID))
        await telegram.send_text(f"message {number}")
        sent = await telegram.wait_for_sent(before + 1, chat_id=ALICE_ID, timeout=20)
        assert fragment in sent[-1]["text"]
        await asyncio.sleep(0.1)
        # Exactly one reply per message.
        assert len(telegram.sent_messages(ALICE_ID)) == before + 1
