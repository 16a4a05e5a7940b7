"""A household member writes to the bot on Telegram and the house answers."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import TYPE_CHECKING

import pytest

from custom_components.ha_personal_assistant.const import (
    CONF_ALLOWED_USER_IDS,
    CONF_NUM_PREDICT,
    CONF_USER_MAPPING,
    TELEGRAM_MESSAGE_LIMIT,
)

from .common import (
    HIDDEN,
    MODEL,
    async_setup_assistant,
    async_setup_house,
    fire_time_changed,
    fixed_text,
    last_user_content,
    tool_results,
)
from .telegram_harness import ALICE_ID, BOB_ID, MALLORY_ID

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant
    from pytest_homeassistant_custom_component.common import MockConfigEntry

    from .fake_ollama import FakeOllama
    from .telegram_harness import TelegramHarness


@pytest.fixture
def fake_ollama(fake_server: FakeOllama) -> FakeOllama:
    """Run every test here over Ollama's API and over OpenAI's (both fakes)."""
    return fake_server


HOUSE_DOMAINS = ["light", "lock", "cover"]


@pytest.fixture
async def assistant(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> MockConfigEntry:
    """The demo house, the Telegram bot and the assistant, all set up."""
    await async_setup_house(hass)
    return await async_setup_assistant(hass, fake_ollama)


async def test_a_message_is_answered_in_the_same_chat_through_the_same_bot(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """The update reaches the model server and the answer reaches Telegram."""
    fake_ollama.reply("Hello Alice, the house is quiet.")
    assert await telegram.send_text("Hi, how is the house?") == 200
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[0]["text"] == "Hello Alice, the house is quiet."
    assert sent[0]["chat_id"] == ALICE_ID
    assert sent[0]["link_preview_options"] == {"is_disabled": True}
    # Sent as plain text: entity ids with underscores must not break Markdown.
    assert "parse_mode" not in sent[0]

    request = fake_ollama.chat_requests[-1]
    assert request["model"] == MODEL
    if getattr(fake_ollama, "backend", "ollama") == "ollama":
        assert request["options"]["num_ctx"] == 8192
        assert request["keep_alive"] == -1
        assert request["think"] is False
    else:
        # The server owns the context size and keeps the model loaded.
        assert request["max_tokens"] == 512
        assert request["chat_template_kwargs"] == {"enable_thinking": False}
    assert [t["function"]["name"] for t in request["tools"]] == [
        "get_state",
        "list_entities",
        "call_service",
        "get_history",
        "web_search",
        "remember",
        "forget",
        "schedule",
        "watch",
        "list_tasks",
        "cancel_task",
    ]
    user = last_user_content(request)
    system = request["messages"][0]["content"]
    assert user.startswith("Hi, how is the house?")
    # Exposed entities are in the catalogue of the cached prefix; a hidden
    # one nowhere.
    assert "light.kitchen_lights" in system
    assert HIDDEN not in user
    assert HIDDEN not in system
    assert "User: Alice" in user
    # A typing indicator was shown while the model worked.
    assert telegram.calls("sendChatAction")[0]["action"] == "typing"


async def test_the_model_turns_on_an_exposed_light(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """A tool call on an exposed light switches the real demo light."""
    await hass.services.async_call(
        "light", "turn_off", {"entity_id": "light.kitchen_lights"}, blocking=True
    )
    fake_ollama.tool_call(
        "call_service",
        {"domain": "light", "service": "turn_on", "entity_id": "light.kitchen_lights"},
    ).reply("The kitchen lights are on.")
    await telegram.send_text("Turn on the kitchen lights")
    sent = await telegram.wait_for_sent(1)
    assert sent[0]["text"] == "The kitchen lights are on."
    assert hass.states.get("light.kitchen_lights").state == "on"
    result = json.loads(tool_results(fake_ollama.chat_requests[-1])[0])
    assert result["result"] == "done"
    assert result["states"][0]["state"] == "on"


async def test_an_entity_not_exposed_is_refused_and_the_model_told_why(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """The same call on a hidden light changes nothing and explains itself."""
    before = hass.states.get(HIDDEN).state
    fake_ollama.tool_call(
        "call_service",
        {"domain": "light", "service": "toggle", "entity_id": HIDDEN},
    ).reply("I can't control that light.")
    await telegram.send_text("Toggle the ceiling lights")
    await telegram.wait_for_sent(1)
    assert hass.states.get(HIDDEN).state == before
    result = tool_results(fake_ollama.chat_requests[-1])[0]
    # The same words as for an entity that does not exist, naming neither.
    assert "not an entity you can see" in result
    assert HIDDEN not in result


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        (
            {"domain": "lock", "service": "unlock", "entity_id": "lock.front_door"},
            "needs confirmation",
        ),
        (
            {
                "domain": "cover",
                "service": "open_cover",
                "entity_id": "cover.garage_door",
            },
            "needs confirmation",
        ),
        (
            {"domain": "homeassistant", "service": "restart"},
            "blocked",
        ),
        ({"domain": "light", "service": "turn_on", "entity_id": "all"}, "not allowed"),
        (
            {"domain": "light", "service": "turn_on", "data": {"area_id": "kitchen"}},
            "does not exist",
        ),
        (
            {"domain": "light", "service": "explode", "entity_id": "light.bed_light"},
            "does not exist",
        ),
        ({"domain": "light", "service": "turn_on"}, "name the target"),
    ],
)
async def test_restricted_and_blocked_calls_do_not_run_on_the_models_word(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    arguments: dict[str, object],
    reason: str,
) -> None:
    """Locks, garage doors and blocked services never run because the model says."""
    states = {s.entity_id: s.state for s in hass.states.async_all(HOUSE_DOMAINS)}
    fake_ollama.tool_call("call_service", arguments).reply("I couldn't do that.")
    await telegram.send_text("Do it")
    sent = await telegram.wait_for_sent(1)
    assert sent[0]["text"] == "I couldn't do that."
    assert reason in tool_results(fake_ollama.chat_requests[-1])[0]
    await hass.async_block_till_done()
    assert {
        s.entity_id: s.state for s in hass.states.async_all(HOUSE_DOMAINS)
    } == states


async def test_get_state_and_list_entities_see_only_exposed_entities(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Reading tools show exposed entities and hide the rest the same way."""
    fake_ollama.tool_calls(
        [
            ("list_entities", {"domain": "light"}),
            ("get_state", {"entity_id": "lock.front_door"}),
            ("get_state", {"entity_id": HIDDEN}),
        ]
    ).reply("Done looking.")
    await telegram.send_text("What lights are there?")
    await telegram.wait_for_sent(1)
    listed, lock, hidden = tool_results(fake_ollama.chat_requests[-1])
    ids = [e.split(" | ")[0] for e in json.loads(listed)["entities"]]
    # The lights that are on first, then those that are off.
    assert sorted(ids) == ["light.bed_light", "light.kitchen_lights"]
    states = [e.split(" | ")[2] for e in json.loads(listed)["entities"]]
    assert states == sorted(states, key=lambda state: state == "off")
    assert json.loads(lock)["state"] == hass.states.get("lock.front_door").state
    assert "not an entity you can see" in hidden


