"""Household notices and their one-tap fix, through real HA and real telegram_bot.

Alice turns notices on; the garage is left open at 23:00. Time moves the HA
way (tests/common.py ``fire_time_changed``); the home is in US/Pacific and the
night hours are the default 22:00-07:00.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import pytest
from homeassistant.components.homeassistant.exposed_entities import (
    async_expose_entity,
)
from homeassistant.const import EVENT_CALL_SERVICE
from homeassistant.core import callback
from homeassistant.util import dt as dt_util

from custom_components.ha_personal_assistant.tasks.notices import CMD_NOTICES

from .common import (
    async_setup_assistant,
    async_setup_house,
    fire_time_changed,
    fixed_text,
)
from .telegram_harness import ALICE_ID, BOB_ID, TelegramHarness

if TYPE_CHECKING:
    from freezegun.api import FrozenDateTimeFactory
    from homeassistant.core import Event, HomeAssistant
    from pytest_homeassistant_custom_component.common import (  # type: ignore[import-untyped]
        MockConfigEntry,
    )

    from .fake_ollama import FakeOllama
    from .restart import Restarter

pytestmark = pytest.mark.freeze_time("2025-03-28 20:00:00-07:00", tick=True)

HOME = ZoneInfo("US/Pacific")
GARAGE = "cover.garage_door"
SHED_DOOR = "binary_sensor.shed_door"


def at(day: int, hour: int, minute: int = 0) -> datetime:
    """Return a local moment in the test home (March 2025)."""
    return datetime(2025, 3, day, hour, minute, tzinfo=HOME)


@pytest.fixture
def cover_calls(hass: HomeAssistant) -> list[Event[Any]]:
    """Every cover service call HA executes."""
    calls: list[Event[Any]] = []

    @callback
    def record(event: Event[Any]) -> None:
        if event.data["domain"] == "cover":
            calls.append(event)

    hass.bus.async_listen(EVENT_CALL_SERVICE, record)
    return calls


async def _move_to(
    hass: HomeAssistant, freezer: FrozenDateTimeFactory, moment: datetime
) -> None:
    await hass.async_block_till_done()
    freezer.move_to(moment)
    fire_time_changed(hass, dt_util.as_utc(moment))
    await hass.async_block_till_done()
    for _ in range(5):
        await asyncio.sleep(0.02)
        await hass.async_block_till_done()


async def _setup_house(
    hass: HomeAssistant, fake_ollama: FakeOllama, **options: Any
) -> MockConfigEntry:
    """The demo house with a hidden shed door, and the assistant."""
    await async_setup_house(hass)
    hass.states.async_set(
        SHED_DOOR, "off", {"device_class": "door", "friendly_name": "Shed door"}
    )
    async_expose_entity(hass, "conversation", SHED_DOOR, False)
    return await async_setup_assistant(hass, fake_ollama, **options)


async def _setup(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> MockConfigEntry:
    """The demo house, a hidden shed door, and Alice's notices on."""
    entry = await _setup_house(hass, fake_ollama)
    await telegram.send_command(CMD_NOTICES, ["on"])
    [reply] = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert reply["text"] == fixed_text("notices_on")
    return entry


async def _garage_open_at_2300(
    hass: HomeAssistant, freezer: FrozenDateTimeFactory
) -> None:
    await _move_to(hass, freezer, at(28, 23, 0))
    await hass.services.async_call(
        "cover", "open_cover", {"entity_id": GARAGE}, blocking=True
    )
    hass.states.async_set(SHED_DOOR, "on", {"device_class": "door"})
    await hass.async_block_till_done()


def _texts(telegram: TelegramHarness, chat_id: int = ALICE_ID) -> list[str]:
    return [str(m["text"]) for m in telegram.sent_messages(chat_id)]


async def _notice(
    hass: HomeAssistant, telegram: TelegramHarness, freezer: FrozenDateTimeFactory
) -> dict[str, Any]:
    """Leave the garage open from 23:00; return the notice sent at 23:30."""
    await _garage_open_at_2300(hass, freezer)
    before = len(telegram.sent_messages(ALICE_ID))
    await _move_to(hass, freezer, at(28, 23, 29))
    assert len(telegram.sent_messages(ALICE_ID)) == before
    await _move_to(hass, freezer, at(28, 23, 30) + timedelta(seconds=1))
    sent = await telegram.wait_for_sent(before + 1, chat_id=ALICE_ID)
    assert len(sent) == before + 1
    # As the bot sent it: with its message id and buttons.
    return telegram.bot_messages(ALICE_ID)[-1]


def _button(message: dict[str, Any]) -> tuple[str, str]:
    [[button]] = message["reply_markup"]["inline_keyboard"]
    return str(button["text"]), str(button["callback_data"])


