"""Real-model smoke test: the whole path works against a real llama-server.

HA's telegram_bot, the integration, the Ollama shim and llama-server with
SmolLM2-135M: two turns in the demo house. The first is the model's own
answer; in the second the model is made to call ``call_service`` (see
shim.py) and then answers on its own. It checks what a real server can
break and the fakes cannot: the requests are accepted, streamed replies
arrive, the tool call runs, the replies are bounded and carry no chat-template
tokens or tool-call markup, and the second turn reuses the server's cached
prompt prefix.

Skipped when llama-server or the model file is missing (run.py installs
both; ``REAL_MODEL_GGUF`` may point at the file). Not part of scripts/test or
CI (``norecursedirs`` keeps pytest out of bench/); run it by hand:

    .venv/bin/pytest bench/real_model/test_smoke.py -p no:randomly --no-cov
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for _path in (str(ROOT), str(HERE)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

# ruff: noqa: E402, I001, F811 -- this checkout's custom_components first; fixtures
import custom_components  # noqa: F401
from pytest_homeassistant_custom_component.common import (  # type: ignore[import-untyped]
    MockConfigEntry,
)

from direct import OpenAIRecorder
from script import async_setup_house
from server import CACHE, CONTEXT, GGUF, LlamaServer
from shim import MODEL_NAME, OllamaShim
from tests.conftest import auto_enable_custom_integrations, hass_config_dir  # noqa: F401
from tests.telegram_harness import ALICE_ID, telegram, telegram_api  # noqa: F401

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from homeassistant.core import HomeAssistant

MODEL_FILE = Path(os.environ.get("REAL_MODEL_GGUF", str(CACHE / GGUF)))
BINARY = shutil.which("llama-server")
CAP = 128
# Chat-template tokens and tool-call markup: never for the user's eyes.
MARKUP = ("<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>", "</tool_call>")

pytestmark = [
    pytest.mark.skipif(BINARY is None, reason="llama-server is not installed"),
    pytest.mark.skipif(not MODEL_FILE.exists(), reason=f"no model file {MODEL_FILE}"),
    pytest.mark.timeout(300),
]


@pytest.fixture
def telegram_chat_ids() -> list[int]:
    """Alice's private chat only."""
    return [ALICE_ID]


@pytest.fixture
async def llama(tmp_path: Path) -> AsyncIterator[LlamaServer]:
    """Start a fresh llama-server: one slot, no host-RAM cache, one thread.

    Started and stopped in a worker thread: the start polls /health with a
    blocking client, which HA's blocking-call detector (on in the tests)
    refuses in the event loop.
    """
    assert BINARY is not None
    server = LlamaServer(Path(BINARY), MODEL_FILE, log=tmp_path / "llama.log")
    await asyncio.to_thread(server.start)
    try:
        yield server
    finally:
        await asyncio.to_thread(server.stop)


async def _turn(telegram: Any, text: str) -> str:
    before = len(telegram.sent_messages(ALICE_ID))
    await telegram.send_text(text, chat_id=ALICE_ID)
    sent = await telegram.wait_for_sent(before + 1, chat_id=ALICE_ID, timeout=240)
    return str(sent[before]["text"])


@pytest.mark.parametrize("backend", ["ollama", "openai"])
async def test_real_model_smoke(
    hass: HomeAssistant,
    telegram: Any,
    llama: LlamaServer,
    socket_enabled: None,  # noqa: ARG001 - llama-server is on loopback
    backend: str,
) -> None:
    """Two turns through the whole path with a real model.

    ``ollama``: through the Ollama shim; ``openai``: llama-server's own
    OpenAI API through the integration's OpenAI-compatible backend.
    """
    started = time.monotonic()
    shim_class = OpenAIRecorder if backend == "openai" else OllamaShim
    shim = shim_class(llama.url, context_length=CONTEXT, default_cap=CAP)
    url = await shim.start()
    data: dict[str, Any] = {"ollama_url": url, "model": MODEL_NAME}
    if backend == "openai":
        url = f"{url}/v1"
        data = {"backend": "openai_compatible", "base_url": url, "model": MODEL_NAME}
    try:
        await async_setup_house(hass, 0)
        entry = MockConfigEntry(
            domain="ha_personal_assistant",
            title=MODEL_NAME,
            unique_id=url,
            data=data,
            options={"request_timeout": 240},
        )
        entry.add_to_hass(hass)
        assert await hass.config_entries.async_setup(entry.entry_id)
        await hass.async_block_till_done()
        assert hass.states.get("light.kitchen_lights").state == "on"

        first = await _turn(telegram, "Hi! Are the kitchen lights on?")
        asked = len(shim.records)
        shim.force(
            [
                (
                    "call_service",
                    {
                        "domain": "light",
                        "service": "turn_off",
                        "entity_id": "light.kitchen_lights",
                    },
                )
            ]
        )
        second = await _turn(telegram, "Please turn the kitchen lights off.")
        await hass.async_block_till_done()

        assert hass.states.get("light.kitchen_lights").state == "off"
        assert shim.forced_pending() == 0
        turns = [r for r in shim.records if r.tools]
        assert turns
        assert all(not r.error for r in shim.records), [r.error for r in shim.records]
        for reply in (first, second):
            assert reply.strip()
            assert len(reply) <= 4096  # noqa: PLR2004 - Telegram's limit
            assert not any(mark in reply for mark in MARKUP), reply
        # Every request is bounded: by the cap it sent (num_predict or
        # max_tokens), else by the bench's own.
        assert all(r.predicted_n <= (r.num_predict or CAP) for r in shim.records), [
            (r.predicted_n, r.num_predict) for r in shim.records
        ]
        # The second turn's first request reuses at least the fixed prefix.
        second_turn = [r for r in shim.records[asked:] if r.tools]
        assert second_turn[0].forced == ["call_service"]
        assert second_turn[0].cache_n >= turns[0].prompt_tokens // 2, (
            second_turn[0].cache_n,
            turns[0].prompt_tokens,
        )
        # The forced call is in the cache: the answer after it reuses it.
        assert len(second_turn) >= 2  # noqa: PLR2004
        assert second_turn[1].cache_n >= second_turn[0].prompt_tokens
        await hass.config_entries.async_unload(entry.entry_id)
        await hass.async_block_till_done()
    finally:
        await shim.stop()
    print(
        f"\nreal-model smoke ({backend}): {len(shim.records)} model requests, "
        f"{sum(r.prompt_n for r in shim.records)} tokens evaluated, "
        f"{sum(r.predicted_n for r in shim.records)} generated, "
        f"{time.monotonic() - started:.0f} s"
    )
