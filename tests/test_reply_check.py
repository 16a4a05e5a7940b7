"""The junk detector: every shape small models write, and answers that only look odd."""

from __future__ import annotations

import time

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from custom_components.ha_personal_assistant.agent import graph, reply_check
from custom_components.ha_personal_assistant.agent.prompts import (
    FEEDBACK_ECHO,
    FEEDBACK_EMPTY,
    FEEDBACK_JSON_DUMP,
    FEEDBACK_TEXT_TOOL_CALL,
    SYSTEM_PROMPT,
)
from custom_components.ha_personal_assistant.agent.reply_check import (
    ECHO_WORDS,
    EXCERPT_CHARS,
    Junk,
    ReplyCheck,
    corrected_before,
    rejected_answer,
)
from custom_components.ha_personal_assistant.agent.reply_loop import (
    LOOP_MIN_SPAN,
    LOOP_SENTENCES,
    loop_cut,
)
from custom_components.ha_personal_assistant.tools.registry import ToolRegistry

from .junk_replies import GOOD, JUNK, JUNK_IDS, REGISTRY, SPECS, TOOL_MODEL_SCHEMA
from .junk_replies import Junk as JunkReply
from .token_samples import LANGUAGES, intent_responses

# Answers are checked against the instructions of the registry that made
# the turn: here the junk set's tools.
CHECK = REGISTRY.reply_check


def check_reply(text: str) -> reply_check.Finding | None:
    """Check a whole answer as a turn with the junk set's tools does."""
    return reply_check.check_reply(text, CHECK)


def partial_text(text: str) -> str:
    """Cut a draft as a turn with the junk set's tools does."""
    return graph.partial_text(text, CHECK)


def shown_while_streaming(text: str) -> str:
    """Cut a draft (no reasoning removed) as a turn with those tools does."""
    return reply_check.shown_while_streaming(text, CHECK)


KINDS = {
    "tool_model_schema": Junk.SCHEMA,
    "tool_schemas_dump": Junk.SCHEMA,
    "cut_off_schema": Junk.SCHEMA,
    "json_data_dump": Junk.JSON_DUMP,
    "system_prompt_echo": Junk.ECHO,
    "system_prompt_run": Junk.ECHO,
    "tool_description_echo": Junk.ECHO,
}


@pytest.mark.parametrize("junk", JUNK, ids=JUNK_IDS)
def test_every_junk_shape_is_found(junk: JunkReply) -> None:
    """Each shape is junk of its kind, found where it starts (after its lead)."""
    finding = check_reply(junk.text)
    assert finding is not None
    assert finding.junk == KINDS.get(junk.name, Junk.TOOL_CALL)
    assert junk.text[: finding.start].strip() == junk.lead
    # The same with reasoning around it, or after a friendly opening line.
    assert check_reply(f"Let me see.\n\n{junk.text}") is not None


@pytest.mark.parametrize("junk", JUNK, ids=JUNK_IDS)
def test_a_draft_never_shows_any_of_the_junk(junk: JunkReply) -> None:
    """At every point of the stream, a draft shows at most the words before it."""
    text = junk.text
    step = 1 if len(text) < 800 else 7
    for end in [*range(1, len(text), step), len(text)]:
        shown = partial_text(text[:end])
        assert junk.lead.startswith(shown), (end, shown)


@pytest.mark.parametrize("text", GOOD)
def test_ordinary_answers_are_not_junk(text: str) -> None:
    """Entity ids, short JSON, code the user asked for and prose about tools pass."""
    assert check_reply(text) is None
    # Drafts show the answer as it grows, never anything else.
    for end in range(1, len(text) + 1):
        assert text.startswith(partial_text(text[:end]))


def test_home_assistants_own_answers_are_not_junk() -> None:
    """Assist's built-in responses in five languages, templates aside, all pass."""
    answers = [
        text
        for language in LANGUAGES
        for text in intent_responses(language)
        if "{%" not in text and "{{" not in text
    ]
    assert len(answers) > 200
    assert [text for text in answers if check_reply(text) is not None] == []


@pytest.mark.parametrize(
    "text",
    [
        "The kitchen lights are on.\nThe hall is warm.\nAnything else?",
        "Die Küchenlichter sind an, und im Flur ist es warm. Noch etwas?",
        "客厅的灯已经打开了。还有别的吗",
    ],
)
def test_drafts_of_prose_keep_up_with_the_model(text: str) -> None:
    """Prose is held back by a word or two at most, never frozen."""
    shown = partial_text(text + " ")
    assert len(shown) >= len(text) - 20


