"""Home Assistant stopping with turns in flight: a quick, clean stop; nothing lost."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import pytest
from homeassistant.const import EVENT_HOMEASSISTANT_STOP

from .common import async_setup_assistant, async_setup_house
from .telegram_harness import ALICE_ID, BOB_ID

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant

    from .fake_ollama import FakeOllama
    from .telegram_harness import TelegramHarness

UNLOCK = {"domain": "lock", "service": "unlock", "entity_id": "lock.front_door"}


@pytest.fixture(autouse=True)
def fast_demo_locks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the demo locks move at once instead of after two seconds."""
    monkeypatch.setattr("homeassistant.components.demo.lock.LOCK_UNLOCK_DELAY", 0)


def _chat_tasks() -> list[asyncio.Task[object]]:
    return [
        task
        for task in asyncio.all_tasks()
        if task.get_name().startswith("ha_personal_assistant chat") and not task.done()
    ]


async def test_stopping_with_turns_in_flight_is_quick_and_keeps_confirmations(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """HA stops mid-turn: work ends within 20 s; a pending unlock survives."""
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama, request_timeout=300)
    # Alice asks for an unlock; it waits for her confirmation.
    fake_ollama.tool_call("call_service", UNLOCK).reply("Please confirm.")
    await telegram.send_text("Unlock the front door")
    await telegram.wait_for_sent(2, chat_id=ALICE_ID)
    assert hass.states.get("lock.front_door").state == "locked"
    # Bob's turn hangs in the model (a 300 s request timeout).
    requests = len(fake_ollama.chat_requests)
    fake_ollama.hang()
    await telegram.send_text("What is the weather like?", chat_id=BOB_ID)
    for _ in range(500):
        if len(fake_ollama.chat_requests) > requests:
            break
        await asyncio.sleep(0.01)
    assert _chat_tasks()

    started = time.monotonic()
    hass.bus.async_fire(EVENT_HOMEASSISTANT_STOP)
    async with asyncio.timeout(20):
        await hass.async_block_till_done()
    # The stop alone (HA does not unload entries) ended the turn and closed
    # the files.
    assert _chat_tasks() == []
    assert entry.runtime_data.storage.checkpoints.saver is None
    async with asyncio.timeout(20):
        assert await hass.config_entries.async_unload(entry.entry_id)
    assert time.monotonic() - started < 20
    assert "Unable to remove" not in caplog.text

    # "Restart": the entry is set up again on the same files.
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    before = len(telegram.sent_messages(ALICE_ID))
    await telegram.send_command("/confirm")
    sent = await telegram.wait_for_sent(before + 1, chat_id=ALICE_ID)
    assert sent[-1]["text"].startswith("Done: Unlock Front Door")
    await asyncio.sleep(0.1)
    await hass.async_block_till_done()
    assert hass.states.get("lock.front_door").state == "unlocked"
