"""The domain words of every language point at their entities (agent/domain_words)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from homeassistant.core import State

from custom_components.ha_personal_assistant.agent.entity_index import (
    DOMAIN_WORDS_VERSION,
    load_domain_words,
    rank_entities,
)

if TYPE_CHECKING:
    from pathlib import Path

    from homeassistant.core import HomeAssistant

# Neither the name nor the id says what the entity is: only the domain words do.
LIGHT = State("light.x17", "on", {"friendly_name": "X17"})
SWITCH = State("switch.q42", "off", {"friendly_name": "Q42"})


@pytest.mark.parametrize(
    "message",
    [
        "Is the lamp on?",
        "Ist die Lampe an?",
        "Включи свет",
        "Włącz światło",
        "开灯",
    ],
)
async def test_a_word_for_light_in_each_language_ranks_the_light_first(
    hass: HomeAssistant, message: str
) -> None:
    """English, German, Russian, Polish and Chinese words for light all count."""
    lines = rank_entities(hass, message, states=[SWITCH, LIGHT])
    assert [(line.entity_id, line.score > 0) for line in lines] == [
        ("light.x17", True),
        ("switch.q42", False),
    ]


def test_a_domain_words_file_of_another_version_is_refused(tmp_path: Path) -> None:
    """A file written for another format is an error, not words read wrongly."""
    (tmp_path / "en.json").write_text(
        json.dumps({"version": DOMAIN_WORDS_VERSION + 1, "domains": {}}),
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match=r"en\.json: version"):
        load_domain_words(tmp_path)


def test_words_of_every_file_are_merged_per_domain(tmp_path: Path) -> None:
    """Two languages' words for one domain are one set, case-folded."""
    for language, words in (("en", ["Lamp"]), ("de", ["Lampe"])):
        (tmp_path / f"{language}.json").write_text(
            json.dumps(
                {
                    "version": DOMAIN_WORDS_VERSION,
                    "language": language,
                    "domains": {"light": words},
                }
            ),
            encoding="utf-8",
        )
    assert load_domain_words(tmp_path) == {"light": frozenset({"lamp", "lampe"})}
