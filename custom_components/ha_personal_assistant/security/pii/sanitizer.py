"""The PII sanitizer: what leaves the house in a web query carries nothing personal.

Every outgoing query passes :func:`sanitize`. It removes (never masks with a
hint of the value) phone numbers (also local forms without an area or
country code), emails, street addresses (also in lower case inside a
sentence), coordinates (including the home's own location in any rounding),
IP and MAC addresses, local host names, entity ids, bank account numbers
(IBANs, card numbers), secrets (keys, tokens, and passwords, PINs and codes
the user says), and the names the house knows: its people and users, areas,
zones, devices and what the profile says. Callers fail closed: if sanitizing
raises, nothing is sent.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from .accounts import bank_accounts
from .addresses import de_street, flats, lower_address
from .disguise import normalise, spelled_long_numbers
from .names import (
    LETTERS,
    MIN_NAME_CHARS,
    NameMatcher,
    fold,
    name_matcher,
    named_tokens,
)
from .network import BARE_MAC, bare_mac, device_mac, valid_ip
from .patterns import (
    ADDRESSES,
    COORD_DMS,
    COORD_HEMISPHERE_FIRST,
    COORD_PAIR,
    DE_STREET,
    DECIMAL,
    EMAIL_SHAPE,
    ENTITY_ID_PATTERN,
    IPV4,
    IPV6,
    KEY_SHAPES,
    LOCAL_HOST,
    LONG_TOKEN,
    LOWER_ADDRESSES,
    MAC_SHAPE,
    NUMBER_RUN,
    ORDINAL_STREET,
    PHONE_FALLBACK,
    SERVICE,
    URL_CREDENTIALS,
    VERSION_LABEL,
)
from .phones import local_phone, other_number, phone_spans
from .redactor import (
    ADDRESS,
    BANK_ACCOUNT,
    BIRTH_DATE,
    COORDINATES,
    EMAIL,
    ENTITY_ID,
    HOSTNAME,
    IP,
    MAC,
    NAME,
    PHONE,
    SECRET,
    Redactor,
    Sanitized,
)
from .secrets import said_secrets
from .shapes import addresses, birth_dates, cards

if TYPE_CHECKING:
    from collections.abc import Callable

MAX_QUERY_CHARS: Final = 300


@dataclass(frozen=True, slots=True)
class PiiContext:
    """What the house knows that must not leave it."""

    country: str | None = None
    home: tuple[float, float] | None = None
    # People, areas, zones, devices, profile names: removed wherever they occur.
    names: tuple[str, ...] = ()
    # Exact values (e.g. an address saved in the profile) removed verbatim.
    values: tuple[str, ...] = ()


def _is_secret(token: str) -> bool:
    """Tell a random token from a long word: mixed classes, many distinct chars."""
    classes = sum(
        (
            any(c.islower() for c in token),
            any(c.isupper() for c in token),
            any(c.isdigit() for c in token),
        )
    )
    if classes < 2 or (classes == 2 and sum(c.isdigit() for c in token) < 3):  # noqa: PLR2004
        return False
    counts: dict[str, int] = {}
    for char in token:
        counts[char] = counts.get(char, 0) + 1
    entropy = -sum(n / len(token) * math.log2(n / len(token)) for n in counts.values())
    return entropy >= 3.5  # noqa: PLR2004 - bits per char of random base64/hex


def _home_decimals(home: tuple[float, float]) -> Callable[[re.Match[str]], bool]:
    """Accept a decimal number that is the home's latitude or longitude, rounded."""

    def accept(match: re.Match[str]) -> bool:
        raw = match.group(0).replace(",", ".")
        digits = len(match.group(1))
        try:
            value = abs(float(raw))
        except ValueError:
            return False
        for coordinate in home:
            target = abs(coordinate)
            if math.isclose(value, round(target, digits), abs_tol=10**-digits / 2):
                return True
            truncated = math.floor(target * 10**digits) / 10**digits
            if math.isclose(value, truncated, abs_tol=10 ** -(digits + 3)):
                return True
        return False

    return accept


def _add_names(redactor: Redactor, names: NameMatcher) -> None:
    """Remove the house's names: without accents, declined, inside handles.

    Inside an address or email already removed, a name adds nothing.
    """
    spans = [m.span() for m in names.pattern.finditer(redactor.text)]
    if names.declined:
        spans.extend(
            m.span()
            for m in LETTERS.finditer(redactor.text)
            if m.group(0).casefold() in names.declined
        )
    spans.extend(named_tokens(fold(redactor.text), names.words))
    for start, end in spans:
        if not redactor.taken(start, end, but=NAME):
            redactor.add(start, end, NAME)


