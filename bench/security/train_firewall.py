"""Train the firewall's injection model and write its file into the integration.

The model is a logistic regression over hashed features (the firewall's own
pattern cues, words, word pairs and letter sequences; see
``security/injection_model.py``), fitted with numpy on every labelled set in
this folder except the blind one (``holdout6_``), which is never read here.

Before the final fit, each set is left out in turn and scored by a model
trained on the others ("leave one set out"): each set was written by another
hand or in another round, so this is how the model does on text it has not
seen the style of. The thresholds are chosen on those out-of-set scores (see
``choose_threshold``): the most caught on the sets written blind by other
hands (set 5 and the training sets in ``train/``) while they lose at most
``TARGET_FP`` of their benign texts on average; the final model (trained on
everything) keeps them.

Run: ``.venv/bin/python bench/security/train_firewall.py`` (about ten
minutes on two cores; ``--cv-only`` prints the leave-one-set-out figures
without writing weights). It writes
``custom_components/ha_personal_assistant/security/injection_model.bin``: the
int8 weight codes, the parameters and the feature settings, with the SHA-256
checksum the integration checks on loading (format in
``security/injection_model.py``). Commit the file; the integration refuses
one whose checksum, version or feature settings do not match. Knobs for
experiments, from the environment: L2, STEPS, LR, AUGMENT (share of short
injections also buried in a benign text), EXCLUDE (sets to leave out, by
name) and FOLDS (only these left-out folds).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from custom_components.ha_personal_assistant.security import (  # noqa: E402
    injection_model as im,
)
from custom_components.ha_personal_assistant.security.firewall import (  # noqa: E402
    ALWAYS_FLAG,
    PRECISE,
    analyze,
    rules_flag,
)

DATA = Path(__file__).resolve().parent
MODEL_FILE = im.MODEL_FILE
# The labelled sets: (name, file of injections, file of benign texts).
SETS: tuple[tuple[str, str, str], ...] = (
    ("dev", "injections.jsonl", "benign_texts.jsonl"),
    ("held-out 1", "holdout_injections.jsonl", "holdout_benign_texts.jsonl"),
    ("held-out 2", "holdout2_injections.jsonl", "holdout2_benign_texts.jsonl"),
    ("set 3", "holdout3_injections.jsonl", "holdout3_benign_texts.jsonl"),
    ("set 4", "holdout4_injections.jsonl", "holdout4_benign_texts.jsonl"),
    ("set 5", "holdout5_injections.jsonl", "holdout5_benign_texts.jsonl"),
    ("shapes", "shapes_injections.jsonl", "shapes_benign_texts.jsonl"),
    ("train a", "train/a_injections.jsonl", "train/a_benign_texts.jsonl"),
    ("train b", "train/b_injections.jsonl", "train/b_benign_texts.jsonl"),
    ("train c", "train/c_injections.jsonl", "train/c_benign_texts.jsonl"),
    ("train d", "train/d_injections.jsonl", "train/d_benign_texts.jsonl"),
    ("train e", "train/e_injections.jsonl", "train/e_benign_texts.jsonl"),
    ("train f", "train/f_injections.jsonl", "train/f_benign_texts.jsonl"),
    ("train g", "train/g_injections.jsonl", "train/g_benign_texts.jsonl"),
    ("train h", "train/h_injections.jsonl", "train/h_benign_texts.jsonl"),
    ("train i", "train/i_injections.jsonl", "train/i_benign_texts.jsonl"),
    ("train j", "train/j_injections.jsonl", "train/j_benign_texts.jsonl"),
    ("train k", "train/k_injections.jsonl", "train/k_benign_texts.jsonl"),
)
TARGET_FP = 0.015
L2 = float(os.environ.get("L2", "1e-5"))
STEPS = int(os.environ.get("STEPS", "400"))
LEARNING_RATE = float(os.environ.get("LR", "0.05"))
# Buried injections: short ones, inside benign texts at least this long.
SHORT_INJECTION = 300
LONG_CARRIER = 120
AUGMENT = float(os.environ.get("AUGMENT", "0.5"))
DIM = 1 << im.FEATURE_BITS


@dataclass
class Example:
    """One text as the model sees it: feature ids of the whole and its windows."""

    set_name: str
    label: int
    whole: np.ndarray
    parts: list[np.ndarray]
    rules: bool
    always: bool
    strong: bool
    text: str


def load(name: str) -> list[dict[str, str]]:
    """Return the rows of one JSONL file (none when the file is missing)."""
    path = DATA / name
    if not path.exists():
        return []
    with path.open(encoding="utf-8") as file:
        return [json.loads(line) for line in file if line.strip()]


def featurize(
    text: str,
) -> tuple[np.ndarray, list[np.ndarray], bool, bool, bool, str]:
    """Return the feature ids of a text and its windows, and the rules' verdicts."""
    found = analyze(text)
    signals = (*found.strong, *found.cues)
    whole = np.array(sorted(im.feature_ids(im.feature_names(found.readings, signals))))
    parts = [
        np.array(sorted(im.feature_ids(im.feature_names([window], signals))))
        for window in im.windows(found.folded)
    ]
    always = not ALWAYS_FLAG.isdisjoint(found.strong)
    return (
        whole,
        parts,
        rules_flag(found),
        always,
        not PRECISE.isdisjoint(found.strong),
        text,
    )


