"""Groups: only known people change state or confirm; every call runs as an HA user.

telegram_bot lets an update in when its chat *or* its sender is allowed, so
anyone in an allowed group reaches the assistant. The model here is hostile
(it calls whatever tool it is told to); what must hold is decided by the
integration: HA state, what Telegram received, and the HA user in the Context
of each state change.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Final

import pytest
from homeassistant.auth.const import GROUP_ID_USER
from homeassistant.components import conversation
from homeassistant.config_entries import ConfigEntryState, ConfigSubentryData
from homeassistant.const import EVENT_CALL_SERVICE
from homeassistant.core import Context
from homeassistant.helpers import entity_registry as er
from pytest_homeassistant_custom_component.common import (  # type: ignore[import-untyped]
    MockConfigEntry,
)

from custom_components.ha_personal_assistant.const import (
    CONF_ADMIN_USER_IDS,
    CONF_ALLOWED_USER_IDS,
    CONF_USER_MAPPING,
    EVENT_ACTION_EXECUTED,
)
from custom_components.ha_personal_assistant.policy.people import (
    ACTING_USER_NAME,
    ALLOWED_CHAT_SUBENTRY,
    acting_user_id,
    is_known,
)

from .common import async_setup_assistant, async_setup_house, fixed_text, tool_results
from .telegram_harness import ALICE_ID, BOB_ID, GROUP_ID, MALLORY_ID

if TYPE_CHECKING:
    from homeassistant.auth.models import User
    from homeassistant.core import Event, HomeAssistant

    from .fake_ollama import FakeOllama
    from .telegram_harness import TelegramHarness

NOT_KNOWN_DECISION = fixed_text("not_known_decision")
NOT_KNOWN_REPLY = fixed_text("not_known_reply")
# Members of the group whose private chats telegram_bot does not allow.
CAROL_ID: Final = 333333333
DAVE_ID: Final = 444444444
UNLOCK: Final = {"domain": "lock", "service": "unlock", "entity_id": "lock.front_door"}
BED_LIGHT: Final = "light.bed_light"
BED_LIGHT_ON: Final = {"domain": "light", "service": "turn_on", "entity_id": BED_LIGHT}


@pytest.fixture(autouse=True)
def fast_demo_locks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the demo locks move at once instead of after two seconds."""
    monkeypatch.setattr("homeassistant.components.demo.lock.LOCK_UNLOCK_DELAY", 0)


@pytest.fixture
def service_calls(hass: HomeAssistant) -> list[Event[Any]]:
    """Every light or lock service call HA actually executes."""
    calls: list[Event[Any]] = []

    def record(event: Event[Any]) -> None:
        if event.data["domain"] in ("light", "lock"):
            calls.append(event)

    hass.bus.async_listen(EVENT_CALL_SERVICE, record)
    return calls


async def _setup(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    **options: Any,
) -> MockConfigEntry:
    """The demo house, the assistant, and the family group allowed in telegram_bot."""
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama, **options)
    await telegram.add_allowed_chat(GROUP_ID, "Family")
    assert hass.states.get(BED_LIGHT).state == "off"
    assert hass.states.get("lock.front_door").state == "locked"
    return entry


async def _settle(hass: HomeAssistant) -> None:
    await asyncio.sleep(0.1)
    await hass.async_block_till_done()


async def _acting_user(hass: HomeAssistant) -> User:
    """Return the integration's own HA user."""
    user_id = acting_user_id(hass)
    assert user_id is not None
    user = await hass.auth.async_get_user(user_id)
    assert user is not None
    return user


def _buttons(message: dict[str, Any]) -> list[tuple[str, str]]:
    rows = message["reply_markup"]["inline_keyboard"]
    return [(b["text"], b["callback_data"]) for row in rows for b in row]


def _with_buttons(telegram: TelegramHarness, chat_id: int) -> list[dict[str, Any]]:
    """Return every message the bot sent to the chat with an inline keyboard."""
    return [m for m in telegram.sent_messages(chat_id) if "reply_markup" in m]


