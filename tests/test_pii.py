# ruff: noqa: RUF001 - queries in many scripts
"""The PII sanitizer: personal details leave the query, ordinary words stay."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from custom_components.ha_personal_assistant.security.pii.sanitizer import (
    MAX_QUERY_CHARS,
    PiiContext,
    sanitize,
)
from custom_components.ha_personal_assistant.tools.web import profile_names

HOME = (52.520008, 13.404954)
CONTEXT = PiiContext(
    country="DE",
    home=HOME,
    names=("Anna Schmidt", "Kitchen", "Emma's Room", "Jonas's iPhone", "Bello", "Home"),
)
DATA = Path(__file__).parent.parent / "bench" / "security"


@pytest.mark.parametrize(
    ("query", "value", "category"),
    [
        ("call +49 30 12345678 about the boiler repair", "12345678", "phone"),
        ("who called from 0176 98765432 yesterday evening", "98765432", "phone"),
        ("is (212) 555-0199 a scam caller or not", "555-0199", "phone"),
        ("write anna.schmidt@example.org about the party", "anna.schmidt", "email"),
        ("plumber near Hauptstraße 5 open today", "Hauptstraße 5", "address"),
        (
            "pizza delivery to 12 Main Street tonight please",
            "12 Main Street",
            "address",
        ),
        ("bakery near ul. Długa 3 in the old town", "Długa 3", "address"),
        ("pharmacy near ул. Ленина, 5 open now", "Ленина, 5", "address"),
        ("cafe next to Calle Mayor 5 with terrace", "Calle Mayor 5", "address"),
        ("hotel close to 12 rue de la Paix with parking", "rue de la Paix", "address"),
        ("restaurants around Via Roma 10 for dinner", "Via Roma 10", "address"),
        ("parking near Kalverstraat 12 on saturday", "Kalverstraat 12", "address"),
        ("weather at 52.52, 13.40 for the weekend", "52.52", "coordinates"),
        ("sunset time at 52.5200 this weekend", "52.5200", "coordinates"),
        ("what is at 13.405 longitude and nearby", "13.405", "coordinates"),
        ("router 192.168.1.20 does not answer pings", "192.168.1.20", "ip_address"),
        ("fd00::1a2b:3c4d unreachable from the laptop", "fd00::1a2b", "ip_address"),
        ("vendor of aa:bb:cc:dd:ee:ff network card lookup", "aa:bb:cc", "mac_address"),
        (
            "homeassistant.local not loading in the browser",
            "homeassistant.local",
            "local_host",
        ),
        (
            "certificate error for myhouse.duckdns.org in firefox",
            "duckdns",
            "local_host",
        ),
        ("abc123.ui.nabu.casa is slow from abroad", "abc123", "local_host"),
        ("why is lock.front_door jammed every winter", "lock.front_door", "entity_id"),
        ("is sk-abc123DEF456ghi789JKL012 a valid key format", "sk-abc123", "secret"),
        (
            "bot token 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw leaked what now",
            "AAHdq",
            "secret",
        ),
        ("birthday gift ideas for Anna Schmidt who loves gardening", "Anna", "name"),
        ("dog food that Bello would like best for puppies", "Bello", "name"),
        ("best lamp for emma's room and reading", "emma", "name"),
    ],
)
def test_each_kind_of_pii_is_removed(query: str, value: str, category: str) -> None:
    """The value is gone, the category recorded, the rest of the query kept."""
    result = sanitize(query, CONTEXT)
    assert value.casefold() not in result.text.casefold()
    assert category in result.categories
    assert value not in repr(result)


@pytest.mark.parametrize(
    "query",
    [
        "weather in Berlin tomorrow",
        "iphone 15 pro battery life",
        "top 10 movies 2024",
        "route 66 road trip",
        "python 3.14 release date",
        "convert 350 fahrenheit to celsius",
        "how to place 2 eggs in boiling water",
        "kitchen tap spare parts",
        "home remedies for a cold",
        "ring doorbell 2 setup",
        "what is 15% of 80",
        "what is 127.0.0.1",
        "home assistant light.turn_on example",
    ],
)
def test_ordinary_queries_pass_unchanged(query: str) -> None:
    """Numbers, versions and generic room words are not personal."""
    result = sanitize(query, CONTEXT)
    assert result.text == query
    assert result.categories == ()
    assert result.sendable


def test_a_mostly_personal_query_is_not_sendable() -> None:
    """Little left after removal: not worth sending, and telling by its shape."""
    result = sanitize("+49 30 12345678 anna@example.org", CONTEXT)
    assert not result.sendable
    assert set(result.categories) == {"phone", "email"}
    assert not sanitize("   ", CONTEXT).sendable


def test_long_queries_are_cut_before_checking() -> None:
    """Only the first MAX_QUERY_CHARS characters are considered, or sent."""
    result = sanitize("weather " * 100, PiiContext())
    assert len(result.text) <= MAX_QUERY_CHARS


def test_profile_entries_give_names_and_literal_values() -> None:
    """Capitalized names and structured details in the profile are withheld."""
    names, values = profile_names(
        [
            "My husband is called Maximilian",
            "Lives at Lindenweg 7",
            "Likes the kitchen warm on Monday",
        ]
    )
    assert "Maximilian" in names
    assert "Monday" not in names
    assert "My" not in names
    assert values == ["Lindenweg 7"]


def _load(name: str) -> list[dict[str, Any]]:
    with (DATA / name).open(encoding="utf-8") as file:
        return [json.loads(line) for line in file]


def _context(house: dict[str, Any]) -> PiiContext:
    # Like web_search: Home Assistant users without a person entity count too.
    return PiiContext(
        country=house["country"],
        home=tuple(house["home"]),
        names=(*house["names"], *house.get("users", ())),
    )


def _leaked(value: str, text: str) -> bool:
    """The value, or six of its digits in a row (half an IBAN), left in the text."""
    if value.casefold() in text.casefold():
        return True
    digits = re.sub(r"\D", "", value)
    left = re.sub(r"\D", "", text)
    return len(digits) >= 6 and any(
        digits[i : i + 6] in left for i in range(len(digits) - 5)
    )


@pytest.mark.parametrize(
    ("queries", "benign", "minimum"),
    [
        ("pii_queries.jsonl", "benign_queries.jsonl", 1000),
        ("pii13_queries.jsonl", "pii13_benign_queries.jsonl", 500),
        ("pii13_hand_queries.jsonl", "pii13_hand_benign_queries.jsonl", 100),
    ],
)
def test_the_evaluation_sets_meet_the_thresholds(
    queries: str, benign: str, minimum: int
) -> None:
    """Issues #6 and #13: recall 100 % / 99 %, over-redaction <= 5 %, every set."""
    rows = _load(queries)
    benign_rows = _load(benign)
    assert len(rows) >= minimum
    assert len(benign_rows) >= 100
    caught = {True: 0, False: 0}
    total = {True: 0, False: 0}
    for row in rows:
        result = sanitize(row["query"], _context(row["household"]))
        sent = result.text if result.sendable else ""
        for pii in row["pii"]:
            total[pii["structured"]] += 1
            caught[pii["structured"]] += not _leaked(pii["value"], sent)
    assert caught[True] == total[True]
    assert caught[False] / total[False] >= 0.99
    over = sum(
        sanitize(row["query"], _context(row["household"])).text != row["query"]
        for row in benign_rows
    )
    assert over / len(benign_rows) <= 0.05


