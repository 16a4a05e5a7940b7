"""Answers no one should read: tool calls written as text, JSON dumps, prompt echoes.

Small models sometimes write junk where the answer belongs: a tool call as
text (in one of the many formats their training saw), their tool schemas or
raw data as JSON, or their own instructions word for word. The checks here
are deterministic (patterns, JSON parsing and exact runs of words, no model).
The graph checks every final answer (the model gets one correction, then the
user an apology), and every partial answer is cut before the first thing that
is, or may still become, junk, so a draft never shows any of it.

What counts as the model's instructions is the system prompt and the
feedback the graph writes (:data:`BASE_TEXTS`, checked by :data:`BASE_CHECK`)
plus the tool names and descriptions: each tool registry builds its own
:class:`ReplyCheck` with its tools (``ToolRegistry.reply_check``), so no
registry changes what another one's answers are checked against. These are
texts from the code, so each collection stays small.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage

from .prompts import (
    FEEDBACK_BAD_JSON,
    FEEDBACK_ECHO,
    FEEDBACK_EMPTY,
    FEEDBACK_JSON_DUMP,
    FEEDBACK_TEXT_TOOL_CALL,
    SYSTEM_PROMPT,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping


class Junk(StrEnum):
    """What is wrong with an answer, most telling first."""

    SCHEMA = "a tool schema"
    TOOL_CALL = "a tool call written as text"
    JSON_DUMP = "a JSON dump"
    ECHO = "an echo of the instructions"


FEEDBACK: Final[Mapping[Junk, str]] = MappingProxyType(
    {
        Junk.SCHEMA: FEEDBACK_JSON_DUMP,
        Junk.TOOL_CALL: FEEDBACK_TEXT_TOOL_CALL,
        Junk.JSON_DUMP: FEEDBACK_JSON_DUMP,
        Junk.ECHO: FEEDBACK_ECHO,
    }
)

# Echoes, in words (runs of letters and digits, case-folded): an answer that
# begins with this many words of the instructions, or holds this many in a
# row anywhere, repeats them. Ordinary answers share short phrases ("the
# user", "turn on the") with the prompt, and an answer about the assistant
# may paraphrase a tool ("I can search the web for current public
# information" shares 7 words), so the runs are long enough to be copies.
ECHO_START_WORDS: Final = 8
ECHO_WORDS: Final = 14
# A JSON dump: JSON is most of the answer, and not short. A short JSON value
# quoted in a sentence, or JSON the user asked for shown in a code block with
# words around it, is an answer.
DUMP_MIN_CHARS: Final = 200
DUMP_SHARE: Final = 0.7
PROSE_WORDS: Final = 4
# How much of a rejected answer the model reads back with its correction.
EXCERPT_CHARS: Final = 200

_WORD_RE: Final = re.compile(r"[^\W_]+")
_SPACE_RE: Final = re.compile(r"\s+")
# Tags and markers of the chat templates small models use for tool calls and
# turns: <tool_call>, <tool_model>, <tools>, <function=...>, <|python_tag|>,
# [TOOL_CALLS], <start_of_turn>.
_TAG_RE: Final = re.compile(
    r"</?(?:tool|function)[\w=-]*|<\|[\w-]*\|?>?|\[/?TOOL_[A-Z_]+\]"
    r"|<(?:start_of_turn|end_of_turn|im_start|im_end)\b",
    re.IGNORECASE,
)
# OpenAI- and Gemma-style call syntax: functions.get_state(...),
# to=functions.get_state, default_api.get_state(...).
_NAMESPACE_RE: Final = re.compile(r"(?:functions|default_api)\.[A-Za-z_]\w*")
# One call in Python syntax (no space before the parenthesis: prose has one),
# its arguments nested one level at most.
_CALL: Final = r"[A-Za-z_][\w.]*\((?:[^()]|\([^()]*\))*\)"
_ONLY_CALLS_RE: Final = re.compile(
    rf"\s*(?:\[\s*)?{_CALL}(?:\s*[,;]?\s*{_CALL})*\s*\]?[\s.]*", re.DOTALL
)
# Arguments given the way a tool's are: by keyword.
_CALL_ARGUMENTS_RE: Final = re.compile(r"[(,]\s*[A-Za-z_]\w*\s*=(?!=)")
# call_service's arguments as keywords: a tool call whatever the function is
# named (turn_on(entity_id="light.kitchen")), unless it is in a code block.
_SERVICE_CALL_RE: Final = re.compile(
    r"\b[A-Za-z_][\w.]*\(\s*(?:[^()]*,\s*)?(?:entity_id|domain|service)\s*="
)
_FENCE_RE: Final = re.compile(
    r"^[ \t]*```[^\n`]*\n?(?:.*?^[ \t]*```[ \t]*$|.*\Z)", re.MULTILINE | re.DOTALL
)
_FENCE_LINE_RE: Final = re.compile(r"^[ \t]*```[^\n`]*$", re.MULTILINE)
_FENCE_BEFORE_RE: Final = re.compile(r"```[^\n`]*\n\s*\Z")
_JSON_OPEN_RE: Final = re.compile(r"[\[{]")
_LINE_RE: Final = re.compile(r"^.*\S.*$", re.MULTILINE)
# JSON of a call or a schema that does not parse (cut off, or single quotes).
_JSON_CALL_KEYS_RE: Final = re.compile(
    r"[\"'](?:arguments|action_input|tool_calls|function_call)[\"']\s*:"
)
_JSON_SCHEMA_RE: Final = re.compile(
    r"[\"']type[\"']\s*:\s*[\"'](?:object|function)[\"']"
)
_JSON_PROPERTIES_RE: Final = re.compile(r"[\"'](?:properties|parameters)[\"']\s*:\s*\{")
_JSON_START_RE: Final = re.compile(r"\A\s*(?:```[^\n`]*\n)?\s*([\[{])\s*[\"'{\[]")
# While streaming: where something that may turn out to be junk begins. Code
# and JSON (an answer that opens with a list) are held back until the answer
# is whole; a name followed by "(" is code, a plural "(s)" is prose.
_HOLD_RE: Final = re.compile(r"\{|\A\s*\[|\[\s*(?:[\[{\"']|\Z)|```|`{1,2}\Z")
_PAREN_RE: Final = re.compile(r"\((?!e?s\))")
_NAME_BEFORE_RE: Final = re.compile(r"[A-Za-z_][\w.]*\Z")
# The word being written: while it is ASCII letters, digits or code
# punctuation, it may be the start of a tool name, a tag or JSON.
_TRAILING_TOKEN_RE: Final = re.compile(r"[A-Za-z0-9_.:=<>|/\\`'\"{}\[\]()-]+\Z")
_OPEN_TAG_RE: Final = re.compile(r"<[^<>\s]{0,40}\Z")

_NAME_KEYS: Final = ("name", "function", "tool", "tool_name", "function_name")
_ARGUMENT_KEYS: Final = frozenset(
    {"arguments", "parameters", "args", "input", "action_input", "tool_input"}
)
_SCHEMA_KEYS: Final = frozenset({"$schema", "$defs", "anyOf", "additionalProperties"})
_CACHED: Final = (
    "_prompt",
    "_prompt_grams",
    "_prompt_words",
    "_tool_call_re",
    "_tool_name_re",
    "_json_call_re",
)


@dataclass(frozen=True, slots=True)
class Finding:
    """Junk in an answer, and where it begins."""

    junk: Junk
    start: int

    @property
    def feedback(self) -> str:
        """Return what the model is told about its mistake."""
        return FEEDBACK[self.junk]


def _words(text: str) -> list[re.Match[str]]:
    return list(_WORD_RE.finditer(text))


def _phrase(words: Iterable[re.Match[str]]) -> str:
    return " " + " ".join(word.group().casefold() for word in words) + " "


def _alternatives(names: Iterable[str]) -> str:
    """Return a regex alternation of ``names``, longest first."""
    return "|".join(re.escape(name) for name in sorted(names, key=len, reverse=True))


class ReplyCheck:
    """The checks, for one set of tool names and instruction texts."""

    def __init__(
        self, tool_names: Iterable[str] = (), texts: Iterable[str] = ()
    ) -> None:
        """Know these tool names, and these texts as the model's instructions."""
        self._names: dict[str, None] = {}
        self._texts: dict[str, None] = {}
        self.add(tool_names, texts)

    @classmethod
    def with_tools(cls, tool_names: Iterable[str], texts: Iterable[str]) -> ReplyCheck:
        """Return a check of the base texts plus these tools' names and texts."""
        check = cls(texts=BASE_TEXTS)
        check.add(tool_names, texts)
        return check

    def add(self, tool_names: Iterable[str] = (), texts: Iterable[str] = ()) -> None:
        """Add tool names and instruction texts (those already known stay)."""
        names = [name for name in tool_names if name and name not in self._names]
        fresh = [text for text in texts if text.strip() and text not in self._texts]
        if not names and not fresh:
            return
        self._names.update(dict.fromkeys(names))
        self._texts.update(dict.fromkeys(fresh))
        if len(fresh) > 1:
            # Short texts (a tool's few words) are read out one after the
            # other: their run counts as the instructions too.
            self._texts.update(dict.fromkeys([" ".join(fresh)]))
        for attribute in _CACHED:
            self.__dict__.pop(attribute, None)

    @property
    def tool_names(self) -> list[str]:
        """Return the known tool names."""
        return list(self._names)

    @cached_property
    def _prompt(self) -> str:
        """Return the instructions as phrases of words, one line per text."""
        return "\n".join(_phrase(_words(text)) for text in self._texts)

    @cached_property
    def _prompt_grams(self) -> frozenset[tuple[str, ...]]:
        """Return every run of ECHO_WORDS words of the instructions."""
        grams: set[tuple[str, ...]] = set()
        for text in self._texts:
            words = _WORD_RE.findall(text.casefold())
            grams.update(zip(*(words[i:] for i in range(ECHO_WORDS)), strict=False))
        return frozenset(grams)

    @cached_property
    def _prompt_words(self) -> int:
        """Return the length in words of the longest instruction text."""
        return max((len(_WORD_RE.findall(text)) for text in self._texts), default=0)

    @property
    def _called(self) -> str:
        """Return a pattern of a known tool name written as a call, up to "(".

        A name with an underscore is never prose: a space may come before the
        parenthesis. One that is a word ("remember", "forget") needs none, as
        calls are written: "I'll remember (as you asked)" is prose.
        """
        coded = [name for name in self._names if not name.isalpha()]
        words = [name for name in self._names if name.isalpha()]
        called = "|".join(
            pattern
            for names, pattern in (
                (coded, rf"(?:{_alternatives(coded)})\s?"),
                (words, rf"(?:{_alternatives(words)})"),
            )
            if names
        )
        return rf"(?<![\w.])(?:\[\s*)?(?:[A-Za-z_]\w*\.)*(?:{called})"

    @cached_property
    def _tool_call_re(self) -> re.Pattern[str] | None:
        """Match a known tool called in Python syntax: get_state(entity_id=...)."""
        if not self._names:
            return None
        return re.compile(
            rf"{self._called}\(\s*"
            r"(?:\)|[A-Za-z_]\w*\s*[=:]|[\"'\[{]|[a-z_]+\.\w+\s*[,)])"
        )

    @cached_property
    def _tool_name_re(self) -> re.Pattern[str] | None:
        """Match a known tool name that is, or may become, a call."""
        if not self._names:
            return None
        return re.compile(
            rf"{self._called}(?:\s*\Z|(?=\(\s*"
            r"(?:\Z|[)\"'\[{]|[A-Za-z_][\w.]*\s*(?:\Z|[=:,)]))))"
        )

    @cached_property
    def _json_call_re(self) -> re.Pattern[str]:
        """Match a known tool named in JSON that does not parse."""
        names = _alternatives(self._names) or r"(?!)"
        keys = "|".join(_NAME_KEYS)
        return re.compile(
            rf"[{{\[,]\s*[\"'](?:{keys})[\"']\s*:\s*[\"'](?:{names})[\"']"
        )

    def _names_in(self, text: str) -> bool:
        """Tell whether a known tool name occurs in ``text`` (a cheap first look)."""
        return any(name in text for name in self._names)

    def check(self, text: str) -> Finding | None:
        """Return the junk in a whole answer, or None when it may be shown."""
        found = [
            finding
            for finding in (
                self._json(text),
                self._tags(text),
                self._calls(text),
                self._echo(text),
            )
            if finding is not None
        ]
        if (finding := _first(found)) is None:
            return None
        # Junk in a code block starts where the block does.
        if fence := _FENCE_BEFORE_RE.search(text, 0, finding.start):
            return Finding(finding.junk, fence.start())
        return finding

    def shown(self, text: str) -> str:
        """Return what of a partial answer may be shown: the text before any junk.

        Cut before what is junk already, and before what may still become
        junk: code, JSON, a tag or a tool name being written, the word being
        written, and words that so far repeat the instructions.
        """
        cut = len(text)
        if (finding := self.check(text)) is not None:
            cut = finding.start
        for pattern in (
            _HOLD_RE,
            _TRAILING_TOKEN_RE,
            _OPEN_TAG_RE,
            self._tool_name_re if self._names_in(text) else None,
        ):
            if pattern is not None and (match := pattern.search(text)):
                cut = min(cut, match.start())
        cut = min(cut, _code_call_start(text), self._echo_so_far(text))
        return text[:cut].rstrip()

    # ------------------------------------------------------------------ kinds

    def _tags(self, text: str) -> Finding | None:
        """Find a tool-call tag, or a call in OpenAI's or Gemma's syntax."""
        starts = []
        if ("<" in text or "[" in text) and (match := _TAG_RE.search(text)):
            starts.append(match.start())
        if match := _NAMESPACE_RE.search(text):
            start = match.start()
            starts.append(
                start - 3 if text[max(0, start - 3) : start] == "to=" else start
            )
        return Finding(Junk.TOOL_CALL, min(starts)) if starts else None

    def _calls(self, text: str) -> Finding | None:
        """Find a call in Python syntax."""
        starts = []
        pattern = self._tool_call_re
        if (
            pattern is not None
            and self._names_in(text)
            and (match := pattern.search(text))
        ):
            starts.append(match.start())
        outside = _FENCE_RE.sub(lambda m: " " * len(m.group()), text)
        if "=" in outside and (match := _SERVICE_CALL_RE.search(outside)):
            starts.append(match.start())
        # Nothing but calls with keyword arguments, on a line of its own or
        # in the whole answer (code fences aside): a tool call, whatever the
        # names.
        bare = _FENCE_LINE_RE.sub("", text)
        if _ONLY_CALLS_RE.fullmatch(bare) and _CALL_ARGUMENTS_RE.search(bare):
            starts.append(len(text) - len(text.lstrip()))
        if "=" in outside:
            starts.extend(
                line.start()
                for line in _LINE_RE.finditer(outside)
                if _ONLY_CALLS_RE.fullmatch(line.group())
                and _CALL_ARGUMENTS_RE.search(line.group())
            )
        return Finding(Junk.TOOL_CALL, min(starts)) if starts else None

    def _json(self, text: str) -> Finding | None:
        """Find JSON that calls a tool, defines one, or is most of the answer."""
        spans: list[tuple[int, int]] = []
        found: list[Finding] = []
        decoder = json.JSONDecoder()
        position = 0
        while (match := _JSON_OPEN_RE.search(text, position)) is not None:
            start = match.start()
            try:
                value, end = decoder.raw_decode(text, start)
            except ValueError:
                position = start + 1
                continue
            position = end
            spans.append((start, end))
            if (junk := self._json_kind(value)) is not None:
                found.append(Finding(junk, start))
        if (match := _JSON_SCHEMA_RE.search(text)) and _JSON_PROPERTIES_RE.search(text):
            found.append(Finding(Junk.SCHEMA, _json_start(text, match.start())))
        found.extend(
            Finding(Junk.TOOL_CALL, _json_start(text, match.start()))
            for pattern in (self._json_call_re, _JSON_CALL_KEYS_RE)
            if (match := pattern.search(text))
        )
        return _first(found) or _dump(text, spans)

    def _json_kind(self, value: object) -> Junk | None:
        """Tell whether parsed JSON holds a schema or a tool call."""
        objects = list(_objects(value))
        if any(_is_schema(item) for item in objects):
            return Junk.SCHEMA
        if any(self._is_call(item) for item in objects):
            return Junk.TOOL_CALL
        return None

    def _is_call(self, item: dict[str, Any]) -> bool:
        """Tell whether a JSON object is a tool call, in any of the usual shapes."""
        if "tool_calls" in item or "function_call" in item:
            return True
        function = item.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            return True
        for key in _NAME_KEYS:
            name = item.get(key)
            if isinstance(name, str) and (
                name in self._names or _ARGUMENT_KEYS.intersection(item)
            ):
                return True
        return False

    def _echo(self, text: str) -> Finding | None:
        """Find the instructions repeated from the first word, or in a long run."""
        words = _words(text)
        if not words or not self._texts:
            return None
        if len(words) >= ECHO_START_WORDS and (
            _phrase(words[:ECHO_START_WORDS]) in self._prompt
        ):
            return Finding(Junk.ECHO, words[0].start())
        grams = self._prompt_grams
        folded = [word.group().casefold() for word in words]
        windows = zip(*(folded[i:] for i in range(ECHO_WORDS)), strict=False)
        for index, window in enumerate(windows):
            if window in grams:
                return Finding(Junk.ECHO, words[index].start())
        return None

    def _echo_so_far(self, text: str) -> int:
        """Return where the last words begin if they so far repeat the instructions.

        Held back until the answer says something else: a lag of a word or
        two in ordinary answers (they share common words with the prompt),
        and an echo is never shown, not even its first word. The word being
        written counts as the start of any word.
        """
        words = _words(text)
        if not words or not self._texts:
            return len(text)
        partial = words[-1].end() == len(text)
        # A run's last words are a run too: the longest is found by halving.
        low, high = 0, min(len(words), self._prompt_words)
        while low < high:
            middle = (low + high + 1) // 2
            phrase = _phrase(words[-middle:])
            if (phrase[:-1] if partial else phrase) in self._prompt:
                low = middle
            else:
                high = middle - 1
        return words[-low].start() if low else len(text)