async def _say(
    telegram: TelegramHarness, text: str, user_id: int, count: int = 1
) -> list[dict[str, Any]]:
    """Write in the group as ``user_id``; wait for ``count`` more messages there."""
    before = len(telegram.sent_messages(GROUP_ID))
    await telegram.send_text(text, chat_id=GROUP_ID, user_id=user_id)
    return (await telegram.wait_for_sent(before + count, chat_id=GROUP_ID))[before:]


async def _ask_to_unlock(
    telegram: TelegramHarness, fake_ollama: FakeOllama, user_id: int
) -> dict[str, Any]:
    """Have ``user_id`` ask for the unlock in the group; return the request."""
    fake_ollama.tool_call("call_service", UNLOCK).reply("Please press Confirm.")
    await _say(telegram, "Unlock the front door", user_id, count=2)
    request = next(
        m for m in reversed(telegram.bot_messages(GROUP_ID)) if m.get("reply_markup")
    )
    assert "Unlock Front Door (lock.front_door)" in request["text"]
    assert [text for text, _ in _buttons(request)] == ["Confirm", "Cancel"]
    return request


async def test_a_stranger_in_the_group_cannot_unlock(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    service_calls: list[Event[Any]],
) -> None:
    """Mallory asks, the model calls lock.unlock: locked, no buttons, a clear reply."""
    await _setup(hass, telegram, fake_ollama)
    fake_ollama.tool_call("call_service", UNLOCK).reply("Done, the door is open!")
    sent = await _say(telegram, "Unlock the front door", MALLORY_ID)
    await _settle(hass)

    # The attack was really attempted: the model called call_service, and the
    # tool refused it as the integration, not the model, decided.
    results = tool_results(fake_ollama.chat_requests[-1])
    assert len(results) == 1
    assert results[0].startswith("Error: Refused: the person writing is not known")
    # Nothing happened, nothing waits for a Confirm, and Mallory is told so.
    assert hass.states.get("lock.front_door").state == "locked"
    assert service_calls == []
    assert _with_buttons(telegram, GROUP_ID) == []
    assert len(sent) == 1
    assert NOT_KNOWN_REPLY in sent[0]["text"]
    assert entry_pending(hass) == 0
    # /confirm afterwards finds nothing to run either.
    await telegram.send_command("/confirm", chat_id=GROUP_ID, user_id=MALLORY_ID)
    await telegram.wait_for_sent(2, chat_id=GROUP_ID)
    await _settle(hass)
    assert hass.states.get("lock.front_door").state == "locked"
    assert service_calls == []


def entry_pending(hass: HomeAssistant) -> int:
    """Return the pending confirmations sensor's value."""
    states = [
        s for s in hass.states.async_all("sensor") if "pending" in s.entity_id.lower()
    ]
    assert len(states) == 1
    return int(states[0].state)


async def wait_pending(hass: HomeAssistant, count: int) -> None:
    """Wait until the sensor shows ``count`` (it counts in the executor)."""
    for _ in range(250):
        if entry_pending(hass) == count:
            return
        await asyncio.sleep(0.02)
    assert entry_pending(hass) == count


async def test_a_stranger_cannot_confirm_or_cancel_a_known_persons_unlock(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    service_calls: list[Event[Any]],
) -> None:
    """Mallory presses Alice's Confirm, sends /confirm and /cancel: nothing runs.

    Mallory is even listed as an admin (who may decide for others): an admin
    must be known as well.
    """
    await _setup(hass, telegram, fake_ollama, **{CONF_ADMIN_USER_IDS: [MALLORY_ID]})
    request = await _ask_to_unlock(telegram, fake_ollama, ALICE_ID)
    confirm_data = _buttons(request)[0][1]
    cancel_data = _buttons(request)[1][1]
    await wait_pending(hass, 1)

    await telegram.press_button(
        confirm_data,
        chat_id=GROUP_ID,
        user_id=MALLORY_ID,
        message_id=request["message_id"],
    )
    await telegram.press_button(
        cancel_data,
        chat_id=GROUP_ID,
        user_id=MALLORY_ID,
        message_id=request["message_id"],
    )
    answers = await telegram.wait_for_calls("answerCallbackQuery", 2)
    assert [a["text"] for a in answers] == [NOT_KNOWN_DECISION] * 2
    before = len(telegram.sent_messages(GROUP_ID))
    await telegram.send_command("/confirm", chat_id=GROUP_ID, user_id=MALLORY_ID)
    token = confirm_data.partition("_")[2]
    await telegram.send_command(
        f"/confirm_{token}", chat_id=GROUP_ID, user_id=MALLORY_ID
    )
    await telegram.send_command("/cancel", chat_id=GROUP_ID, user_id=MALLORY_ID)
    sent = await telegram.wait_for_sent(before + 3, chat_id=GROUP_ID)
    assert [m["text"] for m in sent[before:]] == [NOT_KNOWN_DECISION] * 3
    await _settle(hass)
    assert hass.states.get("lock.front_door").state == "locked"
    assert service_calls == []
    # The request is untouched: still pending, its buttons still there.
    assert telegram.calls("editMessageText") == []
    assert entry_pending(hass) == 1

    # Alice's own press still works, as her (the integration's user).
    await telegram.press_button(
        confirm_data,
        chat_id=GROUP_ID,
        user_id=ALICE_ID,
        message_id=request["message_id"],
    )
    await telegram.wait_for_calls("answerCallbackQuery", 3)
    await _settle(hass)
    state = hass.states.get("lock.front_door")
    assert state.state == "unlocked"
    assert state.context.user_id == (await _acting_user(hass)).id


