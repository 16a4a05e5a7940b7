"""Assist talks to the same assistant: one memory, one set of permission rules."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from homeassistant.components import conversation
from homeassistant.core import Context
from homeassistant.helpers import chat_session
from homeassistant.helpers import entity_registry as er

from custom_components.ha_personal_assistant.const import (
    CONF_USER_MAPPING,
    DOMAIN,
    EVENT_ACTION_EXECUTED,
)

from .common import async_setup_assistant, async_setup_house, last_user_content
from .telegram_harness import ALICE_ID

if TYPE_CHECKING:
    from homeassistant.core import Event, HomeAssistant
    from pytest_homeassistant_custom_component.common import MockConfigEntry

    from .fake_ollama import FakeOllama
    from .telegram_harness import TelegramHarness

UNLOCK = {"domain": "lock", "service": "unlock", "entity_id": "lock.front_door"}
FACT = "Favourite colour is teal"


@pytest.fixture
def fake_ollama(fake_server: FakeOllama) -> FakeOllama:
    """Run every test here over Ollama's API and over OpenAI's (both fakes)."""
    return fake_server


@pytest.fixture
async def assistant(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    hass_admin_user: Any,
) -> MockConfigEntry:
    """The house and the assistant; Alice's Telegram account is the HA admin."""
    await async_setup_house(hass)
    return await async_setup_assistant(
        hass, fake_ollama, **{CONF_USER_MAPPING: {str(ALICE_ID): hass_admin_user.id}}
    )


def _agent_id(hass: HomeAssistant, entry: MockConfigEntry) -> str:
    entity_id = er.async_get(hass).async_get_entity_id(
        "conversation", DOMAIN, entry.entry_id
    )
    assert entity_id is not None
    return entity_id


async def _converse(
    hass: HomeAssistant,
    entry: MockConfigEntry,
    text: str,
    user_id: str | None,
    conversation_id: str | None = None,
) -> conversation.ConversationResult:
    return await conversation.async_converse(
        hass,
        text,
        conversation_id,
        Context(user_id=user_id),
        language="en",
        agent_id=_agent_id(hass, entry),
    )


def _speech(result: conversation.ConversationResult) -> str:
    return str(result.response.speech["plain"]["speech"])


async def test_assist_recalls_what_was_remembered_on_telegram(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    hass_admin_user: Any,
) -> None:
    """A fact told on Telegram is in the context of the same person's Assist turn."""
    fake_ollama.tool_call("remember", {"fact": FACT}).reply("I'll remember that.")
    await telegram.send_text("Remember that my favourite colour is teal")
    await telegram.wait_for_sent(1)

    fake_ollama.reply("Your favourite colour is teal.")
    result = await _converse(
        hass, assistant, "What is my favourite colour?", hass_admin_user.id
    )
    assert _speech(result) == "Your favourite colour is teal."
    assert FACT in last_user_content(fake_ollama.chat_requests[-1])
    # The answer is in HA's own Assist conversation as well.
    assert result.conversation_id


async def test_another_ha_user_does_not_get_that_profile(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    hass_read_only_user: Any,
) -> None:
    """The profile follows the HA user, not the Assist agent."""
    fake_ollama.tool_call("remember", {"fact": FACT}).reply("I'll remember that.")
    await telegram.send_text("Remember that my favourite colour is teal")
    await telegram.wait_for_sent(1)

    fake_ollama.reply("I don't know.")
    await _converse(
        hass, assistant, "What is my favourite colour?", hass_read_only_user.id
    )
    assert FACT not in last_user_content(fake_ollama.chat_requests[-1])


async def test_unlocking_in_assist_waits_for_a_spoken_yes(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    fake_ollama: FakeOllama,
    hass_admin_user: Any,
) -> None:
    """The unlock is asked about, and runs only after "yes" in that conversation."""
    executed: list[Event[Any]] = []
    hass.bus.async_listen(EVENT_ACTION_EXECUTED, executed.append)
    fake_ollama.tool_call("call_service", UNLOCK).reply(
        "I need your confirmation to unlock the front door."
    )
    asked = await _converse(
        hass, assistant, "Unlock the front door", hass_admin_user.id
    )
    speech = _speech(asked)
    assert "Please confirm: Unlock Front Door (lock.front_door)" in speech
    assert asked.continue_conversation is True
    await hass.async_block_till_done()
    assert hass.states.get("lock.front_door").state == "locked"
    assert executed == []

    requests = len(fake_ollama.chat_requests)
    done = await _converse(
        hass, assistant, "Yes.", hass_admin_user.id, asked.conversation_id
    )
    await hass.async_block_till_done()
    assert _speech(done).startswith("Done: Unlock Front Door")
    assert hass.states.get("lock.front_door").state == "unlocked"
    # The confirmation never went through the model.
    assert len(fake_ollama.chat_requests) == requests
    assert [e.data for e in executed] == [
        {
            "domain": "lock",
            "service": "unlock",
            "entity_ids": ["lock.front_door"],
            "user": f"ha:{hass_admin_user.id}",
            "ha_user_id": hass_admin_user.id,
        }
    ]