# Issue #13: shapes of personal data that used to leave in web queries.
# Each row: query, the value that must go, the category, the house's country
# (often not the number's own country: a number travels).
@pytest.mark.parametrize(
    ("query", "value", "country"),
    [
        ("who keeps calling from 555-0199", "555-0199", "DE"),
        ("is 555.0143 the pharmacy", "555.0143", "FR"),
        ("missed call from 946 0123 manchester", "946 0123", "US"),
        ("is 7946 0321 a london number", "7946 0321", "US"),
        ("01632 960 123 who is this", "01632 960 123", "US"),
        ("Anruf von 23 45 67 heute", "23 45 67", "DE"),
        ("Telefonnummer 2345678 Rückwärtssuche", "2345678", "US"),
        ("wer ruft von 0221 / 987 65 43 an", "987 65 43", "US"),
        ("qui m'appelle du 01 42 68 53 17", "42 68 53 17", "US"),
        ("numéro 06.71.23.45.89 arnaque", "06.71.23.45.89", "DE"),
        ("kto dzwonił z numeru 601 234 567", "601 234 567", "DE"),
        ("22 628 14 45 czyj to numer", "628 14 45", "US"),
        ("кто звонил с номера 123-45-67", "123-45-67", "US"),
        ("8 (812) 234-56-78 чей номер", "234-56-78", "DE"),
        ("138 0013 8000 是谁的电话", "0013 8000", "US"),
        ("13912345678 is this spam", "13912345678", "DE"),
        ("座机 6552 9988 骚扰电话", "6552 9988", "US"),
        ("quién me llama desde el 912 34 56 78", "912 34 56 78", "US"),
        ("chi chiama dal numero 06 6988 3712", "6988 3712", "US"),
        ("06-12345678 oplichter", "12345678", "US"),
        ("090-1234-5678 spam call japan", "1234-5678", "US"),
        ("(11) 91234-5678 quem ligou", "91234-5678", "US"),
        ("98765 43210 truecaller lookup", "98765 43210", "US"),
        ("0412 345 678 who is calling", "345 678", "US"),
        ("plumber 3177 7613 reviews", "3177 7613", "DE"),
    ],
)
def test_local_phone_numbers_of_any_country_are_removed(
    query: str, value: str, country: str
) -> None:
    """Written without a country code, a number is still someone's."""
    result = sanitize(query, PiiContext(country=country))
    assert value not in result.text
    assert "phone" in result.categories