def _code_call_start(text: str) -> int:
    """Return where the first name(... of code begins (a plural "(s)" is prose)."""
    for paren in _PAREN_RE.finditer(text):
        if match := _NAME_BEFORE_RE.search(text, 0, paren.start()):
            return match.start()
    return len(text)


def _first(found: list[Finding]) -> Finding | None:
    """Return the most telling kind, starting where the earliest junk starts."""
    if not found:
        return None
    junk = min((finding.junk for finding in found), key=list(Junk).index)
    return Finding(junk, min(finding.start for finding in found))


def _dump(text: str, spans: list[tuple[int, int]]) -> Finding | None:
    """Find JSON that is most of the answer, and long: data, not an answer."""
    visible = len(_SPACE_RE.sub("", _FENCE_LINE_RE.sub("", text)))
    in_json = sum(len(_SPACE_RE.sub("", text[a:b])) for a, b in spans)
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
    if _FENCE_RE.search(text) and len(_words(_FENCE_RE.sub(" ", text))) >= PROSE_WORDS:
        return None
    return Finding(Junk.JSON_DUMP, start)


def _json_start(text: str, position: int) -> int:
    """Return where the JSON around ``position`` opens (else ``position``)."""
    if (whole := _JSON_START_RE.match(text)) and whole.start(1) <= position:
        return whole.start(1)
    opening = max(text.rfind("{", 0, position + 1), text.rfind("[", 0, position + 1))
    return opening if opening >= 0 else position


