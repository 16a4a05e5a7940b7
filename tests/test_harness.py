"""Prove the test harness is faithful to telegram_bot, ChatOllama and Ollama.

These tests drive HA's real ``telegram_bot`` integration through
``tests/telegram_harness.py`` and real ChatOllama / ``ollama`` clients through
``tests/fake_ollama.py``. They pin the behaviours the integration's tests rely
on, so a harness regression shows up here first.
"""

from __future__ import annotations

import asyncio
import math
import time
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import httpx
import ollama
import pytest
from homeassistant.core import callback
from homeassistant.exceptions import HomeAssistantError, ServiceValidationError
from homeassistant.helpers.event import async_call_later
from homeassistant.util import dt as dt_util
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_ollama import ChatOllama, OllamaEmbeddings
from pytest_homeassistant_custom_component.common import (  # type: ignore[import-untyped]
    async_capture_events,
    async_fire_time_changed,
)

from .common import fire_time_changed
from .fake_ollama import FakeOllama, split_text
from .telegram_harness import (
    ALICE_ID,
    BOB_ID,
    BOT_ID,
    BOT_USERNAME,
    GROUP_ID,
    MALLORY_ID,
    TelegramHarness,
    markdown_v1_error,
)

if TYPE_CHECKING:
    from homeassistant.core import Event, HomeAssistant

QWEN = "qwen3:4b"


@tool
def get_state(entity_id: str) -> str:
    """Return the state of a Home Assistant entity."""
    return "on"


@tool
def list_entities(domain: str, area: str | None = None) -> str:
    """List the entities of a domain, optionally in one area."""
    return "light.kitchen"


async def _send(hass: HomeAssistant, service: str, **data: Any) -> Any:
    """Call a telegram_bot service and wait for it to finish."""
    return await hass.services.async_call("telegram_bot", service, data, blocking=True)


# --------------------------------------------------------------- telegram_bot


async def test_setup_registers_webhook_like_telegram_bot_does(
    telegram: TelegramHarness,
) -> None:
    """Setup calls getMe, getWebhookInfo and setWebhook with a secret."""
    methods = [call.method for call in telegram.api.calls]
    assert methods[:3] == ["getMe", "getWebhookInfo", "setWebhook"]
    webhook = telegram.calls("setWebhook")[0]
    assert webhook["url"] == f"https://example.com/api/telegram_webhooks_{BOT_ID}"
    assert len(webhook["secret_token"]) == 32
    assert telegram.secret_token == webhook["secret_token"]
    assert "callback_query" in webhook["allowed_updates"]
    assert telegram.bot_entry is not None
    assert telegram.bot_entry.unique_id == telegram.token
    assert sorted(
        subentry.data["chat_id"] for subentry in telegram.bot_entry.subentries.values()
    ) == sorted([ALICE_ID, BOB_ID])


async def test_text_update_fires_telegram_text(
    hass: HomeAssistant, telegram: TelegramHarness
) -> None:
    """A text message becomes a telegram_text event with the sender's data."""
    events = async_capture_events(hass, "telegram_text")
    update = telegram.text_update(ALICE_ID, ALICE_ID, "Is the garage closed?")

    assert await telegram.post_update(update) == 200

    assert len(events) == 1
    data = events[0].data
    assert data["chat_id"] == ALICE_ID
    assert data["user_id"] == ALICE_ID
    assert data["text"] == "Is the garage closed?"
    assert data["from_first"] == "Alice"
    assert data["id"] == update["message"]["message_id"]
    assert data["bot"]["config_entry_id"] == telegram.entry_id
    assert data["bot"]["id"] == BOT_ID
    assert data["bot"]["username"] == BOT_USERNAME