@pytest.mark.parametrize(
    ("query", "value"),
    [
        ("is DE52370502990001234578 a valid iban", "DE52370502990001234578"),
        ("Überweisung auf DE29 1001 0010 0987 6543 21", "1001 0010"),
        ("my iban de52 3705 0299 0001 2345 78 correct?", "3705 0299"),
        ("virement FR76 3000 6000 0112 3456 7890 189", "3456 7890"),
        ("GB28 BARC 2003 5387 6543 21 sort code", "BARC 2003"),
        ("NL44RABO0123456789 check", "RABO0123456789"),
        ("PL83 2490 0004 0000 1456 1234 5678 przelew", "1456 1234"),
        ("NO71 1234 5678 903 hvilken bank", "5678 903"),
        ("numer konta 83249000040000145612345678 bank", "8324900004"),
        ("Kontonummer 1234567890 BLZ 37040044", "1234567890"),
        ("my card 4111 1111 1111 1111 was charged twice", "4111 1111"),
    ],
)
def test_bank_account_numbers_are_removed(query: str, value: str) -> None:
    """IBANs of any country, compact, grouped or lower case; account and cards."""
    result = sanitize(query, CONTEXT)
    assert value.casefold() not in result.text.casefold()
    assert "bank_account" in result.categories


@pytest.mark.parametrize(
    ("query", "value"),
    [
        ("i live at 12 elm street, which garbage day is it", "elm street"),
        ("we moved to 7 church lane, nearest gp", "church lane"),
        ("pizza delivery to 196b station road tonight", "station road"),
        ("ich wohne in der berliner straße 12, wann ist sperrmüll", "berliner"),
        ("apotheke am markt 3 öffnungszeiten", "markt 3"),
        ("j'habite au 5 rue des lilas, quel jour", "lilas"),
        ("plombier 3 boulevard voltaire urgence", "voltaire"),
        ("vivo en la calle mayor 5, farmacia de guardia", "mayor"),
        ("abito in via garibaldi 12, raccolta differenziata", "garibaldi"),
        ("mieszkam na ul. długiej 3, gdzie apteka", "długiej"),
        ("ik woon op kerkstraat 8, grofvuil", "kerkstraat"),
        ("я живу на улице гагарина 5, где аптека", "гагарина"),
        ("jag bor på storgatan 14 när töms soporna", "storgatan"),
        ("moro na rua augusta 100, quando passa o lixo", "augusta"),
    ],
)
def test_street_addresses_in_lower_case_are_removed(query: str, value: str) -> None:
    """No capitals: the words that lead to an address or the street word decide."""
    result = sanitize(query, CONTEXT)
    assert value not in result.text
    assert "address" in result.categories


def test_capitals_still_say_where_an_address_ends() -> None:
    """The lower-case reading never takes the words after a capitalized street."""
    result = sanitize("plumber near 71 rue de la Paix open on sunday", CONTEXT)
    assert result.text == "plumber near open on sunday"


@pytest.mark.parametrize(
    ("query", "value", "kept"),
    [
        ("my password is hunter2 is it safe", "hunter2", "my password is"),
        ("my password is sunflower, is that bad", "sunflower", "is that bad"),
        ("is Tr0ub4dor&3 a strong password", "Tr0ub4dor&3", "a strong password"),
        ("the wifi password is BlueFox-77, share it", "BlueFox-77", "wifi password"),
        ("password: mypass!23 not working", "mypass!23", "not working"),
        ("changed my password to correcthorse, ok?", "correcthorse", "changed"),
        ("mein Passwort ist Sommer2024! sicher genug?", "Sommer2024", "Passwort"),
        ("mein Kennwort lautet katze123, wie ändern", "katze123", "Kennwort"),
        ("mon mot de passe est soleil78 c'est grave", "soleil78", "mot de passe"),
        ("mot de passe wifi : Chaton!2020 partager", "Chaton!2020", "partager"),
        ("mi contraseña es gatito99 es segura", "gatito99", "contraseña"),
        ("mi clave del wifi es clave1234 como cambiarla", "clave1234", "wifi"),
        ("la mia password è pizza2023 va bene", "pizza2023", "password"),
        ("moje hasło to Kotek123 czy bezpieczne", "Kotek123", "hasło"),
        ("мой пароль qwerty123 это надёжно", "qwerty123", "пароль"),
        ("我的密码是 abc12345 安全吗", "abc12345", "密码"),
        ("mijn wachtwoord is Fiets2022 sterk genoeg", "Fiets2022", "wachtwoord"),
        ("my pin is 0420, how do i change it", "0420", "my pin is"),
        ("meine PIN ist 4711, zu einfach?", "4711", "PIN"),
        ("the alarm code is 7391, duress code", "7391", "alarm code"),
        ("garage door code 9910 reset", "9910", "garage door code"),
        ("le code de la porte est 1234A", "1234A", "code de la porte"),
        ("el código de la alarma es 9876", "9876", "código"),
        ("kod do bramy to 2468 jak zmienić", "2468", "kod do bramy"),
        ("код от домофона 0310 как сменить", "0310", "домофона"),
        ("le digicode est 4B71", "4B71", "digicode"),
        ("wifi key ABCD-1234 for guests", "ABCD-1234", "wifi key"),
    ],
)
def test_passwords_pins_and_codes_the_user_says_are_removed(
    query: str, value: str, kept: str
) -> None:
    """The value goes, the words around it stay: the search can still help."""
    result = sanitize(query, CONTEXT)
    assert value not in result.text
    assert kept in result.text
    assert "secret" in result.categories