def _objects(value: object, depth: int = 0) -> Iterator[dict[str, Any]]:
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
        yield from _objects(child, depth + 1)


def _is_schema(item: dict[str, Any]) -> bool:
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


# What every answer is checked against: the system prompt and the graph's
# feedback. A tool registry adds its tools' names and descriptions to a check
# of its own (``ReplyCheck.with_tools``).
BASE_TEXTS: Final = (
    SYSTEM_PROMPT,
    FEEDBACK_EMPTY,
    FEEDBACK_TEXT_TOOL_CALL,
    FEEDBACK_JSON_DUMP,
    FEEDBACK_ECHO,
    FEEDBACK_BAD_JSON,
)
# The check of answers written with no tools (a briefing). Never added to.
BASE_CHECK: Final = ReplyCheck(texts=BASE_TEXTS)


def check_reply(text: str, check: ReplyCheck = BASE_CHECK) -> Finding | None:
    """Return the junk in a whole answer (see :class:`ReplyCheck`), or None."""
    return check.check(text)


def shown_while_streaming(text: str, check: ReplyCheck = BASE_CHECK) -> str:
    """Return what of a partial answer may be shown (see :meth:`ReplyCheck.shown`)."""
    return check.shown(text)


def corrected_before(messages: Iterable[AnyMessage], turn_id: str | None) -> bool:
    """Tell whether the model was already told this turn that an answer was junk."""
    corrections = set(FEEDBACK.values())
    in_turn = turn_id is None
    for message in messages:
        if message.id == turn_id:
            in_turn = True
        elif (
            in_turn
            and isinstance(message, HumanMessage)
            and isinstance(message.content, str)
            and message.content in corrections
        ):
            return True
    return False


