"""Build the held-out PII set from its hand-written source.

``sources/pii_holdout.txt`` holds the rows as their author wrote them (the
format is explained at its top); this script only turns them into the JSONL
files ``security_eval.py`` reads and checks the labels:

- every value occurs in its query;
- the rest of a query does not already count as a leak of one of its values
  by the harness's rule (six digits of a long number anywhere in the text);
- an IBAN's check digits are right;
- a look-alike carries no household name as a word, unless its shape says
  the collision is the point (``name_collision_debatable``).

It imports nothing from the integration: its author did not read the
sanitizer. Run: ``.venv/bin/python bench/security/pii_holdout.py``.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "sources" / "pii_holdout.txt"
QUERIES = HERE / "pii_holdout_queries.jsonl"
BENIGN = HERE / "pii_holdout_benign_queries.jsonl"
NAME_CATEGORIES = frozenset({"person", "pet", "device", "room", "user"})
COLLISION_SHAPE = "name_collision_debatable"
MIN_DIGITS = 6


def leaked(value: str, text: str) -> bool:
    """Tell whether ``value`` is in ``text`` by the rule of security_eval.py."""
    if value.casefold() in text.casefold():
        return True
    digits = re.sub(r"\D", "", value)
    if len(digits) < MIN_DIGITS:
        return False
    left = re.sub(r"\D", "", text)
    return any(
        digits[i : i + MIN_DIGITS] in left for i in range(len(digits) - MIN_DIGITS + 1)
    )


def iban_ok(value: str) -> bool:
    """Check an IBAN's mod-97 check digits."""
    compact = re.sub(r"\s", "", value).upper()
    moved = compact[4:] + compact[:4]
    return int("".join(str(int(char, 36)) for char in moved)) % 97 == 1


def parse(lines: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Return the PII rows and the look-alike rows of the source."""
    houses: dict[str, dict[str, Any]] = {}
    queries: list[dict[str, Any]] = []
    benign: list[dict[str, Any]] = []
    for number, raw in enumerate(lines, 1):
        line = raw.rstrip("\n")
        if not line.strip() or line.startswith("#"):
            continue
        kind, _, rest = line.partition(" ")
        if kind == "house":
            key, country, lat, lon = rest.split()
            houses[key] = {
                "country": country,
                "home": [float(lat), float(lon)],
                "names": [],
                "users": [],
            }
        elif kind in {"names", "users"}:
            key, _, items = rest.partition(": ")
            houses[key.rstrip(":")][kind] = [item.strip() for item in items.split(";")]
        elif kind == "pii":
            key, query, *labels = rest.split(" || ")
            pii = []
            for label in labels:
                category, _, value = label.partition(": ")
                pii.append(
                    {
                        "category": category,
                        "structured": category not in NAME_CATEGORIES,
                        "value": value,
                    }
                )
            queries.append(
                {"household": houses[key], "pii": pii, "query": query, "line": number}
            )
        elif kind == "benign":
            key, shape, query = rest.split(" || ")
            benign.append(
                {
                    "household": houses[key],
                    "query": query,
                    "shape": shape,
                    "line": number,
                }
            )
        else:
            msg = f"line {number}: unknown row kind {kind!r}"
            raise ValueError(msg)
    return queries, benign


def query_problems(row: dict[str, Any]) -> list[str]:
    """Return what is wrong with one PII row's labels."""
    where = f"line {row['line']}"
    found = [] if row["pii"] else [f"{where}: no value"]
    rest = row["query"]
    for pii in row["pii"]:
        if pii["value"] not in row["query"]:
            found.append(f"{where}: {pii['value']!r} is not in the query")
        rest = rest.replace(pii["value"], " ")
    for pii in row["pii"]:
        if leaked(pii["value"], rest):
            found.append(f"{where}: the rest of the query leaks {pii['value']!r}")
        if pii["category"] == "iban" and not iban_ok(pii["value"]):
            found.append(f"{where}: bad IBAN check digits {pii['value']!r}")
    return found


def benign_problems(row: dict[str, Any]) -> list[str]:
    """Return the household words (four letters or more) in one look-alike."""
    if row["shape"] == COLLISION_SHAPE:
        return []
    house = row["household"]
    words = set(re.findall(r"\w+", row["query"].casefold()))
    return [
        f"line {row['line']}: household word {word!r}"
        for name in (*house["names"], *house["users"])
        for word in re.findall(r"\w+", name.casefold())
        if len(word) > 3 and word in words  # noqa: PLR2004
    ]


def problems(queries: list[dict[str, Any]], benign: list[dict[str, Any]]) -> list[str]:
    """Return what is wrong with the labels, one line each."""
    found = [line for row in queries for line in query_problems(row)]
    found += [line for row in benign for line in benign_problems(row)]
    seen: set[str] = set()
    for row in (*queries, *benign):
        if row["query"] in seen:
            found.append(f"line {row['line']}: duplicate query")
        seen.add(row["query"])
    return found


def write(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write rows as JSONL, without the source line numbers."""
    with path.open("w", encoding="utf-8") as file:
        for row in rows:
            out = {key: value for key, value in row.items() if key != "line"}
            file.write(json.dumps(out, ensure_ascii=False, sort_keys=True) + "\n")


def main() -> int:
    """Build both files; exit 1 (writing nothing) when a label is wrong."""
    queries, benign = parse(SOURCE.read_text(encoding="utf-8").splitlines())
    if found := problems(queries, benign):
        print("\n".join(found))
        return 1
    write(QUERIES, queries)
    write(BENIGN, benign)
    values = sum(len(row["pii"]) for row in queries)
    print(
        f"{len(queries)} queries with {values} values, {len(benign)} look-alikes "
        f"in {len({row['shape'] for row in benign})} shapes"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