async def test_the_garage_left_open_at_2300_sends_one_notice(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    freezer: FrozenDateTimeFactory,
) -> None:
    """After 30 minutes one notice with a Close button; nothing more until it closes."""
    await _setup(hass, telegram, fake_ollama)
    notice = await _notice(hass, telegram, freezer)
    assert notice["text"] == fixed_text("notice_open", name="Garage Door", minutes=30)
    assert _button(notice)[0] == fixed_text("notice_button_close", name="Garage Door")
    count = len(telegram.sent_messages(ALICE_ID))
    await _move_to(hass, freezer, at(28, 23, 45))
    await _move_to(hass, freezer, at(29, 1, 0))
    assert len(telegram.sent_messages(ALICE_ID)) == count
    # The shed door is hidden: it is never named.
    assert not any("Shed" in text for text in _texts(telegram))
    # Closed by hand: a short "cleared" follow-up.
    await hass.services.async_call(
        "cover", "close_cover", {"entity_id": GARAGE}, blocking=True
    )
    sent = await telegram.wait_for_sent(count + 1, chat_id=ALICE_ID)
    assert sent[-1]["text"] == fixed_text("notice_cleared", name="Garage Door")


async def test_the_button_closes_the_garage_exactly_once(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    freezer: FrozenDateTimeFactory,
    cover_calls: list[Event[Any]],
) -> None:
    """A press closes it, as Alice; a second press does nothing."""
    await _setup(hass, telegram, fake_ollama)
    notice = await _notice(hass, telegram, freezer)
    _label, data = _button(notice)
    cover_calls.clear()
    await telegram.press_button(data, message_id=notice["message_id"])
    await telegram.wait_for_calls("answerCallbackQuery", 1)
    await hass.async_block_till_done()
    state = hass.states.get(GARAGE)
    assert state is not None
    assert state.state == "closed"
    assert [
        (c.data["service"], c.context.user_id is not None) for c in cover_calls
    ] == [("close_cover", True)]
    await telegram.press_button(data, message_id=notice["message_id"])
    await telegram.wait_for_calls("answerCallbackQuery", 2)
    await hass.async_block_till_done()
    assert len(cover_calls) == 1
    second = telegram.calls("answerCallbackQuery")[-1]["text"]
    assert second != telegram.calls("answerCallbackQuery")[0]["text"]
    # Audited as Alice's action: /actions lists it.
    count = len(telegram.sent_messages(ALICE_ID))
    await telegram.send_command("/actions")
    sent = await telegram.wait_for_sent(count + 1, chat_id=ALICE_ID)
    assert "cover.close_cover" in sent[-1]["text"] or "Garage Door" in sent[-1]["text"]


async def test_another_persons_press_is_refused(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    freezer: FrozenDateTimeFactory,
    cover_calls: list[Event[Any]],
) -> None:
    """Bob presses Alice's button: refused, the garage stays open."""
    await _setup(hass, telegram, fake_ollama)
    notice = await _notice(hass, telegram, freezer)
    _label, data = _button(notice)
    cover_calls.clear()
    await telegram.press_button(
        data, chat_id=ALICE_ID, user_id=BOB_ID, message_id=notice["message_id"]
    )
    await telegram.wait_for_calls("answerCallbackQuery", 1)
    await hass.async_block_till_done()
    assert telegram.calls("answerCallbackQuery")[-1]["text"] == fixed_text("not_yours")
    state = hass.states.get(GARAGE)
    assert state is not None
    assert state.state == "open"
    assert cover_calls == []


async def test_a_hidden_door_open_at_night_never_sends_a_notice(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    freezer: FrozenDateTimeFactory,
) -> None:
    """The shed door (not exposed) stays open all night: nothing is sent."""
    await _setup(hass, telegram, fake_ollama)
    before = len(telegram.sent_messages(ALICE_ID))
    await _move_to(hass, freezer, at(28, 22, 10))
    hass.states.async_set(SHED_DOOR, "on", {"device_class": "door"})
    await _move_to(hass, freezer, at(28, 23, 0))
    await _move_to(hass, freezer, at(29, 1, 0))
    assert len(telegram.sent_messages(ALICE_ID)) == before


