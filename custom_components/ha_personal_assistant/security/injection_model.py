"""A learned score for untrusted text that reads like an instruction to the assistant.

The firewall's patterns name cues (a house goal, a sign the text speaks to an
AI, urgency, disguise); a logistic model weighs them together with the words
and letter sequences of the text, so a how-to that tells a person to unlock a
door is told apart from a page that tells the assistant to. Features are
hashed, so the model holds no vocabulary and its size does not grow with the
data.

The weights are trained offline by ``bench/security/train_firewall.py``, which
writes them to ``injection_model.bin`` next to this module. The file is read
once, off the event loop: entry setup awaits :func:`async_load_model` (HA's
executor) before any text is checked; scripts and tests outside an event loop
load it on first use. A file that is missing or refused (see below) is logged
as an error once, and the firewall then decides by its patterns alone.

File format, version 1. All numbers little-endian; the header is 86 bytes:

====== ==== ===================================================================
Offset Size Field
====== ==== ===================================================================
0      8    magic ``b"HAPAINJM"``
8      2    format version, uint16: 1
10     1    feature bits, uint8: the weight table has 2 ** bits entries (18)
11     1    feature hash, uint8: 1 = CRC-32 of the feature name in UTF-8, its
            low ``feature bits`` bits
12     4    letter-sequence lengths, one uint8 each, unused ones 0 (3, 4, 5, 0)
16     2    window, uint16: characters of a window of long text (360)
18     8    scale, float64: code q is the weight sign(q) * (q / 127) ** 2 * scale
26     8    bias, float64
34     8    threshold, float64: the probability that flags a text
42     8    strong threshold, float64: the same when a precise strong pattern
            matched
50     4    payload length in bytes, uint32
54     32   SHA-256 of bytes 0-53 followed by the payload (the header's fields
            are covered too, not only the payload)
86     n    payload: the 2 ** bits weight codes, int8, zlib-compressed
====== ==== ===================================================================

The file must end with the payload. A file with another magic or version, a
length that does not match, a wrong checksum, or feature settings other than
the ones this module computes (FEATURE_BITS, CRC-32, _CHAR_GRAMS,
WINDOW_CHARS) is refused: a model applied to features it was not trained on
scores noise.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import struct
import threading
import zlib
from array import array
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ..const import LOGGER

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Sequence

    from homeassistant.core import HomeAssistant

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


MODEL_FILE: Final = Path(__file__).with_name("injection_model.bin")
MAGIC: Final = b"HAPAINJM"
FORMAT_VERSION: Final = 1
HASH_CRC32: Final = 1
# magic, version, feature bits, hash, 4 letter-sequence lengths, window,
# scale, bias, threshold, strong threshold, payload length, SHA-256.
_HEADER: Final = struct.Struct("<8sHBB4BHddddI32s")
_CHECKSUM_SIZE: Final = 32


class ModelFileError(ValueError):
    """The model file is damaged, of another format or for other features."""


def _grams_field() -> tuple[int, int, int, int]:
    """Return the letter-sequence lengths as the header's four bytes."""
    sizes = (*_CHAR_GRAMS, 0, 0, 0, 0)
    return sizes[0], sizes[1], sizes[2], sizes[3]


def pack_model(
    codes: bytes,
    *,
    scale: float,
    bias: float,
    threshold: float,
    strong_threshold: float,
) -> bytes:
    """Return the model file for ``codes`` (2 ** FEATURE_BITS int8 weight codes).

    The trainer writes the file with this; see the module docstring.
    """
    if len(codes) != 1 << FEATURE_BITS:
        msg = f"{len(codes)} weight codes for a table of {1 << FEATURE_BITS}"
        raise ValueError(msg)
    payload = zlib.compress(codes, 9)
    fields = (
        MAGIC,
        FORMAT_VERSION,
        FEATURE_BITS,
        HASH_CRC32,
        *_grams_field(),
        WINDOW_CHARS,
        scale,
        bias,
        threshold,
        strong_threshold,
        len(payload),
    )
    head = _HEADER.pack(*fields, bytes(_CHECKSUM_SIZE))[:-_CHECKSUM_SIZE]
    return head + hashlib.sha256(head + payload).digest() + payload