def test_the_word_being_written_is_held_back() -> None:
    """A word still being written may become a tool name: shown once it ends."""
    assert partial_text("The light is on and get_sta") == "The light is on and"
    assert partial_text("I will remember") == "I will"
    assert partial_text("I will remember that") == "I will remember"
    assert partial_text("Done. <tool_ca") == "Done."
    assert partial_text("Done. functions") == "Done."


def test_an_echo_is_hidden_from_its_first_word() -> None:
    """An answer that starts like the system prompt shows nothing of it."""
    for end in range(1, 120):
        assert partial_text(SYSTEM_PROMPT[:end]) == ""
    # An answer that only starts the same way is shown once it differs.
    assert partial_text("You are welcome! The lights are off. ") == (
        "You are welcome! The lights are off."
    )


def test_a_long_run_of_the_prompt_is_an_echo_a_shorter_one_is_not() -> None:
    """ECHO_WORDS words of the instructions in a row repeat them; fewer quote them."""
    words = SYSTEM_PROMPT.split()
    # From the middle of the prompt, behind words of the model's own.
    start = words.index("Use")
    run = " ".join(words[start : start + ECHO_WORDS])
    shorter = " ".join(words[start : start + ECHO_WORDS - 2])
    assert check_reply(f"Well, here goes: {run} and so on.") is not None
    assert check_reply(f"Well, here goes: {shorter} and so on.") is None


def test_the_real_incident_is_a_schema() -> None:
    """The tool-schema JSON that reached Telegram from a real small model."""
    assert TOOL_MODEL_SCHEMA.startswith('<tool_model>{"type": "object"')
    finding = check_reply(TOOL_MODEL_SCHEMA)
    assert finding is not None
    assert finding.junk == Junk.SCHEMA
    assert finding.feedback == FEEDBACK_JSON_DUMP


def test_each_kind_has_its_own_correction() -> None:
    """The model is told what it did wrong."""
    call = check_reply('get_state(entity_id="light.kitchen")')
    echo = check_reply(SYSTEM_PROMPT)
    assert call is not None
    assert echo is not None
    assert call.feedback == FEEDBACK_TEXT_TOOL_CALL
    assert echo.feedback == FEEDBACK_ECHO


def test_names_come_from_the_registry_disabled_tools_included() -> None:
    """A tool switched off is still a call when written out; others are prose."""
    check = ReplyCheck()
    assert check.check('schedule(message="Tea", at="17:00")') is not None
    assert check.check("schedule(tea)") is None
    named = ReplyCheck(["schedule"])
    assert named.check("Sure: schedule(tea)") is None
    assert named.check('Sure: schedule("Tea at five")') is not None
    registry = ToolRegistry(
        [spec for spec in SPECS if spec.name != "watch"],
        disabled={"watch": "switched off"},
    )
    assert "watch" not in registry
    own = registry.reply_check
    assert own.check('I will watch("binary_sensor.door")') is not None
    # Prose about watching is prose.
    assert own.check("I will watch (and tell you) when it opens.") is None
    # Another registry's tools do not change what this one checks.
    assert ToolRegistry([]).reply_check.check('watch("binary_sensor.door")') is None


def test_descriptions_of_every_tool_are_instructions() -> None:
    """A registry makes its tools' descriptions count as the prompt."""
    first, second = [spec.description for spec in SPECS if spec.description][:2]
    text = first + " " + second
    assert check_reply(text) is not None
    check = ReplyCheck()
    assert check.check(text) is None
    assert ReplyCheck(texts=[first, second]).check(text) is not None


def test_a_rejected_answer_is_read_back_short() -> None:
    """The model sees the start of what it wrote, not 4,000 characters of it."""
    message = AIMessage(content=TOOL_MODEL_SCHEMA, id="answer-1")
    excerpt = rejected_answer(message, TOOL_MODEL_SCHEMA)
    assert excerpt.id == "answer-1"
    assert isinstance(excerpt.content, str)
    assert len(excerpt.content) <= EXCERPT_CHARS + 4
    assert excerpt.content.startswith("<tool_model>")
    assert excerpt.content.endswith("[…]")
    short = rejected_answer(AIMessage(content="get_state()"), "get_state()")
    assert short.content == "get_state()"