def examples() -> list[Example]:
    """Read and featurize every training set."""
    skip = set(filter(None, os.environ.get("EXCLUDE", "").split(",")))
    return [
        Example(name, label, *featurize(row["text"]))
        for name, positives, negatives in SETS
        if name not in skip
        for label, file in ((1, positives), (0, negatives))
        for row in load(file)
    ]


def fit(rows: list[tuple[np.ndarray, int, float]]) -> tuple[np.ndarray, float]:
    """Fit L2-regularized logistic regression with Adam, full batch.

    A text's features are binary and scaled to unit length (each counts
    1 / sqrt(number of features)), so a long page does not reach extreme
    scores just by having many words.
    """
    indices = np.concatenate([ids for ids, _, _ in rows])
    lengths = np.array([len(ids) for ids, _, _ in rows])
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    norms = 1.0 / np.sqrt(np.maximum(lengths, 1))
    labels = np.array([label for _, label, _ in rows], dtype=np.float64)
    weights = np.array([weight for _, _, weight in rows], dtype=np.float64)
    weights /= weights.sum()
    w = np.zeros(DIM)
    b = 0.0
    m, v = np.zeros(DIM), np.zeros(DIM)
    mb = vb = 0.0
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    for step in range(1, STEPS + 1):
        z = np.add.reduceat(w[indices], starts) * norms + b
        p = 1.0 / (1.0 + np.exp(-np.clip(z, -40, 40)))
        g = (p - labels) * weights
        grad = np.bincount(
            indices, weights=np.repeat(g * norms, lengths), minlength=DIM
        )
        grad += L2 * w
        gb = g.sum()
        m = beta1 * m + (1 - beta1) * grad
        v = beta2 * v + (1 - beta2) * grad * grad
        mb = beta1 * mb + (1 - beta1) * gb
        vb = beta2 * vb + (1 - beta2) * gb * gb
        correction = np.sqrt(1 - beta2**step) / (1 - beta1**step)
        w -= LEARNING_RATE * correction * m / (np.sqrt(v) + eps)
        b -= LEARNING_RATE * correction * mb / (np.sqrt(vb) + eps)
    return w, b


def training_rows(train: list[Example]) -> list[tuple[np.ndarray, int, float]]:
    """Weight each text by 1 / sqrt(size of its (set, label) group).

    Benign windows are negatives too, at half weight; buried injections are
    added by buried().
    """
    groups: dict[tuple[str, int], int] = {}
    for example in train:
        key = (example.set_name, example.label)
        groups[key] = groups.get(key, 0) + 1
    rows: list[tuple[np.ndarray, int, float]] = []
    for example in train:
        # The square root keeps big template sets from drowning small
        # hand-written ones without letting a tiny set dominate.
        weight = 1.0 / np.sqrt(groups[(example.set_name, example.label)])
        rows.append((example.whole, example.label, weight))
        if example.label == 0:
            rows.extend((part, 0, weight / 2) for part in example.parts)
    rows.extend(buried(train, groups))
    return rows


