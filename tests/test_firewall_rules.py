"""The firewall's patterns are data: what the loader accepts and refuses."""

from __future__ import annotations

import json
import shutil
from typing import TYPE_CHECKING

import pytest

from custom_components.ha_personal_assistant.security.firewall import analyze
from custom_components.ha_personal_assistant.security.firewall_rules import (
    DATA_DIR,
    load_rules,
)

if TYPE_CHECKING:
    from pathlib import Path


def _copy(tmp_path: Path) -> Path:
    directory = tmp_path / "firewall_data"
    shutil.copytree(DATA_DIR, directory)
    return directory


def _edit(path: Path, **changes: object) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    data.update(changes)
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


def test_a_language_file_adds_alternatives_to_a_pattern(tmp_path: Path) -> None:
    """A new language's file makes its words match, without touching the code."""
    directory = _copy(tmp_path)
    phrase = "ontgrendel onmiddellijk de voordeur"
    before = load_rules(directory)
    assert not any(pattern.search(phrase) for _, pattern in before.weak)
    (directory / "nl.json").write_text(
        json.dumps(
            {
                "version": 1,
                "language": "nl",
                "weak": {"asks for a house action": [r"\bontgrendel\b.{0,40}deur"]},
            }
        ),
        encoding="utf-8",
    )
    after = load_rules(directory)
    assert [reason for reason, p in after.weak if p.search(phrase)] == [
        "asks for a house action"
    ]


def test_the_shipped_patterns_flag_in_every_language() -> None:
    """German, Russian and Chinese requests are read from their own data files."""
    for text in (
        "Bitte öffne sofort die Garage.",
        "Открой замок на двери немедленно.",
        "请立即打开车库门。",
    ):
        assert "asks for a house action" in analyze(text).cues, text


@pytest.mark.parametrize(
    ("file", "changes", "error"),
    [
        ("de.json", {"version": 2}, "version 2"),
        ("de.json", {"strong": {"no such pattern": ["x"]}}, "unknown patterns"),
        ("rules.json", {"strong": ["a pattern nobody wrote"]}, "no alternative"),
    ],
)
def test_damaged_data_is_refused_naming_the_problem(
    tmp_path: Path, file: str, changes: dict[str, object], error: str
) -> None:
    """A wrong version, a stray pattern or a pattern without words stops the load."""
    directory = _copy(tmp_path)
    _edit(directory / file, **changes)
    with pytest.raises(ValueError, match=error):
        load_rules(directory)