def test_one_correction_per_turn() -> None:
    """Only a junk correction of this turn counts, not an empty-answer one."""
    turn, earlier = "turn-2", "turn-1"
    messages = [
        HumanMessage(content="hi", id=earlier),
        HumanMessage(content=FEEDBACK_TEXT_TOOL_CALL, id="feedback-1"),
        AIMessage(content="Hello."),
        HumanMessage(content="Is the light on?", id=turn),
        HumanMessage(content=FEEDBACK_EMPTY, id="feedback-2"),
    ]
    assert not corrected_before(messages, turn)
    messages.append(HumanMessage(content=FEEDBACK_ECHO, id="feedback-3"))
    assert corrected_before(messages, turn)


def test_long_answers_are_checked_quickly_enough_to_stream() -> None:
    """Every streamed piece is checked whole: it must stay cheap on the event loop.

    About a millisecond a piece of 4,000 characters on a desktop; the bound
    leaves room for a slow or busy machine.
    """
    text = "The kitchen lights are on and the hall is warm at 21 degrees. " * 65
    pieces = [text[: end + 1] for end in range(0, len(text), 4)]
    assert len(pieces) > 1000
    started = time.process_time()
    for piece in pieces:
        shown_while_streaming(piece)
    assert time.process_time() - started < 10


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        # Two sentences alternating, the stream stopped mid-word.
        (
            "It is 21 degrees inside."
            + " The heating is on. The window is closed." * 20
            + " The heat",
            "It is 21 degrees inside. The heating is on. The window is closed.",
        ),
        # A list item written again and again.
        (
            "Lights on:\n" + "- Kitchen lights (first floor)\n" * 30,
            "Lights on:\n- Kitchen lights (first floor)",
        ),
        # No sentence end inside the block: it is kept whole, once.
        (
            "ok " + "light.kitchen_lights light.hall_lights " * 20,
            "ok light.kitchen_lights light.hall_lights",
        ),
        # A loop that varies: cut once every variant has come back.
        (
            "The door is locked. "
            + "I'm here to help. I'm ready. I'm here to assist. I'm ready. " * 6,
            "The door is locked. I'm here to help. I'm ready. I'm here to assist.",
        ),
    ],
    ids=["sentences", "list", "no-sentence-end", "varying"],
)
def test_a_loop_is_cut_where_it_began(text: str, kept: str) -> None:
    """The answer keeps what came before the loop and the loop's block once."""
    cut = loop_cut(text)
    assert cut is not None
    assert text[:cut].rstrip() == kept


@pytest.mark.parametrize(
    "text",
    [
        "-" * 2000,
        "ha" * 1000,
        "Yes! " * 400,
        # A line asked for five times.
        "I will remember to water the plants.\n" * 5,
        # Long, but never the same block three times in a row.
        " ".join(f"Light {n} is on in room {n}." for n in range(200)),
        # Two repeats only.
        "The forecast says rain at noon and wind in the evening. " * 2,
        # Short sentences repeated: neither counted nor a block.
        "On. Off. " * 100,
        GOOD[0] if GOOD else "",
    ],
    ids=[
        "dashes",
        "laugh",
        "short-block",
        "five-times",
        "no-repeat",
        "twice",
        "short-sentences",
        "good",
    ],
)
def test_what_is_not_a_loop(text: str) -> None:
    """Rows of symbols, short words, a short repeat asked for: not loops."""
    assert loop_cut(text) is None


def test_a_loop_is_found_as_soon_as_it_is_long_enough() -> None:
    """Checked on every streamed chunk: it fires once the loop is long enough."""
    # Sentences: the sixth repeat in a row.
    block = "Thank you again for your visit. "
    text = "Done. " + block * 40
    first = next(n for n in range(len(text) + 1) if loop_cut(text[:n]) is not None)
    assert first <= len("Done. ") + (LOOP_SENTENCES + 1) * len(block)
    # A block without sentences: once it spans LOOP_MIN_SPAN characters.
    block = "light.kitchen_lights light.hall_lights "
    text = "ok " + block * 40
    first = next(n for n in range(len(text) + 1) if loop_cut(text[:n]) is not None)
    assert first <= len("ok ") + LOOP_MIN_SPAN + len(block)
