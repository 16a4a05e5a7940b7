# ruff: noqa: RUF001 - apostrophes, signs and letters of many scripts
"""A normalised copy of a query, where disguised details take their usual shape.

People write details so that a pattern does not see them, or just the way
they speak: "five five five, zero one nine nine", "555 01 99 - 12",
"peter.k at posteo dot de", "GB34 QQHU 1170 7910 1411 90". The copy has
spelled numbers as digits (every shipped language), split digit groups
joined, and words or bracketed forms for "@" and "." as the signs. Each
character of the copy knows the span of the original it came from, so a
finding on the copy maps back to the text that must go.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from .words import WORDS, alternation

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

_MIN_JOINED_DIGITS: Final = 7  # a local phone number without its area code
_MAX_JOINED_DIGITS: Final = 19  # the longest card number
_MAX_GROUP_DIGITS: Final = 5
_PLUS_GAP: Final = re.compile(r"(?<=\+)\s+(?=\d)")
_IBAN_MIN: Final = 15
_IBAN_MAX: Final = 34

_IDEOGRAPH: Final = "〇一-鿿"  # one token each: Chinese writes no spaces
_TOKEN: Final = re.compile(
    rf"[{_IDEOGRAPH}]|(?:(?![{_IDEOGRAPH}])[^\W\d_])+"
    rf"(?:['’-](?:(?![{_IDEOGRAPH}])[^\W\d_])+)*|\d+"
)
_GAP: Final = re.compile(r"\s*[,.\-/]?\s*")
_MAX_PHRASE_WORDS: Final = 4  # "quatre vingt dix neuf"
# Digit groups split by spaces, commas, dots or dashes: "641, 2679, 35".
_DIGIT_GROUPS: Final = re.compile(
    r"(?<![\w.,])\+?\s?\d{1,5}(?:(?:\s?[,.\-/]\s?|\s{1,2})\d{1,5})+(?![\w]|[.,]\d)"
)
_DATE_LIKE: Final = re.compile(
    r"\d{1,2}([./-])\d{1,2}\1(?:19|20)\d{2}|(?:19|20)\d{2}([./-])\d{1,2}\2\d{1,2}"
)
_IP_LIKE: Final = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")
_DECIMALS: Final = re.compile(r"\d+[.,]\d+")
_IBAN_SPLIT: Final = re.compile(
    r"(?<![\w])[A-Za-z]{2}\s?\d{2}(?:[\s.\-]{1,2}[A-Za-z0-9]{1,4}){2,8}"
)
_AT: Final = (
    rf"(?:\s*[\[(<{{]\s*(?:{alternation(WORDS.at)})\s*[\])>}}]\s*"
    rf"|\s+(?:{alternation(WORDS.at)})\s+)"
)
_DOT: Final = (
    rf"(?:\s*[\[(<{{]\s*(?:{alternation(WORDS.dot)})\s*[\])>}}]\s*"
    rf"|\s+(?:{alternation(WORDS.dot)})\s+|\.)"
)
_SPOKEN_EMAIL: Final = re.compile(
    rf"(?<![\w.+-])(?P<local>[\w.+-]{{1,64}}){_AT}(?P<domain>[\w-]{{1,63}}"
    rf"(?:{_DOT}[\w-]{{1,63}})*{_DOT}[^\W\d_]{{2,24}})(?!\w)",
    re.IGNORECASE,
)
_DOT_ONLY: Final = re.compile(_DOT, re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Normalised:
    """The copy, where each character came from in the original, and the edits."""

    text: str
    origins: tuple[tuple[int, int], ...]
    edits: tuple[tuple[int, int], ...]  # spans of the copy that were rewritten

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """Return the span of the original that the copy's span came from."""
        chosen = self.origins[start:end]
        if not chosen:
            return (0, 0)
        return (min(s for s, _ in chosen), max(e for _, e in chosen))

    def touches_edit(self, start: int, end: int) -> bool:
        """Tell whether a span of the copy covers a rewritten part."""
        return any(s < end and start < e for s, e in self.edits)


def _rewrite(
    current: Normalised, pattern: re.Pattern[str], new: Callable[[re.Match[str]], str]
) -> Normalised:
    """Replace each match of ``pattern`` by ``new(match)``; keep the origins."""
    return _apply(
        current,
        ((m.start(), m.end(), new(m)) for m in pattern.finditer(current.text)),
    )


def _apply(current: Normalised, changes: Iterable[tuple[int, int, str]]) -> Normalised:
    """Replace spans of the copy (in order, apart); keep the origins."""
    text, origins = current.text, current.origins
    pieces: list[str] = []
    mapped: list[tuple[int, int]] = []
    edits: list[tuple[int, int]] = []
    changed: list[tuple[int, int, int]] = []  # start, end, length change
    moved = 0  # how far the copy's positions moved so far
    last = 0
    for first, stop, wanted in changes:
        start, end, replacement = first, stop, wanted
        old = text[start:end]
        # Only what changed is an edit: "GB34 QQHU ... 90 take" keeps "take".
        while replacement and old and replacement[-1] == old[-1]:
            replacement, old, end = replacement[:-1], old[:-1], end - 1
        while replacement and old and replacement[0] == old[0]:
            replacement, old, start = replacement[1:], old[1:], start + 1
        if replacement == old or start < last:
            continue
        pieces.append(text[last:start])
        mapped.extend(origins[last:start])
        whole = origins[start:end] or origins[max(0, start - 1) : start]
        span = (min(s for s, _ in whole), max(e for _, e in whole)) if whole else (0, 0)
        at = start + moved
        pieces.append(replacement)
        mapped.extend([span] * len(replacement))
        edits.append((at, at + max(1, len(replacement))))
        changed.append((start, end, len(replacement) - (end - start)))
        moved += len(replacement) - (end - start)
        last = end
    old_edits = [
        (s + shift, e + shift)
        for s, e in current.edits
        if not any(cs < e and s < ce for cs, ce, _ in changed)
        for shift in [sum(d for _, ce, d in changed if ce <= s)]
    ]
    if not edits:
        return current
    pieces.append(text[last:])
    mapped.extend(origins[last:])
    return Normalised("".join(pieces), tuple(mapped), tuple(old_edits + edits))