def parse_model(data: bytes) -> InjectionModel:
    """Check a model file (see the module docstring) and build the model.

    Raises ModelFileError saying what is wrong with it.
    """
    if len(data) < _HEADER.size:
        msg = (
            f"truncated: {len(data)} bytes, shorter than the {_HEADER.size}-byte header"
        )
        raise ModelFileError(msg)
    (
        magic,
        version,
        bits,
        hash_kind,
        *grams,
        window,
        scale,
        bias,
        threshold,
        strong_threshold,
        length,
        checksum,
    ) = _HEADER.unpack_from(data)
    if magic != MAGIC:
        msg = f"not an injection model file (magic {magic!r}, expected {MAGIC!r})"
        raise ModelFileError(msg)
    if version != FORMAT_VERSION:
        msg = f"format version {version}; this version reads {FORMAT_VERSION}"
        raise ModelFileError(msg)
    if len(data) != _HEADER.size + length:
        msg = (
            f"{len(data)} bytes, but the header announces "
            f"{_HEADER.size + length} (truncated or padded)"
        )
        raise ModelFileError(msg)
    payload = data[_HEADER.size :]
    head = data[: _HEADER.size - _CHECKSUM_SIZE]
    if hashlib.sha256(head + payload).digest() != checksum:
        msg = "checksum mismatch: the file is damaged"
        raise ModelFileError(msg)
    settings = (bits, hash_kind, tuple(grams), window)
    expected = (FEATURE_BITS, HASH_CRC32, _grams_field(), WINDOW_CHARS)
    if settings != expected:
        msg = (
            f"trained on other features (bits, hash, letter sequences, window "
            f"{settings}; this version computes {expected})"
        )
        raise ModelFileError(msg)
    if not all(map(math.isfinite, (scale, bias, threshold, strong_threshold))):
        msg = "a parameter is not a finite number"
        raise ModelFileError(msg)
    try:
        codes = array("b", zlib.decompress(payload))
    except zlib.error as err:
        msg = f"the weights do not decompress ({err})"
        raise ModelFileError(msg) from err
    if len(codes) != 1 << bits:
        msg = f"{len(codes)} weights for a table of {1 << bits}"
        raise ModelFileError(msg)
    # Codes are on a square-root scale (see bench/security/train_firewall.py).
    table = [
        math.copysign((code / 127) ** 2 * scale, code) for code in range(-128, 128)
    ]
    return InjectionModel(
        weights=array("f", (table[code + 128] for code in codes)),
        bias=bias,
        threshold=threshold,
        strong_threshold=strong_threshold,
    )


def read_model(path: Path | None = None) -> InjectionModel:
    """Read and check a model file (the shipped one by default); blocking.

    Raises OSError or ModelFileError.
    """
    return parse_model((path or MODEL_FILE).read_bytes())


@dataclass(slots=True)
class _Shipped:
    """The shipped model of this process: read once, or found unusable once."""

    lock: threading.Lock
    tried: bool = False
    model: InjectionModel | None = None
    early_logged: bool = False


_SHIPPED: Final = _Shipped(threading.Lock())


def load_model(path: Path | None = None) -> InjectionModel | None:
    """Read the shipped model once per process; blocking (run it in an executor).

    Returns None when the file is missing or refused: the error is logged
    once, and the firewall decides by its patterns alone until Home Assistant
    restarts with a good file.
    """
    path = path or MODEL_FILE
    with _SHIPPED.lock:
        if not _SHIPPED.tried:
            try:
                _SHIPPED.model = read_model(path)
            except (OSError, ModelFileError) as err:
                LOGGER.error(
                    "The firewall's injection model %s could not be loaded: %s. "
                    "Untrusted text is checked by the firewall's patterns alone, "
                    "which withhold more ordinary text and catch fewer injections; "
                    "reinstall the integration to restore the file",
                    path,
                    err,
                )
            _SHIPPED.tried = True
        return _SHIPPED.model


async def async_load_model(hass: HomeAssistant) -> InjectionModel | None:
    """Load the shipped model in HA's executor, unless it was already tried."""
    if _SHIPPED.tried:
        return _SHIPPED.model
    return await hass.async_add_executor_job(load_model)


def _on_event_loop() -> bool:
    """Tell whether this thread runs an asyncio event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def shipped_model() -> InjectionModel | None:
    """Return the model for a check, or None to decide by the patterns alone.

    Entry setup loads it before any text is checked. Outside an event loop
    (the executor, scripts, tests) a first call loads it here; on the event
    loop it is never read (file I/O would block the loop): a check that comes
    before the load there is decided by the patterns alone, and logged once.
    """
    if _SHIPPED.tried:
        return _SHIPPED.model
    if not _on_event_loop():
        return load_model()
    if not _SHIPPED.early_logged:
        _SHIPPED.early_logged = True
        LOGGER.error(
            "Untrusted text was checked on the event loop before the firewall's "
            "injection model was loaded; it was decided by the patterns alone"
        )
    return None