async def test_command_update_fires_telegram_command(
    hass: HomeAssistant, telegram: TelegramHarness
) -> None:
    """A /command fires telegram_command (not telegram_text) with its args."""
    texts = async_capture_events(hass, "telegram_text")
    commands = async_capture_events(hass, "telegram_command")

    assert await telegram.send_command("/confirm", ["42", "now"], chat_id=BOB_ID) == 200
    # In groups clients append the bot's name, and telegram_bot keeps it.
    update = telegram.command_update(ALICE_ID, ALICE_ID, "new", mention_bot=True)
    assert await telegram.post_update(update) == 200

    assert texts == []
    assert [(e.data["command"], e.data["args"]) for e in commands] == [
        ("/confirm", ["42", "now"]),
        (f"/new@{BOT_USERNAME}", []),
    ]
    assert commands[0].data["user_id"] == BOB_ID
    assert commands[0].data["from_first"] == "Bob"
    assert commands[0].data["bot"]["config_entry_id"] == telegram.entry_id


async def test_callback_update_fires_telegram_callback(
    hass: HomeAssistant, telegram: TelegramHarness
) -> None:
    """Pressing a button on a sent keyboard fires telegram_callback."""
    await _send(
        hass,
        "send_message",
        config_entry_id=telegram.entry_id,
        chat_id=ALICE_ID,
        message="Unlock the front door?",
        inline_keyboard=[[["Confirm", "/confirm_1"], ["Cancel", "/cancel_1"]]],
    )
    sent_id = telegram.bot_messages(ALICE_ID)[-1]["message_id"]
    events = async_capture_events(hass, "telegram_callback")

    assert await telegram.press_button("/confirm_1") == 200

    assert len(events) == 1
    data = events[0].data
    assert data["data"] == "/confirm_1"
    assert (data["command"], data["args"]) == ("/confirm_1", [])
    assert (data["chat_id"], data["user_id"]) == (ALICE_ID, ALICE_ID)
    assert data["message"]["message_id"] == sent_id
    assert data["message"]["text"] == "Unlock the front door?"
    assert data["bot"]["config_entry_id"] == telegram.entry_id
    # The query id is numeric, so answer_callback_query accepts it.
    await _send(
        hass,
        "answer_callback_query",
        config_entry_id=telegram.entry_id,
        message="Done",
        callback_query_id=data["id"],
    )
    assert telegram.calls("answerCallbackQuery") == [
        {"callback_query_id": data["id"], "text": "Done", "show_alert": False}
    ]


async def test_unauthorized_and_forged_updates_fire_nothing(
    hass: HomeAssistant, telegram: TelegramHarness
) -> None:
    """Senders outside the allowed chats and a wrong secret are rejected."""
    events = async_capture_events(hass, "telegram_text")

    status = await telegram.post_update(
        telegram.text_update(MALLORY_ID, MALLORY_ID, "open the door")
    )
    forged = await telegram.post_update(
        telegram.text_update(ALICE_ID, ALICE_ID, "hi"),
        secret_token="wrong",  # noqa: S106
    )

    assert status == 200  # telegram_bot accepts, logs and drops it
    assert forged == 401
    assert events == []


@pytest.mark.parametrize("telegram_chat_ids", [[GROUP_ID, BOB_ID]])
async def test_allowed_chats_are_users_or_chats(
    hass: HomeAssistant, telegram: TelegramHarness
) -> None:
    """telegram_bot lets an update in if its user OR its chat is allowed.

    Replies are stricter: send_message only reaches allowed chats (each has a
    notify entity), so answering an allowed user who writes in a group that
    is not allowed fails.
    """
    other_group = -1005555555555
    events = async_capture_events(hass, "telegram_text")

    await telegram.send_text("private", chat_id=ALICE_ID)  # neither allowed
    await telegram.send_text("in group", chat_id=GROUP_ID, user_id=ALICE_ID)
    await telegram.send_text("elsewhere", chat_id=other_group, user_id=BOB_ID)

    assert [(e.data["chat_id"], e.data["user_id"]) for e in events] == [
        (GROUP_ID, ALICE_ID),
        (other_group, BOB_ID),
    ]
    with pytest.raises(ServiceValidationError):
        await _send(
            hass,
            "send_message",
            config_entry_id=telegram.entry_id,
            chat_id=other_group,
            message="not an allowed chat",
        )
    assert telegram.calls("sendMessage") == []


