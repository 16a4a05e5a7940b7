"""Risky actions wait for the requester's Confirm, and run exactly once."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest
from homeassistant.components.homeassistant.exposed_entities import (
    async_expose_entity,
)
from homeassistant.const import EVENT_CALL_SERVICE

from custom_components.ha_personal_assistant.const import (
    CONF_CONFIRMATION_TIMEOUT,
    DOMAIN,
)
from custom_components.ha_personal_assistant.policy.verdict import ResolvedCall
from custom_components.ha_personal_assistant.telegram import delivery as delivery_module

from .common import async_setup_assistant, async_setup_house, fixed_text
from .telegram_harness import ALICE_ID, BOB_ID, GROUP_ID

if TYPE_CHECKING:
    import sqlite3

    from homeassistant.core import Event, HomeAssistant
    from pytest_homeassistant_custom_component.common import MockConfigEntry

    from .fake_ollama import FakeOllama
    from .telegram_harness import TelegramHarness

UNLOCK = {"domain": "lock", "service": "unlock", "entity_id": "lock.front_door"}
OPEN_GARAGE = {
    "domain": "cover",
    "service": "open_cover",
    "entity_id": "cover.garage_door",
}


@pytest.fixture
def fake_ollama(fake_server: FakeOllama) -> FakeOllama:
    """Run every test here over Ollama's API and over OpenAI's (both fakes)."""
    return fake_server


@pytest.fixture(autouse=True)
def fast_demo_locks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the demo locks move at once instead of after two seconds."""
    monkeypatch.setattr("homeassistant.components.demo.lock.LOCK_UNLOCK_DELAY", 0)


@pytest.fixture
def unlocks(hass: HomeAssistant) -> list[Event[Any]]:
    """Every lock.unlock that HA actually executes."""
    calls: list[Event[Any]] = []

    def record(event: Event[Any]) -> None:
        if (event.data["domain"], event.data["service"]) == ("lock", "unlock"):
            calls.append(event)

    hass.bus.async_listen(EVENT_CALL_SERVICE, record)
    return calls


async def _setup(
    hass: HomeAssistant, fake_ollama: FakeOllama, **options: Any
) -> MockConfigEntry:
    await async_setup_house(hass)
    return await async_setup_assistant(hass, fake_ollama, **options)


async def _ask_to_unlock(
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    chat_id: int = ALICE_ID,
    user_id: int | None = None,
) -> dict[str, Any]:
    """Ask for the unlock and return the confirmation request message."""
    fake_ollama.tool_call("call_service", UNLOCK).reply(
        "I need your confirmation to unlock the front door."
    )
    before = len(telegram.sent_messages(chat_id))
    await telegram.send_text("Unlock the front door", chat_id=chat_id, user_id=user_id)
    await telegram.wait_for_sent(before + 2, chat_id=chat_id)
    return _request_message(telegram, chat_id)


def _request_message(
    telegram: TelegramHarness, chat_id: int = ALICE_ID
) -> dict[str, Any]:
    """Return the bot's newest message in the chat that carries buttons."""
    return next(
        m for m in reversed(telegram.bot_messages(chat_id)) if m.get("reply_markup")
    )


def _buttons(message: dict[str, Any]) -> list[tuple[str, str]]:
    rows = message["reply_markup"]["inline_keyboard"]
    return [(b["text"], b["callback_data"]) for row in rows for b in row]


async def _settle(hass: HomeAssistant) -> None:
    await asyncio.sleep(0.1)
    await hass.async_block_till_done()


