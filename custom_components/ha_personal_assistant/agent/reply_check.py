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
registry changes what another one's answers are checked against. A check
is built whole and never changed. These are texts from the code, so each
collection stays small. The JSON shapes are in reply_json.py; answers that
loop are cut by reply_loop.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
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
from .reply_json import (
    ARGUMENT_KEYS,
    FENCE_LINE_RE,
    FENCE_RE,
    JSON_CALL_KEYS_RE,
    JSON_OPEN_RE,
    JSON_PROPERTIES_RE,
    JSON_SCHEMA_RE,
    NAME_KEYS,
    SPACE_RE,
    WORD_RE,
    dump_start,
    is_schema,
    json_start,
    objects,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping


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
# How much of a rejected answer the model reads back with its correction.
EXCERPT_CHARS: Final = 200

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
_FENCE_BEFORE_RE: Final = re.compile(r"```[^\n`]*\n\s*\Z")
_LINE_RE: Final = re.compile(r"^.*\S.*$", re.MULTILINE)
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
    return list(WORD_RE.finditer(text))


def _phrase(words: Iterable[re.Match[str]]) -> str:
    return " " + " ".join(word.group().casefold() for word in words) + " "


def _alternatives(names: Iterable[str]) -> str:
    """Return a regex alternation of ``names``, longest first."""
    return "|".join(re.escape(name) for name in sorted(names, key=len, reverse=True))


def _instructions(groups: Iterable[tuple[str, ...]]) -> tuple[str, ...]:
    """Return the instruction texts of each group, each once.

    Short texts (a tool's few words) are read out one after the other: the
    run of a group's new texts counts as the instructions too.
    """
    known: dict[str, None] = {}
    for group in groups:
        fresh = [text for text in group if text.strip() and text not in known]
        known.update(dict.fromkeys(fresh))
        if len(fresh) > 1:
            known.update(dict.fromkeys([" ".join(fresh)]))
    return tuple(known)


def _called(names: tuple[str, ...]) -> str:
    """Return a pattern of a known tool name written as a call, up to "(".

    A name with an underscore is never prose: a space may come before the
    parenthesis. One that is a word ("remember", "forget") needs none, as
    calls are written: "I'll remember (as you asked)" is prose.
    """
    coded = [name for name in names if not name.isalpha()]
    words = [name for name in names if name.isalpha()]
    called = "|".join(
        pattern
        for group, pattern in (
            (coded, rf"(?:{_alternatives(coded)})\s?"),
            (words, rf"(?:{_alternatives(words)})"),
        )
        if group
    )
    return rf"(?<![\w.])(?:\[\s*)?(?:[A-Za-z_]\w*\.)*(?:{called})"


class ReplyCheck:
    """The checks, for one set of tool names and instruction texts.

    Built whole and never changed: a registry, or a test, builds its own.
    """

    __slots__ = (
        "_json_call_re",
        "_known_names",
        "_names",
        "_prompt",
        "_prompt_grams",
        "_prompt_words",
        "_texts",
        "_tool_call_re",
        "_tool_name_re",
    )

    def __init__(
        self,
        tool_names: Iterable[str] = (),
        texts: Iterable[str] = (),
        *,
        base: Iterable[str] = (),
    ) -> None:
        """Know these tool names, and ``base`` and ``texts`` as the instructions."""
        self._names: Final = tuple(dict.fromkeys(name for name in tool_names if name))
        self._known_names: Final = frozenset(self._names)
        self._texts: Final = _instructions((tuple(base), tuple(texts)))
        # The instructions as phrases of words, one line per text.
        self._prompt: Final = "\n".join(_phrase(_words(text)) for text in self._texts)
        # Every run of ECHO_WORDS words of the instructions.
        grams: set[tuple[str, ...]] = set()
        for text in self._texts:
            words = WORD_RE.findall(text.casefold())
            grams.update(zip(*(words[i:] for i in range(ECHO_WORDS)), strict=False))
        self._prompt_grams: Final = frozenset(grams)
        # The length in words of the longest instruction text.
        self._prompt_words: Final = max(
            (len(WORD_RE.findall(text)) for text in self._texts), default=0
        )
        called = _called(self._names)
        # A known tool called in Python syntax: get_state(entity_id=...).
        self._tool_call_re: Final = (
            re.compile(
                rf"{called}\(\s*"
                r"(?:\)|[A-Za-z_]\w*\s*[=:]|[\"'\[{]|[a-z_]+\.\w+\s*[,)])"
            )
            if self._names
            else None
        )
        # A known tool name that is, or may become, a call.
        self._tool_name_re: Final = (
            re.compile(
                rf"{called}(?:\s*\Z|(?=\(\s*"
                r"(?:\Z|[)\"'\[{]|[A-Za-z_][\w.]*\s*(?:\Z|[=:,)]))))"
            )
            if self._names
            else None
        )
        # A known tool named in JSON that does not parse.
        names = _alternatives(self._names) or r"(?!)"
        keys = "|".join(NAME_KEYS)
        self._json_call_re: Final = re.compile(
            rf"[{{\[,]\s*[\"'](?:{keys})[\"']\s*:\s*[\"'](?:{names})[\"']"
        )

    @classmethod
    def with_tools(cls, tool_names: Iterable[str], texts: Iterable[str]) -> ReplyCheck:
        """Return a check of the base texts plus these tools' names and texts."""
        return cls(tool_names, texts, base=BASE_TEXTS)

    @property
    def tool_names(self) -> list[str]:
        """Return the known tool names."""
        return list(self._names)

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
        outside = FENCE_RE.sub(lambda m: " " * len(m.group()), text)
        if "=" in outside and (match := _SERVICE_CALL_RE.search(outside)):
            starts.append(match.start())
        # Nothing but calls with keyword arguments, on a line of its own or
        # in the whole answer (code fences aside): a tool call, whatever the
        # names.
        bare = FENCE_LINE_RE.sub("", text)
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
        while (match := JSON_OPEN_RE.search(text, position)) is not None:
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
        if (match := JSON_SCHEMA_RE.search(text)) and JSON_PROPERTIES_RE.search(text):
            found.append(Finding(Junk.SCHEMA, json_start(text, match.start())))
        found.extend(
            Finding(Junk.TOOL_CALL, json_start(text, match.start()))
            for pattern in (self._json_call_re, JSON_CALL_KEYS_RE)
            if (match := pattern.search(text))
        )
        if found:
            return _first(found)
        dump = dump_start(text, spans)
        return None if dump is None else Finding(Junk.JSON_DUMP, dump)

    def _json_kind(self, value: object) -> Junk | None:
        """Tell whether parsed JSON holds a schema or a tool call."""
        items = list(objects(value))
        if any(is_schema(item) for item in items):
            return Junk.SCHEMA
        if any(self._is_call(item) for item in items):
            return Junk.TOOL_CALL
        return None

    def _is_call(self, item: dict[str, Any]) -> bool:
        """Tell whether a JSON object is a tool call, in any of the usual shapes."""
        if "tool_calls" in item or "function_call" in item:
            return True
        function = item.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            return True
        for key in NAME_KEYS:
            name = item.get(key)
            if isinstance(name, str) and (
                name in self._known_names or ARGUMENT_KEYS.intersection(item)
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
# The check of answers written with no tools (a briefing).
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
    excerpt = SPACE_RE.sub(" ", text).strip()
    if len(excerpt) > EXCERPT_CHARS:
        excerpt = excerpt[:EXCERPT_CHARS].rstrip() + " […]"
    return AIMessage(content=excerpt, id=message.id)