async def test_other_update_kinds(
    hass: HomeAssistant, telegram: TelegramHarness
) -> None:
    """Edits, channel posts and text-less messages as telegram_bot sees them."""
    texts = async_capture_events(hass, "telegram_text")
    attachments = async_capture_events(hass, "telegram_attachment")
    await telegram.add_allowed_chat(GROUP_ID, "Family")

    await telegram.post_update(
        telegram.edited_text_update(ALICE_ID, ALICE_ID, "fixed typo", message_id=7)
    )
    await telegram.post_update(telegram.channel_post_update(GROUP_ID, "announcement"))
    await telegram.post_update(telegram.update_without_text(ALICE_ID, ALICE_ID))
    await telegram.post_update(
        telegram.update_without_text(GROUP_ID, BOB_ID, "new_chat_members")
    )

    assert [(e.data["text"], e.data["id"]) for e in texts][:2] == [
        ("fixed typo", 7),
        ("announcement", texts[1].data["id"]),
    ]
    assert "user_id" not in texts[1].data  # a channel post has no sender
    assert texts[2].data["text"] is None  # service message: no text at all
    assert texts[2].data["chat_id"] == GROUP_ID
    assert len(attachments) == 1
    assert attachments[0].data["file_id"] == "CAACAgIAAxkBAAIBsticker"
    assert attachments[0].data["text"] is None


async def test_send_message_service_records_sendmessage(
    hass: HomeAssistant, telegram: TelegramHarness
) -> None:
    """telegram_bot.send_message reaches the Bot API with decoded params."""
    response = await hass.services.async_call(
        "telegram_bot",
        "send_message",
        {
            "config_entry_id": telegram.entry_id,
            "chat_id": ALICE_ID,
            "message": "The garage is *closed*.",
            "disable_web_page_preview": True,
            "inline_keyboard": ["Confirm:/confirm_1, Cancel:/cancel_1"],
        },
        blocking=True,
        return_response=True,
    )

    sent = telegram.sent_messages(ALICE_ID)
    assert len(sent) == 1
    assert sent[0]["chat_id"] == ALICE_ID
    assert sent[0]["text"] == "The garage is *closed*."
    # python-telegram-bot 22 turns disable_web_page_preview into
    # link_preview_options, and the entry's parse mode into "Markdown".
    assert sent[0]["link_preview_options"] == {"is_disabled": True}
    assert "disable_web_page_preview" not in sent[0]
    assert sent[0]["parse_mode"] == "Markdown"
    # The "Label:/cmd, Label:/cmd" string form keeps the space after the
    # comma in the second label; the list-of-pairs form avoids that.
    assert sent[0]["reply_markup"] == {
        "inline_keyboard": [
            [
                {"text": "Confirm", "callback_data": "/confirm_1"},
                {"text": " Cancel", "callback_data": "/cancel_1"},
            ]
        ]
    }
    message_id = telegram.bot_messages(ALICE_ID)[0]["message_id"]
    assert response == {
        "chats": [
            {"chat_id": ALICE_ID, "message_id": message_id, "entity_id": "notify.alice"}
        ]
    }
    assert telegram.sent_messages(BOB_ID) == []