def _spoken_email(match: re.Match[str]) -> str:
    domain = _DOT_ONLY.sub(".", match.group("domain"))
    return f"{match.group('local')}@{domain}"


def _number_at(
    text: str, tokens: list[re.Match[str]], index: int
) -> tuple[int, str] | None:
    """Return how many tokens from ``index`` make one number, and its digits."""
    first = tokens[index].group(0)
    if first.isdigit():
        return 1, first
    for size in range(min(_MAX_PHRASE_WORDS, len(tokens) - index), 0, -1):
        chosen = tokens[index : index + size]
        gaps = [text[a.end() : b.start()] for a, b in itertools.pairwise(chosen)]
        if any(not re.fullmatch(r"[\s-]+", gap) for gap in gaps):
            continue
        words = [t.group(0).casefold() for t in chosen]
        for key in (" ".join(words), "-".join(words), "".join(words)):
            if key in WORDS.numbers:
                return size, str(WORDS.numbers[key])
    if first.casefold() in WORDS.plus:
        return 1, "+"
    return None


def _spelled_runs(text: str) -> Iterator[tuple[int, int, str]]:
    """Find runs of two or more numbers, one spelled, and give their digits."""
    tokens = list(_TOKEN.finditer(text))
    index = 0
    while index < len(tokens):
        items: list[tuple[int, int, str]] = []
        at = index
        while at < len(tokens):
            found = _number_at(text, tokens, at)
            if found is None:
                break
            if items and not _GAP.fullmatch(text[items[-1][1] : tokens[at].start()]):
                break
            size, digits = found
            if digits == "+" and items:
                break
            items.append((tokens[at].start(), tokens[at + size - 1].end(), digits))
            at += size
        while items and items[-1][2] == "+":
            items.pop()
        spelled = [item for item in items if not text[item[0] : item[1]].isdigit()]
        if len(items) >= 2 and spelled:  # noqa: PLR2004
            for start, end, digits in spelled:
                yield start, end, digits
        index = max(at, index + 1)


def _joined(match: re.Match[str]) -> str:
    run = match.group(0)
    digits = re.sub(r"\D", "", run)
    groups = re.findall(r"\d+", run)
    if not _MIN_JOINED_DIGITS <= len(digits) <= _MAX_JOINED_DIGITS:
        return run
    if any(len(g) > _MAX_GROUP_DIGITS for g in groups):
        return run
    body = run.lstrip("+ ")
    if (
        _DATE_LIKE.fullmatch(body)
        or (_IP_LIKE.fullmatch(body) and all(int(g) < 256 for g in groups))  # noqa: PLR2004
        or (len(groups) == 2 and _DECIMALS.fullmatch(body))  # noqa: PLR2004
    ):
        return run
    return ("+" if run.lstrip().startswith("+") else "") + digits


def _iban_ok(compact: str) -> bool:
    moved = compact[4:] + compact[:4]
    try:
        return int("".join(str(int(ch, 36)) for ch in moved)) % 97 == 1
    except ValueError:
        return False


def _iban(match: re.Match[str]) -> str:
    run = match.group(0)
    # The last group may be a word after the number ("... 90 take").
    parts = re.split(r"([\s.\-]{1,2})", run)
    while parts:
        candidate = re.sub(r"[\s.\-]", "", "".join(parts)).upper()
        if _IBAN_MIN <= len(candidate) <= _IBAN_MAX and _iban_ok(candidate):
            return candidate + run[len("".join(parts)) :]
        parts = parts[:-2]
    return run


def normalise(text: str) -> Normalised:
    """Return the normalised copy of ``text`` with its map to the original."""
    current = Normalised(text, tuple((i, i + 1) for i in range(len(text))), ())
    current = _rewrite(current, _SPOKEN_EMAIL, _spoken_email)
    current = _apply(current, list(_spelled_runs(current.text)))
    current = _rewrite(current, _PLUS_GAP, lambda _: "")
    current = _rewrite(current, _IBAN_SPLIT, _iban)
    return _rewrite(current, _DIGIT_GROUPS, _joined)


_LONG_RUN: Final = re.compile(r"\+?\d{7,}")


def spelled_long_numbers(copy: Normalised, original: str) -> Iterator[tuple[int, int]]:
    """Find numbers of seven digits or more that were spelled out.

    Nobody spells a count or a price digit by digit: a long number said
    aloud ("five five five, zero one nine nine") is a phone or an account.
    """
    for match in _LONG_RUN.finditer(copy.text):
        start, end = match.span()
        first, last = copy.original_span(start, end)
        if copy.touches_edit(start, end) and any(
            ch.isalpha() for ch in original[first:last]
        ):
            yield start, end