def test_the_name_of_any_household_user_is_removed() -> None:
    """A Home Assistant user's name is a name the house knows, in any case."""
    context = PiiContext(names=("Gertrud", "mqtt", "Wall Tablet", "Node-RED"))
    assert sanitize("gift for gertrud who knits", context).text == "gift for who knits"
    # Service accounts name nobody: their words stay.
    for query in ("mqtt broker setup", "wall tablet mount", "node-red function"):
        assert sanitize(query, context).text == query


@pytest.mark.parametrize(
    "query",
    [
        "555 timer ic pinout",
        "ne555 vs 555 timer astable",
        "why do movies use 555 phone numbers",
        "route 66 road trip 14 days",
        "i-95 traffic today",
        "rtx 4090 vs 4080 super benchmark",
        "dell xps 13 9340 battery",
        "bosch 800 series dishwasher error e24",
        "boeing 737-800 seat map",
        "world war 2 1939-1945 timeline",
        "tax brackets 2024 2025",
        "s&p 500 2024 return",
        "events on 2024-06-15 in boston",
        "Feiertage 03.10.2025 Brandenburg",
        "what happened on 07/20/1969",
        "iso 8601 2025-01-31T14:30:00Z example",
        "home assistant 2026.11.2 changelog",
        "windows 10 build 19045.5247 issues",
        "pi to 10 digits 3.1415926535",
        "maison à vendre 350 000 € lyon",
        "mieszkanie 1 250 000 zł warszawa",
        "population of germany 84 000 000",
        "speed of light 299 792 458 m/s",
        "lottery numbers 4 8 15 16 23 42",
        "ports 8123 1883 8080 open",
        "wifi channel 36 40 44 48",
        "ISBN 978-0-13-468599-1",
        "IEC 60335-2-40 heat pump",
        "what is an iban number",
        "how many characters is a german iban",
        "IBAN Aufbau Deutschland Prüfziffer",
        "phone number format germany",
        "area code 212 time zone",
        "call 911 or 112 abroad",
        "my password is not working on my router",
        "the password is case sensitive?",
        "mein Passwort ist abgelaufen",
        "mi contraseña es incorrecta",
        "best password manager 2025",
        "password manager is bitwarden any good",
        "wifi password qr code",
        "PIN code 0000 default router",
        "pin 5 on the 555 timer",
        "esp32 gpio pin 18 pwm",
        "zip code 10001 new york",
        "error code 0x80070005",
        "my code is not compiling",
        "5 best street food cities",
        "top 10 road trips in europe",
        "4 wheel drive vs all wheel drive",
        "usb 3 flash drive speed",
        "send photos via whatsapp 2 at a time",
        "i drive 2 hours to work",
        "calle 13 grupo musica",
    ],
)
def test_look_alikes_of_personal_data_pass_unchanged(query: str) -> None:
    """Model numbers, years, dates, amounts and questions without a value stay."""
    result = sanitize(query, CONTEXT)
    assert result.text == query
    assert result.categories == ()


# Held-out set of 2026-11-26: its misses and look-alikes fixed at their
# cause. The examples below are new ones, not the set's rows: they show that
# each rule holds for other phrasings of the same kind.
@pytest.mark.parametrize(
    "query",
    [
        "is 9.9.9.9 faster than 208.67.222.222 for dns",
        "2606:4700:4700::1111 as the ipv6 dns server",
        "netmask 255.255.0.0 for a /16 network",
        "wildcard mask 0.0.0.255 in a cisco acl",
        "239.255.255.250 ssdp discovery blocked by the firewall",
        "ff02::fb mdns group explained",
        "255.255.255.255 udp broadcast not received",
        "::1 or 127.0.0.1 in the nginx listen line",
        "01:00:5e:00:00:fb multicast mac in wireshark",
        "frames to 00:00:00:00:00:00 in a capture",
        "lldp frames to 01:80:c2:00:00:0e",
        "FF-FF-FF-FF-FF-FF as destination",
        "c'est grave ?",
        "use !include_dir_merge_named in packages",
    ],
)
def test_addresses_of_no_machine_pass_unchanged(query: str) -> None:
    """Netmasks, broadcast, multicast, loopback and public resolvers are nobody's."""
    result = sanitize(query, CONTEXT)
    assert result.text == query
    assert result.categories == ()


@pytest.mark.parametrize(
    ("query", "value"),
    [
        ("ping 8.8.8.9 from the lan fails", "8.8.8.9"),
        ("lease for 192.168.178.44 expired", "192.168.178.44"),
        ("::ffff:192.168.1.20 shows up in the log", "192.168.1.20"),
        ("3c:22:fb:12:34:56 not in the dhcp list", "3c:22:fb"),
        ("fe80::1c2b:3dff:fe4a:5b6c link local address", "fe80::1c2b"),
        ("is 1.1.1.7 reachable from here", "1.1.1.7"),
    ],
)
def test_addresses_of_machines_are_still_removed(query: str, value: str) -> None:
    """Only the special addresses stay: a machine's own address still goes."""
    result = sanitize(query, CONTEXT)
    assert value not in result.text


