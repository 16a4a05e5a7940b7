"""The PII sanitizer: personal details leave the query, ordinary words stay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from custom_components.ha_personal_assistant.security.pii import (
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
    return PiiContext(
        country=house["country"], home=tuple(house["home"]), names=tuple(house["names"])
    )


def test_the_evaluation_set_meets_the_thresholds() -> None:
    """Issue #6 on the committed set: recall 100 % / 99 %, over-redaction <= 5 %."""
    queries = _load("pii_queries.jsonl")
    benign = _load("benign_queries.jsonl")
    assert len(queries) >= 1000
    assert len(benign) >= 300
    caught = {True: 0, False: 0}
    total = {True: 0, False: 0}
    for row in queries:
        result = sanitize(row["query"], _context(row["household"]))
        sent = result.text if result.sendable else ""
        for pii in row["pii"]:
            total[pii["structured"]] += 1
            caught[pii["structured"]] += pii["value"].casefold() not in sent.casefold()
    assert caught[True] == total[True]
    assert caught[False] / total[False] >= 0.99
    over = sum(
        sanitize(row["query"], _context(row["household"])).text != row["query"]
        for row in benign
    )
    assert over / len(benign) <= 0.05
