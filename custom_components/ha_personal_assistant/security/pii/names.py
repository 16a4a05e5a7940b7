# ruff: noqa: RUF001 - names and endings of many scripts
"""The names the house knows, as they appear in a query.

Names are matched case- and accent-free, with the declined forms of the
languages that decline them (Polish, Czech, South Slavic, Russian and
Ukrainian endings), and as parts of compound tokens ("@anna", "anna_phone",
"AnnaPhone"). Words that name nobody (GENERIC_WORDS) never make a name.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from .words import WORDS

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

MIN_NAME_CHARS: Final = 3
# Names made only of these words identify no household ("Kitchen", "Home",
# "Living Room"); removing them from queries would only spoil searches.
GENERIC_WORDS: Final = WORDS.lists["generic_words"]
_WORD: Final = re.compile(r"[^\W\d_][\w'’-]*")


def _build_fold() -> dict[int, str]:
    """Map each accented Latin letter to its base letter, one for one."""
    table = {
        code: base
        for code in range(0xC0, 0x250)
        if (base := unicodedata.normalize("NFD", chr(code))[0]) != chr(code)
        and base.isascii()
    }
    table.update({ord(a): b for a, b in zip("łŁøØđĐı", "lLoOdDi", strict=True)})
    return table


_FOLD: Final = _build_fold()


def fold(text: str) -> str:
    """Drop the accents of Latin letters, keeping every offset ("Inês" -> "Ines")."""
    return text.translate(_FOLD)


# Households whose language declines names: Polish, Czech, Slovak, Slovene,
# Croatian, Serbian, Bosnian, Montenegrin, Russian, Ukrainian, Belarusian;
# with the endings their own grammar adds (Czech "Janu", Croatian "Ane").
@dataclass(frozen=True, slots=True)
class _Grammar:
    """Endings a language adds beyond the Polish ones, after -a and a consonant."""

    after_a: tuple[str, ...] = ()
    after_consonant: tuple[str, ...] = ()


_POLISH: Final = _Grammar()
_CZECH: Final = _Grammar(after_a=("u",))
_SOUTH_SLAVIC: Final = _Grammar(after_a=("u", "e", "om"), after_consonant=("om",))
_DECLINING: Final = {
    "PL": _POLISH,
    "CZ": _CZECH,
    "SK": _CZECH,
    "SI": _SOUTH_SLAVIC,
    "HR": _SOUTH_SLAVIC,
    "RS": _SOUTH_SLAVIC,
    "BA": _SOUTH_SLAVIC,
    "ME": _SOUTH_SLAVIC,
    "RU": _POLISH,  # Cyrillic names have their own endings
    "UA": _POLISH,
    "BY": _POLISH,
}
MIN_DECLINED_CHARS: Final = 4
# Endings that declined names take, by the name's own ending. Vocatives and
# forms that are mostly other words ("Anno", "Marte") are left out.
# Halina -> Haliny, Halinie, Halinę, Haliną (Czech Jana -> Janou, Janě);
# after k, g, l, j the genitive takes i: Agnieszki, Olgi.
_ENDINGS_A: Final = ("y", "ie", "ę", "ą", "ej", "iej", "ou", "ě")
_ENDINGS_A_SOFT: Final = ("i", "ie", "ę", "ą", "ej", "iej", "ou", "ě")
# Kasia -> Kasi, Kasię, Kasią, Kasiu; Julia -> Julii, Julię, Julią.
_ENDINGS_SIA: Final = ("", "ę", "ą", "u")
_ENDINGS_IA: Final = ("i", "ę", "ą")
_ENDINGS_CONSONANT: Final = ("a", "u", "owi", "ovi", "em", "iem", "ie")
_ENDINGS_SKI: Final = ("i", "iego", "iemu", "im", "ich")
_ENDINGS_CYRILLIC_A: Final = ("а", "ы", "и", "е", "у", "ой", "ей", "ою", "ею")
_ENDINGS_CYRILLIC: Final = ("а", "у", "ом", "ем", "е")
# Declined forms that are mostly everyday words: "Ani" (Ania) is "neither",
# "Mają" (Maja) "they have", "Marka" (Marek) "brand".
_COMMON_DECLINED: Final = WORDS.lists["common_declined"]
_SOFTENED: Final = (
    ("ch", "sze"),
    ("st", "ście"),
    ("t", "cie"),
    ("d", "dzie"),
    ("k", "ce"),
    ("g", "dze"),
    ("r", "rze"),
    ("ł", "le"),
)


def _declined(word: str, grammar: _Grammar = _POLISH) -> set[str]:
    """Return the declined forms of a name in a Slavic language.

    "Kasia" -> Kasi, Kasię, Kasią, Kasiu; "Halina" -> Haliny, Halinie,
    Halinę; "Marta" -> Marcie; "Tomasz" -> Tomasza, Tomaszowi; "Burek" ->
    Burka; "Wiśniewski" -> Wiśniewskiego; "Наташа" -> Наташи, Наташей.
    """
    if len(word) < MIN_DECLINED_CHARS or not word.isalpha():
        return set()
    # The stem may be typed without its accents ("Lukasza"), never the
    # ending: "Kasie" is not "Kasię" (and is a till's).
    forms = {
        s + e
        for stem, endings in _stems_and_endings(word, grammar)
        for s in ({stem, fold(stem)} if len(endings) > 1 else {stem})
        for e in endings
    }
    forms.difference_update({word, fold(word)})
    return {form for form in forms if form.casefold() not in _COMMON_DECLINED}


def _stems_and_endings(
    word: str, grammar: _Grammar
) -> list[tuple[str, tuple[str, ...]]]:
    """Return the stems of a name and the endings its declension adds."""
    lower = word.casefold()
    if "а" <= lower[-1] <= "я":
        return _cyrillic_stems(word)
    if lower.endswith("ia"):
        diminutive = len(lower) > len("ia") and lower[-3] in "szncź"
        return [(word[:-1], _ENDINGS_SIA if diminutive else _ENDINGS_IA)]
    if lower.endswith("a"):
        stem = word[:-1]
        endings = _ENDINGS_A_SOFT if lower[-2] in "kglj" else _ENDINGS_A
        found = [(stem, endings + grammar.after_a)]
        for hard, soft in _SOFTENED:
            if stem.casefold().endswith(hard):
                # Dative and locative change the last consonant: Marta -> Marcie.
                found.append((stem[: -len(hard)], (soft,)))
                break
        return found
    if lower.endswith(("ski", "cki", "dzki")):
        return [(word[:-1], _ENDINGS_SKI)]
    stem = word
    if lower.endswith(("ek", "eł")) and lower[-3] not in "aeiouy":
        # The e drops: Burek -> Burka, Paweł -> Pawła.
        stem = word[:-2] + word[-1]
    elif lower[-1] in "aeiouyąęóé":
        return []
    return [(stem, _ENDINGS_CONSONANT + grammar.after_consonant)]


def _cyrillic_stems(word: str) -> list[tuple[str, tuple[str, ...]]]:
    """Return the stem and endings of a Cyrillic name: Наташа -> Наташи."""
    last = word[-1].casefold()
    if last in "ая":
        return [(word[:-1], _ENDINGS_CYRILLIC_A)]
    if last in "еёиоуыэюйь":
        return []
    return [(word, _ENDINGS_CYRILLIC)]


@dataclass(frozen=True, slots=True)
class NameMatcher:
    """How the names of a house are found in a query."""

    # Names and their distinctive words, with or without accents, any case.
    pattern: re.Pattern[str]
    # Declined forms, as written and in lower case (Slavic households only).
    declined: frozenset[str]
    # The single words, folded and in lower case, for handles and SSIDs.
    words: frozenset[str]


@functools.lru_cache(maxsize=64)
def name_matcher(names: tuple[str, ...], country: str | None) -> NameMatcher | None:
    """Build the matcher of a house's names; the same house reuses it."""
    wanted = _wanted_names(names)
    if not wanted:
        return None
    alternatives = "|".join(
        r"\s+".join(_accent_free(part) for part in name.split())
        for name in sorted(wanted, key=len, reverse=True)
    )
    # "Emma's", "Emmas" (Dutch, German, and English without the apostrophe).
    pattern = re.compile(
        rf"(?<![\w])(?:{alternatives})(?:['’]?s)?(?![\w])", re.IGNORECASE
    )
    words = frozenset(
        fold(name).casefold() for name in wanted if " " not in name and name.isalpha()
    )
    declined: frozenset[str] = frozenset()
    if country is not None and (grammar := _DECLINING.get(country.upper())) is not None:
        declined = frozenset(
            form.casefold()
            for name in wanted
            if " " not in name
            for form in _declined(name, grammar)
        )
    return NameMatcher(pattern, declined, words)