async def test_bot_api_behaves_like_telegram(
    hass: HomeAssistant, telegram: TelegramHarness
) -> None:
    """Edits, deletes, drafts, chat actions and Telegram's usual 400s."""
    entry_id = telegram.entry_id
    await _send(
        hass, "send_message", config_entry_id=entry_id, chat_id=BOB_ID, message="one"
    )
    message_id = telegram.bot_messages(BOB_ID)[0]["message_id"]
    await _send(
        hass,
        "edit_message",
        config_entry_id=entry_id,
        chat_id=BOB_ID,
        message_id=message_id,
        message="two",
    )
    assert telegram.bot_messages(BOB_ID)[0]["text"] == "two"
    with pytest.raises(HomeAssistantError, match=r"(?i)message is not modified"):
        await _send(
            hass,
            "edit_message",
            config_entry_id=entry_id,
            chat_id=BOB_ID,
            message_id=message_id,
            message="two",
        )
    await _send(
        hass,
        "send_chat_action",
        config_entry_id=entry_id,
        chat_id=BOB_ID,
        chat_action="typing",
    )
    await _send(
        hass,
        "send_message_draft",
        config_entry_id=entry_id,
        chat_id=BOB_ID,
        draft_id=5,
        message="thinking…",
    )
    await _send(
        hass,
        "delete_message",
        config_entry_id=entry_id,
        chat_id=BOB_ID,
        message_id=message_id,
    )
    assert telegram.bot_messages(BOB_ID) == []
    assert telegram.calls("sendChatAction") == [{"chat_id": BOB_ID, "action": "typing"}]
    assert telegram.calls("sendMessageDraft")[0]["draft_id"] == 5
    assert telegram.calls("sendMessageDraft")[0]["text"] == "thinking…"

    # Telegram's classic rejections of LLM output.
    with pytest.raises(HomeAssistantError, match=r"(?i)can't parse entities"):
        await _send(
            hass,
            "send_message",
            config_entry_id=entry_id,
            chat_id=BOB_ID,
            message="Turned on light.kitchen_lamp",
        )
    with pytest.raises(HomeAssistantError, match=r"(?i)message is too long"):
        await _send(
            hass,
            "send_message",
            config_entry_id=entry_id,
            chat_id=BOB_ID,
            message="x" * 4097,
            parse_mode="plain_text",
        )
    telegram.api.fail_next(
        "sendMessage", "Forbidden: bot was blocked by the user", error_code=403
    )
    with pytest.raises(HomeAssistantError, match=r"(?i)bot was blocked"):
        await _send(
            hass, "send_message", config_entry_id=entry_id, chat_id=BOB_ID, message="hi"
        )
    # Plain text carries the same words fine; failed sends are not "sent".
    await _send(
        hass,
        "send_message",
        config_entry_id=entry_id,
        chat_id=BOB_ID,
        message="Turned on light.kitchen_lamp",
        parse_mode="plain_text",
    )
    assert [m["text"] for m in telegram.sent_messages(BOB_ID)] == [
        "one",
        "Turned on light.kitchen_lamp",
    ]
    assert len(telegram.calls("sendMessage")) == 5
    assert "parse_mode" not in telegram.sent_messages(BOB_ID)[1]


def test_markdown_v1_check() -> None:
    """The legacy Markdown check matches Telegram's parser on common cases."""
    assert markdown_v1_error("*bold* and _italic_ and `code`") is None
    assert markdown_v1_error("snake\\_case is fine") is None
    assert markdown_v1_error("```\nlight_kitchen\n```") is None
    assert markdown_v1_error("light.kitchen_lamp") == (
        "Bad Request: can't parse entities: Can't find end of the entity "
        "starting at byte offset 13"
    )
    # Offsets count UTF-8 bytes, as Telegram's do: "é" is two bytes.
    assert markdown_v1_error("é*") == (
        "Bad Request: can't parse entities: Can't find end of the entity "
        "starting at byte offset 2"
    )


async def test_wait_for_sent(hass: HomeAssistant, telegram: TelegramHarness) -> None:
    """wait_for_sent returns once messages arrive and fails after timeout."""

    async def later() -> None:
        await asyncio.sleep(0.05)
        await _send(
            hass,
            "send_message",
            config_entry_id=telegram.entry_id,
            chat_id=ALICE_ID,
            message="late",
        )

    task = hass.async_create_task(later())
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID, timeout=5)
    await task
    assert [m["text"] for m in sent] == ["late"]
    with pytest.raises(AssertionError, match="expected 2 sendMessage"):
        await telegram.wait_for_sent(2, timeout=0.05)


# --------------------------------------------------------------- fake Ollama