def rejected_answer(message: AIMessage, text: str) -> AIMessage:
    """Return the rejected answer as the model reads it back: its start only.

    Enough for the model to see what it did; a 4,000-character schema read
    again would cost prompt tokens and invite another copy.
    """
    excerpt = _SPACE_RE.sub(" ", text).strip()
    if len(excerpt) > EXCERPT_CHARS:
        excerpt = excerpt[:EXCERPT_CHARS].rstrip() + " […]"
    return AIMessage(content=excerpt, id=message.id)


# A model that loops. Small models at home write the same sentences over and
# over until the output cap (a 135M model through an OpenAI-compatible
# server, which applies no repeat penalty, looped in 6 of 11 turns of
# bench/real_model): seconds of a small machine for text nobody should read.
# Two deterministic rules, checked on every streamed chunk:
#
# * sentences: LOOP_SENTENCES sentences in a row (of at least
#   LOOP_SENTENCE_WORDS words; shorter ones neither count nor break the run)
#   that each were written before in the answer. This catches loops that
#   vary ("I'm here to help." / "I'm here to assist.") once every variant
#   has been seen. The answer ends before the first of them.
# * blocks: the same block of text (LOOP_MIN_CHARS characters, LOOP_MIN_WORDS
#   different words) LOOP_REPEATS times in a row over LOOP_MIN_SPAN
#   characters, for loops without sentences (lists of ids, JSON). The answer
#   keeps the block once.
#
# Rows of dashes, a laugh, table rows about different things or a line the
# user asked for five times are not loops; a line asked for ten times is cut
# to one.
LOOP_SENTENCES: Final = 6
LOOP_SENTENCE_WORDS: Final = 3
LOOP_REPEATS: Final = 3
LOOP_MIN_CHARS: Final = 24
LOOP_MIN_SPAN: Final = 400
LOOP_MAX_CHARS: Final = 600
LOOP_MIN_WORDS: Final = 3
# The answer's last characters, looked for earlier in it to find the block.
_LOOP_PROBE: Final = 16
_LOOP_CANDIDATES: Final = 8
_SENTENCE_END_RE: Final = re.compile(r"[.!?:;\n](?=\s|\Z)")
# Where a sentence ends, for the sentence rule: a full stop, a question or
# exclamation mark before a space, or a line break.
_SENTENCE_BREAK_RE: Final = re.compile(r"[.!?]+(?=\s)|\n")


