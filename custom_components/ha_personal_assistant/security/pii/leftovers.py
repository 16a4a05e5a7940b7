# ruff: noqa: RUF001 - apostrophes, signs and letters of many scripts
"""What is left of a query once its personal details are cut out.

A clause that only carried a removed detail ("call me on … or mail …",
"I live at …") goes with it, and so does the request to search ("search the
web for"), so that "search the web for plumbers near me, call me on … or mail
…, I live at …" leaves as "plumbers near me". A query is worth sending while
one searchable word is left; only a query that was all personal is refused.
A query with nothing removed is never touched here.
"""

from __future__ import annotations

import re
from typing import Final

from .words import WORDS, alternation

CUT: Final = "\x00"  # where a detail was removed
_CLAUSE: Final = re.compile(r"[^,;]+|[,;]")
_WORD: Final = re.compile(r"[^\W\d_][\w'’.-]*|\d+")
_PREFIX: Final = re.compile(
    rf"^\s*(?:please\s+|bitte\s+)?(?:{alternation(WORDS.search_prefixes)})"
    r"(?:\s*:)?\s+",
    re.IGNORECASE,
)


def _carrier(word: str) -> bool:
    folded = word.casefold().strip(".'’-")
    return not folded or folded in WORDS.carriers


def searchable(text: str) -> bool:
    """Tell whether a word worth searching for is left."""
    return any(not _carrier(w) for w in _WORD.findall(text.replace(CUT, " ")))


def clean(text: str) -> str:
    """Drop the clauses that only carried a removed detail, and the search verb."""
    if CUT not in text:
        return text
    kept: list[str] = []
    for part in _CLAUSE.findall(text):
        if CUT in part and not searchable(part):
            kept.append(" ")
            continue
        kept.append(part)
    out = "".join(kept)
    if not searchable(out):
        return text
    stripped = _PREFIX.sub("", out, count=1)
    return stripped if searchable(stripped) else out