async def test_chatollama_streams_text(fake_ollama: FakeOllama) -> None:
    """ChatOllama reassembles a reply streamed over several NDJSON chunks."""
    text = "The kitchen light is on and the garage is closed."
    fake_ollama.reply(text, text_chunks=4)
    fake_ollama.reply(text, text_chunks=4)
    llm = ChatOllama(base_url=fake_ollama.url, model=QWEN, num_ctx=8192)

    result = await llm.ainvoke(
        [SystemMessage("You are a house."), HumanMessage("Status?")]
    )
    chunks = [chunk.content async for chunk in llm.astream("Status?")]

    assert result.content == text
    assert result.response_metadata["done_reason"] == "stop"
    assert result.usage_metadata is not None
    assert result.usage_metadata["output_tokens"] == 4
    assert [c for c in chunks if c] == split_text(text, 4)
    assert len([c for c in chunks if c]) == 4
    request = fake_ollama.chat_requests[0]
    assert request["model"] == QWEN
    assert request["stream"] is True
    assert request["options"] == {"num_ctx": 8192}
    assert request["messages"] == [
        {"role": "system", "content": "You are a house."},
        {"role": "user", "content": "Status?"},
    ]
    # None-valued fields (think, keep_alive, format) are not sent at all.
    assert "think" not in request
    assert "keep_alive" not in request
    assert request["tools"] == []


async def test_chatollama_request_fields(fake_ollama: FakeOllama) -> None:
    """keep_alive, think and temperature reach the request as sent."""
    fake_ollama.reply("Sure.", thinking="User wants a yes.")
    llm = ChatOllama(
        base_url=fake_ollama.url,
        model=QWEN,
        num_ctx=4096,
        keep_alive=-1,
        temperature=0.2,
        reasoning=True,
    )

    result = await llm.ainvoke("Yes?")

    request = fake_ollama.last_chat_request
    assert request["keep_alive"] == -1
    assert request["think"] is True
    assert request["options"] == {"num_ctx": 4096, "temperature": 0.2}
    assert result.content == "Sure."
    assert result.additional_kwargs["reasoning_content"] == "User wants a yes."


async def test_chatollama_tool_calls(fake_ollama: FakeOllama) -> None:
    """A scripted tool call arrives as AIMessage.tool_calls; tools are sent."""
    llm = ChatOllama(base_url=fake_ollama.url, model=QWEN).bind_tools(
        [get_state, list_entities]
    )
    fake_ollama.tool_call(
        "get_state", {"entity_id": "light.kitchen"}, content="Checking."
    )
    fake_ollama.tool_calls(
        [
            ("get_state", {"entity_id": "lock.front"}),
            {"name": "list_entities", "arguments": {"domain": "light"}},
        ]
    )
    messages: list[Any] = [HumanMessage("Is the kitchen light on?")]

    first = await llm.ainvoke(messages)
    assert isinstance(first, AIMessage)
    assert first.content == "Checking."
    assert [(c["name"], c["args"]) for c in first.tool_calls] == [
        ("get_state", {"entity_id": "light.kitchen"})
    ]
    messages += [first, ToolMessage("on", tool_call_id=first.tool_calls[0]["id"])]
    second = await llm.ainvoke(messages)
    assert [(c["name"], c["args"]) for c in second.tool_calls] == [
        ("get_state", {"entity_id": "lock.front"}),
        ("list_entities", {"domain": "light"}),
    ]

    tools = fake_ollama.chat_requests[0]["tools"]
    assert [t["function"]["name"] for t in tools] == ["get_state", "list_entities"]
    assert tools[0] == {
        "type": "function",
        "function": {
            "name": "get_state",
            "description": "Return the state of a Home Assistant entity.",
            "parameters": {
                "type": "object",
                "required": ["entity_id"],
                "properties": {"entity_id": {"type": "string"}},
            },
        },
    }
    # How ChatOllama sends the tool round back: the assistant's call without
    # an id, and the result as role "tool" without tool_call_id or name.
    assert fake_ollama.chat_requests[1]["messages"][1:] == [
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "function": {
                        "name": "get_state",
                        "arguments": {"entity_id": "light.kitchen"},
                    }
                }
            ],
        },
        {"role": "tool", "content": "on"},
    ]