def loop_cut(text: str) -> int | None:
    """Return where to end an answer that loops, or None if it does not."""
    cut = _repeated_sentences(text)
    return cut if cut is not None else _repeated_block(text)


def _repeated_sentences(text: str) -> int | None:
    """Return where a run of LOOP_SENTENCES already written sentences begins."""
    seen: set[str] = set()
    run = 0
    run_start = 0
    position = 0
    for match in _SENTENCE_BREAK_RE.finditer(text):
        start, position = position, match.end()
        words = _WORD_RE.findall(text, start, position)
        if len(words) < LOOP_SENTENCE_WORDS:
            continue
        key = " ".join(word.casefold() for word in words)
        if key not in seen:
            seen.add(key)
            run = 0
            continue
        if not run:
            run_start = start
        run += 1
        if run >= LOOP_SENTENCES:
            return len(text[:run_start].rstrip())
    return None


def _repeated_block(text: str) -> int | None:
    """Return where to end an answer whose end repeats one block, or None.

    The answer keeps its text up to the first time the repeated block was
    written, cut back to the end of a sentence within that block if there is
    one: a handful of substring searches from the end.
    """
    end = len(text.rstrip())
    if end < LOOP_MIN_CHARS * LOOP_REPEATS:
        return None
    probe = text[end - _LOOP_PROBE : end]
    search_end = end - 1
    for _ in range(_LOOP_CANDIDATES):
        found = text.rfind(probe, 0, search_end)
        if found < 0:
            return None
        period = end - (found + _LOOP_PROBE)
        search_end = found + _LOOP_PROBE - 1
        if period < LOOP_MIN_CHARS:
            continue
        if period > LOOP_MAX_CHARS or period * LOOP_REPEATS > end:
            return None
        block = text[end - period : end]
        if any(
            text[end - (n + 1) * period : end - n * period] != block
            for n in range(1, LOOP_REPEATS)
        ):
            continue
        if len({word.casefold() for word in _WORD_RE.findall(block)}) < LOOP_MIN_WORDS:
            continue
        # Where the repetition began: walk back while the text is periodic.
        start = end - LOOP_REPEATS * period
        while start > 0 and text[start - 1] == text[start - 1 + period]:
            start -= 1
        if end - start < LOOP_MIN_SPAN:
            return None
        first = start + period
        ends = [m.end() for m in _SENTENCE_END_RE.finditer(text, start, first + 1)]
        return ends[-1] if ends else first
    return None