def _accent_free(name: str) -> str:
    """Return a pattern of a name that also matches it without its accents.

    Only the name's own accents are optional: "Émilie" matches "emilie",
    while "Maja" never matches "mają" ("they have").
    """
    return "".join(
        f"[{re.escape(char)}{base}]"
        if (base := fold(char)) != char
        else re.escape(char)
        for char in name
    )


LETTERS: Final = re.compile(r"(?<!\w)[^\W\d_]+(?!\w)")
# A handle or network name holding a house name: "@jessicabrooks87",
# "Casa_Ortega", "TylerNet5G". Split at "_", digits and inner capitals.
_HANDLE: Final = re.compile(r"(?<![\w@])@[\w.]{2,40}")
_COMPOUND: Final = re.compile(r"(?<![\w@])\w*(?:_|\d|[a-z][A-Z])\w*")
_COMPOUND_PART: Final = re.compile(r"[^\W\d_][^\W\d_A-Z]*|[A-Z][^\W\d_A-Z]*")


def named_tokens(folded: str, words: frozenset[str]) -> Iterator[tuple[int, int]]:
    """Find handles and compound names that hold one of the house's names."""
    long_words = [w for w in words if len(w) >= MIN_DECLINED_CHARS]
    for match in _HANDLE.finditer(folded):
        handle = match.group(0).casefold()
        if any(word in handle for word in long_words):
            yield match.span()
    for match in _COMPOUND.finditer(folded):
        token = match.group(0)
        parts = {p.casefold() for p in _COMPOUND_PART.findall(token)}
        glued = re.sub(r"[\d_]+", "", token).casefold()
        if parts & words or (
            re.search(r"[\d_]", token) and any(w in glued for w in long_words)
        ):
            yield match.span()


def _wanted_names(names: Iterable[str]) -> set[str]:
    """Return every identifying name and each of its distinctive words."""
    wanted: set[str] = set()
    for name in names:
        clean = " ".join(name.split())
        if len(clean) < MIN_NAME_CHARS:
            continue
        words = [w.casefold() for w in _WORD.findall(clean)]
        if not words or all(w in GENERIC_WORDS for w in words):
            continue
        wanted.add(clean)
        # Each distinctive word of a longer name identifies too ("Emma's Room").
        for word in _WORD.findall(clean):
            base = re.sub(r"['’]s$", "", word)
            if (
                len(base) >= MIN_NAME_CHARS
                and base[0].isupper()
                and base.casefold() not in GENERIC_WORDS
            ):
                wanted.add(base)
    return wanted