def sanitize(query: str, context: PiiContext) -> Sanitized:
    """Remove personal data from a web query.

    The detectors run on the query and on its normalised copy (spelled
    numbers as digits, split groups joined, "at"/"dot" as signs); what the
    copy shows maps back to the span of the query it came from. Raises only
    on a bug; callers then send nothing (fail closed).
    """
    text = query[:MAX_QUERY_CHARS]
    redactor = _detect(text, context)
    copy = normalise(text)
    found: list[tuple[int, int, str]] = []
    if copy.edits:
        found.extend(
            (start, end, category)
            for start, end, category in _detect(copy.text, context).spans
            if copy.touches_edit(start, end)
        )
    found.extend((start, end, BANK_ACCOUNT) for start, end in cards(copy.text))
    found.extend((s, e, PHONE) for s, e in spelled_long_numbers(copy, text))
    found.extend((start, end, ADDRESS) for start, end in addresses(copy.text))
    found.extend((start, end, BIRTH_DATE) for start, end in birth_dates(copy.text))
    for start, end, category in found:
        first, last = copy.original_span(start, end)
        if any(s <= first and last <= e for s, e, _ in redactor.spans):
            continue
        # Groups of digits joined in the copy are still a list, a date or an
        # amount when the words around them say so ("Vorwahlen 0170 0171").
        written = text[first:last]
        if (
            category == PHONE
            and not any(ch.isalpha() for ch in written)
            and other_number(text, first, last)
        ):
            continue
        redactor.add(first, last, category)
    return redactor.result()


def _detect(text: str, context: PiiContext) -> Redactor:
    """Run every detector of the original sanitizer over ``text``."""
    redactor = Redactor(text)
    redactor.add_all(URL_CREDENTIALS, SECRET)
    redactor.add_all(KEY_SHAPES, SECRET)
    redactor.add_all(LONG_TOKEN, SECRET, lambda m: _is_secret(m.group(0)))
    for start, end in said_secrets(text):
        redactor.add(start, end, SECRET)
    redactor.add_all(EMAIL_SHAPE, EMAIL)
    redactor.add_all(LOCAL_HOST, HOSTNAME)
    redactor.add_all(MAC_SHAPE, MAC, lambda m: device_mac(m.group(0)))
    redactor.add_all(BARE_MAC, MAC, lambda m: bare_mac(text, m))
    redactor.add_all(
        IPV4,
        IP,
        lambda m: (
            valid_ip(m.group(0))
            and not VERSION_LABEL.search(text[max(0, m.start() - 12) : m.start()])
        ),
    )
    redactor.add_all(
        IPV6,
        IP,
        lambda m: m.group(0).count(":") >= 2 and valid_ip(m.group(0)),  # noqa: PLR2004
    )
    redactor.add_all(
        ENTITY_ID_PATTERN, ENTITY_ID, lambda m: not SERVICE.fullmatch(m.group(0))
    )
    redactor.add_all(COORD_DMS, COORDINATES)
    redactor.add_all(COORD_HEMISPHERE_FIRST, COORDINATES)
    redactor.add_all(COORD_PAIR, COORDINATES)
    if context.home is not None:
        redactor.add_all(DECIMAL, COORDINATES, _home_decimals(context.home))
    for pattern in ADDRESSES:
        redactor.add_all(pattern, ADDRESS)
    for index, pattern in enumerate(LOWER_ADDRESSES):
        redactor.add_all(pattern, ADDRESS, lower_address(redactor, index))
    redactor.add_all(DE_STREET, ADDRESS, lambda m: de_street(text, m))
    redactor.add_all(ORDINAL_STREET, ADDRESS)
    for start, end in flats(text, redactor.spans):
        redactor.add(start, end, ADDRESS)
    for value in context.values:
        if len(value.strip()) >= MIN_NAME_CHARS:
            redactor.add_all(re.compile(re.escape(value.strip()), re.IGNORECASE), NAME)
    for start, end in bank_accounts(text):
        redactor.add(start, end, BANK_ACCOUNT)
    for start, end in phone_spans(text, context.country):
        if not redactor.taken(start, end) and not other_number(text, start, end):
            redactor.add(start, end, PHONE)
    redactor.add_all(
        PHONE_FALLBACK,
        PHONE,
        lambda m: (
            sum(c.isdigit() for c in m.group(0)) >= 7  # noqa: PLR2004
            and not redactor.taken(m.start(), m.end())
            and not other_number(text, m.start(), m.end())
        ),
    )
    redactor.add_all(
        NUMBER_RUN,
        PHONE,
        # Grown from a number the library found: "8 (812) 234-56-78".
        lambda m: (
            not redactor.taken(m.start(), m.end(), but=PHONE) and local_phone(m, text)
        ),
    )
    if (names := name_matcher(tuple(context.names), context.country)) is not None:
        _add_names(redactor, names)
    return redactor
