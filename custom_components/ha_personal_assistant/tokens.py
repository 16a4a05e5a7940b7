"""Token estimates that never under-count, corrected from what Ollama reports."""

from __future__ import annotations

import json
import math
import re
import time
from collections import deque
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Iterable

# The pieces a BPE pre-tokenizer (Qwen, Llama 3, GPT-4 style) splits text into:
# CJK characters, single digits, letter runs, punctuation runs, line breaks and
# other white space. Each kind has its own rate; none uses characters / 4,
# which under-counts Chinese by half and over-counts English by a fifth.
_PIECE_RE: Final = re.compile(
    r"(?P<cjk>[\u2e80-\u2fff\u3000-\u303f\u3040-\u30ff\u3100-\u9fff"
    r"\uac00-\ud7af\uf900-\ufaff\uff00-\uffef])"
    r"|(?P<digit>\d)"
    r"|(?P<word>[^\W\d_\u02b0-\u02ff]+)"
    r"|(?P<newline>\s*[\r\n]+)"
    r"|(?P<space>[ \t]{2,})"
    r"|(?P<punct>(?:[^\w\s]|[_\u02b0-\u02ff])+)"
)
_ASCII_RE: Final = re.compile(r"[A-Za-z]")
_LATIN_EXT_RE: Final = re.compile(r"[\u00c0-\u024f\u1e00-\u1eff]")
_CYRILLIC_RE: Final = re.compile(r"[\u0400-\u052f]")

# English words are mostly one token each; German, Polish and other Latin
# languages split into pieces of about three letters. A text counts as English
# when it has no accented Latin letter and enough English function words (or
# Home Assistant's English state words); anything else is counted the
# expensive way, so a wrong guess only over-counts.
_ENGLISH_MARKERS: Final = frozenset(
    [
        "the",
        "a",
        "an",
        "to",
        "of",
        "and",
        "or",
        "is",
        "are",
        "was",
        "be",
        "been",
        "in",
        "on",
        "at",
        "for",
        "with",
        "by",
        "from",
        "this",
        "that",
        "it",
        "you",
        "your",
        "not",
        "no",
        "can",
        "could",
        "will",
        "would",
        "do",
        "does",
        "has",
        "have",
        "if",
        "as",
        "all",
        "any",
        "use",
        "when",
        "which",
        "please",
        "what",
        "off",
        "unavailable",
        "unknown",
        "home",
    ]
)
ENGLISH_MIN_SHARE: Final = 0.1
# Tokens of an ASCII word: one, plus one per this many letters past the free ones.
ENGLISH_FREE_LETTERS: Final = 5
ENGLISH_LETTERS_PER_TOKEN: Final = 5.0
FOREIGN_LETTERS_PER_TOKEN: Final = 3.3
# An accented Latin letter costs as much as this many plain ones.
ACCENTED_WEIGHT: Final = 2.0
CYRILLIC_LETTERS_PER_TOKEN: Final = 3.0
PUNCT_CHARS_PER_TOKEN: Final = 1.7
CAPITAL_AT_START: Final = 0.6
RARE_SYMBOL_TOKENS: Final = 2.5
# Qwen 3.6 splits datamarked words more than Qwen 2.5: at 0.5 the p5 of
# fenced text fell to 0.949 on some random fences and marks (0.952 median).
GLUED_WORD: Final = 0.6
# Each chat message costs its role markers and separators.
MESSAGE_OVERHEAD: Final = 6

# The learned correction: raised at once when a request held more tokens than
# estimated, lowered only when that count is a day old, kept within bounds.
MIN_CORRECTION: Final = 1.0
MAX_CORRECTION: Final = 2.0
# How long a high count keeps the correction up, and how many are kept.
CORRECTION_MEMORY: Final = 24 * 3600.0
MAX_OBSERVATIONS: Final = 256


def _is_english(words: list[str]) -> bool:
    if not words:
        return False
    markers = sum(word.lower() in _ENGLISH_MARKERS for word in words)
    return markers >= ENGLISH_MIN_SHARE * len(words)


def _word_tokens(word: str, *, english: bool) -> float:
    """Return the tokens of one run of letters."""
    letters = len(word)
    ascii_count = len(_ASCII_RE.findall(word))
    if ascii_count == letters:
        if english:
            return 1.0 + max(0, letters - ENGLISH_FREE_LETTERS) / (
                ENGLISH_LETTERS_PER_TOKEN
            )
        return 1.0 + (letters - 1) / FOREIGN_LETTERS_PER_TOKEN
    accented = len(_LATIN_EXT_RE.findall(word))
    cyrillic = len(_CYRILLIC_RE.findall(word))
    other = letters - ascii_count - accented - cyrillic
    if cyrillic:
        return (
            1.0
            + (cyrillic + ascii_count + accented) / CYRILLIC_LETTERS_PER_TOKEN
            + other
        )
    return (
        1.0
        + (ascii_count + ACCENTED_WEIGHT * accented - 1) / FOREIGN_LETTERS_PER_TOKEN
        + other
    )


