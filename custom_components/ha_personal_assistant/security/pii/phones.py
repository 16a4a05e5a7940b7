"""Phone numbers, and the numbers that only look like one (dates, amounts, versions)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

import phonenumbers

from .patterns import (
    DECIMAL_BEFORE,
    LABEL_WINDOW,
    LOTTERY,
    MAX_PHONE_DIGITS,
    MIN_CUED_DIGITS,
    MIN_LOCAL_DIGITS,
    NUMBER_LABEL,
    NUMBER_WORD,
    PHONE_CUE,
    PHONE_CUE_WINDOW,
    PREFIX_CUE,
    UNIT_AFTER,
    UNIT_BEFORE,
)

if TYPE_CHECKING:
    from collections.abc import Iterator


def phone_spans(text: str, country: str | None) -> Iterator[tuple[int, int]]:
    """Find the phone numbers libphonenumber accepts, for the country and the US."""
    regions = [country.upper()] if country else []
    regions.append("US")
    seen: set[tuple[int, int]] = set()
    for region in dict.fromkeys(regions):
        for match in phonenumbers.PhoneNumberMatcher(
            text, region, leniency=phonenumbers.Leniency.VALID
        ):
            span = (match.start, match.end)
            if span not in seen:
                seen.add(span)
                yield span


_YEARS: Final = range(1900, 2100)
_MONTHS: Final = range(1, 13)
_DAYS: Final = range(1, 32)


def _is_date(groups: list[str], separators: set[str]) -> bool:
    """Tell a date (2024-06-15, 03.10.2025, 07/20/1969) from a phone number."""
    if len(groups) != 3 or len(separators) != 1 or separators <= {" "}:  # noqa: PLR2004
        return False
    first, second, third = (int(g) for g in groups)
    if len(groups[0]) == 4:  # noqa: PLR2004 - year first
        return first in _YEARS and second in _MONTHS and third in _DAYS
    return (
        len(groups[2]) in {2, 4}
        and first in _DAYS
        and second in _DAYS
        and (first in _MONTHS or second in _MONTHS)
    )


def _is_amount(
    groups: list[str], separators: set[str], before: str, after: str
) -> bool:
    """Tell a number grouped in thousands (1 250 000 zł, 84 000 000)."""
    if len(separators) != 1 or not separators <= {" ", "."}:
        return False
    if len(groups[0]) > 3 or any(len(g) != 3 for g in groups[1:]):  # noqa: PLR2004
        return False
    return (
        groups[-1] == "000"
        or UNIT_AFTER.match(after) is not None
        or UNIT_BEFORE.search(before) is not None
    )


def _groups(run: str) -> tuple[list[str], set[str]]:
    """Return the digit groups of a number and the separators between them."""
    separators = {
        sep.strip() or " " for sep in re.findall(r"(?<=[\d)])[^\d(]+(?=[(\d])", run)
    }
    return re.findall(r"\d+", run), separators


def other_number(text: str, start: int, end: int) -> bool:
    """Tell a number that is not a phone number.

    Dates, year ranges, versions and decimals, amounts, and numbers named by a
    label (ISBN, ISO, port) are not.
    """
    run = text[start:end]
    if run.lstrip().startswith("+"):
        return False
    groups, separators = _groups(run)
    before = text[max(0, start - PHONE_CUE_WINDOW) : start]
    after = text[end : end + PHONE_CUE_WINDOW]
    if (
        NUMBER_LABEL.search(before)
        or DECIMAL_BEFORE.search(text[max(0, start - 4) : start])
        or _is_date(groups, separators)
        or sum(len(g) == 4 and int(g) in _YEARS for g in groups) >= 2  # noqa: PLR2004
        or _is_amount(groups, separators, before, after)
    ):
        return True
    # "s&p 500 2024": a number next to a year, not one number.
    if (
        separators == {" "}
        and len(groups) == 2  # noqa: PLR2004
        and any(len(g) == 4 and int(g) in _YEARS for g in groups)  # noqa: PLR2004
        and not (PHONE_CUE.search(before) or PHONE_CUE.search(after))
    ):
        return True
    # Lottery draws, unless something says "call" ("number" does not).
    wide = text[max(0, start - LABEL_WINDOW) : start]
    if LOTTERY.search(wide) and not PHONE_CUE.search(
        NUMBER_WORD.sub(" ", before + " " + after)
    ):
        return True
    # A list of dialling prefixes, all of one length: "0162 0163".
    if (
        PREFIX_CUE.search(wide)
        and len(groups) >= 2  # noqa: PLR2004
        and len({len(g) for g in groups}) == 1
        and all(g.startswith("0") for g in groups)
    ):
        return True
    # 3.1415926535, 19045.5247, 10.0.19045: decimals and versions; a dotted
    # phone number has a national prefix or the US shape (646.555.0199).
    return (
        separators == {"."}
        and not groups[0].startswith("0")
        and [len(g) for g in groups] not in ([3, 4], [3, 3, 4])
    )


def local_phone(match: re.Match[str], text: str) -> bool:
    """Tell whether a run of digit groups is a phone number in a local form.

    Accepted: 7 to 15 digits in phone-like groups, or 6 in pairs ("12 34
    56"), or 5 and more near a word that says "phone" in some language; never
    a date, year range, version, decimal, amount or labelled number. A number
    in one piece needs that word too, or a national prefix (0...), or the
    shape of a Chinese mobile number.
    """
    groups, _ = _groups(match.group(0))
    digits = "".join(groups)
    # Groups of one digit are a trunk prefix at most ("8 (812) ..."): a list
    # of small numbers is not a phone number ("4 8 15 16 23 42").
    if (
        not MIN_CUED_DIGITS <= len(digits) <= MAX_PHONE_DIGITS
        or any(len(g) == 1 for g in groups[1:])
        or other_number(text, match.start(), match.end())
    ):
        return False
    before = text[max(0, match.start() - PHONE_CUE_WINDOW) : match.start()]
    after = text[match.end() : match.end() + PHONE_CUE_WINDOW]
    if PHONE_CUE.search(before) or PHONE_CUE.search(after):
        return True
    if len(groups) == 1:
        return (digits.startswith("0") and len(digits) >= 9) or bool(  # noqa: PLR2004
            re.fullmatch(r"1[3-9]\d{9}", digits)
        )
    pairs = len(groups) >= 3 and all(len(g) == 2 for g in groups)  # noqa: PLR2004
    return len(digits) >= (6 if pairs else MIN_LOCAL_DIGITS)
