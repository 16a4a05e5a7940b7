"""The PII sanitizer's word lists, one data file per language (data/).

Each file (``<lang>.json``, with a ``version``) holds what a language
writes around personal details: its number words (0-99, ordinals, the words
of spelled years; generated with num2words), its words for "@" and ".", the
words that announce a birth date, month names, the flat and unit words after
a street, the prepositions before a place, the words that only carried a
removed detail ("call me on", "I live at") and the phrases that ask for a web
search. ``streets.json`` holds the street-type words of the postal
conventions (USPS suffixes and their European counterparts);
``lists.json`` the word lists of the original sanitizer (generic room
words, words that are no key, IBAN countries, public resolvers, common
declined words).

They are read once, when the module is imported: Home Assistant imports a
custom integration in its import executor, never on the event loop. The
result is frozen.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

DATA_DIR: Final = Path(__file__).parent / "data"
DATA_VERSION: Final = 1


@dataclass(frozen=True, slots=True)
class Words:
    """Every language's words, merged: a query may mix languages."""

    numbers: dict[str, int]
    ordinals: dict[str, int]
    year_words: frozenset[str]
    at: tuple[str, ...]
    dot: tuple[str, ...]
    plus: tuple[str, ...]
    birth: tuple[str, ...]
    months: frozenset[str]
    joiners: frozenset[str]
    units: tuple[str, ...]
    place_cues: tuple[str, ...]
    carriers: frozenset[str]
    search_prefixes: tuple[str, ...]
    street_types: tuple[str, ...]
    counted: frozenset[str]
    follow: frozenset[str]
    # The original sanitizer's lists (lists.json), each by its purpose.
    lists: dict[str, frozenset[str]]


def _read(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if data.get("version") != DATA_VERSION:
        msg = f"{path.name}: version {data.get('version')}, expected {DATA_VERSION}"
        raise ValueError(msg)
    return data


_LATIN_END: Final = 0x250  # Latin letters end before IPA extensions


def _plain(word: str) -> str:
    """Return a Latin word without its accents; other scripts as they are."""
    if any(ord(ch) >= _LATIN_END for ch in word):
        return word
    decomposed = unicodedata.normalize("NFD", word)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _longest_first(items: set[str]) -> tuple[str, ...]:
    return tuple(sorted(items, key=lambda s: (-len(s), s)))


def load_words(directory: Path = DATA_DIR) -> Words:
    """Read and merge the data files (blocking: call at import or in an executor)."""
    merged: dict[str, Any] = {
        "numbers": {},
        "ordinals": {},
        "year_words": set(),
        "at": set(),
        "dot": set(),
        "plus": set(),
        "birth": set(),
        "months": set(),
        "joiners": set(),
        "units": set(),
        "place_cues": set(),
        "carriers": set(),
        "search_prefixes": set(),
    }
    for path in sorted(directory.glob("*.json")):
        if path.name in {"streets.json", "lists.json"}:
            continue
        data = _read(path)
        for key, target in merged.items():
            values = data.get(key, ())
            if isinstance(target, dict):
                for word, number in values.items():
                    target.setdefault(word.casefold(), int(number))
            else:
                target.update(str(v).casefold() for v in values)
    streets = _read(directory / "streets.json")
    lists = _read(directory / "lists.json")
    # Number words also written without their hyphens, spaces or accents
    # ("een" for "één", "tres" for "três").
    for table in (merged["numbers"], merged["ordinals"]):
        for word, number in list(table.items()):
            for variant in (word.replace("-", " "), re.sub(r"[-\s]+", "", word)):
                table.setdefault(variant, number)
        for word, number in list(table.items()):
            table.setdefault(_plain(word), number)
    return Words(
        numbers=merged["numbers"],
        ordinals=merged["ordinals"],
        year_words=frozenset(merged["year_words"]),
        at=_longest_first(merged["at"]),
        dot=_longest_first(merged["dot"]),
        plus=_longest_first(merged["plus"]),
        birth=_longest_first(merged["birth"]),
        months=frozenset(merged["months"]),
        joiners=frozenset(merged["joiners"]),
        units=_longest_first(merged["units"]),
        place_cues=_longest_first(merged["place_cues"]),
        carriers=frozenset(merged["carriers"]),
        search_prefixes=_longest_first(merged["search_prefixes"]),
        street_types=_longest_first({s.casefold() for s in streets["types"]}),
        counted=frozenset(s.casefold() for s in streets["counted"]),
        follow=frozenset(s.casefold() for s in streets["follow"]),
        lists={
            key: frozenset(value)
            for key, value in lists.items()
            if isinstance(value, list)
        },
    )


def alternation(items: tuple[str, ...] | frozenset[str]) -> str:
    """Return a regex alternation of literal phrases, longest first."""
    ordered = _longest_first(set(items))
    return "|".join(re.escape(item).replace(r"\ ", r"[\s-]+") for item in ordered)


WORDS: Final = load_words()
