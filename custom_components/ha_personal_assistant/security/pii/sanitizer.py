# ruff: noqa: RUF001 - street names, quotes and letters of many scripts
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

import ipaddress
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import phonenumbers

from . import leftovers
from .disguise import normalise, spelled_long_numbers
from .names import (
    LETTERS,
    MIN_NAME_CHARS,
    NameMatcher,
    fold,
    name_matcher,
    named_tokens,
)
from .patterns import (
    ACCOUNT_NUMBER,
    ADDRESS_CUE,
    ADDRESSES,
    CHECK_DIGIT,
    CLABE_DIGITS,
    CLABE_WEIGHTS,
    COORD_DMS,
    COORD_HEMISPHERE_FIRST,
    COORD_PAIR,
    DE_PLACE,
    DE_STREET,
    DECIMAL,
    DECIMAL_BEFORE,
    EMAIL_SHAPE,
    ENTITY_ID_PATTERN,
    FLAT_AFTER,
    IBAN,
    IBAN_COUNTRIES,
    IPV4,
    IPV6,
    KEY_SHAPES,
    LABEL_WINDOW,
    LOCAL_HOST,
    LONG_GROUPED_NUMBER,
    LONG_NUMBER,
    LONG_TOKEN,
    LOTTERY,
    LOWER_ADDRESSES,
    LOWER_EVIDENT,
    MAC_SHAPE,
    MAX_PHONE_DIGITS,
    MIN_ACCOUNT_DIGITS,
    MIN_CUED_ACCOUNT_DIGITS,
    MIN_CUED_DIGITS,
    MIN_IBAN_DIGITS,
    MIN_LOCAL_DIGITS,
    NUMBER_LABEL,
    NUMBER_RUN,
    NUMBER_WORD,
    ORDINAL_STREET,
    PHONE_CUE,
    PHONE_CUE_WINDOW,
    PHONE_FALLBACK,
    PREFIX_CUE,
    SERVICE,
    UNIT_AFTER,
    UNIT_BEFORE,
    URL_CREDENTIALS,
    VERSION_LABEL,
    WORD,
)
from .secrets import said_secrets
from .shapes import addresses, birth_dates, cards
from .words import WORDS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

# Categories, as stored in search_audit_log and shown by /searchlog.
PHONE: Final = "phone"
EMAIL: Final = "email"
ADDRESS: Final = "address"
COORDINATES: Final = "coordinates"
IP: Final = "ip_address"
MAC: Final = "mac_address"
HOSTNAME: Final = "local_host"
ENTITY_ID: Final = "entity_id"
NAME: Final = "name"
SECRET: Final = "secret"  # noqa: S105 - a category name
BANK_ACCOUNT: Final = "bank_account"
BIRTH_DATE: Final = "birth_date"

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


@dataclass(frozen=True, slots=True)
class Sanitized:
    """The query as it may be sent, and what was taken out."""

    text: str
    categories: tuple[str, ...]
    original_chars: int
    removed_chars: int
    counts: dict[str, int] = field(default_factory=dict)
    # The removed values themselves: in memory only, never stored or logged.
    found: tuple[str, ...] = field(default=(), repr=False)

    @property
    def sendable(self) -> bool:
        """Tell whether a word worth searching for is left.

        Only a query that was all personal details (and the words that
        carried them, "call me on") is refused.
        """
        return bool(WORD.search(self.text)) and leftovers.searchable(self.text)


