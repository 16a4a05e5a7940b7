"""telegram_bot's internal update signal: pinned, and watched at run time.

The gateway takes updates from a dispatcher signal of telegram_bot, not from
the bus events anyone can fire. The signal is not a public API, so these tests
pin its name and payload to the HA version under test, and check that a
silent signal (a changed HA) raises a repair instead of a silent assistant.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from homeassistant.components.telegram_bot import bot as telegram_bot_module
from homeassistant.components.telegram_bot import const as telegram_bot_const
from homeassistant.components.telegram_bot.helpers import signal as telegram_signal
from homeassistant.helpers import issue_registry as ir
from homeassistant.helpers.dispatcher import (
    async_dispatcher_connect,
    async_dispatcher_send,
)
from telegram import Update
from telegram.ext import Application, TypeHandler

from custom_components.ha_personal_assistant.const import DOMAIN
from custom_components.ha_personal_assistant.telegram import watch as telegram_watch
from custom_components.ha_personal_assistant.telegram.inbound import (
    LANGUAGE_HANDLER_GROUP,
)
from custom_components.ha_personal_assistant.telegram.incoming import (
    EVENT_CALLBACK,
    EVENT_COMMAND,
    EVENT_TEXT,
    parse_update,
)
from custom_components.ha_personal_assistant.telegram.watch import (
    SIGNAL_UPDATE_EVENT,
    bot_signal,
)

from .common import async_setup_assistant, async_setup_house
from .telegram_harness import ALICE_ID, BOT_ID

if TYPE_CHECKING:
    from collections.abc import Mapping

    import pytest
    from homeassistant.core import HomeAssistant

    from .fake_ollama import FakeOllama
    from .telegram_harness import TelegramHarness


class _Bot:
    id = BOT_ID


def test_the_signal_name_is_telegram_bots() -> None:
    """The name the gateway listens on is the one telegram_bot sends on."""
    assert SIGNAL_UPDATE_EVENT == telegram_bot_const.SIGNAL_UPDATE_EVENT
    assert (EVENT_TEXT, EVENT_COMMAND, EVENT_CALLBACK) == (
        telegram_bot_const.EVENT_TELEGRAM_TEXT,
        telegram_bot_const.EVENT_TELEGRAM_COMMAND,
        telegram_bot_const.EVENT_TELEGRAM_CALLBACK,
    )


async def test_the_signal_and_payload_are_what_the_gateway_reads(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """A text, a command and a press arrive on the signal with the fields we parse."""
    await async_setup_house(hass)
    await async_setup_assistant(hass, fake_ollama)
    bot_entry = hass.config_entries.async_get_entry(telegram.entry_id)
    assert bot_entry is not None
    name = bot_signal(bot_entry)
    assert name == telegram_signal(_Bot()) == f"telegram_bot_update_event_{BOT_ID}"  # type: ignore[arg-type]
    received: list[tuple[str, Mapping[str, Any]]] = []
    unsub = async_dispatcher_connect(
        hass, name, lambda kind, data: received.append((kind, data))
    )
    fake_ollama.reply("Hi.")
    await telegram.send_text("Hello there")
    await telegram.send_command("/help")
    await telegram.press_button("/cancel_1")
    await telegram.wait_for_sent(2)
    unsub()
    # telegram_bot also reports what it sent on the signal: not for us.
    received = [(k, d) for k, d in received if k != "telegram_sent"]
    kinds = [kind for kind, _ in received]
    assert kinds == [EVENT_TEXT, EVENT_COMMAND, EVENT_CALLBACK]
    text, command, press = (data for _, data in received)
    for data in (text, command, press):
        assert data["chat_id"] == ALICE_ID
        assert data["user_id"] == ALICE_ID
        assert isinstance(data["from_first"], str)
        assert data["bot"]["config_entry_id"] == telegram.entry_id
        assert data["bot"]["id"] == BOT_ID
    assert text["text"] == "Hello there"
    assert isinstance(text["id"], int)
    assert command["command"] == "/help"
    assert press["data"] == "/cancel_1"
    assert isinstance(press["id"], str)
    assert isinstance(press["message"]["message_id"], int)
    # What arrived is what the gateway understands.
    parsed = [parse_update(telegram.entry_id, kind, data) for kind, data in received]
    assert all(incoming is not None for incoming in parsed)
    assert parsed[0] is not None
    assert parsed[0].text == "Hello there"


async def test_a_silent_signal_raises_a_repair_and_a_working_one_clears_it(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As if an HA release renamed the signal: three updates lost, a repair."""
    monkeypatch.setattr(telegram_watch, "SIGNAL_GRACE", 0.2)
    await async_setup_house(hass)
    await async_setup_assistant(hass, fake_ollama)
    registry = ir.async_get(hass)
    sent_on = telegram_bot_module.async_dispatcher_send
    with monkeypatch.context() as patch:
        patch.setattr(telegram_bot_module, "async_dispatcher_send", lambda *_args: None)
        for index in range(telegram_watch.MISSES_FOR_ISSUE - 1):
            await telegram.send_text(f"Hello {index}")
        await asyncio.sleep(0.5)
        # Two lost updates: not yet (a forged event or two cannot raise it).
        assert registry.async_get_issue(DOMAIN, "telegram_signal_silent") is None
        await telegram.send_text("Anyone there?")
        await asyncio.sleep(0.5)
    issue = registry.async_get_issue(DOMAIN, "telegram_signal_silent")
    assert issue is not None
    assert issue.severity is ir.IssueSeverity.ERROR
    assert issue.translation_placeholders["count"] == "3"
    assert telegram.sent_messages() == []
    assert not fake_ollama.chat_requests
    # The signal works again (an update of the integration): answered, cleared.
    assert telegram_bot_module.async_dispatcher_send is sent_on
    fake_ollama.reply("Here.")
    await telegram.send_text("Hello again")
    await telegram.wait_for_sent(1)
    assert registry.async_get_issue(DOMAIN, "telegram_signal_silent") is None


