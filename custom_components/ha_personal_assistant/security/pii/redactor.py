"""What the sanitizer found, cut out in one pass: the categories and the result."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from . import leftovers
from .patterns import WORD

if TYPE_CHECKING:
    from collections.abc import Callable

# Categories, as stored in search_audit_log and shown by /searchlog.
PHONE: Final = "phone"
EMAIL: Final = "email"
ADDRESS: Final = "address"
COORDINATES: Final = "coordinates"
IP: Final = "ip_address"
MAC: Final = "mac_address"
HOSTNAME: Final = "local_host"
ENTITY_ID: Final = "entity_id"
NAME: Final = "name"
SECRET: Final = "secret"  # noqa: S105 - a category name
BANK_ACCOUNT: Final = "bank_account"
BIRTH_DATE: Final = "birth_date"


@dataclass(frozen=True, slots=True)
class Sanitized:
    """The query as it may be sent, and what was taken out."""

    text: str
    categories: tuple[str, ...]
    original_chars: int
    removed_chars: int
    counts: dict[str, int] = field(default_factory=dict)
    # The removed values themselves: in memory only, never stored or logged.
    found: tuple[str, ...] = field(default=(), repr=False)

    @property
    def sendable(self) -> bool:
        """Tell whether a word worth searching for is left.

        Only a query that was all personal details (and the words that
        carried them, "call me on") is refused.
        """
        return bool(WORD.search(self.text)) and leftovers.searchable(self.text)


class Redactor:
    """Collect spans to remove, then cut them out in one pass."""

    def __init__(self, text: str) -> None:
        """Start with nothing to remove from ``text``."""
        self.text = text
        self.spans: list[tuple[int, int, str]] = []

    def taken(self, start: int, end: int, *, but: str | None = None) -> bool:
        """Tell whether a span overlaps one found (of another category than ``but``)."""
        return any(s < end and start < e and c != but for s, e, c in self.spans)

    def add(self, start: int, end: int, category: str) -> None:
        """Remove ``text[start:end]`` as ``category``."""
        if end > start:
            self.spans.append((start, end, category))

    def add_all(
        self,
        pattern: re.Pattern[str],
        category: str,
        accept: Callable[[re.Match[str]], bool] | None = None,
    ) -> None:
        """Remove every match of ``pattern`` that ``accept`` accepts."""
        for match in pattern.finditer(self.text):
            if accept is None or accept(match):
                self.add(match.start(), match.end(), category)

    def result(self) -> Sanitized:
        """Return the text with every span cut out, and what was cut."""
        merged: list[tuple[int, int]] = []
        counts: dict[str, int] = {}
        for start, end, category in sorted(self.spans):
            counts[category] = counts.get(category, 0) + 1
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], end))
            else:
                merged.append((start, end))
        found = tuple(self.text[s:e].strip() for s, e in merged)
        pieces: list[str] = []
        last = 0
        removed = 0
        for start, end in merged:
            pieces.append(self.text[last:start])
            pieces.append(f" {leftovers.CUT} ")
            removed += len(self.text[start:end].strip())
            last = end
        pieces.append(self.text[last:])
        # Nothing removed: the query leaves as written ("c'est grave ?",
        # "!secret"), only its blank runs collapsed.
        cleaned = leftovers.clean("".join(pieces)).replace(leftovers.CUT, " ")
        text = _tidy(cleaned) if merged else " ".join(self.text.split())
        categories = tuple(sorted(counts))
        original = len(re.sub(r"\s+", "", self.text))
        return Sanitized(text, categories, original, removed, counts, found)


def _tidy(text: str) -> str:
    """Collapse what removal left behind: double spaces, dangling separators."""
    text = re.sub(r"\(\s*[,;/]?\s*\)|\[\s*\]|\"\s*\"|'\s+'", " ", text)
    # A mark that ends a phrase moves back to its word; one that starts a
    # token ("!secret", "::1", "-22.9") stays where it is.
    text = re.sub(r"\s+([,.;:!?]+)(?=\s|$)", r"\1", text)
    text = re.sub(r"(?:^|(?<=\s))[,.;:/-]+(?=\s|$)", " ", text)
    text = re.sub(r"([,;:])(?:\s*[,;:])+(?=\s|$)", r"\1", text)
    return re.sub(r"\s+", " ", text).lstrip().rstrip(" ,;:-/")