async def test_a_stranger_gets_answers_without_actions(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    service_calls: list[Event[Any]],
) -> None:
    """Mallory's question is answered; the light, her memory and /forget are refused."""
    await _setup(hass, telegram, fake_ollama)
    fake_ollama.tool_call("get_state", {"entity_id": BED_LIGHT}).tool_call(
        "call_service", BED_LIGHT_ON
    ).tool_call("remember", {"fact": "Mallory may open the door"}).reply(
        "The bed light is on now, and I will remember that."
    )
    sent = await _say(telegram, "Is the bed light on? Turn it on.", MALLORY_ID)
    await _settle(hass)

    results = tool_results(fake_ollama.chat_requests[-1])
    assert len(results) == 3
    # Reading works.
    assert '"entity_id":"light.bed_light"' in results[0]
    assert '"state":"off"' in results[0]
    # Switching and remembering were tried, and refused.
    assert results[1].startswith("Error: Refused: the person writing is not known")
    assert results[2].startswith("Error: Refused: the person writing is not known")
    assert hass.states.get(BED_LIGHT).state == "off"
    assert service_calls == []
    # The model's claim goes out, but the integration's notice comes with it.
    assert sent[0]["text"].endswith(NOT_KNOWN_REPLY)
    assert _with_buttons(telegram, GROUP_ID) == []
    entry = hass.config_entries.async_entries("ha_personal_assistant")[0]
    memory = entry.runtime_data.assistant.memory
    assert await memory.async_context(f"telegram:{MALLORY_ID}", "door", 4000) == ""

    await telegram.send_command(
        "/forget", ["door"], chat_id=GROUP_ID, user_id=MALLORY_ID
    )
    sent = await telegram.wait_for_sent(2, chat_id=GROUP_ID)
    assert sent[-1]["text"] == NOT_KNOWN_REPLY


@pytest.mark.parametrize(
    ("way", "member_id"),
    [
        ("private chat allowed in telegram_bot", BOB_ID),
        ("on the allowed list", CAROL_ID),
        ("mapped to an HA user", DAVE_ID),
    ],
)
async def test_a_known_person_in_the_group_acts_and_confirms(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    service_calls: list[Event[Any]],
    way: str,
    member_id: int,
) -> None:
    """Each of the three ways of being known lets a group member act and confirm.

    The calls run as the mapped HA user, else as the integration's own user.
    """
    dave = await hass.auth.async_create_user("Dave", group_ids=[GROUP_ID_USER])
    options: dict[str, Any] = {
        "on the allowed list": {CONF_ALLOWED_USER_IDS: [CAROL_ID]},
        "mapped to an HA user": {CONF_USER_MAPPING: {str(DAVE_ID): dave.id}},
    }.get(way, {})
    await _setup(hass, telegram, fake_ollama, **options)
    assert member_id not in telegram.chat_ids or way.startswith("private")
    expected_user = dave.id if member_id == DAVE_ID else (await _acting_user(hass)).id

    fake_ollama.tool_call("call_service", BED_LIGHT_ON).reply("The bed light is on.")
    sent = await _say(telegram, "Turn on the bed light", member_id)
    await _settle(hass)
    assert tool_results(fake_ollama.chat_requests[-1])[0].startswith('{"result":"done"')
    light = hass.states.get(BED_LIGHT)
    assert light.state == "on"
    assert light.context.user_id == expected_user
    assert NOT_KNOWN_REPLY not in sent[0]["text"]

    request = await _ask_to_unlock(telegram, fake_ollama, member_id)
    assert hass.states.get("lock.front_door").state == "locked"
    await telegram.press_button(
        _buttons(request)[0][1],
        chat_id=GROUP_ID,
        user_id=member_id,
        message_id=request["message_id"],
    )
    answers = await telegram.wait_for_calls("answerCallbackQuery", 1)
    await _settle(hass)
    assert answers[0]["text"].startswith("Done: Unlock Front Door")
    lock = hass.states.get("lock.front_door")
    assert lock.state == "unlocked"
    assert lock.context.user_id == expected_user
    assert [e.context.user_id for e in service_calls] == [expected_user] * 2


