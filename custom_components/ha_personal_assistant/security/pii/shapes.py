# ruff: noqa: RUF001 - apostrophes, signs and letters of many scripts
"""Details found by their format's conventions, on the normalised copy.

- Street addresses where a house number stands next to a street name in
  either order, with or without a street-type word, in any case or script:
  a number first and a postal street type after the name ("83232 Nicolas
  Harbor", "659 christina coves"), or the name first and the number after it
  (the continental convention: "Castelao 71", "Nygårdhagen 2A", "Pivovarská
  1827", "Σιταίνης 31-70") after a word that introduces a place. A flat or
  unit after it goes with it.
- Card numbers of 12 to 19 digits with a valid Luhn check digit, when a card
  word is near or the issuer prefix fits the length.
- Dates of birth: a date after a word for being born, in any form (digits,
  month names, spelled).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from .words import WORDS, alternation

if TYPE_CHECKING:
    from collections.abc import Iterator

_WORD: Final = r"[^\W\d_][\w'’.]*(?:-[^\W\d_][\w'’.]*)*"
# A numbered name inside a street's name: "Заводська 5-та", "Балтський 5-й".
_NAME_WORD: Final = rf"(?:{_WORD}|\d{{1,3}}-?[^\W\d_]{{1,3}}(?!\w))"
_PARTICLE: Final = (
    r"(?:de|del|della|di|da|das|do|dos|du|des|la|le|les|l'|d'|van|von|der|den|"
    r"het|the|of|y|e|na|u|nad|pod|pri|při)"
)
_HOUSE: Final = (
    r"\d{1,5}(?:\s?[a-zA-Z](?!\w))?(?:\s?[/-]\s?\d{1,4}(?:[a-zA-Z](?!\w))?)?(?!\w)"
)
_UNIT: Final = (
    rf"(?:\s*,?\s*(?:{alternation(WORDS.units)})\.?\s*(?:n[º°o.]\s*)?#?\s*"
    r"\d{1,4}[a-zA-Z]?(?!\w))*"
)
_NOT_AFTER_NUMBER: Final = re.compile(
    r"\s*(?:[.,]\d|%|€|\$|£|°|:\d|[x×]\s?\d)|['\"\w]", re.IGNORECASE
)
_STREET_TYPE: Final = rf"(?:{alternation(WORDS.street_types)})"
# 83232 Nicolas Harbor, 659 christina coves apt. 114
_NUMBER_FIRST: Final = re.compile(
    rf"(?<![\w.,/-])(?P<number>{_HOUSE}),?\s+(?P<name>(?:{_WORD}\s+){{1,3}}?)"
    rf"(?P<type>{_STREET_TYPE})\.?(?!\w)(?P<unit>{_UNIT})",
    re.IGNORECASE,
)
_CUE: Final = rf"(?:{alternation(WORDS.place_cues)})"
# to Castelao 71, near Nygårdhagen 2A, en Cañada de Alcides Ugarte 44 piso 3
_NAME_FIRST: Final = re.compile(
    rf"(?<![\w'’])(?:{_CUE})[\s,:]+(?P<name>{_WORD}(?:\s+(?:{_PARTICLE}\s+)*{_NAME_WORD})"
    rf"{{0,5}})(?:\s*,\s*|\s+)(?:(?:n[º°o.]|nr\.?|no\.|д\.|дом|буд\.)\s*)?"
    rf"(?P<number>{_HOUSE})(?P<unit>{_UNIT})",
    re.IGNORECASE,
)
_CUE_BEFORE: Final = re.compile(rf"(?<![\w'’])(?:{_CUE})[\s,:]*$", re.IGNORECASE)
_PARTICLE_WORD: Final = re.compile(_PARTICLE, re.IGNORECASE)
_YEAR: Final = re.compile(r"(?:19|20)\d\d")
_MIN_NAME_LETTERS: Final = 3

_CARD_WORDS: Final = re.compile(
    r"(?<!\w)(?:card|cards|karte|kreditkarte|carte|tarjeta|carta|kaart|karta|"
    r"cartão|карта|картка|карты|visa|mastercard|maestro|amex|diners|jcb|"
    r"discover|cc|cvv|kk)(?!\w)",
    re.IGNORECASE,
)
_CARD_WINDOW: Final = 48
_DIGITS: Final = re.compile(r"(?<![\w.+-])\d{12,19}(?!\w|[.,]\d)")
# Issuer prefixes by length (ISO/IEC 7812 ranges of the card networks).
_ISSUERS: Final = (
    (range(12, 20), re.compile(r"5[06-8]|6\d")),  # Maestro
    (range(13, 14), re.compile(r"4")),  # Visa 13
    (range(14, 15), re.compile(r"30[0-5]|36|38|39")),  # Diners
    (range(15, 16), re.compile(r"3[47]|1800|2131")),  # Amex, JCB 15
    (range(16, 20), re.compile(r"4|5[1-5]|2[2-7]|6011|65|64[4-9]|35")),
)

_BIRTH: Final = rf"(?:{alternation(WORDS.birth)})"
_DATE_TOKEN: Final = re.compile(
    r"\s*(?:\d{1,4}(?:[./-]\d{1,4}){0,2}(?:st|nd|rd|th|er|e|º|°|\.)?"
    r"|[^\W\d_]+(?:-[^\W\d_]+)*\.?)"
    r"\s*,?",
    re.IGNORECASE,
)
_BIRTH_CUE: Final = re.compile(
    rf"(?<![\w])(?:{_BIRTH})(?!\w)[\s:,]*(?:(?:bin|ist|bist|sind|war|was|is|"
    r"suis|es|est|sono|è|sou|on|am|le|el|il|op|the|in|im|en|в|у|dne|dnia)\s+){0,2}",
    re.IGNORECASE,
)
_MAX_DATE_TOKENS: Final = 9


def _luhn(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2:
            value = value * 2 - 9 if value > 4 else value * 2  # noqa: PLR2004
        total += value
    return total % 10 == 0


def cards(text: str) -> Iterator[tuple[int, int]]:
    """Find card numbers of 12-19 digits (Luhn), by a card word or issuer prefix."""
    for match in _DIGITS.finditer(text):
        digits = match.group(0)
        if not _luhn(digits):
            continue
        near = text[max(0, match.start() - _CARD_WINDOW) : match.start()]
        issuer = any(
            len(digits) in lengths and prefix.match(digits)
            for lengths, prefix in _ISSUERS
        )
        if issuer or _CARD_WORDS.search(near):
            yield match.span()


def _counted(word: str) -> bool:
    return word.casefold().rstrip(".") in WORDS.counted


def _number_free(text: str, end: int) -> bool:
    """Tell a house number from a quantity: the noun phrase ends after it.

    "to Castelao 71 tonight", "for Liestubben 2, please"; not "to boil 7
    eggs", "from Windows 10 Pro".
    """
    after = text[end:]
    if _NOT_AFTER_NUMBER.match(after) is not None:
        return False
    if re.match(r"\s*(?:[,;:!?)]|\.(?!\d)|$)", after):
        return True
    following = re.match(r"\s+([^\W\d_][\w'’-]*)", after)
    return following is not None and following.group(1).casefold() in WORDS.follow


def _overlapping(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """Yield matches that may overlap: a rejected one must not hide the next."""
    at = 0
    while (match := pattern.search(text, at)) is not None:
        yield match
        at = match.start() + 1


def addresses(text: str) -> Iterator[tuple[int, int]]:
    """Find a house number next to a street name, in either order."""
    for match in _NUMBER_FIRST.finditer(text):
        words = match.group("name").split()
        if any(_counted(w) for w in words):
            continue
        # Without capitals, a word that introduces a place must come first:
        # "near 659 christina coves", not "3 wheel drive suv".
        titled = all(w[0].isupper() for w in [*words, match.group("type")])
        if titled or _CUE_BEFORE.search(text[: match.start()]):
            yield match.start(), match.end()
    for match in _overlapping(_NAME_FIRST, text):
        name = match.group("name")
        words = name.split()
        last = next(w for w in reversed(words) if w[0].isalpha())
        number = match.group("number")
        named = [w for w in words if not _PARTICLE_WORD.fullmatch(w)]
        if (
            any(w.casefold() in WORDS.follow for w in named)
            or _counted(words[0])
            or _counted(last)
            or sum(ch.isalpha() for ch in last) < _MIN_NAME_LETTERS
            or _YEAR.fullmatch(number.strip())
            or (not match.group("unit") and not _number_free(text, match.end("number")))
        ):
            continue
        yield match.start("name"), match.end()


def _date_like(tokens: list[str]) -> bool:
    """Tell whether date tokens hold a month, a numeric date or a year."""
    numbers = 0
    for token in tokens:
        word = token.strip(" ,.").casefold()
        if word in WORDS.months or re.fullmatch(
            r"\d{1,4}[./-]\d{1,2}[./-]\d{2,4}", word
        ):
            return True
        if re.fullmatch(r"(?:19|20)\d\d", word):
            return True
        if word.isdigit() or word in WORDS.numbers or word in WORDS.ordinals:
            numbers += 1
    return numbers >= 2  # noqa: PLR2004


def _date_word(token: str) -> bool:
    word = token.strip(" ,.").casefold()
    if not word:
        return False
    if word[0].isdigit():
        return True
    if "-" in word:
        return all(_date_word(part) for part in word.split("-"))
    return (
        word in WORDS.months
        or word in WORDS.numbers
        or word in WORDS.ordinals
        or word in WORDS.year_words
        or word in WORDS.joiners
        or word.rstrip(".") in WORDS.months
    )


def birth_dates(text: str) -> Iterator[tuple[int, int]]:
    """Find the date after a word for being born."""
    for cue in _BIRTH_CUE.finditer(text):
        at = cue.end()
        tokens: list[str] = []
        end = at
        while len(tokens) < _MAX_DATE_TOKENS:
            token = _DATE_TOKEN.match(text, end)
            if token is None or not _date_word(token.group(0)):
                break
            tokens.append(token.group(0))
            end = token.end()
        # A joiner ends no date: "born in 1985 in Paris".
        while tokens and tokens[-1].strip(" ,.").casefold() in WORDS.joiners:
            end -= len(tokens.pop())
        if tokens and _date_like(tokens):
            yield at, end
