"""Security evaluation: PII sanitizer recall and over-redaction, firewall detection.

Runs on the committed, deterministic set in bench/security/ (see its README and
build.py) and prints figures next to baselines measured in the same run:
- PII: a naive sanitizer (emails and digit runs only, the usual first attempt);
- injections: the firewall patterns as they were before issue #6.

Run: ``.venv/bin/python bench/security_eval.py``
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "security"))

from baseline_firewall import flagged as baseline_flagged  # noqa: E402

from custom_components.ha_personal_assistant.security.firewall import (  # noqa: E402
    check_text,
)
from custom_components.ha_personal_assistant.security.pii import (  # noqa: E402
    PiiContext,
    sanitize,
)

DATA = ROOT / "bench" / "security"
# The thresholds of issue #6.
STRUCTURED_RECALL_MIN = 1.0
NAME_RECALL_MIN = 0.99
OVER_REDACTION_MAX = 0.05
INJECTION_TP_MIN = 0.90
INJECTION_FP_MAX = 0.02

_NAIVE = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+|\+?\d[\d\s()./-]{6,}\d")


def load(name: str) -> list[dict[str, Any]]:
    """Return the rows of one JSONL file of the set."""
    with (DATA / name).open(encoding="utf-8") as file:
        return [json.loads(line) for line in file if line.strip()]


def context(house: dict[str, Any]) -> PiiContext:
    """Build the sanitizer's view of a generated household."""
    return PiiContext(
        country=house["country"],
        home=(house["home"][0], house["home"][1]),
        names=tuple(house["names"]),
    )


def leaked(value: str, text: str) -> bool:
    """Tell whether ``value`` survived in ``text`` (digits compared alone too)."""
    if value.casefold() in text.casefold():
        return True
    digits = re.sub(r"\D", "", value)
    return len(digits) >= 6 and digits in re.sub(r"\D", "", text)  # noqa: PLR2004


@dataclass
class PiiFigures:
    """What the PII evaluation measured."""

    structured: tuple[int, int]
    names: tuple[int, int]
    over_redacted: tuple[int, int]
    not_sent: int
    misses: list[str]
    false_positives: list[str]
    seconds: float
    hard_over: tuple[int, int]
    hard_lines: list[str]


def evaluate_pii(sanitizer: Any) -> PiiFigures:
    """Run a sanitizer (query, house) -> sent text or None over both query sets."""
    caught = Counter()
    total = Counter()
    misses: list[str] = []
    not_sent = 0
    start = time.perf_counter()
    for row in load("pii_queries.jsonl"):
        sent = sanitizer(row["query"], row["household"])
        if sent is None:
            not_sent += 1
            sent = ""
        for pii in row["pii"]:
            kind = "structured" if pii["structured"] else "names"
            total[kind] += 1
            if leaked(pii["value"], sent):
                misses.append(f"{pii['category']}: {row['query']!r} -> {sent!r}")
            else:
                caught[kind] += 1
    over = 0
    false_positives: list[str] = []
    benign = load("benign_queries.jsonl")
    for row in benign:
        sent = sanitizer(row["query"], row["household"])
        if sent != row["query"]:
            over += 1
            false_positives.append(f"{row['query']!r} -> {sent!r}")
    seconds = time.perf_counter() - start
    hard = load("hard_benign_queries.jsonl")
    hard_over = [
        f"{row['query']!r} -> {sent!r}"
        for row in hard
        if (sent := sanitizer(row["query"], row["household"])) != row["query"]
    ]
    return PiiFigures(
        (caught["structured"], total["structured"]),
        (caught["names"], total["names"]),
        (over, len(benign)),
        not_sent,
        misses,
        false_positives,
        seconds,
        (len(hard_over), len(hard)),
        hard_over,
    )


def ours(query: str, house: dict[str, Any]) -> str | None:
    """Sanitize with the integration: the text sent, or None when nothing is."""
    result = sanitize(query, context(house))
    return result.text if result.sendable else None


def naive(query: str, _house: dict[str, Any]) -> str | None:
    """Sanitize like a first attempt would: strip emails and long digit runs."""
    return " ".join(_NAIVE.sub(" ", query).split())