async def test_unlock_waits_for_the_requesters_confirm(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    unlocks: list[Event[Any]],
) -> None:
    """The lock stays locked until Alice presses Confirm; then it unlocks once."""
    await _setup(hass, fake_ollama)
    request = await _ask_to_unlock(telegram, fake_ollama)
    assert hass.states.get("lock.front_door").state == "locked"
    assert "Unlock Front Door (lock.front_door)" in request["text"]
    assert "expires in 5 minutes" in request["text"]
    (confirm, confirm_data), (cancel, _) = _buttons(request)
    assert (confirm, cancel) == ("Confirm", "Cancel")
    # The model was told nothing happened yet.
    tool_result = next(
        m["content"]
        for m in fake_ollama.chat_requests[-1]["messages"]
        if m["role"] == "tool"
    )
    assert "waiting_for_confirmation" in tool_result

    await telegram.press_button(confirm_data, message_id=request["message_id"])
    await telegram.wait_for_calls("answerCallbackQuery", 1)
    await _settle(hass)
    assert hass.states.get("lock.front_door").state == "unlocked"
    assert len(unlocks) == 1
    edited = telegram.calls("editMessageText")[-1]
    assert edited["message_id"] == request["message_id"]
    assert edited["text"].startswith("Done: Unlock Front Door")
    assert "reply_markup" not in edited

    # A second press, or a replay of the same update, does nothing more.
    await telegram.press_button(confirm_data, message_id=request["message_id"])
    await telegram.wait_for_calls("answerCallbackQuery", 2)
    await _settle(hass)
    assert len(unlocks) == 1
    assert telegram.calls("answerCallbackQuery")[-1]["text"] == "This was already done."


async def test_another_user_cannot_confirm(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    unlocks: list[Event[Any]],
) -> None:
    """In a group, Bob pressing Alice's Confirm changes nothing."""
    await _setup(hass, fake_ollama)
    await telegram.add_allowed_chat(GROUP_ID)
    await hass.async_block_till_done()
    request = await _ask_to_unlock(telegram, fake_ollama, GROUP_ID, ALICE_ID)
    confirm_data = _buttons(request)[0][1]
    await telegram.press_button(
        confirm_data, chat_id=GROUP_ID, user_id=BOB_ID, message_id=request["message_id"]
    )
    await telegram.wait_for_calls("answerCallbackQuery", 1)
    await _settle(hass)
    assert hass.states.get("lock.front_door").state == "locked"
    assert unlocks == []
    assert (
        "Only the person who asked" in telegram.calls("answerCallbackQuery")[0]["text"]
    )
    assert telegram.calls("editMessageText") == []
    # Bob's /confirm does not reach Alice's action either.
    await telegram.send_command("/confirm", chat_id=GROUP_ID, user_id=BOB_ID)
    sent = await telegram.wait_for_sent(3, chat_id=GROUP_ID)
    assert sent[-1]["text"] == "Nothing is waiting for your confirmation."
    # Alice can.
    await telegram.press_button(
        confirm_data,
        chat_id=GROUP_ID,
        user_id=ALICE_ID,
        message_id=request["message_id"],
    )
    await telegram.wait_for_calls("answerCallbackQuery", 2)
    await _settle(hass)
    assert hass.states.get("lock.front_door").state == "unlocked"
    assert len(unlocks) == 1


async def test_an_admin_may_confirm_for_others(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    unlocks: list[Event[Any]],
) -> None:
    """A user listed as admin in the options can confirm someone else's action."""
    await _setup(hass, fake_ollama, admin_user_ids=[BOB_ID])
    await telegram.add_allowed_chat(GROUP_ID)
    await hass.async_block_till_done()
    request = await _ask_to_unlock(telegram, fake_ollama, GROUP_ID, ALICE_ID)
    await telegram.press_button(
        _buttons(request)[0][1],
        chat_id=GROUP_ID,
        user_id=BOB_ID,
        message_id=request["message_id"],
    )
    await telegram.wait_for_calls("answerCallbackQuery", 1)
    await _settle(hass)
    assert len(unlocks) == 1


async def test_cancel_leaves_the_door_locked(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    unlocks: list[Event[Any]],
) -> None:
    """/cancel drops the newest pending action and edits the request."""
    await _setup(hass, fake_ollama)
    request = await _ask_to_unlock(telegram, fake_ollama)
    confirm_data = _buttons(request)[0][1]
    await telegram.send_command("/cancel")
    sent = await telegram.wait_for_sent(3)
    assert sent[-1]["text"].startswith("Cancelled: Unlock Front Door")
    edited = telegram.calls("editMessageText")[-1]
    assert edited["message_id"] == request["message_id"]
    # A late press on the cancelled request does nothing.
    await telegram.press_button(confirm_data, message_id=request["message_id"])
    await telegram.wait_for_calls("answerCallbackQuery", 1)
    await _settle(hass)
    assert hass.states.get("lock.front_door").state == "locked"
    assert unlocks == []
    assert telegram.calls("answerCallbackQuery")[0]["text"] == "This was cancelled."


