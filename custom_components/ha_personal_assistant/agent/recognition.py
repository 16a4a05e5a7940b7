"""What the fast path recognized: HA's strict match, or a gazetteer reading it takes.

HA's default agent reads a sentence in two stages: hassil's templates
(strict, exposed entities only), then, for what hassil cannot read,
gazetteer-matcher (other wordings, near-miss names, follow-ups such as "turn
it off"; English only in HA 2026.10). The fast path takes the first stage's
match. Of the second it takes a command only when the reading is as sure as
a strict match: every word of the action and every name matched exactly
(nothing fuzzy), no word the matcher could not place but filler, no pronoun
resolved from an earlier turn, no constraint broken, not ambiguous, each
part with its own answer. A question (an intent that only reads exposed
entities) may also have a near-miss name or a word the matcher skipped, as
HA's own agent answers it: reading an exposed entity is what the policy
always allows, and the answer names what it read. Anything else is the
model's, which also has the conversation's history.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from homeassistant.components.conversation.gazetteer import GazetteerFallback

from ..const import LOGGER
from .intents import READ_ONLY_INTENTS

if TYPE_CHECKING:
    # gazetteer-matcher (HA's dependency) ships no type information.
    from gazetteer_matcher import (  # type: ignore[import-untyped]
        FrameCandidate,
        Interpretation,
    )
    from hassil.recognize import RecognizeResult
    from homeassistant.components.conversation.default_agent import DefaultAgent


@dataclass(frozen=True, slots=True)
class Recognized:
    """One intent to handle: its slots, and how HA would answer it."""

    name: str
    # {slot: {"value": ..., "text": ...}}, as HA's intent handlers take them.
    slots: dict[str, dict[str, Any]]
    response_key: str | None
    # The slot texts HA's response templates read.
    speech_slots: dict[str, Any] = field(default_factory=dict)


def from_strict(result: RecognizeResult) -> Recognized:
    """Return hassil's strict match as one intent to handle."""
    return Recognized(
        name=result.intent.name,
        slots={
            entity.name: {"value": entity.value, "text": entity.text or entity.value}
            for entity in result.entities_list
        },
        response_key=result.response,
        speech_slots={
            name: value.text or value.value for name, value in result.entities.items()
        },
    )


def why_unsure(interpretation: Interpretation) -> str | None:
    """Return why the fast path leaves a gazetteer reading to the model, or None."""
    if not interpretation.accepted or not interpretation.frames:
        return interpretation.rejection_code or "not accepted"
    if interpretation.ambiguous:
        return "ambiguous"
    for frame in interpretation.frames:
        if reason := _why_frame_unsure(frame):
            return f"{frame.intent}: {reason}"
    return None


def _why_frame_unsure(frame: FrameCandidate) -> str | None:
    question = frame.intent in READ_ONLY_INTENTS
    if frame.fuzzy_count and not question:
        return "fuzzy action or name"
    if frame.unexplained_important_tokens and not question:
        return "words it could not place"
    if frame.anaphor_target is not None:
        return "a pronoun from an earlier turn"
    if frame.violations:
        return "broken constraint"
    if frame.response_key is None:
        return "no single response"
    return None


async def async_gazetteer(
    agent: DefaultAgent, text: str, language: str
) -> list[Recognized] | None:
    """Return the gazetteer's reading of ``text`` if it is sure, else None.

    The default agent's own matcher, so it follows the home's registries and
    exposure as HA's answers do. No earlier targets are handed to it: a
    follow-up pronoun is read by the model, with the history.
    """
    fallback = getattr(agent, "_gazetteer", None)
    if not isinstance(fallback, GazetteerFallback) or not fallback.supports(language):
        return None
    try:
        # A conversation id of its own: nothing is remembered under it.
        matcher, interpretation = await fallback.async_interpret(
            text, f"fast-path-{uuid.uuid4().hex}", None
        )
    except Exception:  # noqa: BLE001 - the model answers instead
        LOGGER.debug("The gazetteer failed on a message", exc_info=True)
        return None
    if reason := why_unsure(interpretation):
        LOGGER.debug("Fast path: gazetteer reading not taken: %s", reason)
        return None
    return [
        Recognized(
            name=frame.intent,
            slots={
                slot: {"value": value, "text": matcher.display_name(slot, value)}
                for slot, value in frame.slots.items()
            },
            response_key=frame.response_key,
            speech_slots={
                slot: matcher.display_name(slot, value)
                for slot, value in frame.slots.items()
            },
        )
        for frame in interpretation.frames
    ]
