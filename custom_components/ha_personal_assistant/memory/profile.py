"""The profile: what each person told the assistant or it learned, and when it shows."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ..const import LEARNED_MAX_CONFIDENCE, MAX_FACT_CHARS, PROFILE_CONFIDENCE_FLOOR
from ..security.firewall import check_text
from ..store import profile as store
from ..store.profile import (
    Category,
    NewFact,
    ProfileEntry,
    SaveResult,
    Sensitivity,
    Source,
)
from .text import closeness, near_identical, tokens

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Sequence

    from ..i18n import Texts
    from ..models import MemorySource
    from ..store.database import Database

# A query names an entry when half its words are in it (see closeness):
# "bedroom temperature" names "Likes the bedroom at 19 degrees".
FORGET_THRESHOLD: Final = 0.5
# Entries almost as close as the best one go with it ("/forget bedroom").
FORGET_MARGIN: Final = 0.15
# Told preferences this sure are worth a line in every prompt.
ALWAYS_RELEVANT_CONFIDENCE: Final = 0.9
# How long a forgotten fact may not be learned back from older turns.
TOMBSTONE_SECONDS: Final = 86400.0
TOMBSTONE_CLOSENESS: Final = 0.8

_SECRET: Final = re.compile(
    r"\b(?:passwords?|passcodes?|passphrases?|pins?|pin\s+codes?|"
    r"(?:alarm|door|gate|access|security)\s+codes?|api\s+keys?|tokens?|"
    r"credit\s+cards?|iban|social\s+security)\b"
    r"|\b\d{4}[ -]?\d{4}[ -]?\d{4}\b",
    re.IGNORECASE,
)
_SENSITIVE: Final = re.compile(
    r"\b(?:health|medic\w*|diagnos\w*|illness\w*|disease\w*|allerg\w*|"
    r"pregnan\w*|therap\w*|diabet\w*|depress\w*|anxiety|disabilit\w*|"
    r"religio\w*|faith|pray\w*|politic\w*|sexual\w*|salary|income|debts?)\b",
    re.IGNORECASE,
)
_PREFERENCE: Final = re.compile(
    r"\b(?:like|likes|liked|love|loves|prefer\w*|hate\w*|dislike\w*|want\w*|"
    r"favou?rite|enjoy\w*|rather)\b",
    re.IGNORECASE,
)
_HABIT: Final = re.compile(
    r"\b(?:every|usually|always|often|daily|weekdays?|weekends?|each|mornings?|"
    r"evenings?|nights?)\b",
    re.IGNORECASE,
)


class MemoryRefusedError(Exception):
    """A fact may not be remembered; the message says why, for the model."""


@dataclass(frozen=True, slots=True)
class LearnedFact:
    """A durable preference the learner found in a conversation."""

    category: Category
    content: str
    confidence: float


def guess_category(fact: str) -> Category:
    """Return the likely category of a told fact, from its words."""
    if _PREFERENCE.search(fact):
        return Category.PREFERENCE
    if _HABIT.search(fact):
        return Category.HABIT
    return Category.FACT


def parse_category(value: str | None, fact: str) -> Category:
    """Return the category the model named, or a guess when it named none it may."""
    folded = (value or "").strip().casefold().rstrip("s")
    for category in Category:
        if folded == category.value:
            return category
    return guess_category(fact)


def sensitivity_of(fact: str) -> Sensitivity:
    """Return whether a fact touches health, beliefs or money."""
    return Sensitivity.SENSITIVE if _SENSITIVE.search(fact) else Sensitivity.NORMAL


def vet_fact(fact: str) -> str:
    """Return the fact cleaned for storage, or raise MemoryRefusedError."""
    # A fact about the user holds no instruction at all: the patterns alone
    # are enough to refuse it.
    result = check_text(fact, strict=True)
    content = " ".join(result.clean_text.split())
    if not content:
        msg = "the fact is empty; say what to remember in one short sentence"
        raise MemoryRefusedError(msg)
    if len(content) > MAX_FACT_CHARS:
        msg = (
            f"the fact is longer than {MAX_FACT_CHARS} characters; "
            "remember one short sentence"
        )
        raise MemoryRefusedError(msg)
    if result.flagged:
        msg = (
            "this reads like an instruction to the assistant, not something "
            f"about the user ({', '.join(result.reasons)}); nothing was remembered"
        )
        raise MemoryRefusedError(msg)
    if _SECRET.search(content):
        msg = (
            "passwords, PIN codes, door or alarm codes and card numbers are "
            "never remembered"
        )
        raise MemoryRefusedError(msg)
    return content


def line_of(entry: ProfileEntry) -> str:
    """Return how an entry reads in the prompt and in /memory."""
    if entry.source == Source.TOLD:
        return entry.content
    return f"{entry.content} (inferred)"


class ProfileMemory:
    """Each person's profile, kept in the assistant database.

    ``person`` is always a profile key ("ha:<user id>" or "telegram:<id>");
    every query is limited to it, so no person's entries reach another.
    """

    def __init__(self, database: Database) -> None:
        """Keep the database; profiles live there, nothing is cached."""
        self.database = database
        # Recently forgotten facts per person: the learner must not bring them
        # back from turns logged before they were forgotten.
        self._forgotten: dict[str, list[tuple[float, str]]] = {}

    async def async_context(self, person: str, text: str, max_chars: int) -> str:
        """Return the person's entries relevant to ``text``, one a line, in budget."""
        now = time.time()
        known = await self.database.async_run(lambda conn: store.entries(conn, person))
        words = tokens(text)
        scored: list[tuple[float, int, ProfileEntry]] = []
        for index, entry in enumerate(known):
            confidence = entry.current_confidence(now)
            if confidence < PROFILE_CONFIDENCE_FLOOR:
                continue
            overlap = len(words & tokens(entry.content))
            if overlap:
                score = 1.0 + overlap * confidence
            elif (
                entry.source == Source.TOLD
                and entry.category == Category.PREFERENCE
                and entry.sensitivity == Sensitivity.NORMAL
                and confidence >= ALWAYS_RELEVANT_CONFIDENCE
            ):
                score = confidence / 2
            else:
                continue
            scored.append((score, index, entry))
        lines: list[str] = []
        used = 0
        for _, _, entry in sorted(scored, key=lambda item: (-item[0], item[1])):
            line = f"- {line_of(entry)}"
            if used + len(line) + 1 > max_chars:
                # A shorter entry further down may still fit.
                continue
            lines.append(line)
            used += len(line) + 1
        return "\n".join(lines)

    async def async_remember(
        self, person: str, fact: str, category: str | None = None
    ) -> SaveResult:
        """Save what the person told; raise MemoryRefusedError when it may not be."""
        content = vet_fact(fact)
        new = NewFact(
            person=person,
            category=parse_category(category, content),
            content=content,
            confidence=1.0,
            source=Source.TOLD,
            sensitivity=sensitivity_of(content),
        )
        self._unforget(person, content)
        return await self.database.async_run(
            lambda conn: store.save(conn, new, time.time())
        )

    async def async_learn(
        self,
        person: str,
        facts: list[LearnedFact],
        *,
        learned_from: Sequence[int] = (),
    ) -> int:
        """Save what the learner inferred; return how many entries it added or touched.

        Facts that read like instructions, hold secrets, or were forgotten
        recently are dropped without a word: nobody asked for them. The
        logged turns ``learned_from`` are marked processed in the same
        transaction: a stop in between can neither lose nor repeat them.
        """
        accepted: list[NewFact] = []
        for fact in facts:
            try:
                content = vet_fact(fact.content)
            except MemoryRefusedError:
                continue
            if self._was_forgotten(person, content):
                continue
            accepted.append(
                NewFact(
                    person=person,
                    category=fact.category,
                    content=content,
                    confidence=min(LEARNED_MAX_CONFIDENCE, max(0.0, fact.confidence)),
                    source=Source.INFERRED,
                    sensitivity=sensitivity_of(content),
                )
            )
        if not accepted and not learned_from:
            return 0

        def _save(conn: sqlite3.Connection) -> int:
            now = time.time()
            saved = [store.save(conn, new, now).entry for new in accepted]
            store.mark_processed(conn, learned_from)
            return sum(entry is not None for entry in saved)

        return await self.database.async_run(_save)

    async def async_forget(self, person: str, query: str) -> list[ProfileEntry]:
        """Delete the person's entries closest to ``query``; return them."""
        query = " ".join(query.split())
        if not query:
            return []

        def _forget(conn: sqlite3.Connection) -> list[ProfileEntry]:
            scored = [
                (closeness(query, entry.content), entry)
                for entry in store.entries(conn, person)
            ]
            best = max((score for score, _ in scored), default=0.0)
            if best < FORGET_THRESHOLD:
                return []
            chosen = [
                entry
                for score, entry in scored
                if score >= max(FORGET_THRESHOLD, best - FORGET_MARGIN)
            ]
            store.delete(conn, person, (entry.id for entry in chosen))
            return chosen

        removed = await self.database.async_run(_forget)
        now = time.monotonic()
        tombstones = self._forgotten.setdefault(person, [])
        tombstones.extend((now, entry.content) for entry in removed)
        return removed

    async def async_entries(self, person: str) -> list[ProfileEntry]:
        """Return everything known about the person."""
        return await self.database.async_run(lambda conn: store.entries(conn, person))

    async def async_export(self, person: str) -> dict[str, Any]:
        """Return the person's profile as plain data."""
        now = time.time()
        known = await self.async_entries(person)
        return {"person": person, "entries": [entry.as_dict(now) for entry in known]}

    async def async_clear(self, person: str | None) -> int:
        """Forget a person, or everyone; return how many entries went."""
        if person is None:
            self._forgotten.clear()
        else:
            self._forgotten.pop(person, None)
        return await self.database.async_run(lambda conn: store.clear(conn, person))

    async def async_decay(self) -> int:
        """Delete inferred entries that faded below the floor; return how many."""
        return await self.database.async_run(
            lambda conn: store.decay(conn, time.time(), PROFILE_CONFIDENCE_FLOOR)
        )

    def _was_forgotten(self, person: str, content: str) -> bool:
        now = time.monotonic()
        tombstones = [
            (at, text)
            for at, text in self._forgotten.get(person, [])
            if now - at < TOMBSTONE_SECONDS
        ]
        if tombstones:
            self._forgotten[person] = tombstones
        else:
            self._forgotten.pop(person, None)
        return any(
            near_identical(text, content)
            or closeness(text, content) >= TOMBSTONE_CLOSENESS
            for _, text in tombstones
        )

    def _unforget(self, person: str, content: str) -> None:
        """Told again: the person wants it known after all."""
        if person in self._forgotten:
            self._forgotten[person] = [
                (at, text)
                for at, text in self._forgotten[person]
                if not near_identical(text, content)
            ]


async def async_memory_command(
    memory: MemorySource | None,
    person: str,
    command: str,
    argument: str,
    texts: Texts,
) -> str:
    """Answer /memory (list) and /forget <thing> for the sender, without the model."""
    if not isinstance(memory, ProfileMemory):
        return texts("memory_unavailable")
    if command == "/memory":
        known = await memory.async_entries(person)
        if not known:
            return texts("memory_empty")
        lines = [texts("memory_title")]
        lines.extend(f"{n}. {line_of(entry)}" for n, entry in enumerate(known, 1))
        lines.append("")
        lines.append(texts("memory_forget_hint"))
        return "\n".join(lines)
    if not argument.strip():
        return texts("forget_what")
    removed = await memory.async_forget(person, argument)
    if not removed:
        return texts("forget_nothing_close", query=argument.strip())
    return "\n".join([texts("forgotten"), *(f"- {entry.content}" for entry in removed)])
