"""Profile entries and the interaction log in the assistant database.

Plain functions on a ``sqlite3.Connection``: ``Database.async_run`` runs each
in one transaction on the integration's executor.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final

from ..const import LEARNED_MAX_CONFIDENCE, PROFILE_DECAY_PER_DAY
from ..memory.text import is_update, near_identical

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Iterable

DAY: Final = 86400.0
_COLUMNS: Final = (
    "id, person, category, content, confidence, source, sensitivity,"
    " created_at, updated_at, reinforced_at"
)
# Enough for any household member; a bound keeps a runaway learner cheap.
MAX_ENTRIES_PER_PERSON: Final = 200
LEARNED_BOOST: Final = 0.1


class Category(StrEnum):
    """What kind of thing an entry says about the person."""

    PREFERENCE = "preference"
    HABIT = "habit"
    PATTERN = "pattern"
    FACT = "fact"


class Source(StrEnum):
    """How the assistant came to know it."""

    TOLD = "told"
    INFERRED = "inferred"
    OBSERVED = "observed"


class Sensitivity(StrEnum):
    """Sensitive entries reach the prompt only when the message is about them."""

    NORMAL = "normal"
    SENSITIVE = "sensitive"


class SaveOutcome(StrEnum):
    """What saving a fact did."""

    ADDED = "added"
    REINFORCED = "reinforced"
    UPDATED = "updated"
    FULL = "full"


@dataclass(frozen=True, slots=True)
class ProfileEntry:
    """One thing the assistant knows about one person."""

    id: int
    person: str
    category: str
    content: str
    confidence: float
    source: str
    sensitivity: str
    created_at: float
    updated_at: float
    reinforced_at: float

    def current_confidence(self, now: float) -> float:
        """Return the confidence after decay; what the person told never fades."""
        if self.source == Source.TOLD:
            return self.confidence
        days = max(0.0, now - self.reinforced_at) / DAY
        return float(self.confidence * PROFILE_DECAY_PER_DAY**days)

    def as_dict(self, now: float) -> dict[str, Any]:
        """Return the entry as plain data, for the export service."""
        return {
            "id": self.id,
            "category": self.category,
            "content": self.content,
            "confidence": round(self.current_confidence(now), 3),
            "source": self.source,
            "sensitivity": self.sensitivity,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "reinforced_at": self.reinforced_at,
        }


@dataclass(frozen=True, slots=True)
class NewFact:
    """A fact to save for a person."""

    person: str
    category: Category
    content: str
    confidence: float
    source: Source
    sensitivity: Sensitivity


@dataclass(frozen=True, slots=True)
class SaveResult:
    """The outcome of saving a fact, and the entry as stored."""

    outcome: SaveOutcome
    entry: ProfileEntry | None


def _entry(row: tuple[Any, ...]) -> ProfileEntry:
    return ProfileEntry(*row)


def entries(conn: sqlite3.Connection, person: str) -> list[ProfileEntry]:
    """Return a person's entries: told first, oldest first."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM profile_entries WHERE person = ?"  # noqa: S608 - fixed columns
        " ORDER BY source = 'told' DESC, id",
        (person,),
    ).fetchall()
    return [_entry(row) for row in rows]


def get(conn: sqlite3.Connection, entry_id: int) -> ProfileEntry | None:
    """Return one entry by id."""
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM profile_entries WHERE id = ?",  # noqa: S608 - fixed columns
        (entry_id,),
    ).fetchone()
    return _entry(row) if row is not None else None


def save(conn: sqlite3.Connection, fact: NewFact, now: float) -> SaveResult:
    """Add a fact, or reinforce or update the entry that already says it.

    What the person told is never overwritten by what was inferred: an
    inferred restatement of a told entry only counts as a reinforcement.
    """
    known = entries(conn, fact.person)
    for entry in known:
        same = near_identical(entry.content, fact.content)
        if not same and not is_update(entry.content, fact.content):
            continue
        if fact.source != Source.TOLD and entry.source == Source.TOLD:
            # A guess never changes what the person said; agreeing with it
            # only shows the entry still holds.
            if same:
                conn.execute(
                    "UPDATE profile_entries SET reinforced_at = ? WHERE id = ?",
                    (now, entry.id),
                )
            return SaveResult(SaveOutcome.REINFORCED, entry)
        if fact.source == Source.TOLD:
            category, source = fact.category, Source.TOLD
            confidence = max(entry.confidence, fact.confidence)
        else:
            # Seen again: a little surer, but never as sure as being told.
            category, source = Category(entry.category), Source(entry.source)
            confidence = min(
                LEARNED_MAX_CONFIDENCE,
                max(entry.current_confidence(now), fact.confidence) + LEARNED_BOOST,
            )
        # The newer wording wins: it is how the person says it now. REPLACE
        # merges with another entry that already has exactly this wording.
        conn.execute(
            "UPDATE OR REPLACE profile_entries SET content = ?, category = ?,"
            " confidence = ?, source = ?, sensitivity = ?, updated_at = ?,"
            " reinforced_at = ? WHERE id = ?",
            (
                fact.content,
                category,
                confidence,
                source,
                _stricter(entry.sensitivity, fact.sensitivity),
                now,
                now,
                entry.id,
            ),
        )
        return SaveResult(
            SaveOutcome.REINFORCED if same else SaveOutcome.UPDATED,
            get(conn, entry.id),
        )
    if len(known) >= MAX_ENTRIES_PER_PERSON:
        return SaveResult(SaveOutcome.FULL, None)
    cur = conn.execute(
        "INSERT INTO profile_entries (person, category, content, confidence,"
        " source, sensitivity, created_at, updated_at, reinforced_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            fact.person,
            fact.category,
            fact.content,
            fact.confidence,
            fact.source,
            fact.sensitivity,
            now,
            now,
            now,
        ),
    )
    return SaveResult(SaveOutcome.ADDED, get(conn, int(cur.lastrowid or 0)))


