# ruff: noqa: RUF001 - street names, quotes and letters of many scripts
"""The PII sanitizer: what leaves the house in a web query carries nothing personal.

Every outgoing query passes :func:`sanitize`. It removes (never masks with a
hint of the value) phone numbers, emails, street addresses, coordinates
(including the home's own location in any rounding), IP and MAC addresses,
local host names, entity ids, secrets, and the names the house knows: its
people, areas, zones, devices and what the profile says. Callers fail closed:
if sanitizing raises, nothing is sent.
"""

from __future__ import annotations

import ipaddress
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import phonenumbers

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

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

# A query that lost more than this share of its characters says too much
# about the household even without the removed parts: it is not sent.
MAX_REDACTED_SHARE: Final = 0.5
MAX_QUERY_CHARS: Final = 300
MIN_NAME_CHARS: Final = 3

_EMAIL: Final = re.compile(
    r"(?<![\w.+-])[\w.+-]{1,64}@(?:[\w-]{1,63}\.)+[a-z]{2,24}\b", re.IGNORECASE
)
_URL_CREDENTIALS: Final = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s/@:]+:[^\s/@]+@\S+")
# Key shapes of well-known services, then long random-looking strings.
_KEY_SHAPES: Final = re.compile(
    r"\b(?:"
    r"sk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|AKIA[0-9A-Z]{16}"
    r"|AIza[0-9A-Za-z_-]{30,}"
    r"|glpat-[A-Za-z0-9_-]{16,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}(?:\.[A-Za-z0-9_-]+)?"
    r"|\d{8,10}:[A-Za-z0-9_-]{30,}"  # Telegram bot tokens
    r")"
)
_LONG_TOKEN: Final = re.compile(r"(?<![\w/+=-])[A-Za-z0-9_+/=-]{20,}(?![\w/+=-])")
_MAC: Final = re.compile(
    r"\b[0-9a-f]{2}(?:([:-])[0-9a-f]{2})(?:\1[0-9a-f]{2}){4}\b"
    r"|\b[0-9a-f]{4}\.[0-9a-f]{4}\.[0-9a-f]{4}\b",
    re.IGNORECASE,
)
_IPV4: Final = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?:/\d{1,2})?(?![\w.]*\d)")
_IPV6: Final = re.compile(
    r"(?<![\w:])(?:[0-9a-f]{0,4}:){2,7}[0-9a-f]{0,4}(?:%\w+)?(?![\w:])", re.IGNORECASE
)
_LOCAL_HOST: Final = re.compile(
    r"\b(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+"
    r"(?:local|lan|home\.arpa|home|internal|intranet|localdomain|corp|"
    r"duckdns\.org|ui\.nabu\.casa|myfritz\.net|dynv6\.net|no-ip\.org|ddns\.net)"
    r"(?::\d{1,5})?\b",
    re.IGNORECASE,
)
# Two numbers with decimals, as a pair (52.5200, 13.4050) or in degrees.
_COORD_PAIR: Final = re.compile(
    r"[-+]?\d{1,2}[.,]\d{2,}\s*°?\s*[NS]?\s*[,;/ ]\s*"
    r"[-+]?\d{1,3}[.,]\d{2,}\s*°?\s*[EWO]?(?![\d])",
    re.IGNORECASE,
)
_COORD_DMS: Final = re.compile(
    r"\d{1,3}\s*°\s*\d{1,2}\s*['′]\s*(?:\d{1,2}(?:[.,]\d+)?\s*(?:\"|″|'')\s*)?[NSEWO]\b"
    r"|\d{1,3}(?:[.,]\d+)?\s*°\s*[NSEWO]\b",
    re.IGNORECASE,
)
_DECIMAL: Final = re.compile(r"(?<![\w.])[-+]?\d{1,3}[.,](\d{2,})(?![\d])")