def test_a_mark_that_starts_a_token_stays_after_a_removal() -> None:
    """Tidying after a removal moves a phrase's last mark, never a token's first."""
    result = sanitize("call +49 30 12345678 about !secret in yaml", CONTEXT)
    assert result.text == "call about !secret in yaml"
    result = sanitize("::1 and 10.0.0.7 differ how", CONTEXT)
    assert result.text == "::1 and differ how"


@pytest.mark.parametrize(
    "query",
    [
        "Ersatzteilnummer 00754866 Bosch Pumpe",
        "réf. 0123456789 notice en ligne",
        "ISSN 0036-8075 science impact factor",
        "p/n 0445110183 injector price",
        "e ≈ 2,7182818284 auf 10 Stellen",
        "Lotto 6 aus 49 Ziehung 4 11 23 30 41 49 Quote",
        "powerball 08 19 27 44 61 payout",
        "lottery numbers 07 15 28 33 41 drawn friday",
        "Vorwahlen 0170 0171 0172 welcher Anbieter",
        "indicatifs 0590 0596 0594 quelles îles",
        "routing number 121000358 which bank",
        "BSB 062-000 which branch",
        "BLZ 10070000 welche Bank",
        "sort code 20-00-00 barclays branch",
        "firmware 2.1.4.7 changelog",
        "BIOS 1.2.0.3 update for the nuc",
    ],
)
def test_numbers_named_as_something_else_pass_unchanged(query: str) -> None:
    """Part numbers, decimals, draws, prefixes, bank codes and versions stay."""
    result = sanitize(query, CONTEXT)
    assert result.text == query
    assert result.categories == ()


@pytest.mark.parametrize(
    ("query", "value"),
    [
        ("lotto scam call from 0176 23456789", "23456789"),
        ("which prefix is 0171 2345678 from", "2345678"),
        ("sort code 20-00-00 account 55779911 transfer", "55779911"),
        ("my bank pin is 6150 should i change it", "6150"),
        ("firmware update failed on 192.168.1.40", "192.168.1.40"),
        ("0,5 liter 0171 2345678 who sells", "2345678"),
    ],
)
def test_numbers_near_those_labels_are_still_removed(query: str, value: str) -> None:
    """A label only keeps the number it names; a phone or account still goes."""
    result = sanitize(query, CONTEXT)
    assert value not in result.text


@pytest.mark.parametrize(
    ("query", "value"),
    [
        ("recycling day at 1845 e 5th ave columbus", "5th ave"),
        ("heat out in 118 east 57th street nyc", "57th street"),
        ("meet at 14 w colfax ave tonight", "colfax"),
        ("Lieferung an Im Mühlwinkel 12 kam nicht an", "Mühlwinkel"),
        ("wir wohnen am kirchberg 4, wann kommt der sperrmüll", "kirchberg"),
        ("Wohnung Am Eichenhain 3a mieten Erfahrungen", "Eichenhain"),
        ("colis perdu Chaussée de Louvain 455 Bruxelles", "Louvain"),
        ("via garibaldi 8 torino farmacia di turno", "garibaldi"),
        ("os. słoneczne 14 m. 7 brak wody", "słoneczne"),
        ("ul. Polna 3 m. 18 awaria windy", "18"),
        ("Hauptstraße 5, Top 12 Wien Hausverwaltung", "Top 12"),
        ("paquete para Passeig de Gràcia 43 no llega", "Gràcia"),
    ],
)
def test_more_street_address_shapes_are_removed(query: str, value: str) -> None:
    """Numbered US streets, German preposition streets, more street words.

    Also a street word opening the query, and the flat after the street.
    """
    result = sanitize(query, CONTEXT)
    assert value not in result.text
    assert "address" in result.categories


@pytest.mark.parametrize(
    "query",
    [
        "Im Garten 5 Tomaten pflanzen",
        "Am Montag 5 Uhr Termin beim Arzt",
        "Im Test 3 Modelle im Vergleich",
        "Am Ende 2 Punkte Vorsprung",
        "Auf der Höhe 3 Grad kälter",
        "via ferrata difficulty 4 dolomites",
        "photos via whatsapp 2 at a time",
        "pokój dla 4 os. cena 200 zł",
        "jones et al. nature 2019 citation",
        "chaussée glissante 3 km de bouchons",
    ],
)
def test_look_alikes_of_those_address_shapes_pass_unchanged(query: str) -> None:
    """A preposition and a noun before a count, a via that is no street."""
    result = sanitize(query, CONTEXT)
    assert result.text == query
    assert result.categories == ()


@pytest.mark.parametrize(
    ("query", "value"),
    [
        ("cache bei N 52° 31.200' E 13° 24.297' gesucht", "31.200"),
        ("N52 31.200 E013 24.297 geocache hint", "24.297"),
        ("wetter N 48.1374 E 11.5755 morgen", "11.5755"),
        ("sunrise at 47°22.5'N 8°32.7'E tomorrow", "22.5"),
    ],
)
def test_coordinates_in_degrees_and_minutes_are_removed(query: str, value: str) -> None:
    """Decimal minutes, the hemisphere first, the geocaching form without °."""
    result = sanitize(query, CONTEXT)
    assert value not in result.text
    assert "coordinates" in result.categories