class _Redactor:
    """Collect spans to remove, then cut them out in one pass."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.spans: list[tuple[int, int, str]] = []

    def taken(self, start: int, end: int, *, but: str | None = None) -> bool:
        return any(s < end and start < e and c != but for s, e, c in self.spans)

    def add(self, start: int, end: int, category: str) -> None:
        if end > start:
            self.spans.append((start, end, category))

    def add_all(
        self,
        pattern: re.Pattern[str],
        category: str,
        accept: Callable[[re.Match[str]], bool] | None = None,
    ) -> None:
        for match in pattern.finditer(self.text):
            if accept is None or accept(match):
                self.add(match.start(), match.end(), category)

    def result(self) -> Sanitized:
        merged: list[tuple[int, int]] = []
        counts: dict[str, int] = {}
        for start, end, category in sorted(self.spans):
            counts[category] = counts.get(category, 0) + 1
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], end))
            else:
                merged.append((start, end))
        found = tuple(self.text[s:e].strip() for s, e in merged)
        pieces: list[str] = []
        last = 0
        removed = 0
        for start, end in merged:
            pieces.append(self.text[last:start])
            pieces.append(f" {leftovers.CUT} ")
            removed += len(self.text[start:end].strip())
            last = end
        pieces.append(self.text[last:])
        # Nothing removed: the query leaves as written ("c'est grave ?",
        # "!secret"), only its blank runs collapsed.
        cleaned = leftovers.clean("".join(pieces)).replace(leftovers.CUT, " ")
        text = _tidy(cleaned) if merged else " ".join(self.text.split())
        categories = tuple(sorted(counts))
        original = len(re.sub(r"\s+", "", self.text))
        return Sanitized(text, categories, original, removed, counts, found)


def _tidy(text: str) -> str:
    """Collapse what removal left behind: double spaces, dangling separators."""
    text = re.sub(r"\(\s*[,;/]?\s*\)|\[\s*\]|\"\s*\"|'\s+'", " ", text)
    # A mark that ends a phrase moves back to its word; one that starts a
    # token ("!secret", "::1", "-22.9") stays where it is.
    text = re.sub(r"\s+([,.;:!?]+)(?=\s|$)", r"\1", text)
    text = re.sub(r"(?:^|(?<=\s))[,.;:/-]+(?=\s|$)", " ", text)
    text = re.sub(r"([,;:])(?:\s*[,;:])+(?=\s|$)", r"\1", text)
    return re.sub(r"\s+", " ", text).lstrip().rstrip(" ,;:-/")


def _phones(text: str, country: str | None) -> Iterator[tuple[int, int]]:
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


def _other_number(text: str, start: int, end: int) -> bool:
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


def _local_phone(match: re.Match[str], text: str) -> bool:
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
        or _other_number(text, match.start(), match.end())
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


def _bank_accounts(text: str) -> Iterator[tuple[int, int]]:
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


# Public DNS resolvers everybody may name ("8.8.8.8 or 1.1.1.1?"): they are
# nobody's machine. Google, Cloudflare (and its family filters), Quad9,
# OpenDNS, AdGuard, CleanBrowsing, Level3, DNS.WATCH, Comodo, Yandex, Mullvad.
_PUBLIC_RESOLVERS: Final = frozenset(
    ipaddress.ip_address(address) for address in WORDS.lists["public_resolvers"]
)
_THIS_NETWORK: Final = ipaddress.ip_network("0.0.0.0/8")


def _valid_ip(text: str) -> bool:
    """Tell an address of some machine from addresses that are nobody's.

    Not a machine's: loopback, unspecified, multicast (224.0.0.251, ff02::fb),
    IPv4's reserved 240.0.0.0/4 (the broadcast 255.255.255.255 and the
    netmasks 255.255.255.0, 255.255.0.0), "this network" 0.0.0.0/8 (wildcard
    masks) and the public DNS resolvers.
    """
    try:
        address = ipaddress.ip_interface(text.split("%", 1)[0]).ip
    except ValueError:
        return False
    special = address.version == 4 and (  # noqa: PLR2004
        address.is_reserved or address in _THIS_NETWORK
    )
    return not (
        address.is_loopback
        or address.is_unspecified
        or address.is_multicast
        or special
        or address in _PUBLIC_RESOLVERS
    )


# MAC addresses that are no device's: broadcast, all zeros, and the group
# addresses of IPv4 and IPv6 multicast and of IEEE 802.1 (STP, LLDP).
_GROUP_MAC: Final = re.compile(
    r"(?:ff[:.-]?){5}ff|(?:00[:.-]?){5}00|01[:.-]?00[:.-]?5e|33[:.-]?33|"
    r"01[:.-]?80[:.-]?c2",
    re.IGNORECASE,
)


def _device_mac(text: str) -> bool:
    """Tell a device's MAC address from a broadcast or multicast one."""
    return _GROUP_MAC.match(text) is None


