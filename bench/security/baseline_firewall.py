"""The content firewall as it was before issue #6: the baseline of security_eval.py."""

from __future__ import annotations

import re
import unicodedata
from typing import Final

# Characters that render as nothing (or reorder what is shown) and so can hide
# text from a person while a model still reads it.
_INVISIBLE: Final = re.compile(
    "["
    "\u00ad"  # soft hyphen
    "\u061c"  # Arabic letter mark
    "\u180e"  # Mongolian vowel separator
    "\u200b-\u200f"  # zero-width space, joiners, LRM, RLM
    "\u202a-\u202e"  # bidi embeddings and overrides
    "\u2060-\u2064"  # word joiner, invisible operators
    "\u2066-\u2069"  # bidi isolates
    "\ufe00-\ufe0f"  # variation selectors
    "\ufeff"  # zero-width no-break space (BOM)
    "]"
)
# Unicode tag characters spell ASCII invisibly ("ASCII smuggling"); no
# legitimate text about a person contains them.
_TAGS: Final = re.compile("[\U000e0000-\U000e007f]")
_SUPPLEMENTARY_SELECTORS: Final = re.compile("[\U000e0100-\U000e01ef]")
_CONTROL: Final = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")

_ACTIONS: Final = (
    r"(?:unlock|open|disarm|disable|deactivate|turn\s+off|switch\s+off|shut\s+off)"
)
_GUARDED: Final = (
    r"(?:doors?|locks?|gates?|garage|alarms?|security|cameras?|sirens?|"
    r"smoke\s+detectors?)"
)

# Each pattern names why text was flagged. They run on the normalized,
# lower-cased text with whitespace collapsed.
PATTERNS: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    (
        "asks to ignore instructions",
        re.compile(
            r"\b(?:ignore|disregard|forget|override|bypass)\b[^.!?\n]{0,40}"
            r"\b(?:instructions?|rules|prompts?|directions|guidelines|guardrails)\b"
        ),
    ),
    ("redefines the assistant", re.compile(r"\byou\s+are\s+now\b")),
    (
        "mentions the system prompt",
        re.compile(r"\b(?:system|developer)\s+(?:prompt|message|instructions?)\b"),
    ),
    ("announces new instructions", re.compile(r"\bnew\s+instructions?\b")),
    (
        "contains chat-template tokens",
        re.compile(
            r"<\|[a-z_]+\|>|\[/?inst\]|<</?sys>>|<(?:start|end)_of_turn>"
            r"|</?(?:system|assistant|tool_call|tool|function)>"
        ),
    ),
    (
        "starts a chat role",
        re.compile(r"(?:^|\n)\s*(?:#+\s*)?(?:system|assistant|developer)\s*:"),
    ),
    (
        "names a tool",
        re.compile(
            r"\bcall_service\b|\b(?:get_state|list_entities|get_history|web_search|"
            r"search_documents|remember|forget)\s*\(|\"(?:name|function|tool)\"\s*:"
        ),
    ),
    (
        "tells the assistant to act on a lock or alarm",
        re.compile(
            r"(?:^|[.!?;:,]\s*|\b(?:and|then|please|always|now|must|should)\s+)"
            + _ACTIONS
            + r"\b[^.!?\n]{0,40}\b"
            + _GUARDED
            + r"\b"
        ),
    ),
    (
        "asks to skip confirmation",
        re.compile(
            r"\bwithout\s+(?:asking|confirm\w*|permission)\b"
            r"|\b(?:skip|bypass|disable)\b[^.!?\n]{0,20}\bconfirm\w*"
            r"|\b(?:do\s+not|don't|never)\s+ask\s+(?:for\s+)?(?:confirm\w*|permission)"
        ),
    ),
)


def flagged(text: str) -> bool:
    """Tell whether the old patterns flag ``text`` (NFKC, lower-cased)."""
    folded = re.sub(
        r"[ \t\r\f\v]+", " ", unicodedata.normalize("NFKC", text).casefold()
    )
    folded = _INVISIBLE.sub("", _TAGS.sub("", folded))
    return any(pattern.search(folded) for _, pattern in PATTERNS)
