"""Answers that loop: the same sentences or the same block written over and over.

The graph checks every streamed chunk with :func:`loop_cut` and ends the
answer where the loop began (reply_check.py finds the other junk).
"""

from __future__ import annotations

import re
from typing import Final

_WORD_RE: Final = re.compile(r"[^\W_]+")

# A model that loops. Small models at home write the same sentences over and
# over until the output cap (a 135M model through an OpenAI-compatible
# server, which applies no repeat penalty, looped in 6 of 11 turns of
# bench/real_model): seconds of a small machine for text nobody should read.
# Two deterministic rules, checked on every streamed chunk:
#
# * sentences: LOOP_SENTENCES sentences in a row (of at least
#   LOOP_SENTENCE_WORDS words; shorter ones neither count nor break the run)
#   that each were written before in the answer. This catches loops that
#   vary ("I'm here to help." / "I'm here to assist.") once every variant
#   has been seen. The answer ends before the first of them.
# * blocks: the same block of text (LOOP_MIN_CHARS characters, LOOP_MIN_WORDS
#   different words) LOOP_REPEATS times in a row over LOOP_MIN_SPAN
#   characters, for loops without sentences (lists of ids, JSON). The answer
#   keeps the block once.
#
# Rows of dashes, a laugh, table rows about different things or a line the
# user asked for five times are not loops; a line asked for ten times is cut
# to one.
LOOP_SENTENCES: Final = 6
LOOP_SENTENCE_WORDS: Final = 3
LOOP_REPEATS: Final = 3
LOOP_MIN_CHARS: Final = 24
LOOP_MIN_SPAN: Final = 400
LOOP_MAX_CHARS: Final = 600
LOOP_MIN_WORDS: Final = 3
# The answer's last characters, looked for earlier in it to find the block.
_LOOP_PROBE: Final = 16
_LOOP_CANDIDATES: Final = 8
_SENTENCE_END_RE: Final = re.compile(r"[.!?:;\n](?=\s|\Z)")
# Where a sentence ends, for the sentence rule: a full stop, a question or
# exclamation mark before a space, or a line break.
_SENTENCE_BREAK_RE: Final = re.compile(r"[.!?]+(?=\s)|\n")


def loop_cut(text: str) -> int | None:
    """Return where to end an answer that loops, or None if it does not."""
    cut = _repeated_sentences(text)
    return cut if cut is not None else _repeated_block(text)


def _repeated_sentences(text: str) -> int | None:
    """Return where a run of LOOP_SENTENCES already written sentences begins."""
    seen: set[str] = set()
    run = 0
    run_start = 0
    position = 0
    for match in _SENTENCE_BREAK_RE.finditer(text):
        start, position = position, match.end()
        words = _WORD_RE.findall(text, start, position)
        if len(words) < LOOP_SENTENCE_WORDS:
            continue
        key = " ".join(word.casefold() for word in words)
        if key not in seen:
            seen.add(key)
            run = 0
            continue
        if not run:
            run_start = start
        run += 1
        if run >= LOOP_SENTENCES:
            return len(text[:run_start].rstrip())
    return None


def _repeated_block(text: str) -> int | None:
    """Return where to end an answer whose end repeats one block, or None.

    The answer keeps its text up to the first time the repeated block was
    written, cut back to the end of a sentence within that block if there is
    one: a handful of substring searches from the end.
    """
    end = len(text.rstrip())
    if end < LOOP_MIN_CHARS * LOOP_REPEATS:
        return None
    probe = text[end - _LOOP_PROBE : end]
    search_end = end - 1
    for _ in range(_LOOP_CANDIDATES):
        found = text.rfind(probe, 0, search_end)
        if found < 0:
            return None
        period = end - (found + _LOOP_PROBE)
        search_end = found + _LOOP_PROBE - 1
        if period < LOOP_MIN_CHARS:
            continue
        if period > LOOP_MAX_CHARS or period * LOOP_REPEATS > end:
            return None
        block = text[end - period : end]
        if any(
            text[end - (n + 1) * period : end - n * period] != block
            for n in range(1, LOOP_REPEATS)
        ):
            continue
        if len({word.casefold() for word in _WORD_RE.findall(block)}) < LOOP_MIN_WORDS:
            continue
        # Where the repetition began: walk back while the text is periodic.
        start = end - LOOP_REPEATS * period
        while start > 0 and text[start - 1] == text[start - 1 + period]:
            start -= 1
        if end - start < LOOP_MIN_SPAN:
            return None
        first = start + period
        ends = [m.end() for m in _SENTENCE_END_RE.finditer(text, start, first + 1)]
        return ends[-1] if ends else first
    return None
