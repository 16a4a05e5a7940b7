"""The text HA shows from strings.json, where the frontend shows it as written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

INTEGRATION = Path(__file__).parents[1] / "custom_components/ha_personal_assistant"
STRINGS = json.loads((INTEGRATION / "strings.json").read_text(encoding="utf-8"))
# The chat texts (texts/<language>.json): Telegram shows them as written too.
CHAT_TEXTS = json.loads((INTEGRATION / "texts/en.json").read_text(encoding="utf-8"))


def _plain_text() -> list[tuple[str, str]]:
    """Return (path, text) of every string HA's frontend shows without markdown.

    Form errors and abort reasons are shown as plain text (an alert in the
    dialog), and so are exception messages (a toast or the log) and the chat
    texts (sent without a parse mode). Step and issue descriptions are
    rendered as markdown and are not listed.
    """
    found: list[tuple[str, str]] = []
    for flow in ("config", "options"):
        for kind in ("error", "abort"):
            for key, text in STRINGS.get(flow, {}).get(kind, {}).items():
                found.append((f"{flow}.{kind}.{key}", text))
    for key, value in STRINGS["exceptions"].items():
        found.append((f"exceptions.{key}.message", value["message"]))
    for key, text in CHAT_TEXTS.items():
        found.append((f"texts.{key}", text))
    return found


def _all_text(node: Any, path: str = "") -> list[tuple[str, str]]:
    if isinstance(node, dict):
        return [
            item
            for key, value in node.items()
            for item in _all_text(value, f"{path}.{key}" if path else key)
        ]
    return [(path, node)] if isinstance(node, str) else []


def test_the_plain_text_strings_are_listed() -> None:
    """The scan below covers errors, aborts, exceptions and the chat texts."""
    paths = {path for path, _text in _plain_text()}
    assert "config.error.model_no_tools" in paths
    assert "config.abort.already_configured" in paths
    assert "options.error.invalid_service" in paths
    assert "exceptions.not_loaded.message" in paths
    assert "texts.model_no_tools" in paths


@pytest.mark.parametrize(
    ("path", "text"), _plain_text(), ids=[path for path, _text in _plain_text()]
)
def test_no_markdown_where_it_shows_literally(path: str, text: str) -> None:
    """Backticks, asterisks and links would show as typed in a form error."""
    for mark in ("`", "**", "]("):
        assert mark not in text, f"{path} contains {mark!r}: {text}"


def test_no_list_field_asks_for_one_entry_per_line() -> None:
    """A list field shows chips or one box per entry, never lines of text."""
    offending = [
        path for path, text in _all_text(STRINGS) if "per line" in text.casefold()
    ]
    assert offending == []


def test_english_translation_is_strings_json() -> None:
    """translations/en.json is what HA loads: it must be strings.json verbatim."""
    english = json.loads(
        (INTEGRATION / "translations/en.json").read_text(encoding="utf-8")
    )
    assert english == STRINGS


def test_the_device_has_a_translated_name() -> None:
    """The service device's name comes from strings.json, not from the entry."""
    assert STRINGS["device"]["assistant"]["name"] == "Personal Assistant"