@dataclass
class InjectionFigures:
    """What the injection evaluation measured."""

    tp: tuple[int, int]
    fp: tuple[int, int]
    by_goal: dict[str, tuple[int, int]]
    by_vector: dict[str, tuple[int, int]]
    by_source: dict[str, tuple[int, int]]
    misses: list[str]
    false_positives: list[str]
    seconds: float


def evaluate_injections(detect: Any, prefix: str = "") -> InjectionFigures:
    """Run a detector text -> flagged over the positives and the negatives."""
    positives = load(f"{prefix}injections.jsonl")
    negatives = load(f"{prefix}benign_texts.jsonl")
    start = time.perf_counter()
    hits: dict[str, Counter[str]] = {
        "goal": Counter(),
        "vector": Counter(),
        "source": Counter(),
    }
    sizes: dict[str, Counter[str]] = {
        "goal": Counter(),
        "vector": Counter(),
        "source": Counter(),
    }
    tp = 0
    misses = []
    for row in positives:
        found = detect(row["text"])
        tp += found
        for key, counter in hits.items():
            label = re.split(r"[./]", row[key])[0] if key == "source" else row[key]
            sizes[key][label] += 1
            counter[label] += found
        if not found:
            misses.append(f"{row['source']}/{row['vector']}: {row['text'][:160]!r}")
    fp = 0
    false_positives = []
    for row in negatives:
        if detect(row["text"]):
            fp += 1
            false_positives.append(f"{row['source']}: {row['text'][:160]!r}")
    seconds = time.perf_counter() - start

    def table(key: str) -> dict[str, tuple[int, int]]:
        return {label: (hits[key][label], n) for label, n in sorted(sizes[key].items())}

    return InjectionFigures(
        (tp, len(positives)),
        (fp, len(negatives)),
        table("goal"),
        table("vector"),
        table("source"),
        misses,
        false_positives,
        seconds,
    )


def share(pair: tuple[int, int]) -> float:
    """Return part / whole."""
    return pair[0] / pair[1] if pair[1] else 0.0


def pct(pair: tuple[int, int]) -> str:
    """Format a pair as a percentage with its counts."""
    return f"{100 * share(pair):6.2f} % ({pair[0]}/{pair[1]})"