async def test_ollama_client_non_stream_and_wire_shape(fake_ollama: FakeOllama) -> None:
    """stream=false gets one object; tool calls carry id and index."""
    client = ollama.AsyncClient(host=fake_ollama.url)
    fake_ollama.tool_calls([("a", {}), ("b", {"x": 1})], content="Two.")

    async with httpx.AsyncClient(base_url=fake_ollama.url) as http:
        raw = await http.post(
            "/api/chat",
            json={
                "model": QWEN,
                "messages": [{"role": "user", "content": "go"}],
                "stream": False,
            },
        )
    response = await client.chat(
        model=QWEN, messages=[{"role": "user", "content": "hi"}], stream=False
    )

    body = raw.json()
    assert raw.headers["content-type"].startswith("application/json")
    assert body["done"] is True
    assert body["done_reason"] == "stop"
    assert body["message"]["content"] == "Two."
    calls = body["message"]["tool_calls"]
    assert [c["function"] for c in calls] == [
        {"name": "a", "arguments": {}, "index": 0},
        {"name": "b", "arguments": {"x": 1}, "index": 1},
    ]
    assert all(c["id"].startswith("call_") for c in calls)
    for key in (
        "total_duration",
        "load_duration",
        "prompt_eval_count",
        "prompt_eval_duration",
        "eval_count",
        "eval_duration",
    ):
        assert isinstance(body[key], int)
    assert response.message.content == "OK"  # the default responder
    assert response.done is True


async def test_thinking_only_when_asked(fake_ollama: FakeOllama) -> None:
    """Thinking is streamed as its own field, and only when think is set."""
    fake_ollama.reply("Yes.", thinking="Check the lock first.")
    fake_ollama.reply("Yes.", thinking="Check the lock first.")
    client = ollama.AsyncClient(host=fake_ollama.url)
    messages = [{"role": "user", "content": "Locked?"}]

    with_think = [
        c async for c in await client.chat(QWEN, messages, think=True, stream=True)
    ]
    without = await client.chat(QWEN, messages, think=False)

    thinking = "".join(c.message.thinking or "" for c in with_think)
    content = "".join(c.message.content or "" for c in with_think)
    assert thinking == "Check the lock first."
    assert content == "Yes."
    # Thinking chunks come before any content chunk.
    first_content = next(i for i, c in enumerate(with_think) if c.message.content)
    assert all(not c.message.thinking for c in with_think[first_content:])
    assert without.message.thinking is None
    assert without.message.content == "Yes."


async def test_ollama_errors_surface_as_response_error(fake_ollama: FakeOllama) -> None:
    """HTTP errors reach ChatOllama callers as ollama.ResponseError."""
    llm = ChatOllama(base_url=fake_ollama.url, model=QWEN)
    fake_ollama.error(500, "model runner has unexpectedly stopped")

    with pytest.raises(ollama.ResponseError) as server_error:
        await llm.ainvoke("hi")
    with pytest.raises(ollama.ResponseError) as missing:
        await ChatOllama(base_url=fake_ollama.url, model="llama9").ainvoke("hi")
    with pytest.raises(ollama.ResponseError) as no_tools:
        await (
            ChatOllama(base_url=fake_ollama.url, model="gemma:2b")
            .bind_tools([get_state])
            .ainvoke("hi")
        )

    assert server_error.value.status_code == 500
    assert server_error.value.error == "model runner has unexpectedly stopped"
    assert missing.value.status_code == 404
    assert missing.value.error == "model 'llama9' not found"
    assert no_tools.value.status_code == 400
    assert "does not support tools" in no_tools.value.error
    # The capability errors did not consume a scripted reply.
    assert fake_ollama.pending_replies == 0
    assert len(fake_ollama.chat_requests) == 3