async def test_a_late_confirmation_has_expired(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    unlocks: list[Event[Any]],
) -> None:
    """With a 1 s timeout, confirming 2 s later does nothing and says so."""
    await _setup(hass, fake_ollama, **{CONF_CONFIRMATION_TIMEOUT: 1})
    request = await _ask_to_unlock(telegram, fake_ollama)
    assert "expires in 1 second." in request["text"]
    await asyncio.sleep(2)
    await telegram.send_command("/confirm")
    sent = await telegram.wait_for_sent(3)
    assert sent[-1]["text"].startswith("This request expired, so nothing was done")
    await _settle(hass)
    assert hass.states.get("lock.front_door").state == "locked"
    assert unlocks == []


async def test_confirm_after_a_reload_runs_exactly_once(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    unlocks: list[Event[Any]],
) -> None:
    """A pending action survives a reload; /confirm and a press run it once."""
    entry = await _setup(hass, fake_ollama)
    request = await _ask_to_unlock(telegram, fake_ollama)
    confirm_data = _buttons(request)[0][1]
    assert await hass.config_entries.async_reload(entry.entry_id)
    await hass.async_block_till_done()
    await telegram.send_command("/confirm")
    sent = await telegram.wait_for_sent(3)
    assert sent[-1]["text"].startswith("Done: Unlock Front Door")
    await telegram.press_button(confirm_data, message_id=request["message_id"])
    await telegram.wait_for_calls("answerCallbackQuery", 1)
    await _settle(hass)
    assert hass.states.get("lock.front_door").state == "unlocked"
    assert len(unlocks) == 1


async def test_two_risky_actions_share_one_request(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    unlocks: list[Event[Any]],
) -> None:
    """One message lists both actions and one press runs both."""
    await _setup(hass, fake_ollama)
    fake_ollama.tool_calls(
        [("call_service", UNLOCK), ("call_service", OPEN_GARAGE)]
    ).reply("Please confirm both.")
    await telegram.send_text("Unlock the door and open the garage")
    await telegram.wait_for_sent(2)
    request = _request_message(telegram)
    assert "• Unlock Front Door (lock.front_door)" in request["text"]
    assert "• Open Garage Door (cover.garage_door)" in request["text"]
    assert hass.states.get("cover.garage_door").state == "closed"
    await telegram.press_button(
        _buttons(request)[0][1], message_id=request["message_id"]
    )
    await telegram.wait_for_calls("answerCallbackQuery", 1)
    await _settle(hass)
    assert len(unlocks) == 1
    assert hass.states.get("cover.garage_door").state in ("open", "opening")