async def test_a_lock_unlocked_at_night_is_reported_at_once_and_locked_by_a_press(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    freezer: FrozenDateTimeFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Unlocked at 23:00: a notice with a Lock button; the press locks it."""
    monkeypatch.setattr("homeassistant.components.demo.lock.LOCK_UNLOCK_DELAY", 0)
    await _setup(hass, telegram, fake_ollama)
    await _move_to(hass, freezer, at(28, 23, 0))
    before = len(telegram.sent_messages(ALICE_ID))
    await hass.services.async_call(
        "lock", "unlock", {"entity_id": "lock.front_door"}, blocking=True
    )
    await telegram.wait_for_sent(before + 1, chat_id=ALICE_ID)
    notice = telegram.bot_messages(ALICE_ID)[-1]
    assert notice["text"] == fixed_text("notice_unlocked", name="Front Door")
    label, data = _button(notice)
    assert label == fixed_text("notice_button_lock", name="Front Door")
    await telegram.press_button(data, message_id=notice["message_id"])
    await telegram.wait_for_calls("answerCallbackQuery", 1)
    await hass.async_block_till_done()
    state = hass.states.get("lock.front_door")
    assert state is not None
    assert state.state == "locked"
    await telegram.wait_for_sent(before + 2, chat_id=ALICE_ID)
    assert _texts(telegram)[-1] == fixed_text("notice_cleared", name="Front Door")


async def test_a_low_battery_at_night_waits_for_the_morning(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    freezer: FrozenDateTimeFactory,
) -> None:
    """Below 10 % at 23:00: told at 07:00, when the night hours end."""
    await _setup(hass, telegram, fake_ollama)
    battery = "sensor.hall_sensor_battery"
    hass.states.async_set(
        battery, "40", {"device_class": "battery", "friendly_name": "Hall sensor"}
    )
    async_expose_entity(hass, "conversation", battery, True)
    await _move_to(hass, freezer, at(28, 23, 0))
    before = len(telegram.sent_messages(ALICE_ID))
    hass.states.async_set(
        battery, "5", {"device_class": "battery", "friendly_name": "Hall sensor"}
    )
    await _move_to(hass, freezer, at(29, 6, 59))
    assert len(telegram.sent_messages(ALICE_ID)) == before
    await _move_to(hass, freezer, at(29, 7, 0))
    await telegram.wait_for_sent(before + 1, chat_id=ALICE_ID)
    assert _texts(telegram)[-1] == fixed_text("notice_battery", name="Hall sensor")


async def test_notices_stay_on_after_a_restart(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    freezer: FrozenDateTimeFactory,
    restarter: Restarter,
) -> None:
    """Alice's /notices on survives a restart: the garage at night is reported."""
    entry = await _setup(hass, telegram, fake_ollama)
    await hass.async_block_till_done()
    hass, telegram, entry = await restarter.restart(hass, telegram, entry)
    await _notice(hass, telegram, freezer)


async def _setup_listed(
    hass: HomeAssistant, fake_ollama: FakeOllama
) -> MockConfigEntry:
    """The demo house, with Alice listed in the option notice_user_ids."""
    return await _setup_house(hass, fake_ollama, notice_user_ids=[ALICE_ID])


async def _settle(hass: HomeAssistant) -> None:
    for _ in range(5):
        await asyncio.sleep(0.02)
        await hass.async_block_till_done()


async def test_a_person_listed_in_the_options_gets_notices_without_asking(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    freezer: FrozenDateTimeFactory,
) -> None:
    """Alice never sent /notices on; the option lists her: the garage is reported."""
    await _setup_listed(hass, fake_ollama)
    notice = await _notice(hass, telegram, freezer)
    assert notice["text"] == fixed_text("notice_open", name="Garage Door", minutes=30)
    assert _button(notice)[0] == fixed_text("notice_button_close", name="Garage Door")
    # Bob is not listed and never asked: nothing for him.
    assert telegram.sent_messages(BOB_ID) == []


async def test_notices_off_stops_a_person_listed_in_the_options(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    freezer: FrozenDateTimeFactory,
) -> None:
    """Alice's /notices off beats the option listing her, and the reply says so."""
    await _setup_listed(hass, fake_ollama)
    await telegram.send_command(CMD_NOTICES, ["off"])
    [reply] = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert reply["text"] == fixed_text("notices_off_listed")
    await _garage_open_at_2300(hass, freezer)
    await _move_to(hass, freezer, at(28, 23, 45))
    await _move_to(hass, freezer, at(29, 1, 0))
    await _settle(hass)
    assert _texts(telegram) == [fixed_text("notices_off_listed")]


async def test_notices_on_quiet_sends_the_notice_but_no_cleared_follow_up(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    freezer: FrozenDateTimeFactory,
) -> None:
    """/notices on quiet: the garage notice comes, its "cleared" does not."""
    await _setup_house(hass, fake_ollama)
    await telegram.send_command(CMD_NOTICES, ["on", "quiet"])
    [reply] = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert reply["text"] == fixed_text("notices_on_quiet")
    notice = await _notice(hass, telegram, freezer)
    assert notice["text"] == fixed_text("notice_open", name="Garage Door", minutes=30)
    count = len(telegram.sent_messages(ALICE_ID))
    await hass.services.async_call(
        "cover", "close_cover", {"entity_id": GARAGE}, blocking=True
    )
    await _settle(hass)
    state = hass.states.get(GARAGE)
    assert state is not None
    assert state.state == "closed"
    assert len(telegram.sent_messages(ALICE_ID)) == count
    assert fixed_text("notice_cleared", name="Garage Door") not in _texts(telegram)
