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

from . import pii_leftovers
from .pii_disguise import normalise, spelled_long_numbers
from .pii_names import (
    LETTERS,
    MIN_NAME_CHARS,
    NameMatcher,
    fold,
    name_matcher,
    named_tokens,
)
from .pii_secrets import said_secrets
from .pii_shapes import addresses, birth_dates, cards
from .pii_words import WORDS

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
# A dotted quad named as a version: "firmware 1.0.19.2", "build 4.2.0.17".
_VERSION_LABEL: Final = re.compile(
    r"(?<!\w)(?:firmware|fw|version|versión|versione|versão|versie|wersj[ai]|"
    r"ver\.?|v\.?|build|release|bios|kernel)\s*:?\s*$",
    re.IGNORECASE,
)
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
    r"\d{1,3}\s*°\s*\d{1,2}(?:[.,]\d+)?\s*['′]\s*"
    r"(?:\d{1,2}(?:[.,]\d+)?\s*(?:\"|″|'')\s*)?[NSEWO]\b"
    r"|\d{1,3}(?:[.,]\d+)?\s*°\s*[NSEWO]\b",
    re.IGNORECASE,
)
# The hemisphere first, as GPS devices and geocaching write it:
# "N 44° 29.477' E 11° 20.128'", "N52 31.200 E013 24.297", "N 52.5200 E 13.4050".
_COORD_HEMISPHERE_FIRST: Final = re.compile(
    r"(?<![\w°'′])[NSEWO]\s?\d{1,3}\s*°\s*\d{1,2}(?:[.,]\d+)?\s*['′]"
    r"(?:\s*\d{1,2}(?:[.,]\d+)?\s*(?:\"|″|''))?"
    r"|(?<![\w°'′])[NSEWO]\s?\d{1,3}°?\s+\d{1,2}[.,]\d{3}(?!\d)"
    r"|(?<![\w°'′])[NS]\s?\d{1,2}[.,]\d{2,}\s*°?\s*[,;/]?\s*[EWO]\s?\d{1,3}[.,]\d{2,}°?"
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
    r"chaussée|drève|ruelle|"
    r"calle|c/|avenida|avda\.?|paseo|plaza|carrer|avinguda|passeig|travesía|"
    r"via|viale|piazza|piazzale|lungomare|corso|vicolo|"
    r"largo|rua|travessa|praça|estrada|alameda|rodovia|strada|"
    r"ulica|ul\.|al\.|aleja|alei|aleje|os\.|osiedle|osiedlu|osiedla|pl\.)"
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
        rf"(?:\s+{_PARTICLES}{_NAME_WORD}){{0,3}}(?:\s*,\s*|\s+)"
        r"(?:(?i:n[º°o.]|nr\.?|no\.?)\s*)?"
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
# German streets named by a preposition and a noun, without a street word:
# "Am Sonnenhang 7", "Im Winkel 3", "An der Mühle 5", "Zur Alten Schmiede 2".
_DE_STREET_PREPOSITION: Final = (
    r"(?:am|im|an\s+der|an\s+den|auf\s+der|auf\s+dem|auf\s+den|in\s+der|"
    r"in\s+den|zum|zur|zu\s+den|unter\s+den|hinter\s+der|hinter\s+dem|"
    r"vor\s+dem|bei\s+der|über\s+der)"
    # "Zur Alten Mühle 4", "Am Hohen Rain 2"
    r"(?:\s+(?:alte|neue|große|kleine|obere|untere|hohe|lange|krumme|"
    r"schöne)[nmrs]?)?"
)
# What such a street is named after: a slope, a field, a mill ("Sonnenhang",
# "Mühlfeld", "Kirchwinkel"). A noun ending so is a place, not a time.
_DE_PLACE_NOUN: Final = (
    r"(?P<stem>[a-zäöüß]*?)(?:hang|berg|feld|felder|winkel|grund|bach|hof|höfe|garten|"
    r"gärten|wiese|wiesen|anger|rain|bühl|eck|ecke|tal|höhe|höhen|busch|"
    r"brunnen|mühle|kirche|schule|park|see|wald|holz|acker|äcker|kamp|horst|"
    r"heide|stein|tor|burg|graben|hain|aue|kreuz|linde|linden|eiche|eichen|"
    r"weide|weiden|hügel|bogen|blick|siedlung|hecke|brücke|kanal|deich|hafen|"
    r"moor|ried|loh|halde|schlag|sand|rott|dorf|zeile|hagen|kuhle|breite|bruch|"
    r"born|quelle|grube|steg|wall|wende|schmiede|teich|weiher|rück|kopf|leite)"
)
_DE_NOT_A_PLACE: Final = (
    r"(?:montag|dienstag|mittwoch|donnerstag|freitag|samstag|sonntag|wochenende|"
    r"morgen|abend|mittag|nachmittag|vormittag|anfang|ende|jahr|tag|monat|"
    r"januar|februar|märz|april|mai|juni|juli|august|september|oktober|"
    r"november|dezember|schluss|start|test|vergleich|moment|durchschnitt)"
)
_DE_STREET: Final = re.compile(
    rf"(?<!\w)(?P<prep>{_DE_STREET_PREPOSITION})\s+"
    rf"(?!{_DE_NOT_A_PLACE}\s)(?P<noun>[{_LATIN_UPPER}a-zäöüß][a-zäöüß]+"
    rf"(?:-[{_LATIN_UPPER}a-zäöüß][a-zäöüß]+)?)\s+"
    r"\d{1,4}\s?[a-zA-Z]?(?!\w|[.,]\d|\s*(?:uhr|%|€|°|grad|jahre?n?|tage?n?|"
    r"minuten|stunden|punkte?n?|prozent|mal|euro|km|m|kg|cm)(?!\w))",
    re.IGNORECASE,
)
_DE_PLACE: Final = re.compile(_DE_PLACE_NOUN, re.IGNORECASE)
# US numbered streets: "230 west 79th street", "2210 w 32nd ave".
_ORDINAL_STREET: Final = re.compile(
    r"\b\d{1,5}[a-z]?,?\s+(?:(?:n|s|e|w|ne|nw|se|sw|north|south|east|west)\.?\s+)?"
    r"\d{1,3}(?:st|nd|rd|th)\s+(?:street|st|avenue|ave|road|rd|boulevard|blvd|"
    r"drive|dr|lane|ln|parkway|pkwy|terrace|highway|hwy|trail)\b\.?",
    re.IGNORECASE,
)
# A flat after a street: "8 m. 12", "14, apt 3", "Top 5", "piso 3".
_FLAT_AFTER: Final = re.compile(
    r"\s*,?\s*(?:m\.?|lok\.?|mieszk\.?|apt\.?|apartment|unit|suite|flat|whg\.?|"
    r"wohnung|top|stiege|tür|piso|pta\.?|puerta|esc\.?|int\.?|interno|scala|"
    r"app\.?|appartement|bte|kv\.?|кв\.?|квартира)\s*#?\s*\d{1,4}[a-zA-Z]?(?!\w)",
    re.IGNORECASE,
)
# The same shapes in lower case, inside a sentence ("i live at 12 elm
# street", "ich wohne in der berliner straße 12", "vivo en la calle mayor 5").
# Without capitals a street name is any word, so a name word is never one of
# these, and the address needs what people write before one: a preposition
# or a verb of living (_ADDRESS_CUE), unless its street word is nothing else
# ("rue", "calle", "ulica", "улица").
_NOT_A_STREET_NAME: Final = (
    r"(?:the|a|an|to|of|for|and|or|with|in|on|at|by|from|my|our|your|his|her|"
    r"their|is|are|was|it|this|that|what|when|where|how|why|who|which|best|top|"
    r"most|more|less|ways|way|things|tips|steps|ideas|reasons|places|people|"
    r"times|days|hours|minutes|weeks|months|years|miles|km|inch|inches|tb|gb|mb|"
    r"hard|flash|disk|thumb|usb|ssd|wheel|lane|road|street|avenue|drive|"
    r"der|die|das|den|dem|des|ein|eine|einer|einen|einem|und|oder|im|am|an|auf|"
    r"aus|bei|mit|nach|von|vom|zu|zum|zur|für|ist|sind|wie|was|wann|wo|meter|"
    r"le|la|les|un|une|et|ou|pour|avec|dans|sur|ce|cette|ces|quel|quelle|est|"
    r"au|aux|du|de|el|los|las|y|o|para|con|en|por|es|que|cuando|cuándo|donde|il|"
    r"lo|gli|e|per|su|è|che|quando|dove|i|w|na|z|do|od|po|jest|co|kiedy|gdzie|"
    r"czy|os|em|no|da|é|het|een|en|of|voor|met|op|wanneer|waar|och|på|för|är|"
    r"när|var|и|в|на|с|к|по|это|где|когда|что)"
)
_LOWER_WORD: Final = rf"(?!{_NOT_A_STREET_NAME}(?![\w'’]))[^\W\d_][\w'’.-]*"
_ADDRESS_CUE: Final = re.compile(
    r"(?:^|[^\w'’])(?:at|near|on|in|to|from|for|of|by|off|outside|behind|opposite|"
    r"beside|past|around|along|into|onto|towards?|across|via|is|live|lives|lived|"
    r"living|address|moved|move|moving|deliver|delivered|delivery|ship|shipped|"
    r"send|sent|visit|visiting|stay|staying|house|home|flat|"
    r"im|am|an|der|die|das|dem|den|bei|nahe|nähe|wohne|wohnt|wohnen|adresse|"
    r"nach|zur|zum|auf|von|vom|neben|gegenüber|vor|hinter|ist|"
    r"au|aux|à|a|du|de|des|la|le|près|chez|vers|sur|dans|habite|j'habite|"
    r"habitons|habitent|est|en|del|el|al|cerca|vivo|vive|vivimos|dirección|"
    r"junto|es|alla|di|della|da|vicino|abito|abita|abitiamo|indirizzo|è|na|"
    r"przy|w|we|z|ze|do|od|obok|koło|blisko|mieszkam|mieszka|mieszkamy|adres|"
    r"to|no|em|perto|moro|mora|moramos|endereço|é|op|aan|bij|naar|van|woon|"
    r"woont|wonen|på|i|vid|nära|till|från|bor|adress|är|"
    r"на|в|во|у|по|около|рядом|возле|к|живу|живёт|живет|живем|живём|адрес)"
    r"[\s,:]*$",
    re.IGNORECASE,
)
# What makes each lower-case shape an address by itself, without a cue:
# street words that are nothing else in a sentence ("rue", "calle", "ulica";
# "avenue" and "boulevard" after a house number), a German street name's own
# preposition ("am markt 3"), a Cyrillic street word. The others ("via",
# "place", "al.", "12 ... drive") need a cue in lower case.
_UNAMBIGUOUS_PREFIX: Final = (
    r"(?<!\w)(?:rue|chemin|impasse|allée|quai|drève|ruelle|calle|avenida|paseo|"
    r"carrer|avinguda|passeig|travesía|rua|travessa|praça|estrada|alameda|"
    r"strada|viale|piazza|piazzale|vicolo|ulica|ulicy|ulicę|ul\.|osiedle|osiedlu|"
    r"osiedla|aleja|alei|aleje)\s"
)
_LOWER_EVIDENT: Final = (
    None,
    re.compile(
        rf"{_UNAMBIGUOUS_PREFIX}|\s(?:avenue|av\.|boulevard|bd|avda\.?)\s",
        re.IGNORECASE,
    ),
    re.compile(r"^(?:am|im|an\s+der|auf\s+der)\s", re.IGNORECASE),
    re.compile(_UNAMBIGUOUS_PREFIX, re.IGNORECASE),
    re.compile(r""),
)
_CYRILLIC_STREET: Final = (
    r"(?:ул\.|улиц[аеуы]|пр\.|пр-т|просп\.?|проспект[еау]?|пер\.|переул(?:ок|ке)|"
    r"бул\.|бульвар[еа]?|шоссе|наб\.|набережн(?:ая|ой)|пл\.|площад[ьи]|вул\.|"
    r"вулиц[яі]|провул(?:ок|ку)|мкр\.?|микрорайон[еа]?)"
)
_LOWER_ADDRESSES: Final = (
    # 12 elm street, 196b station road, 2210 w colfax ave
    re.compile(
        r"\b\d{1,5}[a-z]?,?\s+(?:(?:n|s|e|w|ne|nw|se|sw|north|south|east|west)\.?\s+)?"
        rf"(?:(?:{_LOWER_WORD}|\d{{1,3}}(?:st|nd|rd|th))\s+){{1,3}}?{_EN_SUFFIX}\b\.?",
        re.IGNORECASE,
    ),
    # 5 rue des lilas, 18 avenue de la république
    re.compile(
        rf"\b\d{{1,5}}(?:\s?(?:bis|ter))?,?\s+{_ROMANCE_PREFIX}\s+{_PARTICLES}"
        rf"{_LOWER_WORD}(?:\s+{_PARTICLES}{_LOWER_WORD})?",
        re.IGNORECASE,
    ),
    # berliner straße 12, am markt 3
    re.compile(
        rf"(?<!\w)(?:am|im|an\s+der|auf\s+der|{_LOWER_WORD})\s+(?:straße|strasse|"
        rf"str\.|weg|allee|platz|gasse|ring|damm|ufer|markt|laan|vej|gata|gate)"
        rf"\s*,?\s*{_HOUSE_NUMBER}\b",
        re.IGNORECASE,
    ),
    # calle mayor 5, via roma 10, ul. długiej 3, rua das flores, 12
    re.compile(
        rf"(?<!\w){_ROMANCE_PREFIX}\s*(?<=[\s.])(?:ulicy|ulicę)?\s*{_PARTICLES}"
        rf"{_LOWER_WORD}(?:\s+{_PARTICLES}{_LOWER_WORD}){{0,3}}(?:\s*,\s*|\s+)"
        rf"(?:(?:n[º°o.]|nr\.?|no\.?)\s*)?{_HOUSE_NUMBER}\b",
        re.IGNORECASE,
    ),
    # улица ленина 5, на улице гагарина 12, ул. садовая, 5
    re.compile(
        rf"(?<!\w){_CYRILLIC_STREET}\s*(?!{_NOT_A_STREET_NAME}\s)[а-яёїієґ][\w-]*"
        r"(?:\s+[а-яёїієґ\w][\w-]*){0,2}\s*,?\s*(?:(?:д|дом|буд)\.?\s*)?"
        r"\d{1,4}\s?[а-я]?(?:/\d{1,4})?(?!\w)",
        re.IGNORECASE,
    ),
)
# Phone shapes the library may miss without the right region.
_PHONE_FALLBACK: Final = re.compile(
    r"(?<![\w+])(?:\+|00)\d{1,3}[\s./-]?(?:\(\d{1,4}\)[\s./-]?)?\d{2,4}(?:[\s./-]?\d{2,4}){1,4}(?!\d)"
    r"|(?<![\w+])\(?0\d{2,4}\)?[\s./-]?\d{3,4}[\s./-]?\d{2,5}(?!\d)"
    r"|(?<![\w+])\(?\d{3}\)?[\s.-]\d{3}[\s.-]\d{4}(?!\d)"
)
# Digit groups that may be one number written the way people write phone
# numbers in their own country, without the country code: "555-0199",
# "01 42 68 53 17", "8 (812) 234-56-78", "138 0013 8000", "0221 / 987 65 43".
# _local_phone() decides; this only finds the runs. A run never starts or
# ends inside a word, a decimal or a version ("i-95", "3.14", "KB5044284").
_NUMBER_RUN: Final = re.compile(
    r"(?<![\w+])(?<![\w][.,/:-])(?:\+\s?)?\(?\d{1,15}\)?"
    r"(?:(?:[ \t]?[-./][ \t]?|[ \t])\(?\d{1,15}\)?)*(?![\w]|[.,/:-]\d)"
)
# Words near a number that say it is a phone number, in many languages:
# call, caller, number, phone, mobile, text, spam, scam, lookup...
_PHONE_CUE: Final = re.compile(
    r"(?<!\w)(?:call|caller|calling|rang|ring|dial|phone|number|numbers|no\.|nr\.?"
    r"|tel|tél|telephone|mobile|mobil|cell|landline|sms|text|texted|whatsapp|"
    r"voicemail|spam|scam|fraud|lookup|reverse|truecaller|fax|"
    r"anruf\w*|angerufen|anrufer|ruf|rufe|rufen|ruft|rückruf\w*|nummer|rufnummer|telefon\w*|handy|"
    r"festnetz|betrug|appel\w*|appelé|numéro|portable|arnaque|démarchage|"
    r"llam\w+|número|teléfono|móvil|chiam\w+|numero|telefono|cellulare|truffa|"
    r"dzwon\w*|numer\w*|komórk\w*|oszust\w*|połączeni\w*|"
    r"звон\w*|номер\w*|телефон\w*|мобильн\w*|мошенн\w*|"
    r"belde|bellen|gebeld|oplichter\w*|ligou|ligação|ligar|golpe)(?!\w)"
    r"|电话|電話|号码|號碼|手机|手機|来电|座机|番号",
    re.IGNORECASE,
)
_PHONE_CUE_WINDOW: Final = 32  # characters either side of a number
_LABEL_WINDOW: Final = 64  # characters before a list of draws or prefixes
# Numbers that are something else, named just before them.
_NUMBER_LABEL: Final = re.compile(
    r"(?<!\w)(?:isbn(?:-1[03])?|issn|ean|upc|gtin|sku|iso|din|rfc|nfpa|kb|build|"
    r"version|ver\.?|art\.?-?nr\.?|model|models|part|parts|serial|s/n|ports?|"
    r"channels?|sizes?|pages?|chapters?|seats?|rooms?|levels?|lines?|bus|buses|"
    r"trams?|routes?|platforms?|gates?|tracks?|episodes?|seasons?|sections?|§|"
    # Spare parts and articles: "Ersatzteil 00611319", "réf. 0123456".
    r"ersatzteil\w*|teilenummer|artikel(?:nummer)?|bestellnummer|e-nr\.?|"
    r"p/n|mpn|ref\.?|réf\.?|référence|referencia|riferimento|"
    r"catalog(?:ue)?|katalog\w*|barcode|bar\s+code|código\s+de\s+barras|"
    r"code[-\s]barres?|strichcode|kod\s+kreskowy|streepjescode|"
    # Bank codes name a bank or branch, never a person's account: "sort code
    # 40-11-62", "routing number 021000021", "BLZ 37040044".
    r"sort\s+code|routing|aba|bsb|blz|bankleitzahl|bic|swift|transit)"
    r"\s*(?:no\.?|nr\.?|number|#)?\s*:?\s*$",
    re.IGNORECASE,
)
# Draws of a lottery: "Lottozahlen 3 12 19 27 38 45" is no phone number.
_LOTTERY: Final = re.compile(
    r"(?<!\w)(?:lotto\w*|lotter\w*|loter[ií]a\w*|loto|lotek|euromil\w*|"
    r"eurojackpot|powerball|mega\s+millions|superenalotto|primitiva|bonoloto|"
    r"mega-?sena|keno|gewinnzahlen|ziehung\w*|tirage|estrazion\w*|sorteo\w*|"
    r"sorteio\w*|winning\s+numbers|numeri\s+vincenti|numéros\s+gagnants|"
    r"números\s+premiados)(?!\w)",
    re.IGNORECASE,
)
# Words that only say "number": with a lottery, they do not make a phone.
_NUMBER_WORD: Final = re.compile(
    r"(?<!\w)(?:numbers?|no\.|nr\.?|nummer\w*|numéros?|números?|numer\w*|"
    r"numeri|numero|номер\w*|zahlen)(?!\w)",
    re.IGNORECASE,
)
# A list of dialling prefixes: "préfixes 0162 0163", "Vorwahlen 030 040".
_PREFIX_CUE: Final = re.compile(
    r"(?<!\w)(?:pr[ée]fix\w*|prefij\w*|prefiss\w*|prefiks\w*|prefixo\w*|"
    r"vorwahl\w*|indicatif\w*|area\s+codes?|dial(?:l)?ing\s+codes?|"
    r"netnummer\w*|kierunkow\w*)(?!\w)",
    re.IGNORECASE,
)
# The fraction of a decimal number: "6,02214076" is not "02214076".
_DECIMAL_BEFORE: Final = re.compile(r"(?<![\d.,])\d{1,3}[.,]$")
# A unit or currency next to a grouped number makes it an amount.
_UNIT_AFTER: Final = re.compile(
    r"^\s?(?:€|\$|£|¥|₽|₹|元|zł|zl|kr|kč|eur|euro|euros|usd|dollars?|pln|rub|"
    r"руб\w*|yen|chf|gbp|m/s|km/h|km|m|kg|t|mah|people|inhabitants|residents|"
    r"einwohner|habitants|mieszkańców|жителей|views|years|jahre)(?!\w)",
    re.IGNORECASE,
)
_UNIT_BEFORE: Final = re.compile(r"(?:€|\$|£|¥|₽|₹)\s?$")
_MIN_LOCAL_DIGITS: Final = 7  # without a word saying "phone"
_MIN_CUED_DIGITS: Final = 5  # small towns have 5-digit local numbers
_MAX_PHONE_DIGITS: Final = 15  # E.164
# Bank account numbers: IBANs, compact or grouped, of the countries that use
# them; and long numbers written in groups of four (cards, national accounts).
_IBAN_COUNTRIES: Final = WORDS.lists["iban_countries"]
_IBAN: Final = re.compile(
    r"(?<![\w])([a-z]{2})\d{2}(?:[ -]?[a-z0-9]{4}){2,7}(?:[ -]?[a-z0-9]{1,4})?(?!\w)",
    re.IGNORECASE,
)
_MIN_IBAN_DIGITS: Final = 8
_LONG_GROUPED_NUMBER: Final = re.compile(
    r"(?<![\w])\d{2,6}(?:[ -]\d{4}){2,7}(?:[ -]\d{1,4})?(?!\w)"
)
_MIN_ACCOUNT_DIGITS: Final = 13
# A number named as an account: "Kontonummer 1234567890", "numer konta ...".
_ACCOUNT_NUMBER: Final = re.compile(
    r"(?<!\w)(?:account|acct|konto|kontonummer|kontonr\.?|kto\.?|compte|cuenta|"
    r"conto|conta|rachun\w*|numer\w*\s+konta|nr\.?\s+konta|сч[её]т\w*|"
    r"rekening\w*|iban|clabe|cbu|cvu|rib|c/c)"
    r"(?:\s+(?:number|no\.?|nr\.?|nummer|numéro|número|numero|corrente|"
    r"corriente|poupança|ahorros?|courant|bancari[ao]|bancária|interbancaria))?"
    r"\s*[:#=]?\s*(\d[\d -]{3,40}[\dxX])(?!\w)",
    re.IGNORECASE,
)
_MIN_CUED_ACCOUNT_DIGITS: Final = 6
# Shorter with a check digit: "conta corrente 4821-7".
_CHECK_DIGIT: Final = re.compile(r"\d{4,}-[\dxX]")
# A long number in one piece: a card number (Luhn), a Mexican CLABE (its own
# check digit); never one named by a label ("EAN 4006381333931").
_LONG_NUMBER: Final = re.compile(r"(?<![\w.,+-])\d{15,19}(?!\w|[.,]\d)")
_CLABE_DIGITS: Final = 18
_CLABE_WEIGHTS: Final = (3, 7, 1) * 5 + (3, 7)  # over the first 17 digits
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
        """Tell whether a word worth searching for is left.

        Only a query that was all personal details (and the words that
        carried them, "call me on") is refused.
        """
        return bool(_WORD.search(self.text)) and pii_leftovers.searchable(self.text)


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
            pieces.append(f" {pii_leftovers.CUT} ")
            removed += len(self.text[start:end].strip())
            last = end
        pieces.append(self.text[last:])
        # Nothing removed: the query leaves as written ("c'est grave ?",
        # "!secret"), only its blank runs collapsed.
        cleaned = pii_leftovers.clean("".join(pieces)).replace(pii_leftovers.CUT, " ")
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
        or _UNIT_AFTER.match(after) is not None
        or _UNIT_BEFORE.search(before) is not None
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
    before = text[max(0, start - _PHONE_CUE_WINDOW) : start]
    after = text[end : end + _PHONE_CUE_WINDOW]
    if (
        _NUMBER_LABEL.search(before)
        or _DECIMAL_BEFORE.search(text[max(0, start - 4) : start])
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
        and not (_PHONE_CUE.search(before) or _PHONE_CUE.search(after))
    ):
        return True
    # Lottery draws, unless something says "call" ("number" does not).
    wide = text[max(0, start - _LABEL_WINDOW) : start]
    if _LOTTERY.search(wide) and not _PHONE_CUE.search(
        _NUMBER_WORD.sub(" ", before + " " + after)
    ):
        return True
    # A list of dialling prefixes, all of one length: "0162 0163".
    if (
        _PREFIX_CUE.search(wide)
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
        not _MIN_CUED_DIGITS <= len(digits) <= _MAX_PHONE_DIGITS
        or any(len(g) == 1 for g in groups[1:])
        or _other_number(text, match.start(), match.end())
    ):
        return False
    before = text[max(0, match.start() - _PHONE_CUE_WINDOW) : match.start()]
    after = text[match.end() : match.end() + _PHONE_CUE_WINDOW]
    if _PHONE_CUE.search(before) or _PHONE_CUE.search(after):
        return True
    if len(groups) == 1:
        return (digits.startswith("0") and len(digits) >= 9) or bool(  # noqa: PLR2004
            re.fullmatch(r"1[3-9]\d{9}", digits)
        )
    pairs = len(groups) >= 3 and all(len(g) == 2 for g in groups)  # noqa: PLR2004
    return len(digits) >= (6 if pairs else _MIN_LOCAL_DIGITS)


def _luhn(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char) * (2 if index % 2 else 1)
        total += value - 9 if value > 9 else value  # noqa: PLR2004
    return total % 10 == 0


def _clabe(digits: str) -> bool:
    """Tell a Mexican CLABE (18 digits) by its check digit."""
    if len(digits) != _CLABE_DIGITS:
        return False
    total = sum(
        int(d) * w % 10 for d, w in zip(digits[:-1], _CLABE_WEIGHTS, strict=True)
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
    for match in _IBAN.finditer(text):
        compact = re.sub(r"[ -]", "", match.group(0))
        if (
            match.group(1).upper() in _IBAN_COUNTRIES
            and sum(c.isdigit() for c in compact[4:]) >= _MIN_IBAN_DIGITS
        ):
            yield match.start(), match.start() + _iban_length(match.group(0))
    for match in _ACCOUNT_NUMBER.finditer(text):
        number = match.group(1)
        if _CHECK_DIGIT.fullmatch(number) or (
            number[-1].isdigit()
            and sum(c.isdigit() for c in number) >= _MIN_CUED_ACCOUNT_DIGITS
        ):
            yield match.span(1)
    for match in _LONG_NUMBER.finditer(text):
        digits = match.group(0)
        before = text[max(0, match.start() - _PHONE_CUE_WINDOW) : match.start()]
        if not _NUMBER_LABEL.search(before) and (_luhn(digits) or _clabe(digits)):
            yield match.span()
    for match in _LONG_GROUPED_NUMBER.finditer(text):
        digits = re.sub(r"\D", "", match.group(0))
        # Card numbers (Luhn) and account numbers (16 digits and more).
        if len(digits) >= _MIN_ACCOUNT_DIGITS and (_luhn(digits) or len(digits) > 15):  # noqa: PLR2004
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
    evident = _LOWER_EVIDENT[index]
    text = redactor.text

    def accept(match: re.Match[str]) -> bool:
        if redactor.taken(match.start(), match.end()):
            return False
        return (
            (evident is not None and evident.search(match.group(0)) is not None)
            or (index == _PREFIX_FIRST and _evident_prefix(text, match))
            or _ADDRESS_CUE.search(text[max(0, match.start() - 24) : match.start()])
            is not None
        )

    return accept


_PREFIX_FIRST: Final = 3  # the index of "calle mayor 5" in _LOWER_ADDRESSES
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
            if flat := _FLAT_AFTER.match(text, at):
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
    place = _DE_PLACE.fullmatch(noun)
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
    redactor.add_all(_URL_CREDENTIALS, SECRET)
    redactor.add_all(_KEY_SHAPES, SECRET)
    redactor.add_all(_LONG_TOKEN, SECRET, lambda m: _is_secret(m.group(0)))
    for start, end in said_secrets(text):
        redactor.add(start, end, SECRET)
    redactor.add_all(_EMAIL, EMAIL)
    redactor.add_all(_LOCAL_HOST, HOSTNAME)
    redactor.add_all(_MAC, MAC, lambda m: _device_mac(m.group(0)))
    redactor.add_all(_BARE_MAC, MAC, lambda m: _bare_mac(text, m))
    redactor.add_all(
        _IPV4,
        IP,
        lambda m: (
            _valid_ip(m.group(0))
            and not _VERSION_LABEL.search(text[max(0, m.start() - 12) : m.start()])
        ),
    )
    redactor.add_all(
        _IPV6,
        IP,
        lambda m: m.group(0).count(":") >= 2 and _valid_ip(m.group(0)),  # noqa: PLR2004
    )
    redactor.add_all(
        ENTITY_ID_PATTERN, ENTITY_ID, lambda m: not _SERVICE.fullmatch(m.group(0))
    )
    redactor.add_all(_COORD_DMS, COORDINATES)
    redactor.add_all(_COORD_HEMISPHERE_FIRST, COORDINATES)
    redactor.add_all(_COORD_PAIR, COORDINATES)
    if context.home is not None:
        redactor.add_all(_DECIMAL, COORDINATES, _home_decimals(context.home))
    for pattern in _ADDRESSES:
        redactor.add_all(pattern, ADDRESS)
    for index, pattern in enumerate(_LOWER_ADDRESSES):
        redactor.add_all(pattern, ADDRESS, _lower_address(redactor, index))
    redactor.add_all(_DE_STREET, ADDRESS, lambda m: _de_street(text, m))
    redactor.add_all(_ORDINAL_STREET, ADDRESS)
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
        _PHONE_FALLBACK,
        PHONE,
        lambda m: (
            sum(c.isdigit() for c in m.group(0)) >= 7  # noqa: PLR2004
            and not redactor.taken(m.start(), m.end())
            and not _other_number(text, m.start(), m.end())
        ),
    )
    redactor.add_all(
        _NUMBER_RUN,
        PHONE,
        # Grown from a number the library found: "8 (812) 234-56-78".
        lambda m: (
            not redactor.taken(m.start(), m.end(), but=PHONE) and _local_phone(m, text)
        ),
    )
    if (names := name_matcher(tuple(context.names), context.country)) is not None:
        _add_names(redactor, names)
    return redactor
