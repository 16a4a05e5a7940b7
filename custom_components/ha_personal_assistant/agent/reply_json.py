"""JSON in an answer: tool schemas, calls written as JSON, and dumps of data.

The shapes :class:`~.reply_check.ReplyCheck` looks for in JSON, parsed or
cut off, and the word and code-fence patterns the checks share.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

# A JSON dump: JSON is most of the answer, and not short. A short JSON value
# quoted in a sentence, or JSON the user asked for shown in a code block with
# words around it, is an answer.
DUMP_MIN_CHARS: Final = 200
DUMP_SHARE: Final = 0.7
PROSE_WORDS: Final = 4

WORD_RE: Final = re.compile(r"[^\W_]+")
SPACE_RE: Final = re.compile(r"\s+")
FENCE_RE: Final = re.compile(
    r"^[ \t]*```[^\n`]*\n?(?:.*?^[ \t]*```[ \t]*$|.*\Z)", re.MULTILINE | re.DOTALL
)
FENCE_LINE_RE: Final = re.compile(r"^[ \t]*```[^\n`]*$", re.MULTILINE)
JSON_OPEN_RE: Final = re.compile(r"[\[{]")
# JSON of a call or a schema that does not parse (cut off, or single quotes).
JSON_CALL_KEYS_RE: Final = re.compile(
    r"[\"'](?:arguments|action_input|tool_calls|function_call)[\"']\s*:"
)
JSON_SCHEMA_RE: Final = re.compile(
    r"[\"']type[\"']\s*:\s*[\"'](?:object|function)[\"']"
)
JSON_PROPERTIES_RE: Final = re.compile(r"[\"'](?:properties|parameters)[\"']\s*:\s*\{")
_JSON_START_RE: Final = re.compile(r"\A\s*(?:```[^\n`]*\n)?\s*([\[{])\s*[\"'{\[]")

NAME_KEYS: Final = ("name", "function", "tool", "tool_name", "function_name")
ARGUMENT_KEYS: Final = frozenset(
    {"arguments", "parameters", "args", "input", "action_input", "tool_input"}
)
_SCHEMA_KEYS: Final = frozenset({"$schema", "$defs", "anyOf", "additionalProperties"})


def dump_start(text: str, spans: list[tuple[int, int]]) -> int | None:
    """Return where JSON that is most of the answer, and long, begins.

    Such JSON is data, not an answer. ``spans`` are the JSON values parsed.
    """
    visible = len(SPACE_RE.sub("", FENCE_LINE_RE.sub("", text)))
    in_json = sum(len(SPACE_RE.sub("", text[a:b])) for a, b in spans)
    opening = _JSON_START_RE.match(text)
    if (
        opening is not None
        and visible >= DUMP_MIN_CHARS
        and (
            # Cut off before it could be parsed: JSON from the first character on.
            not any(start == opening.start(1) for start, _ in spans)
        )
    ):
        start = opening.start(1)
    elif in_json >= DUMP_MIN_CHARS and in_json >= DUMP_SHARE * visible:
        start = spans[0][0]
    else:
        return None
    # JSON in a code block, introduced in words: shown on purpose.
    if (
        FENCE_RE.search(text)
        and len(WORD_RE.findall(FENCE_RE.sub(" ", text))) >= PROSE_WORDS
    ):
        return None
    return start


def json_start(text: str, position: int) -> int:
    """Return where the JSON around ``position`` opens (else ``position``)."""
    if (whole := _JSON_START_RE.match(text)) and whole.start(1) <= position:
        return whole.start(1)
    opening = max(text.rfind("{", 0, position + 1), text.rfind("[", 0, position + 1))
    return opening if opening >= 0 else position


def objects(value: object, depth: int = 0) -> Iterator[dict[str, Any]]:
    """Yield every object of a parsed JSON value, a few levels deep."""
    if depth > 6:  # noqa: PLR2004 - deeper is data, not a call or a schema
        return
    children: Iterable[object]
    if isinstance(value, dict):
        yield value
        children = value.values()
    elif isinstance(value, list):
        children = value
    else:
        return
    for child in children:
        yield from objects(child, depth + 1)


def is_schema(item: dict[str, Any]) -> bool:
    """Tell whether a JSON object is (part of) a tool definition or JSON schema."""
    if _SCHEMA_KEYS.intersection(item):
        return True
    if isinstance(item.get("properties"), dict) and (
        item.get("type") == "object" or "required" in item
    ):
        return True
    parameters = item.get("parameters")
    if isinstance(parameters, dict) and "properties" in parameters:
        return True
    function = item.get("function")
    return (
        item.get("type") == "function"
        and isinstance(function, dict)
        and "parameters" in function
    )