# Street addresses: a name with a street word and a house number, in the
# orders languages use them.
_EN_SUFFIX: Final = (
    r"(?:street|st|avenue|ave|road|rd|lane|ln|boulevard|blvd|drive|dr|way|court|ct|"
    r"place|pl|terrace|close|crescent|square|sq|parkway|pkwy|highway|hwy|circle|cir|"
    r"trail|row|mews|grove|gardens)"
)
_LATIN_UPPER: Final = "A-ZÀ-ÖØ-ÞĀ-ſ"
_NAME_WORD: Final = rf"[{_LATIN_UPPER}0-9][\w'’.-]*"
_GLUED_SUFFIX: Final = (
    r"(?:straße|strasse|str\.|gasse|weg|allee|platz|ring|damm|ufer|chaussee|steig|"
    r"pfad|graben|markt|gracht|straat|laan|plein|kade|singel|dijk|vej|gade|gatan|"
    r"gata|gate|veien|vägen|väg|katu|tie|utca|ulica|cesta|ulice|náměstí)"
)
_ROMANCE_PREFIX: Final = (
    r"(?:rue|avenue|av\.|boulevard|bd|chemin|impasse|allée|place|quai|cours|"
    r"calle|c/|avenida|avda\.?|paseo|plaza|carrer|via|viale|piazza|corso|vicolo|"
    r"largo|rua|travessa|praça|estrada|strada|ulica|ul\.|al\.|aleja|os\.|pl\.)"
)
_PARTICLES: Final = (
    r"(?:(?:de|del|della|delle|dei|degli|di|da|das|do|dos|du|des|la|le|les|l'|d'|"
    r"van|von|der|den|het|the|of)\s*)*"
)
_HOUSE_NUMBER: Final = r"\d{1,5}\s?[a-zA-Z]?(?:\s?[/-]\s?\d{1,4}[a-zA-Z]?)?"
_CYRILLIC_PREFIX: Final = (
    r"(?:ул|улица|пр|пр-т|просп|проспект|пер|переулок|бул|бульвар|ш|шоссе|наб|"
    r"набережная|пл|площадь|вул|вулиця|бульв|провулок|пр-кт|мкр|микрорайон)"
)
_ADDRESSES: Final = (
    # 12 Main Street, 221B Baker St, 1600 Pennsylvania Avenue NW
    re.compile(
        rf"\b\d{{1,5}}[a-zA-Z]?,?\s+(?:{_NAME_WORD}\s+){{1,4}}?(?i:{_EN_SUFFIX})\b\.?"
        r"(?:\s+(?:NW|NE|SW|SE|N|S|E|W)\b)?"
    ),
    # 12 rue de la Paix, 5 avenue Foch
    re.compile(
        rf"\b\d{{1,5}}(?:\s?(?:bis|ter))?,?\s+(?i:{_ROMANCE_PREFIX})\s+{_PARTICLES}"
        rf"{_NAME_WORD}(?:\s+{_PARTICLES}{_NAME_WORD}){{0,3}}"
    ),
    # Hauptstraße 5, Lindenweg 3a, Kalverstraat 12, Drottninggatan 5
    re.compile(
        rf"\b[\w'’-]{{2,}}(?i:{_GLUED_SUFFIX})\s*,?\s*(?:nr\.?\s*)?{_HOUSE_NUMBER}\b"
    ),
    # Berliner Straße 12, Alter Weg 5, Am Markt 3
    re.compile(
        rf"\b[{_LATIN_UPPER}][\w'’-]+\s+(?:(?i:straße|strasse|str\.|weg|allee|platz|"
        rf"gasse|ring|damm|ufer|markt|laan|vej|gata|gate))\s*,?\s*{_HOUSE_NUMBER}\b"
    ),
    # Calle Mayor 5, Via Roma 10, Rua Augusta, 100, ul. Długa 3, al. Róż 6
    re.compile(
        rf"(?<!\w)(?i:{_ROMANCE_PREFIX})\s*{_PARTICLES}{_NAME_WORD}"
        rf"(?:\s+{_PARTICLES}{_NAME_WORD}){{0,3}}\s*,?\s*(?:(?i:n[º°o.]|nr\.?|no\.?)\s*)?"
        rf"{_HOUSE_NUMBER}\b"
    ),
    # ул. Ленина, 5; улица Пушкина д. 10; вул. Шевченка 3
    re.compile(
        rf"(?<!\w)(?i:{_CYRILLIC_PREFIX})\.?\s*[А-ЯЁЇІЄҐA-Z0-9][\w-]*"
        r"(?:\s+[А-ЯЁЇІЄҐа-яёїієґ\w][\w-]*){0,3}\s*,?\s*(?:(?i:д|дом|буд)\.?\s*)?"
        r"\d{1,4}\s?[а-яa-z]?(?:/\d{1,4})?"
    ),
    # Apartment and unit numbers left next to a removed street.
    re.compile(
        r"\b(?i:apt|apartment|unit|suite|flat|wohnung|kv\.|кв\.?)\s*#?\s*\d{1,4}[a-z]?\b"
    ),
)
# Phone shapes the library may miss without the right region.
_PHONE_FALLBACK: Final = re.compile(
    r"(?<![\w+])(?:\+|00)\d{1,3}[\s./-]?(?:\(\d{1,4}\)[\s./-]?)?\d{2,4}(?:[\s./-]?\d{2,4}){1,4}(?!\d)"
    r"|(?<![\w+])\(?0\d{2,4}\)?[\s./-]?\d{3,4}[\s./-]?\d{2,5}(?!\d)"
    r"|(?<![\w+])\(?\d{3}\)?[\s.-]\d{3}[\s.-]\d{4}(?!\d)"
)
_ENTITY_DOMAINS: Final = (
    "air_quality|alarm_control_panel|assist_satellite|automation|binary_sensor|button|"
    "calendar|camera|climate|conversation|counter|cover|date|datetime|device_tracker|"
    "event|fan|group|humidifier|image|input_boolean|input_button|input_datetime|"
    "input_number|input_select|input_text|lawn_mower|light|lock|media_player|notify|"
    "number|person|remote|scene|schedule|script|select|sensor|siren|stt|sun|switch|"
    "text|time|timer|todo|tts|update|vacuum|valve|wake_word|water_heater|weather|zone"
)
ENTITY_ID_PATTERN: Final = re.compile(rf"\b(?:{_ENTITY_DOMAINS})\.\w+", re.IGNORECASE)