def buried(
    train: list[Example], groups: dict[tuple[str, int], int]
) -> list[tuple[np.ndarray, int, float]]:
    """Bury short injections inside longer benign texts of the training sets.

    Real pages carry the instruction in the middle of ordinary text; the
    hand-written sets mostly do not. Seeded, so a run is repeatable.
    """
    if AUGMENT <= 0:
        return []
    rng = np.random.default_rng(6)
    carriers = [e.text for e in train if e.label == 0 and len(e.text) >= LONG_CARRIER]
    rows: list[tuple[np.ndarray, int, float]] = []
    for example in train:
        if (
            example.label != 1
            or len(example.text) > SHORT_INJECTION
            or rng.random() > AUGMENT
        ):
            continue
        carrier = carriers[rng.integers(len(carriers))]
        cuts = [m.end() for m in re.finditer(r"[.!?]\s", carrier)] or [len(carrier)]
        cut = cuts[rng.integers(len(cuts))]
        text = f"{carrier[:cut].rstrip()} {example.text} {carrier[cut:].lstrip()}"
        whole = featurize(text)[0]
        weight = 0.5 / np.sqrt(groups[(example.set_name, 1)])
        rows.append((whole, 1, weight))
    return rows


def score(w: np.ndarray, b: float, example: Example) -> float:
    """Score like the integration: the best of the whole and its windows."""
    best = w[example.whole].sum() / np.sqrt(len(example.whole)) + b
    for part in example.parts:
        best = max(best, w[part].sum() / np.sqrt(len(part)) + b)
    return float(1.0 / (1.0 + np.exp(-np.clip(best, -40, 40))))


_DATA: list[Example] = []


def _fold(name: str) -> tuple[str, np.ndarray]:
    """Train without one set and score that set (run in a worker process)."""
    w, b = fit(training_rows([e for e in _DATA if e.set_name != name]))
    return name, np.array([score(w, b, e) for e in _DATA if e.set_name == name])


def cross_validate(
    data: list[Example],
) -> tuple[dict[str, np.ndarray], tuple[float, float]]:
    """Score every set with a model trained on the others; pick the threshold."""
    _DATA[:] = data
    names = [name for name, _, _ in SETS if any(e.set_name == name for e in data)]
    only = set(filter(None, os.environ.get("FOLDS", "").split(",")))
    names = [name for name in names if not only or name in only]
    # Folds are independent: one worker process per core (fork shares _DATA).
    with multiprocessing.get_context("fork").Pool(os.cpu_count()) as pool:
        out = dict(pool.map(_fold, names))
    return out, choose_threshold(data, out)


def blind_style(name: str) -> bool:
    """Tell whether a set was written blind by another hand, as a new set would be."""
    return name == "set 5" or name.startswith("train")


def flags(
    examples: list[Example], scores: np.ndarray, cut: float, strong_cut: float
) -> np.ndarray:
    """Decide like check_text: always-flag signs, the score, or a strong pattern."""
    always = np.array([e.always for e in examples])
    strong = np.array([e.strong for e in examples])
    return always | (scores >= cut) | (strong & (scores >= strong_cut))


def rates(
    rows: list[Example], scores: np.ndarray, cut: float, strong_cut: float
) -> tuple[np.ndarray, np.ndarray]:
    """Return which injections and which benign texts of a set are flagged."""
    flagged = flags(rows, scores, cut, strong_cut)
    labels = np.array([e.label for e in rows])
    return flagged[labels == 1], flagged[labels == 0]


def choose_threshold(
    data: list[Example], out: dict[str, np.ndarray]
) -> tuple[float, float]:
    """Return the two thresholds that catch most on the blind-style sets.

    A text is flagged at ``cut``, or at the lower ``strong_cut`` when one of
    the firewall's precise strong patterns (PRECISE: a tool name, a chat
    role, skipping confirmation) matched. The pair kept is the one with the
    highest mean TP whose mean FP stays within TARGET_FP; each left-out set
    counts once, so the sets with the most benign text do not decide alone.
    """
    sets = {
        name: ([e for e in data if e.set_name == name], out[name])
        for name in out
        if blind_style(name)
    }
    best = (-1.0, 0.5, 0.5)
    cuts = np.quantile(
        np.concatenate([scores for _, scores in sets.values()]),
        np.linspace(0.3, 0.999, 240),
    )
    for strong_cut in (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.01):
        for cut in cuts:
            found = [
                rates(rows, scores, cut, strong_cut) for rows, scores in sets.values()
            ]
            tps = [caught.mean() for caught, _ in found]
            fps = [withheld.mean() for _, withheld in found]
            if np.mean(fps) <= TARGET_FP and np.mean(tps) > best[0]:
                best = (float(np.mean(tps)), float(cut), strong_cut)
    return best[1], best[2]


