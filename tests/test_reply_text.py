"""What of a half-written answer may be shown, and what counts as yes or no."""

from __future__ import annotations

import pytest

from custom_components.ha_personal_assistant.agent import graph
from custom_components.ha_personal_assistant.conversation import parse_answer
from custom_components.ha_personal_assistant.security.links import filter_reply

from .junk_replies import REGISTRY


def partial_text(raw: str) -> str:
    """Cut a draft as a turn with the junk set's tools does."""
    return graph.partial_text(raw, REGISTRY.reply_check)


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        # The word being written may still become a tool name: held back.
        ("Il fait chaud", "Il fait"),
        ("Il fait chaud ", "Il fait chaud"),
        # Words that so far repeat the prompt wait for the next one.
        ("The lights are ", "The lights"),
        ("<think>the user wants", ""),
        ("<think>plan</think>La porte est ouverte ", "La porte est ouverte"),
        ("It is warm <da", "It is warm"),
        ('{"name": "call_service", "arg', ""),
        ("<tool_call>", ""),
        ("[1, 2", ""),
    ],
)
def test_partial_text_hides_reasoning_tags_and_tool_calls(raw: str, shown: str) -> None:
    """Only plain answer text reaches a draft."""
    assert partial_text(raw) == shown


def test_copied_fences_never_reach_the_user() -> None:
    """A fence the model copied from a tool result is removed with its marks."""
    text = "Here: <data-0a1b2c3d4e5f>the result</data-0a1b2c3d4e5f>"
    assert filter_reply(text, []) == "Here: the result"


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("Yes", True),
        ("yes!", True),
        ("  Ja. ", True),
        ("oui", True),
        ("do it", True),
        ("No", False),
        ("Nein!", False),
        ("cancel", False),
        ("yes, and turn on the lights", None),
        ("unlock the back door", None),
        ("", None),
    ],
)
def test_only_a_plain_yes_or_no_decides(text: str, answer: bool | None) -> None:
    """A sentence with more in it is a new request, not an answer."""
    assert parse_answer(text) is answer
