"""Cutting a document into overlapping chunks, and its content hash."""

from __future__ import annotations

import hashlib
import re
from typing import Final

from ..const import CHUNK_CHARS, CHUNK_OVERLAP

_PARAGRAPHS: Final = re.compile(r"\n\s*\n")
# A sentence ends with ., ! or ? (or their CJK forms) followed by space.
_SENTENCE_END: Final = re.compile(r"(?<=[.!?。！？])\s+")  # noqa: RUF001


def content_hash(text: str) -> str:
    """Return the hash that identifies a document's content."""
    return hashlib.sha256(text.encode()).hexdigest()


def _units(text: str, size: int) -> list[tuple[str, bool]]:
    """Split text into paragraphs, long ones into sentences, long sentences hard.

    Each unit comes with whether it starts a paragraph.
    """
    units: list[tuple[str, bool]] = []
    for paragraph in _PARAGRAPHS.split(text.strip()):
        paragraph = paragraph.strip()  # noqa: PLW2901 - the cleaned paragraph
        if not paragraph:
            continue
        if len(paragraph) <= size:
            units.append((paragraph, True))
            continue
        first = True
        for sentence in _SENTENCE_END.split(paragraph):
            while len(sentence) > size:
                # No sentence boundary within reach: cut at a space if any.
                cut = sentence.rfind(" ", size // 2, size)
                cut = cut if cut > 0 else size
                units.append((sentence[:cut].strip(), first))
                first = False
                sentence = sentence[cut:].strip()  # noqa: PLW2901
            if sentence:
                units.append((sentence, first))
                first = False
    return units


def _join(units: list[tuple[str, bool]]) -> str:
    parts: list[str] = []
    for index, (text, new_paragraph) in enumerate(units):
        if index:
            parts.append("\n\n" if new_paragraph else " ")
        parts.append(text)
    return "".join(parts)


def chunk_text(
    text: str, size: int = CHUNK_CHARS, overlap: int = CHUNK_OVERLAP
) -> list[str]:
    """Cut text into chunks of about ``size`` characters.

    Cuts fall on paragraph and sentence boundaries; each chunk repeats up to
    ``overlap`` characters of the end of the previous one, so a fact spanning
    a boundary stays whole.
    """
    units = _units(text, size)
    chunks: list[str] = []
    start = 0
    while start < len(units):
        end = start
        length = 0
        while end < len(units) and (
            end == start or length + len(units[end][0]) + 2 <= size
        ):
            length += len(units[end][0]) + 2
            end += 1
        chunks.append(_join(units[start:end]))
        if end >= len(units):
            break
        # Step back over whole units while they fit in the overlap, but always
        # move forward by at least one unit.
        back = end
        carried = 0
        while back - 1 > start and carried + len(units[back - 1][0]) <= overlap:
            back -= 1
            carried += len(units[back][0])
        start = back
    return chunks