def report(
    data: list[Example], out: dict[str, np.ndarray], cuts: tuple[float, float]
) -> None:
    """Print TP and FP of each left-out set at the thresholds, and with the rules."""
    cut, strong_cut = cuts
    print(
        f"leave one set out: threshold {cut:.3f}, {strong_cut:.2f} with a strong "
        f"pattern (mean FP of the blind-style sets <= {TARGET_FP:.1%})"
    )
    print(f"  {'set':<12} {'TP':>16} {'FP':>16}   rules TP / FP")
    tps, fps = [], []
    for name, scores in out.items():
        rows = [e for e in data if e.set_name == name]
        caught, withheld = rates(rows, scores, cut, strong_cut)
        tp = f"{caught.mean():7.2%} ({caught.sum()}/{len(caught)})"
        fp = f"{withheld.mean():7.2%} ({withheld.sum()}/{len(withheld)})"
        rules_tp = np.mean([e.rules for e in rows if e.label == 1])
        rules_fp = np.mean([e.rules for e in rows if e.label == 0])
        print(f"  {name:<12} {tp:>16} {fp:>16}   {rules_tp:7.2%} / {rules_fp:6.2%}")
        if blind_style(name):
            tps.append(caught.mean())
            fps.append(withheld.mean())
    if tps:
        print(
            f"  blind-style sets: TP mean {np.mean(tps):.1%} (min {min(tps):.0%}), "
            f"FP mean {np.mean(fps):.2%} (max {max(fps):.1%})"
        )


def quantize(w: np.ndarray) -> tuple[np.ndarray, float]:
    """Return the weights as int8 codes on a square-root scale, and the scale.

    A code q stands for sign(q) * (q / 127) ** 2 * scale: small weights, the
    many that add up, keep more precision than on a linear scale.
    """
    scale = float(np.abs(w).max()) or 1.0
    codes = np.sign(w) * np.sqrt(np.abs(w) / scale) * 127
    return np.clip(np.round(codes), -127, 127).astype(np.int8), scale


def dequantize(codes: np.ndarray, scale: float) -> np.ndarray:
    """Undo quantize() as the integration does."""
    values = codes.astype(np.float64) / 127
    return np.sign(values) * values * values * scale


def write(w: np.ndarray, b: float, cuts: tuple[float, float]) -> None:
    """Quantize the weights to int8 and write the model file, checksum included."""
    quantized, scale = quantize(w)
    MODEL_FILE.write_bytes(
        im.pack_model(
            quantized.tobytes(),
            scale=scale,
            bias=float(b),
            threshold=float(cuts[0]),
            strong_threshold=float(cuts[1]),
        )
    )
    # Read back as the integration does: the file checks out.
    im.read_model(MODEL_FILE)


def main() -> None:
    """Cross-validate, then fit on everything and write the weights."""
    start = time.perf_counter()
    data = examples()
    print(
        f"{len(data)} texts ({sum(e.label for e in data)} injections) "
        f"featurized in {time.perf_counter() - start:.1f} s"
    )
    if "--threshold" in sys.argv:
        # A quick fit at given thresholds, for development only.
        at = sys.argv.index("--threshold")
        cuts = (float(sys.argv[at + 1]), float(sys.argv[at + 2]))
    else:
        out, cuts = cross_validate(data)
        report(data, out, cuts)
    if "--cv-only" in sys.argv:
        return
    w, b = fit(training_rows(data))
    quantized, scale = quantize(w)
    shipped = dequantize(quantized, scale)
    flips = sum(
        flags([e], np.array([score(w, b, e)]), *cuts)[0]
        != flags([e], np.array([score(shipped, b, e)]), *cuts)[0]
        for e in data
    )
    print(f"int8 weights change {flips} of {len(data)} decisions on the training sets")
    write(w, b, cuts)
    print(f"model written to {MODEL_FILE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
