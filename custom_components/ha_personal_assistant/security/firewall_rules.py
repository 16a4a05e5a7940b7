"""The content firewall's patterns, read from their data files (firewall_data/).

``rules.json`` holds the structure: the order of the strong patterns and the
weak cues (the order their reasons are reported in) and the shared fragments
(``{{actions}}``, ``{{owner}}``, ...) and the patterns that read asides (a
P.S., an FAQ answer). Each language file
(``<language>.json``, with a ``version``) holds that language's alternatives,
by pattern; ``mixed.json`` holds the alternatives that pair words of several
languages in one expression (a verb of one with a noun of another). A text
matches a pattern when it matches one of its alternatives, in any language.

They are read once, when the module is imported: Home Assistant imports a
custom integration in its import executor, never on the event loop. The
result is frozen.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

DATA_DIR: Final = Path(__file__).parent / "firewall_data"
DATA_VERSION: Final = 1
RULES_FILE: Final = "rules.json"
# English first, as the patterns were written; the order of alternatives does
# not change whether a pattern matches.
FIRST_LANGUAGE: Final = "en.json"
_FRAGMENT: Final = re.compile(r"\{\{(\w+)\}\}")

type Patterns = tuple[tuple[str, re.Pattern[str]], ...]


@dataclass(frozen=True, slots=True)
class FirewallRules:
    """The compiled patterns, each with the reason it names."""

    # Strong patterns, then weak cues, in the order of rules.json.
    strong: Patterns
    weak: Patterns
    # A command verb capitalized in the middle of a sentence, read before
    # lower-casing.
    embedded_command: re.Pattern[str]
    # The patterns that find a P.S. or an FAQ answer and read it, by name.
    asides: dict[str, re.Pattern[str]]
    fragments: dict[str, str]


def _read(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if data.get("version") != DATA_VERSION:
        msg = f"{path.name}: version {data.get('version')}, expected {DATA_VERSION}"
        raise ValueError(msg)
    return data


def _expand(source: str, fragments: dict[str, str]) -> str:
    """Put the shared fragments in place of their ``{{name}}``."""
    return _FRAGMENT.sub(lambda match: fragments[match.group(1)], source)


def _compile(
    labels: list[str],
    alternatives: dict[str, list[str]],
    fragments: dict[str, str],
) -> Patterns:
    compiled: list[tuple[str, re.Pattern[str]]] = []
    for label in labels:
        sources = alternatives.pop(label, [])
        if not sources:
            msg = f"firewall pattern {label!r} has no alternative"
            raise ValueError(msg)
        compiled.append(
            (label, re.compile("|".join(_expand(s, fragments) for s in sources)))
        )
    if alternatives:
        msg = f"firewall alternatives for unknown patterns: {sorted(alternatives)}"
        raise ValueError(msg)
    return tuple(compiled)


def load_rules(directory: Path = DATA_DIR) -> FirewallRules:
    """Read and compile the data files (blocking: call at import or in an executor)."""
    rules = _read(directory / RULES_FILE)
    fragments: dict[str, str] = dict(rules["fragments"])
    strong: dict[str, list[str]] = {}
    weak: dict[str, list[str]] = {}
    embedded: list[str] = []
    languages = sorted(
        (path for path in directory.glob("*.json") if path.name != RULES_FILE),
        key=lambda path: (path.name != FIRST_LANGUAGE, path.name),
    )
    for path in languages:
        data = _read(path)
        for target, key in ((strong, "strong"), (weak, "weak")):
            for label, sources in data.get(key, {}).items():
                target.setdefault(label, []).extend(sources)
        embedded.extend(data.get("embedded_command", ()))
    if not embedded:
        msg = "the firewall's data has no embedded_command"
        raise ValueError(msg)
    return FirewallRules(
        strong=_compile(rules["strong"], strong, fragments),
        weak=_compile(rules["weak"], weak, fragments),
        embedded_command=re.compile(
            "|".join(_expand(source, fragments) for source in embedded)
        ),
        asides={
            name: re.compile(_expand(source, fragments))
            for name, source in rules["asides"].items()
        },
        fragments=fragments,
    )


RULES: Final = load_rules()