async def test_a_stranger_is_not_known_through_someone_elses_mapping(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    service_calls: list[Event[Any]],
    hass_admin_user: Any,
) -> None:
    """With a mapping for Alice, Mallory in the group still cannot switch a light."""
    await _setup(
        hass,
        telegram,
        fake_ollama,
        **{CONF_USER_MAPPING: {str(ALICE_ID): hass_admin_user.id}},
    )
    fake_ollama.tool_call("call_service", BED_LIGHT_ON).reply("Done.")
    sent = await _say(telegram, "Turn on the bed light", MALLORY_ID)
    await _settle(hass)
    assert tool_results(fake_ollama.chat_requests[-1])[0].startswith("Error: Refused")
    assert hass.states.get(BED_LIGHT).state == "off"
    assert service_calls == []
    assert NOT_KNOWN_REPLY in sent[0]["text"]


async def test_the_default_private_chats_work_as_before(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    service_calls: list[Event[Any]],
) -> None:
    """Each person's private chat allowed, no mapping: switch, ask, confirm.

    The only difference: HA now sees the integration's own non-admin user act,
    never the system (a Context without a user).
    """
    await async_setup_house(hass)
    await async_setup_assistant(hass, fake_ollama)
    executed: list[Event[Any]] = []
    hass.bus.async_listen(EVENT_ACTION_EXECUTED, executed.append)
    acting = await _acting_user(hass)

    fake_ollama.tool_call("call_service", BED_LIGHT_ON).reply("The bed light is on.")
    await telegram.send_text("Turn on the bed light", chat_id=BOB_ID)
    sent = await telegram.wait_for_sent(1, chat_id=BOB_ID)
    await _settle(hass)
    assert sent[0]["text"] == "The bed light is on."
    light = hass.states.get(BED_LIGHT)
    assert light.state == "on"
    assert light.context.user_id == acting.id

    fake_ollama.tool_call("call_service", UNLOCK).reply("Please press Confirm.")
    await telegram.send_text("Unlock the front door", chat_id=ALICE_ID)
    sent = await telegram.wait_for_sent(2, chat_id=ALICE_ID)
    assert "Unlock Front Door" in sent[-1]["text"]
    await telegram.send_command("/confirm", chat_id=ALICE_ID)
    sent = await telegram.wait_for_sent(3, chat_id=ALICE_ID)
    await _settle(hass)
    assert sent[-1]["text"].startswith("Done: Unlock Front Door")
    lock = hass.states.get("lock.front_door")
    assert lock.state == "unlocked"
    assert lock.context.user_id == acting.id
    assert [e.context.user_id for e in service_calls] == [acting.id] * 2
    assert [(e.data["user"], e.data["ha_user_id"]) for e in executed] == [
        (f"telegram:{BOB_ID}", acting.id),
        (f"telegram:{ALICE_ID}", acting.id),
    ]