async def test_embeddings(fake_ollama: FakeOllama) -> None:
    """OllamaEmbeddings gets deterministic, normalised, word-aware vectors."""
    embeddings = OllamaEmbeddings(base_url=fake_ollama.url, model="nomic-embed-text")
    docs = ["The garage door code is 1234", "Bins go out on Tuesday"]

    vectors = await embeddings.aembed_documents(docs)
    query = await embeddings.aembed_query("garage door")
    client = ollama.AsyncClient(host=fake_ollama.url)
    single = await client.embed(model="nomic-embed-text", input=docs[0], dimensions=64)

    def cosine(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert [len(v) for v in vectors] == [768, 768]
    assert math.isclose(sum(x * x for x in vectors[0]), 1.0, rel_tol=1e-6)
    assert vectors[0] == fake_ollama.embedding_for(docs[0])
    assert cosine(query, vectors[0]) > 0.5 > cosine(query, vectors[1])
    assert [len(v) for v in single.embeddings] == [64]
    assert fake_ollama.embed_requests[0]["input"] == docs
    assert fake_ollama.embed_requests[1]["input"] == ["garage door"]
    assert fake_ollama.embed_requests[2]["input"] == docs[0]


async def test_models_tags_show_and_version(fake_ollama: FakeOllama) -> None:
    """/api/tags, /api/show and /api/version as the ollama client reads them."""
    client = ollama.AsyncClient(host=fake_ollama.url)
    fake_ollama.add_model("llama3.2", ["completion", "tools"], family="llama")

    listed = await client.list()
    gemma = await client.show("gemma:2b")
    qwen = await client.show(QWEN)
    embed = await client.show("nomic-embed-text")
    with pytest.raises(ollama.ResponseError) as missing:
        await client.show("mistral")
    async with httpx.AsyncClient(base_url=fake_ollama.url) as http:
        version = (await http.get("/api/version")).json()
        tags = (await http.get("/api/tags")).json()

    assert [m.model for m in listed.models] == [
        QWEN,
        "gemma:2b",
        "nomic-embed-text:latest",
        "llama3.2:latest",
    ]
    assert set(tags["models"][0]) == {
        "name",
        "model",
        "modified_at",
        "size",
        "digest",
        "details",
    }
    assert tags["models"][0]["details"]["family"] == "qwen3"
    assert gemma.capabilities == ["completion"]
    assert "tools" in (qwen.capabilities or [])
    assert embed.capabilities == ["embedding"]
    assert qwen.modelinfo is not None
    assert qwen.modelinfo["qwen3.context_length"] == 40960
    assert gemma.details is not None
    assert gemma.details.family == "gemma"
    assert missing.value.status_code == 404
    assert missing.value.error == "model 'mistral' not found"
    assert version == {"version": fake_ollama.version}


async def test_delay_and_default_responder(fake_ollama: FakeOllama) -> None:
    """delay() postpones the next answer; default answers an empty queue."""
    fake_ollama.default = lambda request: f"echo: {request['messages'][-1]['content']}"
    llm = ChatOllama(base_url=fake_ollama.url, model=QWEN)
    fake_ollama.delay(0.3)

    started = time.monotonic()
    delayed = await llm.ainvoke("first")
    elapsed = time.monotonic() - started
    undelayed = await llm.ainvoke("second")

    assert delayed.content == "echo: first"
    assert elapsed >= 0.3
    assert undelayed.content == "echo: second"


async def test_hang_is_cut_by_client_timeout(fake_ollama: FakeOllama) -> None:
    """A hanging Ollama is ended by the client's timeout; teardown is clean."""
    fake_ollama.hang()
    fake_ollama.hang()
    llm = ChatOllama(
        base_url=fake_ollama.url, model=QWEN, client_kwargs={"timeout": 0.2}
    )

    with pytest.raises(httpx.ReadTimeout):
        await llm.ainvoke("hello?")
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):
            await ChatOllama(base_url=fake_ollama.url, model=QWEN).ainvoke("hello?")

    assert len(fake_ollama.chat_requests) == 2