# A MAC address without separators, "001A2B3C4D5E": twelve hex digits. The
# same shape is a short commit or container id ("3f9a2c1e4b5d"), so it is a
# MAC in capitals (as routers show it) or near a word of networks and devices.
_BARE_MAC: Final = re.compile(r"(?<![\w:.-])[0-9A-Fa-f]{12}(?![\w:.-])")
_MAC_CUE: Final = re.compile(
    r"(?<!\w)(?:mac|bssid|hwaddr|ether|oui|vendor|hersteller|fabricant|"
    r"fabricante|produttore|producent|device|dispositiv[oe]|gerät|geraet|"
    r"appareil|urządzeni\w*|apparaat|router|wi-?fi|wlan|lan|ethernet|network|"
    r"netzwerk|réseau|red|rete|sieć|sieci|rede|netwerk|connected|conectado|"
    r"verbunden|connecté|connesso|połączon\w*|verbonden|dhcp|arp|nic|adapter)"
    r"(?!\w)",
    re.IGNORECASE,
)
_HASH_CUE: Final = re.compile(
    r"(?<!\w)(?:commit|hash|sha\w*|md5|docker|container|image|digest|checksum|"
    r"blob|tree|uuid|guid|build|revision|rev)(?!\w)",
    re.IGNORECASE,
)
_MAC_CUE_WINDOW: Final = 40


def _bare_mac(text: str, match: re.Match[str]) -> bool:
    """Tell twelve hex digits that are a MAC address from a hash or an id."""
    value = match.group(0)
    before = text[max(0, match.start() - _MAC_CUE_WINDOW) : match.start()]
    after = text[match.end() : match.end() + _MAC_CUE_WINDOW]
    if not _device_mac(value) or _HASH_CUE.search(before):
        return False
    if _MAC_CUE.search(before) or _MAC_CUE.search(after):
        return True
    letters = any(c.isalpha() for c in value)
    return value.isupper() and letters and any(c.isdigit() for c in value)


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


def _add_names(redactor: _Redactor, names: NameMatcher) -> None:
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


def _lower_address(redactor: _Redactor, index: int) -> Callable[[re.Match[str]], bool]:
    """Accept a lower-case address that is evident, or follows a cue.

    Where capitals already showed the address ("71 rue de la Paix"), they
    also showed where it ends: the lower-case reading is not used.
    """
    evident = LOWER_EVIDENT[index]
    text = redactor.text

    def accept(match: re.Match[str]) -> bool:
        if redactor.taken(match.start(), match.end()):
            return False
        return (
            (evident is not None and evident.search(match.group(0)) is not None)
            or (index == _PREFIX_FIRST and _evident_prefix(text, match))
            or ADDRESS_CUE.search(text[max(0, match.start() - 24) : match.start()])
            is not None
        )

    return accept


_PREFIX_FIRST: Final = 3  # the index of "calle mayor 5" in LOWER_ADDRESSES
# "via" that names no street: a climbing route, the Milky Way, a procession.
_VIA_PHRASE: Final = re.compile(
    r"v[ií]a\s+(?:ferrata|ferrate|crucis|lattea|láctea|negativa|media)(?!\w)",
    re.IGNORECASE,
)


def _evident_prefix(text: str, match: re.Match[str]) -> bool:
    """Tell a street word that is evident from where it stands.

    "via saragozza 45" opening the query (English "via" never opens one
    before a name and a number); "os. kolorowe 8" and "al. róż 6" unless
    they are "4 os." (persons) or "et al.".
    """
    head = match.group(0)[:4].casefold()
    before = text[: match.start()]
    if head.startswith(("via ", "vía ")):
        return _VIA_PHRASE.match(match.group(0)) is None and (
            not before.strip() or re.search(r"[.!?;:]\s*$", before) is not None
        )
    if head.startswith("os."):
        return re.search(r"\d\s*$", before) is None
    if head.startswith("al."):
        return re.search(r"(?<!\w)et\s*$", before, re.IGNORECASE) is None
    return False


