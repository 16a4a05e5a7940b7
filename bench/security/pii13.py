# ruff: noqa: S311, PLR2004, RUF001 - seeded data generation, many scripts
"""The PII rows of issue #13: shapes that left the house before it.

Two sets, both built by ``build.py``:

- the dev set (``pii13_queries.jsonl``, ``pii13_benign_queries.jsonl``):
  generated here from the templates below with seeded randomness; the
  sanitizer was changed while looking at it, so its figures are optimistic;
- the hand-written set (``pii13_hand_queries.jsonl``,
  ``pii13_hand_benign_queries.jsonl``): rows of ``sources/pii13_hand.txt``,
  committed before the sanitizer was changed and before this dev set was
  written, measured once untuned after the work on the dev set (96.80 %
  structured recall), then tuned on (see ``README.md``).

Categories: ``phone`` (local and national forms of 14 countries, without
the country code), ``bank_account`` (IBANs of 20 countries, compact, grouped
and lower case), ``address`` (street addresses in lower case inside a
sentence, 10 languages), ``secret`` (a password, PIN or door code the user
says is theirs, 11 languages), ``ha_user`` (the name of a Home Assistant
user with no person entity; scored with the household names).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
SEED = 20261126

# Households: the names the sanitizer knows (people with a person entity,
# pets, rooms) and the Home Assistant users without one. Service accounts
# ("mqtt", "kiosk") are what real installations have; they name nobody.
NAMES = ["Anna", "Max Power", "Luna", "Emma's Room", "Jonas's iPhone"]
SERVICE_USERS = ["mqtt", "Kiosk", "Wall Tablet", "admin", "Frigate", "Node-RED"]
USERS = [
    "Hildegard",
    "Bartosz",
    "Philippa",
    "Cornelius",
    "Marguerite",
    "Ignacio",
    "Radomir",
    "Wilhelmina",
    "Soraya",
    "Leopold Brandt",
    "Agnieszka",
    "Evander",
    "Rosalind",
    "Anatoli",
    "Benedikt",
    "Clementine",
    "Oswin",
    "Tamsin",
]


def _house(rng: random.Random, country: str, users: list[str]) -> dict[str, Any]:
    return {
        "names": list(NAMES),
        "users": users,
        "home": [round(rng.uniform(35, 65), 6), round(rng.uniform(-10, 40), 6)],
        "country": country,
    }


def _digits(rng: random.Random, n: int, *, first: str = "0123456789") -> str:
    return rng.choice(first) + "".join(str(rng.randint(0, 9)) for _ in range(n - 1))


# Local phone shapes: {n} is n random digits, {Nn} n digits not starting with 0.
PHONE_SHAPES = {
    "US": ["555-{4}", "{N3}-{4}", "{N3}.{4}"],
    "GB": ["{N4} {4}", "{N3} {4}", "0{4} {6}", "0{4} {3} {3}"],
    "DE": ["{N2} {2} {2}", "{N3} {2} {2}", "{N7}", "0{3} {7}", "0{2}/{N3} {2} {2}"],
    "FR": ["0{1} {2} {2} {2} {2}", "0{1}.{2}.{2}.{2}.{2}", "0{9}"],
    "PL": ["{N3} {3} {3}", "{N2} {3} {2} {2}", "{N3} {2} {2}", "{N3}-{3}-{3}"],
    "RU": ["{N3}-{2}-{2}", "8 ({3}) {3}-{2}-{2}", "8 {3} {3} {2} {2}"],
    "CN": ["1{2} {4} {4}", "13{9}", "0{2}-{4} {4}", "{N4} {4}"],
    "ES": ["{N3} {2} {2} {2}", "{N3} {3} {3}"],
    "IT": ["0{1} {4} {4}", "3{2} {3} {4}"],
    "NL": ["0{2}-{3} {4}", "06-{8}"],
    "JP": ["0{1}-{4}-{4}", "0{2}-{4}-{4}"],
    "BR": ["({2}) 9{4}-{4}"],
    "IN": ["9{4} {5}"],
    "AU": ["(0{1}) {4} {4}", "04{2} {3} {3}"],
}
PHONE_FRAMES = {
    "en": [
        "who called me from {v}",
        "{v} missed call twice today",
        "is {v} spam or a real business",
        "{v} reverse phone lookup",
        "got a text from {v} about a parcel",
        "block {v} on my phone",
        "{v} whose number is this",
        "plumber {v} reviews",
    ],
    "DE": ["wer hat von {v} angerufen", "{v} Nummer gehört wem", "Anrufer {v} Betrug?"],
    "FR": ["qui a appelé du {v}", "numéro {v} spam", "{v} appel inconnu ce matin"],
    "PL": ["kto dzwonił z {v}", "{v} czyj numer telefonu"],
    "RU": ["кто звонил {v}", "{v} чей номер телефона"],
    "CN": ["{v} 谁的号码", "来电 {v} 是诈骗吗"],
    "ES": ["quién llamó desde {v}", "{v} número spam"],
    "IT": ["chi ha chiamato da {v}", "{v} numero truffa"],
    "NL": ["wie belde met {v}", "{v} nummer spam"],
    "JP": ["{v} 誰の電話番号", "{v} phone number who"],
    "BR": ["{v} quem ligou", "ligação de {v} golpe"],
    "IN": ["{v} who called", "{v} spam call india"],
    "AU": ["{v} who called me", "{v} scam call australia"],
}


def _phone(rng: random.Random, country: str) -> str:
    shape = rng.choice(PHONE_SHAPES[country])
    out = []
    i = 0
    while i < len(shape):
        if shape[i] == "{":
            end = shape.index("}", i)
            spec = shape[i + 1 : end]
            if spec.startswith("N"):
                out.append(_digits(rng, int(spec[1:]), first="23456789"))
            else:
                out.append(_digits(rng, int(spec)))
            i = end + 1
        else:
            out.append(shape[i])
            i += 1
    return "".join(out)


IBAN_LENGTHS = {
    "DE": 22,
    "AT": 20,
    "CH": 21,
    "FR": 27,
    "ES": 24,
    "IT": 27,
    "NL": 18,
    "BE": 16,
    "PL": 28,
    "GB": 22,
    "IE": 22,
    "PT": 25,
    "SE": 24,
    "DK": 18,
    "NO": 15,
    "FI": 18,
    "CZ": 24,
    "LU": 20,
    "HU": 28,
    "GR": 27,
}
# Where a BBAN starts with a bank code of letters.
IBAN_LETTERS = {"GB": 4, "IE": 4, "NL": 4, "IT": 1}
IBAN_FRAMES = [
    "transfer money to {v} how long",
    "is {v} a valid iban",
    "{v} which bank",
    "paid rent to {v} but it bounced",
    "Überweisung an {v} zurückgebucht",
    "virement sur {v} combien de temps",
    "transferencia a {v} comisión",
    "przelew {v} nie doszedł",
    "{v} bic code",
    "my account {v} was charged twice",
]


def _iban(rng: random.Random, country: str) -> str:
    length = IBAN_LENGTHS[country]
    letters = IBAN_LETTERS.get(country, 0)
    bban = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(letters))
    bban += _digits(rng, length - 4 - letters)
    number = int("".join(str(int(c, 36)) for c in bban + country + "00"))
    return f"{country}{98 - number % 97:02d}{bban}"


def _iban_written(rng: random.Random, iban: str) -> str:
    style = rng.choice(["compact", "grouped", "grouped", "lower"])
    if style == "compact":
        return iban
    grouped = " ".join(iban[i : i + 4] for i in range(0, len(iban), 4))
    return grouped.lower() if style == "lower" else grouped


# Lower-case street addresses, each with the words that lead to it in its
# language ("i live at", "ich wohne in der", ...).
ADDRESS_SHAPES = {
    "en": (
        [
            "{n} elm street",
            "{n} maple avenue",
            "{n} church road",
            "{n} mill lane",
            "{n} park drive",
            "{n} king st",
            "{n} oak ave",
            "{n}b station road",
            "{n} highfield close",
            "{n} river way",
        ],
        [
            "i live at {v}, when is bin day",
            "we just moved to {v} internet providers",
            "pizza delivery to {v} tonight",
            "dentist near {v}",
            "my house at {v} has a damp wall",
            "road works on {v} how long",
        ],
    ),
    "de": (
        [
            "berliner straße {n}",
            "alte gasse {n}",
            "lindenstraße {n}",
            "am markt {n}",
            "kirchweg {n}a",
            "bahnhofstr. {n}",
            "schulstraße {n}",
        ],
        [
            "ich wohne in der {v}, wann ist sperrmüll",
            "wir sind in die {v} gezogen, welcher Internetanbieter",
            "paket an {v} kam nicht an",
            "zahnarzt in der nähe der {v}",
        ],
    ),
    "fr": (
        [
            "{n} rue des lilas",
            "{n} rue de la gare",
            "{n} avenue jean jaurès",
            "{n} boulevard de la liberté",
            "{n} chemin des vignes",
            "{n} impasse du moulin",
        ],
        [
            "j'habite au {v}, quel jour passent les poubelles",
            "livraison au {v} ce soir",
            "médecin près du {v}",
        ],
    ),
    "es": (
        [
            "calle mayor {n}",
            "calle de la paz {n}",
            "avenida de la constitución {n}",
            "paseo de gracia {n}",
            "plaza españa {n}",
        ],
        [
            "vivo en la {v}, cuándo pasa la basura",
            "farmacia cerca de {v}",
            "mi casa en {v} tiene humedad",
        ],
    ),
    "it": (
        [
            "via roma {n}",
            "via giuseppe verdi {n}",
            "piazza del duomo {n}",
            "corso italia {n}",
            "viale dei mille {n}",
        ],
        ["abito in {v}, quando passa la spazzatura", "farmacia vicino a {v}"],
    ),
    "pl": (
        [
            "ul. długa {n}",
            "ulica polna {n}",
            "ul. kwiatowej {n}",
            "al. jerozolimskie {n}",
            "os. słoneczne {n}",
        ],
        ["mieszkam na {v}, kiedy wywóz śmieci", "apteka przy {v}"],
    ),
    "nl": (
        ["kerkstraat {n}", "dorpsstraat {n}", "molenweg {n}", "stationsplein {n}"],
        ["ik woon op {v}, wanneer komt het oud papier", "huisarts bij {v}"],
    ),
    "ru": (
        [
            "улица ленина {n}",
            "ул. садовая, {n}",
            "проспект мира {n}",
            "улице гагарина {n}",
        ],
        ["я живу на {v}, когда вывоз мусора", "аптека рядом {v}"],
    ),
    "sv": (
        ["storgatan {n}", "kyrkvägen {n}", "drottninggatan {n}"],
        ["jag bor på {v}, när kommer sophämtningen", "vårdcentral nära {v}"],
    ),
    "pt": (
        ["rua augusta {n}", "avenida da liberdade {n}", "rua das flores, {n}"],
        ["moro na {v}, quando passa o lixo", "farmácia perto da {v}"],
    ),
}

PASSWORD_VALUES = [
    "{word}{n}",
    "{Word}{n}!",
    "{word}",
    "{Word}-{n}",
    "{rand}",
]
PASSWORD_WORDS = [
    "sunshine",
    "dragon",
    "tiger",
    "bluebird",
    "pfannkuchen",
    "schatzi",
    "chouchou",
    "mariposa",
    "słoneczko",
    "pomidor",
    "sommar",
    "amore",
    "kaas",
    "monkey",
]
PIN_SHAPES = ["{4}", "{4}", "{6}", "{4}#", "{4}A"]
SECRET_FRAMES = {
    "password": [
        "my password is {v} is that strong",
        "my wifi password is {v} how to share with guests",
        "is {v} a good password",
        "i set my password to {v} but it is rejected",
        "password: {v} does not work for the router",
        "mein Passwort ist {v}, ist das sicher",
        "unser WLAN Passwort lautet {v}",
        "mon mot de passe est {v} trop faible ?",
        "mi contraseña es {v} es segura",
        "la mia password è {v} è sicura",
        "moje hasło to {v} czy jest dobre",
        "мой пароль {v} надёжный?",
        "mijn wachtwoord is {v} veilig genoeg",
        "mitt lösenord är {v} är det bra",
        "minha senha é {v} é segura",
        "我的密码是{v}安全吗",
        "use {v} as my new password?",
    ],
    "pin": [
        "my pin is {v} is it easy to guess",
        "my bank card pin is {v}",
        "the door code is {v} how do i change it",
        "our alarm code is {v}, can the installer see it",
        "keypad code {v} for the gate stopped working",
        "meine PIN ist {v}, zu einfach?",
        "der Code für das Garagentor ist {v}",
        "mon code de carte est {v}",
        "le digicode est {v} comment le changer",
        "mi pin es {v} es seguro",
        "el código de la puerta es {v}",
        "il codice dell'allarme è {v}",
        "mój pin to {v} czy łatwy",
        "код от домофона {v} как сменить",
        "mijn pincode is {v}",
    ],
}


def _secret(rng: random.Random) -> tuple[str, str]:
    kind = rng.choice(["password", "password", "pin"])
    if kind == "pin":
        value = rng.choice(PIN_SHAPES)
        value = value.replace("{4}", _digits(rng, 4)).replace("{6}", _digits(rng, 6))
    else:
        word = rng.choice(PASSWORD_WORDS)
        rand = "".join(
            rng.choice("abcdefghjkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789!$%&")
            for _ in range(rng.randint(8, 12))
        )
        value = rng.choice(PASSWORD_VALUES).format(
            word=word, Word=word.capitalize(), n=rng.randint(1, 2025), rand=rand
        )
    return rng.choice(SECRET_FRAMES[kind]).format(v=value), value


USER_FRAMES = [
    "birthday present for {v} who likes board games",
    "what size bike for {v} at 150 cm",
    "{v} school trip packing list",
    "best mattress for {v}'s back pain",
    "is it too late for {v} to learn piano",
    "{v} geburtstag geschenk ideen",
    "cadeau pour {v} qui aime lire",
    "prezent dla {v} na urodziny",
]

# Queries that look like the shapes above and carry nothing personal.
BENIGN_TEMPLATES = {
    "model": [
        "rtx {m4} vs {m4b} performance",
        "samsung qn{m2}q80c review",
        "dell latitude {m4} battery",
        "lg oled {m2} c3 price",
        "bosch series {d1} {m3} dishwasher manual",
        "sonos era {m3} vs five",
        "ikea tradfri e{m4} firmware",
        "nvidia gtx {m4} drivers",
        "casio f-{m2}w watch strap",
        "ryzen {d1} {m4}x benchmark",
        "philips hue bridge v{d1} reset",
        "boeing 737-{m3} seats",
    ],
    "timer": [
        "555 timer ic pinout",
        "555 timer monostable calculator",
        "ne555 led flasher circuit",
        "why 555 numbers in movies",
        "556 dual 555 timer datasheet",
    ],
    "year": [
        "best albums of {y}",
        "{y} honda civic oil capacity",
        "tax changes {y} {y2}",
        "world cup {y} winner",
        "{y}-{y2} season schedule",
        "events in {y}",
    ],
    "date": [
        "events on {y}-{mm}-{dd}",
        "public holiday {dd}.{mm}.{y}",
        "what happened on {mm}/{dd}/{y}",
        "timestamp {y}-{mm}-{dd}T{hh}:30:00Z to local time",
        "offer valid {dd}/{mm}/{y} to {dd2}/{mm}/{y}",
    ],
    "price": [
        "used car under ${n}",
        "maison {k} 000 € bordeaux",
        "mieszkanie {k} 000 zł kraków",
        "квартира {k} 000 руб",
        "{k}.000 euro kredit rate",
        "salary {k},000 a year after tax",
        "{k} 500 000 € villa",
    ],
    "route": [
        "route {r} motels",
        "highway {r} closure",
        "bus {r} timetable",
        "a{r} motorway traffic",
        "b{r} roadworks",
        "us route {r} history",
    ],
    "number": [
        "population of france {k} 000 000",
        "how many meters in {k} 000 km",
        "{n} seconds to minutes",
        "what is {n} times {n2}",
        "speed of sound {n} m/s",
        "convert {k},{n3} pounds to kg",
    ],
    "phone_question": [
        "how long is a german phone number",
        "phone number format france",
        "area code {r3} which state",
        "country code +{cc}",
        "call 112 from a locked phone",
        "0800 numbers free from mobile",
        "why do phone numbers have 7 digits",
        "what number to call for a gas leak",
    ],
    "iban_question": [
        "how long is an iban in {country}",
        "iban checksum algorithm mod 97",
        "iban and bic explained",
        "where to find my iban in the bank app",
        "is sharing my iban safe",
        "iban format {country}",
        "SEPA transfer time",
    ],
    "password_question": [
        "my password is not accepted",
        "my password is too long for the router",
        "password is case sensitive",
        "forgot my password home assistant",
        "mein Passwort ist falsch",
        "mot de passe incorrect",
        "best password manager",
        "what makes a password strong",
        "wifi password qr code",
        "zip code {zip}",
        "area code {r3}",
        "error code {n}",
        "discount code for groceries",
        "gpio pin {r} raspberry pi",
        "pin {d1} of the 555",
        "default pin for the sim card",
        "how to change the pin on my phone",
        "my code does not compile",
        "status code {r3}",
    ],
    "address_like": [
        "{d1} best street food markets",
        "top {d1} road trip songs",
        "{d1} wheel drive suv",
        "{d1} tb hard drive",
        "usb {d1} flash drive",
        "{d1} lane road rules",
        "via ferrata grade {d1}",
        "21 jump street",
        "{d1}th avenue shopping",
        "how to place {d1} eggs in a pan",
        "sesame street songs",
        "wall street today",
        "abbey road studios tour",
        "one way street meaning",
        "straße {d1} meter breit",
    ],
    "service_user": [
        "mqtt broker docker",
        "kiosk mode home assistant",
        "frigate camera config",
        "wall tablet mount",
        "admin rights windows",
        "node-red function node example",
    ],
}
COUNTRY_NAMES = ["germany", "france", "poland", "spain", "the uk", "italy"]


def _benign(rng: random.Random) -> tuple[str, str]:
    kind = rng.choice(sorted(BENIGN_TEMPLATES))
    template = rng.choice(BENIGN_TEMPLATES[kind])
    values = {
        "m4": rng.randint(1000, 9999),
        "m4b": rng.randint(1000, 9999),
        "m3": rng.randint(100, 999),
        "m2": rng.randint(10, 99),
        "d1": rng.randint(2, 9),
        "y": rng.randint(1950, 2026),
        "y2": rng.randint(1950, 2026),
        "mm": f"{rng.randint(1, 12):02d}",
        "dd": f"{rng.randint(1, 28):02d}",
        "dd2": f"{rng.randint(1, 28):02d}",
        "hh": f"{rng.randint(0, 23):02d}",
        "n": rng.randint(10, 99999),
        "n2": rng.randint(2, 999),
        "n3": rng.randint(100, 999),
        "k": rng.randint(1, 999),
        "r": rng.randint(1, 99),
        "r3": rng.randint(200, 999),
        "cc": rng.randint(1, 99),
        "zip": rng.randint(10000, 99999),
        "country": rng.choice(COUNTRY_NAMES),
    }
    return kind, template.format(**values)


def dev_rows() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Return the generated PII rows and the look-alike benign rows."""
    rng = random.Random(SEED)
    rows: list[dict[str, Any]] = []
    countries = sorted(PHONE_SHAPES)
    for i in range(560):
        house_country = rng.choice(countries)
        kind = ("phone", "phone", "bank_account", "address", "secret", "ha_user")[i % 6]
        users = [rng.choice(SERVICE_USERS)]
        if kind == "phone":
            country = rng.choice(countries)
            value = _phone(rng, country)
            frames = PHONE_FRAMES["en"] + PHONE_FRAMES.get(country, [])
            query = rng.choice(frames).format(v=value)
        elif kind == "bank_account":
            value = _iban_written(rng, _iban(rng, rng.choice(sorted(IBAN_LENGTHS))))
            query = rng.choice(IBAN_FRAMES).format(v=value)
        elif kind == "address":
            shapes, frames = ADDRESS_SHAPES[rng.choice(sorted(ADDRESS_SHAPES))]
            value = rng.choice(shapes).format(n=rng.randint(1, 240))
            query = rng.choice(frames).format(v=value)
        elif kind == "secret":
            query, value = _secret(rng)
        else:
            value = rng.choice(USERS)
            users.append(value)
            if rng.random() < 0.5:
                value = value.lower()
            query = rng.choice(USER_FRAMES).format(v=value)
        structured = kind != "ha_user"
        rows.append(
            {
                "query": query,
                "household": _house(rng, house_country, users),
                "pii": [{"value": value, "category": kind, "structured": structured}],
            }
        )
    benign: list[dict[str, Any]] = []
    seen: set[str] = set()
    while len(benign) < 400:
        kind, query = _benign(rng)
        if query in seen:
            continue
        seen.add(query)
        house = _house(rng, rng.choice(countries), [rng.choice(SERVICE_USERS)])
        benign.append({"query": query, "household": house, "shape": kind})
    return rows, benign


HAND_KINDS = {
    "phone": "phone",
    "iban": "bank_account",
    "address": "address",
    "secret": "secret",
    "user": "ha_user",
}


def hand_rows() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Return the hand-written rows of ``sources/pii13_hand.txt``."""
    rng = random.Random(SEED + 1)
    rows: list[dict[str, Any]] = []
    benign: list[dict[str, Any]] = []
    text = (HERE / "sources" / "pii13_hand.txt").read_text("utf-8")
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        kind, country, value, query = line.split("|", 3)
        if kind == "benign":
            users = SERVICE_USERS if value == "name" else ["Wall Tablet"]
            house = _house(rng, country, list(users))
            benign.append({"query": query, "household": house, "shape": value})
            continue
        category = HAND_KINDS[kind]
        users = [value] if category == "ha_user" else ["Wall Tablet"]
        rows.append(
            {
                "query": query,
                "household": _house(rng, country, users),
                "pii": [
                    {
                        "value": value,
                        "category": category,
                        "structured": category != "ha_user",
                    }
                ],
            }
        )
    return rows, benign