# light.turn_on names a service, not one of the house's entities.
_SERVICE: Final = re.compile(
    r"\w+\.(?:turn_on|turn_off|toggle|reload|lock|unlock|open|press|"
    r"(?:open|close|stop|set|select|alarm|start|play|media|volume)_\w+)",
    re.IGNORECASE,
)

# Names made only of these words identify no household ("Kitchen", "Home",
# "Living Room"); removing them from queries would only spoil searches.
GENERIC_WORDS: Final = frozenset(
    [
        "home",
        "work",
        "school",
        "office",
        "kitchen",
        "living",
        "dining",
        "room",
        "bedroom",
        "bathroom",
        "bath",
        "toilet",
        "hall",
        "hallway",
        "corridor",
        "garage",
        "garden",
        "yard",
        "backyard",
        "front",
        "back",
        "porch",
        "patio",
        "terrace",
        "balcony",
        "basement",
        "cellar",
        "attic",
        "loft",
        "upstairs",
        "downstairs",
        "ground",
        "first",
        "second",
        "third",
        "floor",
        "study",
        "library",
        "guest",
        "kids",
        "kid",
        "children",
        "nursery",
        "laundry",
        "utility",
        "pantry",
        "closet",
        "storage",
        "shed",
        "driveway",
        "entrance",
        "entry",
        "stairs",
        "staircase",
        "lounge",
        "den",
        "family",
        "master",
        "main",
        "lights",
        "light",
        "lamp",
        "lamps",
        "door",
        "doors",
        "window",
        "windows",
        "lock",
        "locks",
        "sensor",
        "sensors",
        "thermostat",
        "heating",
        "heater",
        "cooling",
        "fan",
        "tv",
        "television",
        "speaker",
        "speakers",
        "plug",
        "socket",
        "switch",
        "camera",
        "cameras",
        "alarm",
        "siren",
        "blind",
        "blinds",
        "shade",
        "shades",
        "curtain",
        "curtains",
        "cover",
        "covers",
        "gate",
        "valve",
        "vacuum",
        "robot",
        "fridge",
        "freezer",
        "oven",
        "stove",
        "washer",
        "dryer",
        "dishwasher",
        "kettle",
        "coffee",
        "machine",
        "printer",
        "router",
        "phone",
        "tablet",
        "computer",
        "laptop",
        "desk",
        "bed",
        "ceiling",
        "wall",
        "table",
        "outdoor",
        "indoor",
        "outside",
        "inside",
        "left",
        "right",
        "north",
        "south",
        "east",
        "west",
        "upper",
        "lower",
        "big",
        "small",
        "new",
        "old",
        "the",
        "of",
        "and",
        "de",
        "der",
        "die",
        "das",
        "la",
        "le",
        "el",
        "my",
        "our",
        "sun",
        "moon",
        "weather",
        "forecast",
        "temperature",
        "humidity",
        "power",
        "energy",
        "water",
        "gas",
        "battery",
        "motion",
        "presence",
        "door_sensor",
        "zone",
        "area",
        "all",
        "none",
        "iphone",
        "ipad",
        "galaxy",
        "pixel",
        "echo",
        "nest",
        "hue",
        "sonos",
        "alexa",
        "google",
        "apple",
        "samsung",
        "macbook",
        "homepod",
        "chromecast",
        "roku",
        "kindle",
        "android",
        "watch",
    ]
)
_WORD: Final = re.compile(r"[^\W\d_][\w'’-]*")


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
        """Tell whether enough of the query is left to be worth sending."""
        if not _WORD.search(self.text):
            return False
        if not self.original_chars:
            return False
        return self.removed_chars / self.original_chars <= MAX_REDACTED_SHARE


