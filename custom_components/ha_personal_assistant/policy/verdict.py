"""The policy's answers: a Decision, the Verdict and the concrete calls it allows.

Also the refusal the resolver raises while judging (its message says why, in
words the model can use), the bounds that make it refuse, and the record of
what one judgement found.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final, NoReturn

if TYPE_CHECKING:
    from collections.abc import Mapping

# Bounds that keep a hostile call from making the resolver do unbounded work.
MAX_EXPANSION_DEPTH: Final = 5
MAX_TARGETS: Final = 200
MAX_DATA_ITEMS: Final = 500


class Decision(StrEnum):
    """What the policy lets a service call do."""

    ALLOW = "allow"
    CONFIRM = "confirm"
    BLOCK = "block"


@dataclass(frozen=True, slots=True)
class ResolvedCall:
    """One concrete service call on explicit entity ids: what really runs."""

    domain: str
    service: str
    entity_ids: tuple[str, ...]
    # Service data without any target keys (entity_id, area_id, ...).
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Verdict:
    """The policy's answer for one service call."""

    decision: Decision
    reason: str
    # Every entity the call would really change, after expansion.
    targets: tuple[str, ...]
    # What to execute when allowed or confirmed; empty when blocked.
    calls: tuple[ResolvedCall, ...] = ()
    # What outside text was in the prompt when the call was made, in the
    # integration's words (ToolContext.taint_sources); empty when none was.
    taint_sources: tuple[str, ...] = ()
    # True when only the taint rule asks: the policy alone would have allowed it.
    because_of_taint: bool = False


class RefusedError(Exception):
    """The call is blocked; the message says why, in words the model can use."""


def refuse(reason: str) -> NoReturn:
    """Block the call being judged, for ``reason``."""
    raise RefusedError(reason)


@dataclass(slots=True)
class Findings:
    """What judging one call found: calls to run, their targets, reasons to ask."""

    calls: list[ResolvedCall] = field(default_factory=list)
    # Dicts keep the order things were found in, without repeats.
    targets: dict[str, None] = field(default_factory=dict)
    reasons: dict[str, None] = field(default_factory=dict)

    def confirm(self, reason: str) -> None:
        """Record a reason the call must wait for a person."""
        self.reasons[reason] = None


def domain_of(entity_id: str) -> str:
    """Return the domain part of an entity id."""
    return entity_id.partition(".")[0]