async def test_no_cancels_the_unlock_in_assist(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    fake_ollama: FakeOllama,
    hass_admin_user: Any,
) -> None:
    """A "Nein" (or no in another language) cancels; a later yes runs nothing."""
    fake_ollama.tool_call("call_service", UNLOCK).reply("Please confirm.")
    asked = await _converse(
        hass, assistant, "Unlock the front door", hass_admin_user.id
    )
    cancelled = await _converse(
        hass, assistant, "Nein!", hass_admin_user.id, asked.conversation_id
    )
    assert _speech(cancelled).startswith("Cancelled: Unlock Front Door")
    fake_ollama.reply("There is nothing to confirm.")
    later = await _converse(
        hass, assistant, "yes", hass_admin_user.id, asked.conversation_id
    )
    await hass.async_block_till_done()
    assert _speech(later) == "There is nothing to confirm."
    assert hass.states.get("lock.front_door").state == "locked"


async def test_another_user_cannot_confirm_in_the_same_conversation(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    fake_ollama: FakeOllama,
    hass_admin_user: Any,
    hass_read_only_user: Any,
) -> None:
    """A "yes" from someone else is just a message to the model."""
    fake_ollama.tool_call("call_service", UNLOCK).reply("Please confirm.")
    asked = await _converse(
        hass, assistant, "Unlock the front door", hass_admin_user.id
    )
    fake_ollama.reply("Only the person who asked can confirm.")
    await _converse(
        hass, assistant, "yes", hass_read_only_user.id, asked.conversation_id
    )
    await hass.async_block_till_done()
    assert hass.states.get("lock.front_door").state == "locked"


async def test_a_light_switched_from_telegram_fires_the_action_event(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    hass_admin_user: Any,
) -> None:
    """Automations see each executed action, resolved, with who asked."""
    executed: list[Event[Any]] = []
    hass.bus.async_listen(EVENT_ACTION_EXECUTED, executed.append)
    fake_ollama.tool_call(
        "call_service",
        {"domain": "light", "service": "turn_on", "entity_id": "light.kitchen_lights"},
    ).reply("Done.")
    await telegram.send_text("Kitchen lights on")
    await telegram.wait_for_sent(1)
    assert [e.data for e in executed] == [
        {
            "domain": "light",
            "service": "turn_on",
            "entity_ids": ["light.kitchen_lights"],
            "user": f"telegram:{ALICE_ID}",
            "ha_user_id": hass_admin_user.id,
        }
    ]
    assert executed[0].context.user_id == hass_admin_user.id


async def test_an_assist_answer_streams_word_by_word_into_the_chat_log(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    fake_ollama: FakeOllama,
    hass_admin_user: Any,
) -> None:
    """A pipeline listening to the chat log gets the words as they are written."""
    pieces = (
        "The front door ",
        "is locked, see ",
        "https://evil-login.example.com/x ",
        "and the lights are off.",
    )
    text = "".join(pieces)
    fake_ollama.reply(text, text_chunks=pieces, chunk_delay=0.2)
    deltas: list[dict[str, Any]] = []
    with (
        chat_session.async_get_chat_session(hass) as session,
        conversation.async_get_chat_log(
            hass, session, chat_log_delta_listener=lambda _log, d: deltas.append(d)
        ),
    ):
        result = await _converse(
            hass,
            assistant,
            "Is the front door locked?",
            hass_admin_user.id,
            session.conversation_id,
        )
    speech = _speech(result)
    assert speech == (
        "The front door is locked, see [link removed] and the lights are off."
    )
    contents = [d["content"] for d in deltas if "content" in d]
    assert len(contents) > 1
    assert "".join(contents) == speech
    assert all("evil" not in c for c in contents)
