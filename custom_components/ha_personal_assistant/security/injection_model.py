"""A learned score for untrusted text that reads like an instruction to the assistant.

The firewall's patterns name cues (a house goal, a sign the text speaks to an
AI, urgency, disguise); a logistic model weighs them together with the words
and letter sequences of the text, so a how-to that tells a person to unlock a
door is told apart from a page that tells the assistant to. The weights are
trained offline by ``bench/security/train_firewall.py`` and shipped in
``injection_weights.py`` (no file is read at run time). Features are hashed,
so the model holds no vocabulary and its size does not grow with the data.
"""

from __future__ import annotations

import base64
import math
import re
import zlib
from array import array
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Final

from . import injection_weights

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Sequence

FEATURE_BITS: Final = 18
_MASK: Final = (1 << FEATURE_BITS) - 1
# Letter sequences of these lengths, read across word boundaries.
_CHAR_GRAMS: Final = (3, 4, 5)
# Longer text is also scored a few sentences at a time, so an instruction
# buried in a long page is not outweighed by the page around it.
WINDOW_CHARS: Final = 360
_TOKEN: Final = re.compile(r"\w+|[^\w\s]")
_DIGIT: Final = re.compile(r"\d")
# Links read as one token: whether a text carries a link matters, the made-up
# domain of one attack or another does not.
_LINK: Final = re.compile(
    r"(?:https?://|hxxps?://|www\.)\S+"
    r"|\b(?:[a-z0-9-]+\.)+(?:com|net|org|info|io|co|ru|de|fr|uk|cc|top|xyz|click|"
    r"link|site|online|app|dev|me|biz|example|ly|gd|us|eu|pl|cn|es|it|nl|ch|at|"
    r"be|se|cz|jp|kr|br|pt|shop|store|support|help|live|pro|tk|su)\b(?:/\S*)?"
)
_SENTENCE: Final = re.compile("(?<=[.!?\u3002\uff01\uff1f\n])\\s*")


def _grams(reading: str, out: set[str]) -> None:
    """Add the words, word pairs and letter sequences of one reading."""
    words = _TOKEN.findall(_DIGIT.sub("0", _LINK.sub(" weblink ", reading)))
    out.update("w" + word for word in words)
    out.update(f"b{first} {second}" for first, second in pairwise(words))
    line = " " + " ".join(words) + " "
    for size in _CHAR_GRAMS:
        out.update("c" + line[i : i + size] for i in range(len(line) - size + 1))


def feature_names(readings: Sequence[str], cues: Iterable[str]) -> set[str]:
    """Return the features of a text: the firewall's cues and its n-grams."""
    found = sorted(set(cues))
    names = {"r" + cue for cue in found}
    # Pairs of cues: a house goal alone is a manual, a house goal and a word
    # to the AI reader is an attack; a linear model needs the pair spelled out.
    names.update(
        f"p{first}|{second}"
        for i, first in enumerate(found)
        for second in found[i + 1 :]
    )
    names.add(f"n{min(len(found), 4)}")
    for reading in readings:
        _grams(reading, names)
    return names


def feature_ids(names: Iterable[str]) -> set[int]:
    """Hash feature names into the model's weight table (collisions merge)."""
    return {zlib.crc32(name.encode()) & _MASK for name in names}


def windows(text: str) -> list[str]:
    """Split long text into overlapping runs of sentences of about WINDOW_CHARS."""
    if len(text) <= WINDOW_CHARS:
        return []
    sentences = [s for s in _SENTENCE.split(text) if s.strip()]
    found: list[str] = []
    start = 0
    while start < len(sentences):
        end, size = start, 0
        while end < len(sentences) and (
            size == 0 or size + len(sentences[end]) <= WINDOW_CHARS
        ):
            size += len(sentences[end]) + 1
            end += 1
        found.append(" ".join(sentences[start:end])[: WINDOW_CHARS * 2])
        if end >= len(sentences):
            break
        # Overlap by one sentence, so an instruction split over a boundary
        # is still read whole once.
        start = max(end - 1, start + 1)
    return found if len(found) > 1 else []


@dataclass(frozen=True, slots=True)
class InjectionModel:
    """Hashed logistic regression over binary features."""

    weights: array[float]
    bias: float
    threshold: float
    # The lower threshold for a text one of the firewall's precise strong
    # patterns (a tool name, a chat role, skipping confirmation) matched.
    strong_threshold: float

    def probability(self, ids: Collection[int]) -> float:
        """Return the probability that the features belong to an injection.

        The features of a text count 1 / sqrt(their number) each, so a long
        page does not reach an extreme score just by having many words.
        """
        weights = self.weights
        total = sum(weights[i] for i in ids) / math.sqrt(max(len(ids), 1)) + self.bias
        return 1.0 / (1.0 + math.exp(-max(min(total, 40.0), -40.0)))

    def score(self, readings: Sequence[str], cues: Sequence[str], folded: str) -> float:
        """Score a text: the whole of it, and each window of a long one."""
        best = self.probability(feature_ids(feature_names(readings, cues)))
        for window in windows(folded):
            best = max(
                best, self.probability(feature_ids(feature_names([window], cues)))
            )
        return best


def _load() -> InjectionModel:
    """Unpack the shipped weights."""
    codes = array("b", zlib.decompress(base64.b85decode(injection_weights.WEIGHTS)))
    if len(codes) != 1 << FEATURE_BITS:
        msg = "injection weights do not match the feature table"
        raise ValueError(msg)
    # Codes are on a square-root scale (see bench/security/train_firewall.py).
    scale = injection_weights.SCALE
    table = [
        math.copysign((code / 127) ** 2 * scale, code) for code in range(-128, 128)
    ]
    return InjectionModel(
        weights=array("f", (table[code + 128] for code in codes)),
        bias=injection_weights.BIAS,
        threshold=injection_weights.THRESHOLD,
        strong_threshold=injection_weights.STRONG_THRESHOLD,
    )


MODEL: Final = _load()