def _stricter(first: str, second: str) -> str:
    return (
        Sensitivity.SENSITIVE
        if Sensitivity.SENSITIVE in (first, second)
        else Sensitivity.NORMAL
    )


def delete(conn: sqlite3.Connection, person: str, ids: Iterable[int]) -> int:
    """Delete a person's entries by id; return how many went."""
    return sum(
        conn.execute(
            "DELETE FROM profile_entries WHERE id = ? AND person = ?",
            (entry_id, person),
        ).rowcount
        for entry_id in ids
    )


def clear(conn: sqlite3.Connection, person: str | None) -> int:
    """Forget a person (or everyone): entries and the interactions learned from."""
    if person is None:
        removed = conn.execute("DELETE FROM profile_entries").rowcount
        conn.execute("DELETE FROM interaction_log")
        return removed
    removed = conn.execute(
        "DELETE FROM profile_entries WHERE person = ?", (person,)
    ).rowcount
    conn.execute("DELETE FROM interaction_log WHERE person = ?", (person,))
    return removed


def decay(conn: sqlite3.Connection, now: float, floor: float) -> int:
    """Delete the inferred entries that faded below ``floor``; return how many."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM profile_entries WHERE source != 'told'"  # noqa: S608 - fixed columns
    ).fetchall()
    faded = [
        entry.id for entry in map(_entry, rows) if entry.current_confidence(now) < floor
    ]
    conn.executemany(
        "DELETE FROM profile_entries WHERE id = ?", [(entry_id,) for entry_id in faded]
    )
    return len(faded)


@dataclass(frozen=True, slots=True)
class LoggedInteraction:
    """A turn waiting to be learned from."""

    id: int
    person: str
    user_text: str
    reply: str


def log_interaction(  # noqa: PLR0913 - one column each
    conn: sqlite3.Connection,
    *,
    person: str,
    conversation_key: str,
    user_text: str,
    reply: str,
    tainted: bool,
    now: float,
) -> int:
    """Append a turn to ``interaction_log``; a tainted one is never learned from."""
    cur = conn.execute(
        "INSERT INTO interaction_log (ts, person, conversation_key, user_text,"
        " reply, tainted, processed) VALUES (?, ?, ?, ?, ?, ?, ?)",
        # A tainted turn is logged as already processed: nothing to learn.
        (now, person, conversation_key, user_text, reply, int(tainted), int(tainted)),
    )
    return int(cur.lastrowid or 0)


def pending_interactions(
    conn: sqlite3.Connection, ids: Iterable[int]
) -> list[LoggedInteraction]:
    """Return those of ``ids`` that still wait (clean, unprocessed, not cleared)."""
    result: list[LoggedInteraction] = []
    for interaction_id in ids:
        row = conn.execute(
            "SELECT id, person, user_text, reply FROM interaction_log"
            " WHERE id = ? AND tainted = 0 AND processed = 0",
            (interaction_id,),
        ).fetchone()
        if row is not None:
            result.append(LoggedInteraction(*row))
    return result


def mark_processed(conn: sqlite3.Connection, ids: Iterable[int]) -> None:
    """Record that these turns were learned from."""
    conn.executemany(
        "UPDATE interaction_log SET processed = 1 WHERE id = ?",
        [(interaction_id,) for interaction_id in ids],
    )


def prune_interactions(conn: sqlite3.Connection, before: float) -> int:
    """Delete logged turns older than ``before``; return how many."""
    return conn.execute("DELETE FROM interaction_log WHERE ts < ?", (before,)).rowcount


def unprocessed_interactions(
    conn: sqlite3.Connection, limit: int
) -> list[tuple[int, str]]:
    """Return the oldest logged turns still waiting to be learned from."""
    rows = conn.execute(
        "SELECT id, person FROM interaction_log"
        " WHERE tainted = 0 AND processed = 0 AND person IS NOT NULL"
        " ORDER BY id LIMIT ?",
        (limit,),
    ).fetchall()
    return [(int(row[0]), str(row[1])) for row in rows]
