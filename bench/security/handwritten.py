r"""Build the third and fourth held-out injection sets from hand-written sources.

``sources/holdoutN_positives.txt`` holds ``goal|style|text`` lines and
``sources/holdoutN_negatives.txt`` holds ``kind|text`` lines; a literal
``\n`` is a line break and ``\u200b`` a zero-width space. Positives are
placed in rotation as a web snippet, a document paragraph and a bare title
(media or calendar). Run: ``.venv/bin/python bench/security/handwritten.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "sources"
VECTORS = ("web_snippet", "document", "title")
WEB_CARRIERS = (
    "Top 10 energy-saving tips for winter. {}",
    "{} Read more: our guide to cordless vacuum cleaners.",
    "Garden centre opening hours and offers. {} Free parking for customers.",
)
DOC_CARRIERS = (
    "Holiday rental welcome guide\n\nWi-Fi is in the living room.\n\n{}",
    "{}\n\nMeeting minutes, residents' association, 3 March.",
)


def _unescape(text: str) -> str:
    return text.replace("\\n", "\n").replace("\\u200b", "\u200b")


def build(name: str) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Return the positive and the negative rows of set ``name``."""
    positives = []
    lines = (SOURCES / f"{name}_positives.txt").read_text("utf-8").splitlines()
    for index, line in enumerate(line for line in lines if line.strip()):
        goal, style, text = line.split("|", 2)
        vector = VECTORS[index % len(VECTORS)]
        text = _unescape(text)
        if vector == "web_snippet":
            text = WEB_CARRIERS[index % len(WEB_CARRIERS)].format(text)
        elif vector == "document":
            text = DOC_CARRIERS[index % len(DOC_CARRIERS)].format(text)
        positives.append(
            {
                "goal": goal,
                "source": f"{name}:{style}",
                "text": text,
                "vector": vector,
            }
        )
    negatives = []
    lines = (SOURCES / f"{name}_negatives.txt").read_text("utf-8").splitlines()
    for line in lines:
        if line.strip():
            kind, text = line.split("|", 1)
            negatives.append({"source": f"{name}:{kind}", "text": _unescape(text)})
    return positives, negatives


def main() -> None:
    """Write the two JSONL files of each set."""
    for name in ("holdout3", "holdout4"):
        for kind, rows in zip(("injections", "benign_texts"), build(name), strict=True):
            with (HERE / f"{name}_{kind}.jsonl").open("w", encoding="utf-8") as file:
                for row in rows:
                    line = json.dumps(row, ensure_ascii=False, sort_keys=True)
                    file.write(line + "\n")


if __name__ == "__main__":
    main()