async def test_stop_releases_a_hanging_request(fake_ollama: FakeOllama) -> None:
    """Stopping the server while a request hangs ends it promptly."""
    fake_ollama.hang()
    llm = ChatOllama(base_url=fake_ollama.url, model=QWEN)
    pending = asyncio.ensure_future(llm.ainvoke("hello?"))
    await fake_ollama.wait_for_chat_requests(1, timeout=5)

    started = time.monotonic()
    await fake_ollama.stop()
    # The connection is dropped, as when a real Ollama stops or crashes.
    with pytest.raises(httpx.RemoteProtocolError):
        await pending
    assert time.monotonic() - started < 1.5


async def test_cut_stream_raises_protocol_error(fake_ollama: FakeOllama) -> None:
    """A stream dropped mid-answer surfaces as httpx.RemoteProtocolError."""
    fake_ollama.cut("The answer is probably", after_chunks=1)
    llm = ChatOllama(base_url=fake_ollama.url, model=QWEN)
    seen: list[str] = []

    async def consume() -> None:
        # A loop, not a comprehension: keep the chunks that arrived before
        # the stream broke.
        async for chunk in llm.astream("hi"):
            seen.append(str(chunk.content))  # noqa: PERF401

    with pytest.raises(httpx.RemoteProtocolError):
        await consume()

    # after_chunks=1: the first of two chunks arrives, then the connection dies.
    assert seen == ["The answer "]


# ------------------------------------------------------------------ together


async def test_telegram_and_ollama_in_one_test(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """Respx lets loopback through: a Telegram message answered via Ollama."""
    fake_ollama.reply("It is 21 degrees inside.")
    llm = ChatOllama(base_url=fake_ollama.url, model=QWEN)

    async def answer(event: Event) -> None:
        reply = await llm.ainvoke(event.data["text"])
        await _send(
            hass,
            "send_message",
            config_entry_id=event.data["bot"]["config_entry_id"],
            chat_id=event.data["chat_id"],
            message=str(reply.content),
        )

    hass.bus.async_listen("telegram_text", answer)
    await telegram.send_text("How warm is it?", chat_id=BOB_ID)

    sent = await telegram.wait_for_sent(1, chat_id=BOB_ID)
    assert sent[0]["text"] == "It is 21 degrees inside."
    assert fake_ollama.last_chat_request["messages"] == [
        {"role": "user", "content": "How warm is it?"}
    ]
    await hass.async_block_till_done()


async def _deadline_job() -> str:
    """A short piece of I/O under a generous real deadline."""
    async with asyncio.timeout(5):
        await asyncio.sleep(0.2)
    return "done"


async def test_moving_the_clock_runs_ha_timers_and_leaves_io_deadlines(
    hass: HomeAssistant,
) -> None:
    """``fire_time_changed`` runs a debounce due in 30 s, not a call's deadline.

    phcc's ``async_fire_time_changed`` also runs the ``asyncio.timeout`` of
    whatever is in flight, so a database call that happened to be running
    "timed out" at once (a clean-clone CI run failed that way).
    """
    fired: list[datetime] = []

    @callback
    def _fire(now: datetime) -> None:
        # A callback runs in the timer itself; a plain function (such as
        # list.append) would run in HA's executor, after the assert below.
        fired.append(now)

    async_call_later(hass, 30, _fire)
    job = asyncio.ensure_future(_deadline_job())
    await asyncio.sleep(0)  # the job is inside its timeout now
    fire_time_changed(hass, dt_util.utcnow() + timedelta(seconds=31))
    assert len(fired) == 1
    assert await job == "done"

    # What the helper avoids: the same move with phcc's helper.
    job = asyncio.ensure_future(_deadline_job())
    await asyncio.sleep(0)
    async_fire_time_changed(hass, dt_util.utcnow() + timedelta(seconds=31))
    with pytest.raises(TimeoutError):
        await job