@pytest.mark.parametrize(
    "query",
    [
        "Gefälle von 5° 30' am Hang",
        "Vitamin E 400 IU daily",
        "Class E 12.5 V supply",
    ],
)
def test_angles_and_letters_before_numbers_pass_unchanged(query: str) -> None:
    """An angle without a hemisphere, a letter before a number, stay."""
    result = sanitize(query, CONTEXT)
    assert result.text == query


@pytest.mark.parametrize(
    ("query", "value", "category"),
    [
        ("unbekanntes Gerät 3C22FB1234AB im WLAN", "3C22FB1234AB", "mac_address"),
        (
            "is 5c:cf:7f written 5ccf7f0a1b2c a shelly device",
            "5ccf7f0a1b2c",
            "mac_address",
        ),
        ("B827EB123456 shows up twice", "B827EB123456", "mac_address"),
        ("conta poupança 12345-8 caixa", "12345-8", "bank_account"),
        ("depósito na conta 0012345-6 não caiu", "0012345-6", "bank_account"),
        (
            "mi CLABE es 032180000118359719 para el pago",
            "032180000118359719",
            "bank_account",
        ),
        (
            "transferí a 032180000118359719 y no llega",
            "032180000118359719",
            "bank_account",
        ),
        (
            "CBU 2850590940090418135201 transferencia",
            "2850590940090418135201",
            "bank_account",
        ),
        ("4111111111111111 was charged twice", "4111111111111111", "bank_account"),
    ],
)
def test_bare_macs_and_more_account_numbers_are_removed(
    query: str, value: str, category: str
) -> None:
    """A MAC without separators; accounts named in Portuguese, CLABE, CBU, cards."""
    result = sanitize(query, CONTEXT)
    assert value not in result.text
    assert category in result.categories


@pytest.mark.parametrize(
    "query",
    [
        "git commit 3f9a2c1e4b5d revert",
        "docker container 3f9a2c1e4b5d keeps restarting",
        "3f9a2c1e4b5d what is it",
        "UPC 036000291452 product name",
        "EAN 4006381333931 which product",
        "conta de luz 150,00 reais",
        "pi 3.14159265358979323846 digits",
    ],
)
def test_hex_ids_barcodes_and_decimals_pass_unchanged(query: str) -> None:
    """A lower-case hex id without a network word, labelled barcodes stay."""
    result = sanitize(query, CONTEXT)
    assert result.text == query


@pytest.mark.parametrize(
    ("query", "value", "kept"),
    [
        ("der Code ist 4821, wie ändern", "4821", "der Code ist"),
        ("le code est 7734 pour entrer", "7734", "le code est"),
        ("de code is 5521 voor de deur", "5521", "de code is"),
        ("Handy-PIN 1357 und PUK 24681357 vergessen", "24681357", "PUK"),
        ("code portail 5521 oublié", "5521", "code portail"),
        ("codice cancello 8812 cambiare", "8812", "codice cancello"),
        ("la password del router di casa è Gatto!88", "Gatto!88", "di casa"),
        ("el código de la alarma del local es 4410", "4410", "alarma del local"),
        ("Passwort der Fritzbox ist sonne77", "sonne77", "Passwort der Fritzbox"),
        ("mi nip de la tarjeta es 3321", "3321", "nip de la tarjeta"),
        ("a senha da rede guest Casa2024! não funciona", "Casa2024!", "rede guest"),
        ("hasło do kamery tapo Kot!2023 nie działa", "Kot!2023", "hasło do kamery"),
        ("is mountain42 a safe enough router admin password", "mountain42", "router"),
    ],
)
def test_codes_and_passwords_in_more_phrasings_are_removed(
    query: str, value: str, kept: str
) -> None:
    """A code stated as such, a PUK, links and qualifiers before the value."""
    result = sanitize(query, CONTEXT)
    assert value not in result.text
    assert kept in result.text
    assert "secret" in result.categories


@pytest.mark.parametrize(
    "query",
    [
        "what does puk 2 mean",
        "my code review 2024 checklist",
        "the error code is 0x80070005",
        "the http status code is 404",
        "wifi password for windows 11 how to see",
        "password hashing argon2 vs bcrypt",
        "is python a good language to learn password hashing",
        "wachtwoord vergeten van de ziggo-modem",
        "hasło do routera asus jak zmienić",
        "senha do roteador tp-link padrão",
        "code postal 75008 arrondissement",
        "código postal 28013 madrid",
    ],
)
def test_look_alikes_of_said_secrets_pass_unchanged(query: str) -> None:
    """No value, a public code, or words of the sentence after the link."""
    result = sanitize(query, CONTEXT)
    assert result.text == query
    assert result.categories == ()


