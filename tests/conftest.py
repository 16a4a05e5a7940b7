"""Shared fixtures for the ha_personal_assistant test suite.

``custom_components`` is imported first, before anything from homeassistant:
HA's loader imports the top-level ``custom_components`` package and scans its
``__path__``. The package that wins is whichever Python imported first, so
importing ours here makes HA load this repository's integration instead of the
(empty) one in pytest-homeassistant-custom-component's testing config.
"""

# ruff: noqa: I001 -- the import order below is the point of this module.
import custom_components  # noqa: F401

import logging
import os
import random
from collections.abc import AsyncIterator, Generator  # noqa: TC003 - pytest reads the hint
from typing import Any
from unittest.mock import AsyncMock, patch

import pytest
from homeassistant import block_async_io
from homeassistant.core import Event, HomeAssistant  # noqa: TC002 - pytest reads the hint
from homeassistant.setup import async_setup_component

from custom_components.ha_personal_assistant.const import EVENT_ACTION_EXECUTED
from custom_components.ha_personal_assistant.security import injection_model

from .fake_ollama import FakeOllama, fake_ollama
from .fake_openai import FakeOpenAI, fake_openai
from .restart import Restarter, restarter
from .telegram_harness import (
    TelegramHarness,
    telegram,
    telegram_api,
    telegram_chat_ids,
)

# No ``pytest_plugins`` here: pytest-homeassistant-custom-component registers
# its fixtures (hass, socket_enabled, ...) through a pytest11 entry point.

__all__ = [
    "FakeOllama",
    "FakeOpenAI",
    "Restarter",
    "TelegramHarness",
    "fake_ollama",
    "fake_openai",
    "restarter",
    "telegram",
    "telegram_api",
    "telegram_chat_ids",
]


def pytest_configure(config: pytest.Config) -> None:
    """Draw the taint fuzz's seed once per run, unless one is given to replay.

    It goes into the environment, so pytest-xdist's workers, started after
    this, share it.
    """
    del config
    os.environ.setdefault(
        "TAINT_FUZZ_SEED", str(random.SystemRandom().randrange(2**32))
    )


def pytest_report_header() -> str:
    """Print the taint fuzz's seed at the top of every run."""
    seed = os.environ["TAINT_FUZZ_SEED"]
    return f"taint fuzz seed: {seed} (replay with TAINT_FUZZ_SEED={seed})"


# Home Assistant's detector of blocking calls in the event loop, as a real
# instance runs it (the test plugin leaves it off).
if not block_async_io._BLOCKED_CALLS.calls:
    block_async_io.enable()
# Where HA reports them (homeassistant/util/loop.py).
_LOOP_LOGGER = logging.getLogger("homeassistant.util.loop")


class _BlockingCallReports(logging.Handler):
    """Collect HA's reports of blocking calls in the event loop."""

    def __init__(self) -> None:
        """Start with no report."""
        super().__init__(logging.DEBUG)
        self.reports: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        """Keep a report: a place's first as a warning, later ones at debug level."""
        message = record.getMessage()
        if "Detected blocking call" in message:
            self.reports.append(message)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None]:
    """Fail any test during which HA reports a blocking call in the event loop.

    Only HA's reporting logger listens at debug level. Capturing every logger
    at debug level (``caplog`` does, in the tests that ask for it) makes each
    test format thousands of debug records it never reads.
    """
    del item
    handler = _BlockingCallReports()
    level = _LOOP_LOGGER.level
    _LOOP_LOGGER.addHandler(handler)
    _LOOP_LOGGER.setLevel(logging.DEBUG)
    try:
        result = yield
    finally:
        _LOOP_LOGGER.removeHandler(handler)
        _LOOP_LOGGER.setLevel(level)
    assert not handler.reports, handler.reports[0]
    return result


@pytest.fixture(autouse=True, scope="session")
def injection_model_loaded() -> None:
    """Read the firewall's model file once, outside any event loop.

    Entry setup does this in the executor; tests that check text on the loop
    without setting an entry up find it read. tests/test_injection_model.py
    starts from an unread model where it tests the loading itself.
    """
    assert injection_model.load_model() is not None


@pytest.fixture(autouse=True)
def auto_enable_custom_integrations(enable_custom_integrations: None) -> None:
    """Let HA load integrations from ``custom_components`` in every test."""


@pytest.fixture
def hass_config_dir(hass_tmp_config_dir: str) -> str:
    """Give each test its own config directory, so databases never leak."""
    return hass_tmp_config_dir


@pytest.fixture(params=["ollama", "openai_compatible"])
async def fake_server(
    request: pytest.FixtureRequest, socket_enabled: None
) -> AsyncIterator[FakeOpenAI]:
    """Serve each test once per backend, over Ollama's API and over OpenAI's.

    A module whose ``fake_ollama`` fixture returns this one runs every test
    on both. The server speaks both APIs; ``backend`` tells
    :func:`tests.common.async_setup_assistant` which one the entry uses.
    """
    server = FakeOpenAI(backend=request.param)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
def mock_setup_entry() -> Generator[AsyncMock]:
    """Keep created or reloaded entries from starting the assistant."""
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
def executed(hass: HomeAssistant) -> list[Event[Any]]:
    """The assistant's action_executed events."""
    events: list[Event[Any]] = []
    hass.bus.async_listen(EVENT_ACTION_EXECUTED, events.append)
    return events
