"""Bank accounts: IBANs, numbers named as accounts, card numbers and CLABEs."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .patterns import (
    ACCOUNT_NUMBER,
    CHECK_DIGIT,
    CLABE_DIGITS,
    CLABE_WEIGHTS,
    IBAN,
    IBAN_COUNTRIES,
    LONG_GROUPED_NUMBER,
    LONG_NUMBER,
    MIN_ACCOUNT_DIGITS,
    MIN_CUED_ACCOUNT_DIGITS,
    MIN_IBAN_DIGITS,
    NUMBER_LABEL,
    PHONE_CUE_WINDOW,
)

if TYPE_CHECKING:
    from collections.abc import Iterator


def _luhn(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char) * (2 if index % 2 else 1)
        total += value - 9 if value > 9 else value  # noqa: PLR2004
    return total % 10 == 0


def _clabe(digits: str) -> bool:
    """Tell a Mexican CLABE (18 digits) by its check digit."""
    if len(digits) != CLABE_DIGITS:
        return False
    total = sum(
        int(d) * w % 10 for d, w in zip(digits[:-1], CLABE_WEIGHTS, strict=True)
    )
    return (10 - total % 10) % 10 == int(digits[-1])


def _iban_length(found: str) -> int:
    """Return how much of a matched IBAN is the IBAN.

    A word after it can look like a last group ("BE57 3630 8129 7535 take"):
    when dropping trailing groups gives valid check digits, they were not
    part of it. Otherwise (a mistyped IBAN) all of it goes.
    """
    cut = len(found)
    while cut > 0:
        compact = re.sub(r"[ -]", "", found[:cut]).upper()
        if compact.isalnum() and _iban_ok(compact):
            return cut
        space = max(found.rfind(" ", 0, cut), found.rfind("-", 0, cut))
        if space <= 4:  # noqa: PLR2004
            break
        cut = space
    return len(found)


def _iban_ok(compact: str) -> bool:
    moved = compact[4:] + compact[:4]
    return int("".join(str(int(ch, 36)) for ch in moved)) % 97 == 1


def bank_accounts(text: str) -> Iterator[tuple[int, int]]:
    """Find IBANs, numbers named as accounts and long numbers grouped by four."""
    for match in IBAN.finditer(text):
        compact = re.sub(r"[ -]", "", match.group(0))
        if (
            match.group(1).upper() in IBAN_COUNTRIES
            and sum(c.isdigit() for c in compact[4:]) >= MIN_IBAN_DIGITS
        ):
            yield match.start(), match.start() + _iban_length(match.group(0))
    for match in ACCOUNT_NUMBER.finditer(text):
        number = match.group(1)
        if CHECK_DIGIT.fullmatch(number) or (
            number[-1].isdigit()
            and sum(c.isdigit() for c in number) >= MIN_CUED_ACCOUNT_DIGITS
        ):
            yield match.span(1)
    for match in LONG_NUMBER.finditer(text):
        digits = match.group(0)
        before = text[max(0, match.start() - PHONE_CUE_WINDOW) : match.start()]
        if not NUMBER_LABEL.search(before) and (_luhn(digits) or _clabe(digits)):
            yield match.span()
    for match in LONG_GROUPED_NUMBER.finditer(text):
        digits = re.sub(r"\D", "", match.group(0))
        # Card numbers (Luhn) and account numbers (16 digits and more).
        if len(digits) >= MIN_ACCOUNT_DIGITS and (_luhn(digits) or len(digits) > 15):  # noqa: PLR2004
            yield match.span()