async def test_events_of_a_bot_the_assistant_does_not_follow_are_not_counted(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bus events that name another bot, or none, never raise the repair."""
    monkeypatch.setattr(telegram_watch, "SIGNAL_GRACE", 0.1)
    await async_setup_house(hass)
    await async_setup_assistant(hass, fake_ollama)
    for index in range(5):
        hass.bus.async_fire(
            EVENT_TEXT,
            {
                "chat_id": ALICE_ID,
                "id": index,
                "text": "x",
                "bot": {"config_entry_id": "other"},
            },
        )
        hass.bus.async_fire(EVENT_TEXT, {"chat_id": ALICE_ID, "id": index, "text": "y"})
    await asyncio.sleep(0.3)
    assert ir.async_get(hass).async_get_issue(DOMAIN, "telegram_signal_silent") is None


async def test_the_language_seam_is_where_the_gateway_looks(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """Pin the second private seam: the bot's python-telegram-bot application.

    The gateway reads each sender's language_code with a handler of group -1 on
    ``runtime_data.app.application`` of telegram_bot's entry. If an HA release
    moves it, the texts quietly fall back to HA's language; this test fails
    instead. It also checks the handler leaves with the assistant.
    """
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama)
    bot_entry = hass.config_entries.async_get_entry(telegram.entry_id)
    assert bot_entry is not None
    application = bot_entry.runtime_data.app.application
    assert isinstance(application, Application)

    def ours() -> list[TypeHandler[Any, Any, Any]]:
        return [
            handler
            for handler in application.handlers.get(LANGUAGE_HANDLER_GROUP, [])
            if isinstance(handler, TypeHandler) and handler.type is Update
        ]

    assert len(ours()) == 1
    # Our group runs before telegram_bot's own handlers (group 0).
    assert (
        min(group for group in application.handlers if group != LANGUAGE_HANDLER_GROUP)
        > LANGUAGE_HANDLER_GROUP
    )
    gateway = entry.runtime_data.gateway
    telegram.languages[ALICE_ID] = "pt-br"
    fake_ollama.reply("Olá.")
    await telegram.send_text("Olá")
    await telegram.wait_for_sent(1)
    assert gateway.language_of(ALICE_ID) == "pt-br"
    # Unloading the assistant takes its handler off the bot, which stays.
    assert await hass.config_entries.async_unload(entry.entry_id)
    await hass.async_block_till_done()
    assert ours() == []
    assert bot_entry.runtime_data.app.application is application


async def test_a_bot_without_the_application_is_named_in_the_log(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """If telegram_bot moves its application, the log says so; replies go on."""
    await async_setup_house(hass)
    bot_entry = hass.config_entries.async_get_entry(telegram.entry_id)
    assert bot_entry is not None
    service = bot_entry.runtime_data
    real_app = service.app
    # As an HA release might look: the bot's app without ``application``.
    service.app = object()
    try:
        await async_setup_assistant(hass, fake_ollama)
    finally:
        service.app = real_app
    assert "Cannot read the Telegram users' languages from bot" in caplog.text
    telegram.languages[ALICE_ID] = "de"
    fake_ollama.reply("Hello.")
    await telegram.send_text("Hallo")
    sent = await telegram.wait_for_sent(1)
    assert sent[0]["text"] == "Hello."


async def test_updates_kept_while_starting_are_bounded(
    hass: HomeAssistant, telegram: TelegramHarness, caplog: pytest.LogCaptureFixture
) -> None:
    """A flood while the assistant starts keeps the oldest; the rest is logged."""
    early = telegram_watch.EarlyUpdates(hass)
    early.async_start()
    limit = telegram_watch.MAX_EARLY_UPDATES
    signal = f"{SIGNAL_UPDATE_EVENT}_{BOT_ID}"
    for number in range(limit + 3):
        async_dispatcher_send(hass, signal, EVENT_TEXT, {"text": str(number)})
    kept = early.async_stop()
    assert [data["text"] for _, _, data in kept] == [str(n) for n in range(limit)]
    assert {entry_id for entry_id, _, _ in kept} == {telegram.entry_id}
    assert "3 Telegram updates that came while the assistant started" in caplog.text
    # Stopped: later updates are the gateway's, not kept here.
    async_dispatcher_send(hass, signal, EVENT_TEXT, {"text": "late"})
    assert early.async_stop() == []