def _punct_tokens(piece: str) -> float:
    """Return the tokens of a run of punctuation and symbols."""
    if piece.isascii():
        return len(piece) / PUNCT_CHARS_PER_TOKEN
    total = 0.0
    for char in piece:
        if char.isascii():
            total += 1 / PUNCT_CHARS_PER_TOKEN
        elif (
            "\u00a0" <= char <= "\u00ff"
            or "\u02b0" <= char <= "\u02ff"
            or "\u2000" <= char <= "\u206f"
        ):
            # Latin-1, modifier marks and general punctuation (degree sign,
            # ellipsis, dashes): single tokens in every vocabulary.
            total += 1
        else:
            # Rare symbols fall back to their UTF-8 bytes: two or three tokens.
            total += RARE_SYMBOL_TOKENS
    return total


@lru_cache(maxsize=8192)
def _estimate_cached(text: str) -> int:
    pieces = [
        (match.lastgroup, match.group(), match.start())
        for match in _PIECE_RE.finditer(text)
    ]
    words = [piece for kind, piece, _ in pieces if kind == "word"]
    english = not _LATIN_EXT_RE.search(text) and _is_english(words)
    total = 0.0
    for kind, piece, start in pieces:
        if kind == "word":
            total += _word_tokens(piece, english=english)
            if start and not text[start - 1].isascii():
                # A word glued to a symbol (datamarked text) loses the
                # leading space most vocabulary entries carry.
                total += GLUED_WORD
            if piece[0].isupper() and (start == 0 or text[start - 1] != " "):
                # Vocabularies hold " Word" far more often than "Word": a
                # capital at the start of a line often stands alone.
                total += CAPITAL_AT_START
        elif kind == "punct":
            total += _punct_tokens(piece)
        else:
            # A CJK character, a digit, a line break or a run of spaces.
            total += 1
    return math.ceil(total)


def estimate_tokens(text: str) -> int:
    """Return an estimate of the tokens of ``text`` that errs on the high side."""
    if not text:
        return 0
    # Long texts are rarely repeated; the cache is for entity lines and prompts.
    if len(text) > 2048:  # noqa: PLR2004 - the cache's size limit per entry
        return _estimate_cached.__wrapped__(text)
    return _estimate_cached(text)


def estimate_json_tokens(value: Any) -> int:
    """Return the estimated tokens of ``value`` serialized as compact JSON."""
    return estimate_tokens(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def estimate_messages(texts: Iterable[str]) -> int:
    """Return the estimated tokens of chat messages with these contents."""
    return sum(estimate_tokens(text) + MESSAGE_OVERHEAD for text in texts)


class TokenCounter:
    """Token estimates corrected by the counts the model actually reported.

    The estimate is meant to be high already; when Ollama's
    ``prompt_eval_count`` shows a request held more tokens than estimated
    (another tokenizer, another language), the correction rises at once to
    cover it, capped at twice the estimate.

    It falls only slowly: the correction is the highest ratio seen in the last
    :data:`CORRECTION_MEMORY` seconds, never below 1. Lower counts cannot be
    trusted to lower it: when Ollama reuses its prompt cache (the point of the
    fixed prefix), ``prompt_eval_count`` counts only the tokens it had to read
    anew, far fewer than the request held.
    """

    def __init__(self) -> None:
        """Start with no correction."""
        self.correction = MIN_CORRECTION
        self._seen: deque[tuple[float, float]] = deque(maxlen=MAX_OBSERVATIONS)

    def count(self, text: str) -> int:
        """Return the corrected token estimate of ``text``."""
        return math.ceil(estimate_tokens(text) * self.correction)

    def scale(self, estimate: int) -> int:
        """Return a raw estimate with the correction applied."""
        return math.ceil(estimate * self.correction)

    def observe(self, estimated: int, reported: int, now: float | None = None) -> None:
        """Learn from a request estimated (raw) at ``estimated`` tokens."""
        if estimated <= 0 or reported <= 0:
            return
        now = time.monotonic() if now is None else now
        ratio = min(MAX_CORRECTION, reported / estimated)
        if ratio > MIN_CORRECTION:
            self._seen.append((now, ratio))
        while self._seen and self._seen[0][0] < now - CORRECTION_MEMORY:
            self._seen.popleft()
        self.correction = max([MIN_CORRECTION, *(seen for _, seen in self._seen)])