class _Redactor:
    """Collect spans to remove, then cut them out in one pass."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.spans: list[tuple[int, int, str]] = []

    def taken(self, start: int, end: int) -> bool:
        return any(s < end and start < e for s, e, _ in self.spans)

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
            pieces.append(" ")
            removed += len(self.text[start:end].strip())
            last = end
        pieces.append(self.text[last:])
        text = _tidy("".join(pieces))
        categories = tuple(sorted(counts))
        original = len(re.sub(r"\s+", "", self.text))
        return Sanitized(text, categories, original, removed, counts, found)


def _tidy(text: str) -> str:
    """Collapse what removal left behind: double spaces, dangling separators."""
    text = re.sub(r"\(\s*[,;/]?\s*\)|\[\s*\]|\"\s*\"|'\s+'", " ", text)
    text = re.sub(r"\s+([,.;:!?])", r"\1", text)
    text = re.sub(r"(?:^|(?<=\s))[,.;:/-]+(?=\s|$)", " ", text)
    text = re.sub(r"([,;:])(?:\s*[,;:])+", r"\1", text)
    return re.sub(r"\s+", " ", text).strip(" ,;:-/")


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


def _valid_ip(text: str) -> bool:
    """Tell an address of some machine from loopback, unspecified and non-IPs."""
    try:
        address = ipaddress.ip_interface(text.split("%", 1)[0]).ip
    except ValueError:
        return False
    return not (address.is_loopback or address.is_unspecified)


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


def _name_pattern(names: Iterable[str]) -> re.Pattern[str] | None:
    """One pattern for every identifying name, longest first, whole words only."""
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
    if not wanted:
        return None
    alternatives = "|".join(
        r"\s+".join(re.escape(part) for part in name.split())
        for name in sorted(wanted, key=len, reverse=True)
    )
    return re.compile(rf"(?<![\w])(?:{alternatives})(?:['’]s)?(?![\w])", re.IGNORECASE)


def sanitize(query: str, context: PiiContext) -> Sanitized:
    """Remove personal data from a web query.

    Raises only on a bug; callers then send nothing (fail closed).
    """
    text = query[:MAX_QUERY_CHARS]
    redactor = _Redactor(text)
    redactor.add_all(_URL_CREDENTIALS, SECRET)
    redactor.add_all(_KEY_SHAPES, SECRET)
    redactor.add_all(_LONG_TOKEN, SECRET, lambda m: _is_secret(m.group(0)))
    redactor.add_all(_EMAIL, EMAIL)
    redactor.add_all(_LOCAL_HOST, HOSTNAME)
    redactor.add_all(_MAC, MAC)
    redactor.add_all(_IPV4, IP, lambda m: _valid_ip(m.group(0)))
    redactor.add_all(
        _IPV6,
        IP,
        lambda m: m.group(0).count(":") >= 2 and _valid_ip(m.group(0)),  # noqa: PLR2004
    )
    redactor.add_all(
        ENTITY_ID_PATTERN, ENTITY_ID, lambda m: not _SERVICE.fullmatch(m.group(0))
    )
    redactor.add_all(_COORD_DMS, COORDINATES)
    redactor.add_all(_COORD_PAIR, COORDINATES)
    if context.home is not None:
        redactor.add_all(_DECIMAL, COORDINATES, _home_decimals(context.home))
    for pattern in _ADDRESSES:
        redactor.add_all(pattern, ADDRESS)
    for value in context.values:
        if len(value.strip()) >= MIN_NAME_CHARS:
            redactor.add_all(re.compile(re.escape(value.strip()), re.IGNORECASE), NAME)
    for start, end in _phones(text, context.country):
        if not redactor.taken(start, end):
            redactor.add(start, end, PHONE)
    redactor.add_all(
        _PHONE_FALLBACK,
        PHONE,
        lambda m: (
            sum(c.isdigit() for c in m.group(0)) >= 7  # noqa: PLR2004
            and not redactor.taken(m.start(), m.end())
        ),
    )
    if (names := _name_pattern(context.names)) is not None:
        # Inside an address or email already removed, a name adds nothing.
        redactor.add_all(names, NAME, lambda m: not redactor.taken(m.start(), m.end()))
    return redactor.result()