@pytest.mark.parametrize(
    ("names", "country", "query", "value"),
    [
        (("Émilie",), "CA", "cours de piano pour emilie samedi", "emilie"),
        (("Inês",), "PT", "presente de anos para a Ines", "Ines"),
        (("Zoé",), "FR", "robe pour ZOE taille 8 ans", "ZOE"),
        (("Łukasz",), "PL", "prezent dla Lukasza na imieniny", "Lukasza"),
        (("Sanne",), "NL", "Sannes fiets gestolen wat nu", "Sannes"),
        (("Jessica",), "US", "jessicas birthday cake ideas", "jessicas"),
        (("Kasia",), "PL", "kino z Kasią w sobotę", "Kasią"),
        (("Tomasz Nowak",), "PL", "tort na urodziny Tomasza", "Tomasza"),
        (("Burek",), "PL", "karma dla Burka po zabiegu", "Burka"),
        (("Babcia Halina",), "PL", "wizyta u babci Haliny w szpitalu", "Haliny"),
        (("Marta",), "PL", "kwiaty dla Marty i życzenia", "Marty"),
        (("Wiśniewski",), "PL", "list do Wiśniewskiego z urzędu", "Wiśniewskiego"),
        (("Наташа",), "RU", "подарок для Наташи на день рождения", "Наташи"),
        (("Jana",), "CZ", "dárek pro Janu k narozeninám", "Janu"),
        (("Lena Fischer",), "DE", "Instagram @lenafischer92 gehackt", "lenafischer"),
        (("Javier Ortega",), "ES", "la wifi Ortega_5G no conecta", "Ortega"),
        (("Tyler",), "US", "TylerNet wifi keeps dropping", "TylerNet"),
        (("Kevin",), "CA", "kevin2009 compte bloqué", "kevin2009"),
    ],
)
def test_household_names_are_found_in_any_spelling(
    names: tuple[str, ...], country: str, query: str, value: str
) -> None:
    """Without accents, with a possessive s, declined, inside a handle or SSID."""
    result = sanitize(query, PiiContext(country=country, names=names))
    assert value not in result.text
    assert "name" in result.categories


@pytest.mark.parametrize(
    ("names", "country", "query"),
    [
        (("Ania", "Marek", "Maja"), "PL", "ani jednego błędu w teście"),
        (("Ania", "Marek", "Maja"), "PL", "jaka marka pralki jest najlepsza"),
        (("Ania", "Marek", "Maja"), "PL", "koty mają pchły co robić"),
        (("Telefon Tomka", "Pokój Zosi"), "PL", "naprawa telefonu po zalaniu"),
        (("Telefon Tomka", "Pokój Zosi"), "PL", "pokój dziecka kolor ścian"),
        (("Babcia Halina",), "PL", "przepis babci na pierogi"),
        (("Abuela Carmen",), "ES", "recetas de la abuela fáciles"),
        (("Móvil de Javier",), "ES", "el móvil no carga"),
        (("Věra",), "CZ", "very good czech beer"),
        (("Kasia",), "PL", "problem przy kasie samoobsługowej"),
        (("Tyler",), "US", "python3 venv_setup script"),
    ],
)
def test_words_that_only_look_like_house_names_stay(
    names: tuple[str, ...], country: str, query: str
) -> None:
    """Declined forms that are everyday words, and room, device or family words."""
    result = sanitize(query, PiiContext(country=country, names=names))
    assert result.text == query


# Issue #28: disguised details, found on a normalised copy and cut from the
# query as written; each shape in more than one language.
@pytest.mark.parametrize(
    ("query", "gone", "kept", "category"),
    [
        (
            "reverse lookup five five five one two three four five six seven",
            "five",
            "reverse lookup",
            "phone",
        ),
        (
            "wem gehört null eins sieben sechs, vier zwei eins acht neun",
            "null",
            "wem gehört",
            "phone",
        ),
        (
            "appelez le zéro six douze trente-quatre cinquante-six",
            "zéro",
            "appelez",
            "phone",
        ),
        (
            "llama al seis cero cero, uno dos tres, cuatro cinco seis",
            "seis",
            "llama",
            "phone",
        ),
        ("who owns 0176 98 76 54 32 really", "98 76", "who owns", "phone"),
        ("reverse lookup 555, 867, 53, 09 please", "867", "reverse lookup", "phone"),
        (
            "is peter.k at posteo dot de a real mailbox",
            "peter.k",
            "real mailbox",
            "email",
        ),
        ("postfach anna [at] gmx [punkt] de voll", "anna", "postfach", "email"),
        (
            "courriel jean arobase free point fr ne marche pas",
            "jean",
            "courriel",
            "email",
        ),
        ("correo luis arroba correo punto es no llega", "luis", "no llega", "email"),
        ("mailbox ann(at)example(dot)org is full", "ann(at)", "mailbox", "email"),
    ],
)
def test_disguised_details_are_removed_from_the_query_as_written(
    query: str, gone: str, kept: str, category: str
) -> None:
    """Spelled digits, split groups and words for @ and . leave; the rest stays."""
    result = sanitize(query, CONTEXT)
    assert gone not in result.text
    assert kept in result.text
    assert category in result.categories
    assert result.sendable