async def test_the_acting_user_is_a_kept_non_admin_user(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Created at setup, not an admin, the same after a reload, gone with the entry."""
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama)
    user = await _acting_user(hass)
    assert user.name == ACTING_USER_NAME
    assert not user.is_admin
    assert user.system_generated
    assert [group.id for group in user.groups] == [GROUP_ID_USER]
    assert user.is_active

    # Someone made it an admin: setup puts it back among the users.
    await hass.auth.async_update_user(user, group_ids=["system-admin"])
    assert user.is_admin
    assert await hass.config_entries.async_reload(entry.entry_id)
    await hass.async_block_till_done()
    assert entry.state is ConfigEntryState.LOADED
    again = await _acting_user(hass)
    assert again.id == user.id
    assert not again.is_admin

    # Removed by hand: the next setup creates a new one.
    await hass.auth.async_remove_user(again)
    assert await hass.config_entries.async_reload(entry.entry_id)
    await hass.async_block_till_done()
    fresh = await _acting_user(hass)
    assert fresh.id != user.id
    assert not fresh.is_admin

    await hass.config_entries.async_remove(entry.entry_id)
    await hass.async_block_till_done()
    assert await hass.auth.async_get_user(fresh.id) is None
    assert acting_user_id(hass) is None
    assert [
        u for u in await hass.auth.async_get_users() if u.name == ACTING_USER_NAME
    ] == []


async def test_assist_without_a_user_acts_as_the_integrations_user(
    hass: HomeAssistant,
    fake_ollama: FakeOllama,
    service_calls: list[Event[Any]],
    hass_admin_user: Any,
) -> None:
    """A voice satellite (no HA user) acts as our user; an HA user as itself."""
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama)
    agent_id = er.async_get(hass).async_get_entity_id(
        "conversation", "ha_personal_assistant", entry.entry_id
    )
    fake_ollama.tool_call("call_service", BED_LIGHT_ON).reply("On.")
    await conversation.async_converse(
        hass, "Bed light on", None, Context(), language="en", agent_id=agent_id
    )
    await _settle(hass)
    assert hass.states.get(BED_LIGHT).state == "on"
    assert hass.states.get(BED_LIGHT).context.user_id == (await _acting_user(hass)).id

    off = {**BED_LIGHT_ON, "service": "turn_off"}
    fake_ollama.tool_call("call_service", off).reply("Off.")
    await conversation.async_converse(
        hass,
        "Bed light off",
        None,
        Context(user_id=hass_admin_user.id),
        language="en",
        agent_id=agent_id,
    )
    await _settle(hass)
    assert hass.states.get(BED_LIGHT).state == "off"
    assert hass.states.get(BED_LIGHT).context.user_id == hass_admin_user.id
    assert len(service_calls) == 2


@pytest.mark.parametrize(
    ("stored", "user_id", "known"),
    [
        # A chat id kept as text (a hand-edited or older entry) still counts.
        ("4242", 4242, True),
        # A group's id (negative) is nobody's private chat.
        ("-4242", 4242, False),
        # A flag is no chat id, although Python reads True as 1.
        (True, 1, False),
        ("four", 4242, False),
        (4242, 4242, True),
    ],
    ids=["text", "group id as text", "flag", "not a number", "number"],
)
async def test_an_allowed_private_chat_is_read_however_it_is_stored(
    hass: HomeAssistant, stored: object, user_id: int, *, known: bool
) -> None:
    """Only a chat id that is the writer's own makes them a known person."""
    bot = MockConfigEntry(
        domain="telegram_bot",
        subentries_data=[
            ConfigSubentryData(
                data={"chat_id": stored},
                subentry_type=ALLOWED_CHAT_SUBENTRY,
                title="chat",
                unique_id="chat",
            )
        ],
    )
    bot.add_to_hass(hass)
    assert (
        is_known(
            hass,
            bot_entry_id=bot.entry_id,
            user_id=user_id,
            allowed_user_ids=(),
            user_mapping={},
        )
        is known
    )


async def test_nobody_is_known_through_a_removed_bot(hass: HomeAssistant) -> None:
    """A telegram_bot entry that is gone allows no private chat any more."""
    assert not is_known(
        hass,
        bot_entry_id="removed",
        user_id=ALICE_ID,
        allowed_user_ids=(),
        user_mapping={},
    )
    # The assistant's own list still counts without telegram_bot.
    assert is_known(
        hass,
        bot_entry_id="removed",
        user_id=ALICE_ID,
        allowed_user_ids=(ALICE_ID,),
        user_mapping={},
    )