def _flats(text: str, spans: list[tuple[int, int, str]]) -> list[tuple[int, int]]:
    """Find the flat after each street found: "os. kolorowe 8 m. 12"."""
    found = []
    for _, end, category in spans:
        if category != ADDRESS:
            continue
        # The house number may have taken the flat's letter: "8 m" of "8 m. 12".
        starts = [end]
        if re.match(r"\s[a-zA-Z]", text[end - 2 : end]):
            starts.append(end - 2)
        for at in starts:
            if flat := FLAT_AFTER.match(text, at):
                found.append((at, flat.end()))
                break
    return found


def _de_street(text: str, match: re.Match[str]) -> bool:
    """Tell "Am Sonnenhang 7" (a street) from "Im Garten 5 Tomaten" (a count).

    The noun is a compound naming a place ("Sonnen-hang", "Mühl-feld"), or
    the preposition has a capital inside the sentence, which German gives a
    street's name only ("Paket an Am Sonnenhang 7").
    """
    noun = match.group("noun")
    place = DE_PLACE.fullmatch(noun)
    if place is not None and len(place.group("stem")) >= MIN_NAME_CHARS:
        return True
    before = text[: match.start()]
    return (
        match.group("prep")[0].isupper()
        and noun[0].isupper()
        and re.search(r"[^\W\d_][\w'’-]*[\s,]+$", before) is not None
    )


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
            and _other_number(text, first, last)
        ):
            continue
        redactor.add(first, last, category)
    return redactor.result()


def _detect(text: str, context: PiiContext) -> _Redactor:
    """Run every detector of the original sanitizer over ``text``."""
    redactor = _Redactor(text)
    redactor.add_all(URL_CREDENTIALS, SECRET)
    redactor.add_all(KEY_SHAPES, SECRET)
    redactor.add_all(LONG_TOKEN, SECRET, lambda m: _is_secret(m.group(0)))
    for start, end in said_secrets(text):
        redactor.add(start, end, SECRET)
    redactor.add_all(EMAIL_SHAPE, EMAIL)
    redactor.add_all(LOCAL_HOST, HOSTNAME)
    redactor.add_all(MAC_SHAPE, MAC, lambda m: _device_mac(m.group(0)))
    redactor.add_all(_BARE_MAC, MAC, lambda m: _bare_mac(text, m))
    redactor.add_all(
        IPV4,
        IP,
        lambda m: (
            _valid_ip(m.group(0))
            and not VERSION_LABEL.search(text[max(0, m.start() - 12) : m.start()])
        ),
    )
    redactor.add_all(
        IPV6,
        IP,
        lambda m: m.group(0).count(":") >= 2 and _valid_ip(m.group(0)),  # noqa: PLR2004
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
        redactor.add_all(pattern, ADDRESS, _lower_address(redactor, index))
    redactor.add_all(DE_STREET, ADDRESS, lambda m: _de_street(text, m))
    redactor.add_all(ORDINAL_STREET, ADDRESS)
    for start, end in _flats(text, redactor.spans):
        redactor.add(start, end, ADDRESS)
    for value in context.values:
        if len(value.strip()) >= MIN_NAME_CHARS:
            redactor.add_all(re.compile(re.escape(value.strip()), re.IGNORECASE), NAME)
    for start, end in _bank_accounts(text):
        redactor.add(start, end, BANK_ACCOUNT)
    for start, end in _phones(text, context.country):
        if not redactor.taken(start, end) and not _other_number(text, start, end):
            redactor.add(start, end, PHONE)
    redactor.add_all(
        PHONE_FALLBACK,
        PHONE,
        lambda m: (
            sum(c.isdigit() for c in m.group(0)) >= 7  # noqa: PLR2004
            and not redactor.taken(m.start(), m.end())
            and not _other_number(text, m.start(), m.end())
        ),
    )
    redactor.add_all(
        NUMBER_RUN,
        PHONE,
        # Grown from a number the library found: "8 (812) 234-56-78".
        lambda m: (
            not redactor.taken(m.start(), m.end(), but=PHONE) and _local_phone(m, text)
        ),
    )
    if (names := name_matcher(tuple(context.names), context.country)) is not None:
        _add_names(redactor, names)
    return redactor