async def test_buttons_of_other_automations_are_ignored(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """A press on someone else's keyboard is left to whoever made it."""
    await _setup(hass, fake_ollama)
    await telegram.press_button("/garden_lights_on")
    await telegram.press_button("/confirm_../../etc")
    await _settle(hass)
    assert telegram.calls("answerCallbackQuery") == []


async def test_actions_lists_the_senders_decisions(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """/actions shows what was asked and how it ended, without message text."""
    await _setup(hass, fake_ollama)
    fake_ollama.tool_call(
        "call_service",
        {"domain": "light", "service": "turn_on", "entity_id": "light.bed_light"},
    ).reply("On.")
    await telegram.send_text("Bed light on")
    await telegram.wait_for_sent(1)
    request = await _ask_to_unlock(telegram, fake_ollama)
    await telegram.press_button(
        _buttons(request)[0][1], message_id=request["message_id"]
    )
    await telegram.wait_for_calls("answerCallbackQuery", 1)
    await _settle(hass)
    await telegram.send_command("/actions")
    sent = await telegram.wait_for_sent(4)
    lines = sent[-1]["text"].splitlines()
    assert lines[0] == "Your recent actions:"
    assert lines[1].endswith("lock.unlock lock.front_door: confirmed, executed")
    assert lines[2].endswith("lock.unlock lock.front_door: requested, pending")
    assert lines[3].endswith(
        "light.turn_on light.bed_light: no confirmation needed, executed"
    )
    assert "Unlock the front door" not in sent[-1]["text"]


async def test_actions_says_so_when_nothing_was_done_yet(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """/actions before any action: a plain sentence, and the model is not asked."""
    await _setup(hass, fake_ollama)
    await telegram.send_command("/actions")
    (sent,) = await telegram.wait_for_sent(1)
    assert sent["text"] == fixed_text("actions_none")
    assert not fake_ollama.chat_requests


# Each step between a press and its audit row, with how many unlocks the
# door must have seen once the crash was followed by a restart and a retry:
# before the claim nothing ran and the retry runs it; after the claim the
# action is settled as interrupted and never runs again; once it ran, it ran
# once.
STEPS = {
    "before_find": 1,
    "before_expiry_check": 1,
    "before_claim": 1,
    "after_claim": 0,
    "before_recheck": 0,
    "before_service_call": 0,
    "after_service_call": 1,
    "before_finish": 1,
    "after_finish": 1,
    "before_answer": 1,
    "before_edit": 1,
}


@pytest.mark.parametrize(("step", "expected"), STEPS.items())
async def test_a_crash_at_any_step_never_runs_twice_nor_loses_the_audit(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    unlocks: list[Event[Any]],
    step: str,
    expected: int,
) -> None:
    """Crash the confirm path at a step, restart, press again: at most one unlock."""
    entry = await _setup(hass, fake_ollama)
    request = await _ask_to_unlock(telegram, fake_ollama)
    manager = entry.runtime_data.gateway.confirmations
    crashed: list[str] = []

    def crash(at: str) -> None:
        if at == step and not crashed:
            crashed.append(at)
            msg = f"crash at {at}"
            raise RuntimeError(msg)

    manager.fault = crash
    confirm_data = _buttons(request)[0][1]
    await telegram.press_button(confirm_data, message_id=request["message_id"])
    await _settle(hass)
    assert crashed == [step]
    # "Restart": the entry reloads and settles what the crash left behind.
    assert await hass.config_entries.async_reload(entry.entry_id)
    await hass.async_block_till_done()
    await telegram.press_button(confirm_data, message_id=request["message_id"])
    await telegram.send_command("/confirm")
    await telegram.wait_for_sent(3)
    await _settle(hass)
    assert len(unlocks) == expected
    await _assert_every_decision_audited(entry)


@pytest.mark.parametrize("fail", ["answerCallbackQuery", "editMessageText"])
async def test_telegram_failures_after_a_press_never_run_twice(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    unlocks: list[Event[Any]],
    fail: str,
) -> None:
    """Telegram failing to show the outcome does not repeat the action."""
    entry = await _setup(hass, fake_ollama)
    request = await _ask_to_unlock(telegram, fake_ollama)
    telegram.api.fail_next(fail, "Bad Request: query is too old", count=3)
    confirm_data = _buttons(request)[0][1]
    await telegram.press_button(confirm_data, message_id=request["message_id"])
    await _settle(hass)
    await telegram.press_button(confirm_data, message_id=request["message_id"])
    await telegram.send_command("/confirm")
    await telegram.wait_for_sent(3)
    await _settle(hass)
    assert len(unlocks) == 1
    await _assert_every_decision_audited(entry)


async def test_a_lost_request_message_can_still_be_confirmed(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    unlocks: list[Event[Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """If the request with the buttons cannot be sent, /confirm still works once."""
    monkeypatch.setattr(delivery_module, "SEND_BACKOFF", 0.01)
    entry = await _setup(hass, fake_ollama)
    fake_ollama.tool_call("call_service", UNLOCK).reply("Confirm please.")
    # Telegram fails for both the reply and the request with the buttons,
    # every try of each.
    attempts = 2 * delivery_module.SEND_ATTEMPTS
    telegram.api.fail_next("sendMessage", "Bad Gateway", error_code=502, count=attempts)
    await telegram.send_text("Unlock the front door")
    await telegram.wait_for_calls("sendMessage", attempts)
    await _settle(hass)
    assert telegram.sent_messages() == []
    await telegram.send_command("/confirm")
    await telegram.send_command("/confirm")
    sent = await telegram.wait_for_sent(2)
    await _settle(hass)
    assert sent[0]["text"].startswith("Done: Unlock Front Door")
    assert sent[1]["text"] == "Nothing is waiting for your confirmation."
    assert len(unlocks) == 1
    await _assert_every_decision_audited(entry)


async def test_a_double_tap_runs_once(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    unlocks: list[Event[Any]],
) -> None:
    """Two presses arriving together race; exactly one wins."""
    entry = await _setup(hass, fake_ollama)
    request = await _ask_to_unlock(telegram, fake_ollama)
    confirm_data = _buttons(request)[0][1]
    await asyncio.gather(
        telegram.press_button(confirm_data, message_id=request["message_id"]),
        telegram.press_button(confirm_data, message_id=request["message_id"]),
        telegram.send_command("/confirm"),
    )
    await telegram.wait_for_calls("answerCallbackQuery", 2)
    await _settle(hass)
    assert len(unlocks) == 1
    await _assert_every_decision_audited(entry)


async def test_an_entity_taken_out_of_assist_before_confirm_is_refused(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    unlocks: list[Event[Any]],
) -> None:
    """Unexposed between the request and the press: refused then, still locked."""
    entry = await _setup(hass, fake_ollama)
    request = await _ask_to_unlock(telegram, fake_ollama)
    async_expose_entity(hass, "conversation", "lock.front_door", False)
    confirm_data = _buttons(request)[0][1]
    await telegram.press_button(confirm_data, message_id=request["message_id"])
    await telegram.wait_for_calls("answerCallbackQuery", 1)
    await _settle(hass)
    outcome = next(
        m
        for m in telegram.bot_messages(ALICE_ID)
        if m["message_id"] == request["message_id"]
    )["text"]
    assert outcome.startswith("It did not work: Unlock Front Door")
    assert outcome.splitlines()[-1].startswith("Refused now: ")
    assert hass.states.get("lock.front_door").state == "locked"
    assert unlocks == []
    await _assert_every_decision_audited(entry)


async def test_a_stored_request_of_an_unknown_kind_fails_on_confirm(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """A pending request of a kind this version does not run: Confirm says so."""
    entry = await _setup(hass, fake_ollama)
    # Stored as another version of the integration would have stored it.
    await entry.runtime_data.gateway.confirmations.async_propose_internal(
        conversation_key=f"telegram:{telegram.entry_id}:{ALICE_ID}",
        bot_entry_id=telegram.entry_id,
        chat_id=ALICE_ID,
        requester=f"telegram:{ALICE_ID}",
        call=ResolvedCall(
            domain=DOMAIN, service="retired_kind", entity_ids=(), data={}
        ),
        summary="Add the retired thing",
    )
    await telegram.send_command("/confirm")
    (sent,) = await telegram.wait_for_sent(1)
    assert sent["text"] == (
        "It did not work: Add the retired thing\n"
        "This kind of request cannot be run now."
    )
    await _assert_every_decision_audited(entry)


async def _assert_every_decision_audited(entry: MockConfigEntry) -> None:
    """Every settled action has an audit row with its final outcome."""
    database = entry.runtime_data.assistant.database

    def check(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
        return conn.execute(
            "SELECT a.id, a.status FROM pending_actions a"
            " WHERE a.status != 'pending' AND NOT EXISTS ("
            "  SELECT 1 FROM action_audit_log l WHERE l.action_id = a.id"
            "  AND (l.outcome = a.status"
            "  OR (a.status = 'done' AND l.outcome = 'executed')"
            "  OR (a.status = 'failed' AND l.outcome = 'failed')))"
        ).fetchall()

    assert await database.async_run(check) == []