@pytest.mark.parametrize(
    ("query", "street"),
    [
        ("24 hour locksmith near, 221 baker st", "221 baker"),
        ("taxi to 83232 Nicolas Harbor at six", "83232 Nicolas"),
        ("pizza to 17066 heather grove apt. 915 tonight", "heather grove"),
        ("pizza delivery to Castelao 71 tonight", "Castelao 71"),
        ("taxi from Nygårdhagen 2A to the airport", "Nygårdhagen 2A"),
        ("parcel for Pivovarská 1827 not delivered", "Pivovarská 1827"),
        ("pizza delivery to Σιταίνης 31-70 tonight", "Σιταίνης 31"),
        ("Taxi nach wittelsbacherring 12, bitte", "wittelsbacherring 12"),
        ("cerrajero cerca de cuesta remigio falcó 1 apt. 86", "remigio"),
    ],
)
def test_street_addresses_in_every_convention_are_removed(
    query: str, street: str
) -> None:
    """A house number next to a street name, before or after it, any case or script."""
    result = sanitize(query, CONTEXT)
    assert street.casefold() not in result.text.casefold()
    assert "address" in result.categories


@pytest.mark.parametrize(
    "query",
    [
        "how long to boil 7 eggs",
        "3 wheel drive suv",
        "upgrade from Windows 10 to 11",
        "flights to Paris 2025",
        "how to play level 12 of candy crush",
        "top ten laptops of 2025",
        "one two three four",
        "meet at noon near the station",
        "born in the usa lyrics",
    ],
)
def test_numbers_next_to_words_that_are_no_address_pass_unchanged(query: str) -> None:
    """Counts, versions, years and lists are not house numbers or phones."""
    result = sanitize(query, CONTEXT)
    assert result.text == query
    assert result.categories == ()


@pytest.mark.parametrize(
    ("query", "number"),
    [
        ("my maestro 589959504335 was declined", "589959504335"),
        ("refund to card 4782431565190 how many days", "4782431565190"),
        ("diners 36737035298574 statement", "36737035298574"),
        ("Karte 4015 9351 2962 6018 gesperrt", "4015 9351"),
        ("transfer to GB34.QQHU.1170.7910.1411.90 take", "1170"),
    ],
)
def test_cards_of_12_to_19_digits_and_split_ibans_are_removed(
    query: str, number: str
) -> None:
    """A Luhn-valid card of any length, an IBAN split by dots, go."""
    result = sanitize(query, CONTEXT)
    assert number not in result.text
    assert "bank_account" in result.categories


@pytest.mark.parametrize(
    ("query", "kept"),
    [
        ("horoscope for someone born 12 March 1985", "horoscope for someone born"),
        ("pension age if I was born on March 12, 1985", "pension age"),
        ("Rentenalter wenn ich geboren bin am 24. Juni 1960", "Rentenalter"),
        ("horoscope pour une personne née le 12/11/1970", "horoscope"),
        ("horóscopo para alguien nacido el 3 de mayo de 1990", "horóscopo"),
        ("born twenty-first of April nineteen eighty-five, what sign", "what sign"),
    ],
)
def test_dates_of_birth_are_removed(query: str, kept: str) -> None:
    """The date after a word for being born goes, in digits, names or words."""
    result = sanitize(query, CONTEXT)
    assert not re.search(r"19\d\d|eighty|1970|1960|1990", result.text)
    assert kept in result.text
    assert "birth_date" in result.categories


def test_only_a_query_with_nothing_searchable_left_is_refused() -> None:
    """Clauses that only carried a detail go; the search verb too; the rest is sent."""
    result = sanitize(
        "search the web for plumbers near me, call me on +1 555 123 4567 or mail "
        "ann.smith@example.com, I live at 12 Elm Street",
        CONTEXT,
    )
    assert result.text == "plumbers near me"
    assert result.sendable
    long_iban = sanitize(
        "how long does a transfer to BE68 5390 0754 7034 take", CONTEXT
    )
    assert long_iban.sendable
    assert long_iban.text == "how long does a transfer to take"
    assert not sanitize("call me on +1 555 123 4567", CONTEXT).sendable
    # Nothing removed: "search the web for" stays as written.
    assert sanitize("search the web for plumbers", CONTEXT).text == (
        "search the web for plumbers"
    )


def test_every_shipped_language_has_a_versioned_word_file() -> None:
    """One data file per language of translations/, each with its number words."""
    package = Path(__file__).parent.parent / "custom_components/ha_personal_assistant"
    for translation in (package / "translations").glob("*.json"):
        language = translation.stem.split("-")[0]
        words = json.loads(
            (package / "security/pii/data" / f"{language}.json").read_text(
                encoding="utf-8"
            )
        )
        assert words["version"] == 1
        assert set(range(10)) <= set(words["numbers"].values()), language


@pytest.mark.parametrize(
    "query",
    [
        "chi chiama dal tre tre nove, uno due tre, quattro cinque sei sette",
        "wie belt er van nul zes een twee drie vier vijf zes zeven",
        "kto dzwoni z numeru sześć zero jeden dwa trzy cztery pięć sześć",
        "quem liga do nove um dois três quatro cinco seis sete oito",
        "кто звонит с номера восемь девять один два три четыре пять шесть семь",
        "хто дзвонить з номера нуль шість сім один два три чотири п'ять",
        "谁打电话 一三八 一二三四 五六七八",
    ],
)
def test_spelled_numbers_of_every_shipped_language_are_removed(query: str) -> None:
    """A phone number said digit by digit leaves in none of the languages."""
    result = sanitize(query, CONTEXT)
    assert "phone" in result.categories, query
    assert result.sendable