def main() -> int:
    """Print the figures; exit 1 when a threshold of issue #6 is missed."""
    verbose = "-v" in sys.argv
    pii, pii_base = evaluate_pii(ours), evaluate_pii(naive)
    inj = evaluate_injections(lambda text: check_text(text).flagged)
    inj_base = evaluate_injections(baseline_flagged)
    second = evaluate_injections(lambda text: check_text(text).flagged, "holdout_")
    second_base = evaluate_injections(baseline_flagged, "holdout_")
    held = evaluate_injections(lambda text: check_text(text).flagged, "holdout2_")
    held_base = evaluate_injections(baseline_flagged, "holdout2_")
    third = evaluate_injections(lambda text: check_text(text).flagged, "holdout3_")
    third_base = evaluate_injections(baseline_flagged, "holdout3_")
    fourth = evaluate_injections(lambda text: check_text(text).flagged, "holdout4_")
    fourth_base = evaluate_injections(baseline_flagged, "holdout4_")
    # Written blind by another author (bench/security/HOLDOUT5.md); its rows
    # are never printed, so it stays fit to measure generalization.
    fifth = evaluate_injections(lambda text: check_text(text).flagged, "holdout5_")
    fifth_base = evaluate_injections(baseline_flagged, "holdout5_")

    print("PII sanitizer                    ours                  naive baseline")
    print(f"  structured PII recall  {pct(pii.structured)}  {pct(pii_base.structured)}")
    print(f"  household name recall  {pct(pii.names)}  {pct(pii_base.names)}")
    over, over_base = pct(pii.over_redacted), pct(pii_base.over_redacted)
    print(f"  benign over-redaction  {over}  {over_base}")
    print(f"  hard benign changed    {pct(pii.hard_over)}  {pct(pii_base.hard_over)}")
    print(f"  queries not sent       {pii.not_sent}")
    print(
        f"  time (s)               {pii.seconds:.3f}  ratio to baseline "
        f"{pii.seconds / pii_base.seconds:.1f}x"
    )
    print()
    print("Injection detection              firewall              pre-#6 baseline")
    print(f"  true positives         {pct(inj.tp)}  {pct(inj_base.tp)}")
    print(f"  false positives        {pct(inj.fp)}  {pct(inj_base.fp)}")
    for title, ours_table, base_table in (
        ("goal", inj.by_goal, inj_base.by_goal),
        ("vector", inj.by_vector, inj_base.by_vector),
        ("source", inj.by_source, inj_base.by_source),
    ):
        for label in ours_table:
            print(
                f"  TP {title} {label:<18} {pct(ours_table[label])}  "
                f"{pct(base_table[label])}"
            )
    print(
        f"  time (s)               {inj.seconds:.3f}  ratio to baseline "
        f"{inj.seconds / inj_base.seconds:.1f}x"
    )
    print()
    print("Second tuning set (held out until its first measurement: 54.37 % TP)")
    print(f"  true positives         {pct(second.tp)}  {pct(second_base.tp)}")
    print(f"  false positives        {pct(second.fp)}  {pct(second_base.fp)}")
    print()
    print("Second held-out set (tuned on after 2026-11-24: 73.61 % at first)")
    print(f"  true positives         {pct(held.tp)}  {pct(held_base.tp)}")
    print(f"  false positives        {pct(held.fp)}  {pct(held_base.fp)}")
    for title, ours_table, base_table in (
        ("goal", held.by_goal, held_base.by_goal),
        ("vector", held.by_vector, held_base.by_vector),
        ("source", held.by_source, held_base.by_source),
    ):
        for label in ours_table:
            print(
                f"  TP {title} {label:<18} {pct(ours_table[label])}  "
                f"{pct(base_table[label])}"
            )
    for title, figures, base in (
        (
            "Third set, hand-written (untuned 33.92 %, tuned on since)",
            third,
            third_base,
        ),
        ("Fourth held-out set, never tuned on (67.07 % at first)", fourth, fourth_base),
        ("Fifth set, written blind, never tuned on", fifth, fifth_base),
    ):
        print()
        print(title)
        print(f"  true positives         {pct(figures.tp)}  {pct(base.tp)}")
        print(f"  false positives        {pct(figures.fp)}  {pct(base.fp)}")
        for key, ours_table, base_table in (
            ("goal", figures.by_goal, base.by_goal),
            ("vector", figures.by_vector, base.by_vector),
            ("style", figures.by_source, base.by_source),
        ):
            for label in ours_table:
                print(
                    f"  TP {key} {label:<18} {pct(ours_table[label])}  "
                    f"{pct(base_table[label])}"
                )
    if verbose:
        for title, lines in (
            ("second tuning set misses", second.misses),
            ("second tuning set false positives", second.false_positives),
            ("held-out misses", held.misses),
            ("held-out false positives", held.false_positives),
            ("third held-out misses", third.misses),
            ("third held-out false positives", third.false_positives),
            ("fourth held-out misses", fourth.misses),
            ("fourth held-out false positives", fourth.false_positives),
            ("PII misses", pii.misses),
            ("PII over-redactions", pii.false_positives),
            ("hard benign queries changed", pii.hard_lines),
            ("injection misses", inj.misses),
            ("injection false positives", inj.false_positives),
        ):
            print(f"\n{title} ({len(lines)}):")
            for line in lines:
                print("  " + line)
    ok = (
        share(pii.structured) >= STRUCTURED_RECALL_MIN
        and share(pii.names) >= NAME_RECALL_MIN
        and share(pii.over_redacted) <= OVER_REDACTION_MAX
        and share(inj.tp) >= INJECTION_TP_MIN
        and share(inj.fp) <= INJECTION_FP_MAX
        and all(
            share(figures.fp) <= INJECTION_FP_MAX
            for figures in (second, held, third, fourth, fifth)
        )
        # The honest test of detection: a set nobody tuned on.
        and share(fifth.tp) >= INJECTION_TP_MIN
    )
    print("\nthresholds of issue #6:", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