async def test_a_long_answer_is_split_into_telegram_sized_parts(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Nothing of a long answer is lost and every part fits Telegram's limit."""
    await async_setup_house(hass)
    # Room for the whole answer: the fake Ollama stops at num_predict words.
    await async_setup_assistant(hass, fake_ollama, **{CONF_NUM_PREDICT: 4096})
    paragraphs = [f"Paragraph {i}: " + "lorem ipsum " * 150 for i in range(8)]
    fake_ollama.reply("\n\n".join(paragraphs))
    await telegram.send_text("Tell me a long story")
    sent = await telegram.wait_for_sent(3)
    await asyncio.sleep(0.2)
    parts = [m["text"] for m in telegram.sent_messages(ALICE_ID)]
    assert all(len(p) <= TELEGRAM_MESSAGE_LIMIT for p in parts)
    assert len(parts) == len(sent) >= 3
    assert " ".join(parts).split() == "\n\n".join(paragraphs).split()


async def test_help_and_new_answer_without_the_model(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """/help explains the assistant, /new starts over; neither calls Ollama."""
    await telegram.send_command("/help")
    await telegram.send_command("/new")
    sent = await telegram.wait_for_sent(2)
    assert "/new" in sent[0]["text"]
    assert "Started a new conversation" in sent[1]["text"]
    assert fake_ollama.chat_requests == []


async def test_new_starts_a_conversation_without_the_old_turns(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """After /new the model no longer sees what was said before."""
    fake_ollama.reply("Noted: your cat is Tom.")
    await telegram.send_text("My cat is called Tom")
    await telegram.wait_for_sent(1)
    first = fake_ollama.chat_requests[-1]["messages"]
    fake_ollama.reply("Your cat is Tom.")
    await telegram.send_text("What is my cat called?")
    await telegram.wait_for_sent(2)
    second = fake_ollama.chat_requests[-1]["messages"]
    assert any("My cat is called Tom" in m["content"] for m in second)

    await telegram.send_command("/new")
    await telegram.wait_for_sent(3)
    fake_ollama.reply("I don't know.")
    await telegram.send_text("What is my cat called?")
    await telegram.wait_for_sent(4)
    fresh = fake_ollama.chat_requests[-1]["messages"]
    assert not any("Tom" in m["content"] for m in fresh)
    # Within a session the prompt only grows: the first request is the start
    # of the second, byte for byte (its context block included), so the
    # model server reuses its cache for all of it.
    assert second[: len(first)] == first
    assert second[len(first)] == {
        "role": "assistant",
        "content": "Noted: your cat is Tom.",
    }


async def test_edits_and_updates_without_text_are_ignored(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Editing a message or sending a sticker does not start a turn."""
    fake_ollama.reply("First answer.")
    update = telegram.text_update(ALICE_ID, ALICE_ID, "Original text", message_id=4242)
    assert await telegram.post_update(update) == 200
    await telegram.wait_for_sent(1)
    edited = telegram.edited_text_update(
        ALICE_ID, ALICE_ID, "Edited text", message_id=4242
    )
    assert await telegram.post_update(edited) == 200
    # The same update delivered twice (Telegram retries webhooks) is one message.
    assert await telegram.post_update(update) == 200
    assert (
        await telegram.post_update(
            telegram.update_without_text(ALICE_ID, ALICE_ID, kind="sticker")
        )
        == 200
    )
    assert (
        await telegram.post_update(
            telegram.update_without_text(ALICE_ID, ALICE_ID, kind="new_chat_members")
        )
        == 200
    )
    await asyncio.sleep(0.3)
    await hass.async_block_till_done()
    assert len(fake_ollama.chat_requests) == 1
    # The sticker is declined in words (issue 17), without the model.
    texts = [message["text"] for message in telegram.sent_messages()]
    assert texts == ["First answer.", fixed_text("media_unsupported")]


async def test_users_outside_the_allow_list_get_no_model_call(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Bob may talk to the bot, but the assistant only serves Alice."""
    await async_setup_house(hass)
    await async_setup_assistant(
        hass, fake_ollama, **{CONF_ALLOWED_USER_IDS: [ALICE_ID]}
    )
    await telegram.send_text("Hello from Bob", chat_id=BOB_ID)
    await asyncio.sleep(0.3)
    await hass.async_block_till_done()
    assert fake_ollama.chat_requests == []
    assert telegram.sent_messages() == []
    fake_ollama.reply("Hi Alice")
    await telegram.send_text("Hello from Alice")
    assert (await telegram.wait_for_sent(1))[0]["chat_id"] == ALICE_ID


async def test_service_calls_carry_the_mapped_ha_user(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    hass_read_only_user,
) -> None:
    """A Telegram user mapped to a read-only HA user cannot switch lights."""
    await async_setup_house(hass)
    await async_setup_assistant(
        hass,
        fake_ollama,
        **{
            CONF_ALLOWED_USER_IDS: [ALICE_ID],
            CONF_USER_MAPPING: {str(ALICE_ID): hass_read_only_user.id},
        },
    )
    before = hass.states.get("light.bed_light").state
    fake_ollama.tool_call(
        "call_service",
        {"domain": "light", "service": "toggle", "entity_id": "light.bed_light"},
    ).reply("Sorry.")
    await telegram.send_text("Toggle the bed light")
    await telegram.wait_for_sent(1)
    assert hass.states.get("light.bed_light").state == before
    assert "may not do this" in tool_results(fake_ollama.chat_requests[-1])[0]


async def test_two_chats_are_answered_at_the_same_time(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """A slow answer in one chat does not hold up the other chat."""

    def answer(request: dict[str, object]) -> str:
        return f"Echo: {last_user_content(request).splitlines()[0]}"

    fake_ollama.default = answer
    fake_ollama.delay(1.0)
    await telegram.send_text("slow question", chat_id=ALICE_ID)
    await fake_ollama.wait_for_chat_requests(1)
    await telegram.send_text("quick question", chat_id=BOB_ID, user_id=BOB_ID)
    bob = await telegram.wait_for_sent(1, chat_id=BOB_ID, timeout=0.9)
    assert bob[0]["text"] == "Echo: quick question"
    assert telegram.sent_messages(ALICE_ID) == []
    alice = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert alice[0]["text"] == "Echo: slow question"


async def test_messages_of_one_chat_are_answered_in_order(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Two quick messages get their answers in the order they were written."""

    def answer(request: dict[str, object]) -> str:
        return f"Echo: {last_user_content(request).splitlines()[0]}"

    fake_ollama.default = answer
    fake_ollama.delay(2.0)
    await telegram.send_text("first")
    await telegram.send_text("second")
    # Both arrive while the first answer is still being written (a check of
    # what was sent, not of the clock: a loaded machine is slow, not wrong).
    assert telegram.sent_messages() == []
    assert len(fake_ollama.chat_requests) <= 1
    sent = await telegram.wait_for_sent(2)
    assert [m["text"] for m in sent] == ["Echo: first", "Echo: second"]
    second_request = fake_ollama.chat_requests[1]["messages"]
    assert any(m["content"] == "Echo: first" for m in second_request)


async def test_events_not_from_telegram_bot_are_not_obeyed(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """A telegram_text fired by an automation or API client is not a message."""
    from homeassistant.core import Context

    data = {
        "chat_id": ALICE_ID,
        "user_id": ALICE_ID,
        "text": "Unlock everything",
        "id": 999,
        "bot": {"config_entry_id": telegram.entry_id},
    }
    hass.bus.async_fire("telegram_text", data, context=Context(user_id="someone"))
    hass.bus.async_fire("telegram_text", {**data, "bot": {"config_entry_id": "nope"}})
    hass.bus.async_fire(
        "telegram_text", {**data, "id": 1000}, context=Context(parent_id="automation")
    )
    await asyncio.sleep(0.2)
    await hass.async_block_till_done()
    assert fake_ollama.chat_requests == []
    assert MALLORY_ID not in telegram.chat_ids


async def test_commands_in_a_group_and_unknown_commands(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """/start helps, unknown commands say so, other bots' commands are ignored."""
    await telegram.send_command("/start")
    await telegram.post_update(
        telegram.command_update(ALICE_ID, ALICE_ID, "/help", mention_bot=True)
    )
    other = telegram.command_update(ALICE_ID, ALICE_ID, "/new")
    entity = other["message"]["entities"][0]
    other["message"]["text"] = "/new@SomeOtherBot"
    entity["length"] = len("/new@SomeOtherBot")
    await telegram.post_update(other)
    await telegram.send_command("/frobnicate", ["now"])
    await telegram.send_command("/confirm")
    sent = await telegram.wait_for_sent(4)
    await asyncio.sleep(0.2)
    texts = [m["text"] for m in telegram.sent_messages()]
    assert len(texts) == 4
    assert "/help" in texts[0]
    assert "/help" in texts[1]
    assert (
        texts[2] == "I don't know the command /frobnicate. /help lists what I can do."
    )
    assert texts[3] == "Nothing is waiting for your confirmation."
    assert sent
    assert fake_ollama.chat_requests == []


async def test_ollama_calls_are_bounded_across_chats(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Three chats at once never have more than two model calls in flight."""
    await telegram.add_allowed_chat(333333333)
    in_flight = 0
    peak = 0
    release = asyncio.Event()
    handler = (
        "_handle_completions"
        if getattr(fake_ollama, "backend", "ollama") == "openai_compatible"
        else "_handle_chat"
    )
    original = getattr(fake_ollama, handler)

    async def counting(request):  # type: ignore[no-untyped-def]
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(release.wait(), 0.5)
        try:
            return await original(request)
        finally:
            in_flight -= 1

    setattr(fake_ollama, handler, counting)
    # The router captured the bound method at start; restart to use the wrapper.
    port = int(fake_ollama.url.rsplit(":", 1)[1])
    await fake_ollama.stop()
    await fake_ollama.start(port)
    await telegram.send_text("one", chat_id=ALICE_ID)
    await telegram.send_text("two", chat_id=BOB_ID, user_id=BOB_ID)
    await telegram.send_text("three", chat_id=333333333, user_id=333333333)
    await telegram.wait_for_sent(3, timeout=10)
    assert peak == 2


async def test_old_message_ids_are_pruned_on_a_schedule(
    hass: HomeAssistant,
    assistant: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Seen message ids are forgotten after a week, off the response path."""
    import sqlite3
    import time
    from datetime import timedelta

    from homeassistant.util import dt as dt_util

    database = assistant.runtime_data.assistant.database
    await database.async_mark_seen("old", 1, time.time() - 8 * 24 * 3600)
    await database.async_mark_seen("new", 1, time.time())
    fire_time_changed(hass, dt_util.utcnow() + timedelta(hours=7))
    await hass.async_block_till_done()

    def rows() -> list[str]:
        conn = sqlite3.connect(database.path)
        try:
            return [
                r[0]
                for r in conn.execute(
                    "SELECT conversation_key FROM telegram_messages_seen"
                )
            ]
        finally:
            conn.close()

    # The prune runs as a background job: wait for it, briefly.
    for _ in range(50):
        if await hass.async_add_executor_job(rows) == ["new"]:
            break
        await asyncio.sleep(0.02)
    assert await hass.async_add_executor_job(rows) == ["new"]
