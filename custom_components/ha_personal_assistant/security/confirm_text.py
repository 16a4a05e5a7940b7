"""The words of a Confirm message: what a pending action does, said from real data.

Each call is described from the entities it touches (names from Home
Assistant, one-lined, bounded), never from the model's prose: verbs of our
own or Home Assistant's names of its services, data values quoted with codes
hidden, what a scene sets, and which outside text made the assistant ask.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from homeassistant.const import ATTR_ENTITY_ID
from homeassistant.helpers.translation import async_get_translations

from ..agent.satellite import EXTRA_PROMPT_SOURCE
from ..const import DOMAIN, LOGGER
from ..policy.people import NOT_KNOWN_SOURCE
from ..policy.targets import scene_states
from ..telegram.origin import (
    FORWARDED_SOURCE,
    QUOTED_SOURCE,
    UNCHECKED_SOURCE,
    VIA_BOT_SOURCE,
)
from .names import model_name
from .service_fields import KnownFields, async_known_fields

if TYPE_CHECKING:
    from collections.abc import Sequence

    from homeassistant.core import HomeAssistant

    from ..i18n import Texts
    from ..policy.verdict import ResolvedCall, Verdict

# Readable verbs for the confirmation message (keys of the translations); the
# other actions take Home Assistant's own name of the service.
VERBS: Final = {
    ("lock", "unlock"): "verb_lock_unlock",
    ("lock", "open"): "verb_lock_open",
    ("lock", "lock"): "verb_lock_lock",
    ("cover", "open_cover"): "verb_cover_open",
    ("cover", "close_cover"): "verb_cover_close",
    ("cover", "set_cover_position"): "verb_cover_move",
    ("cover", "toggle"): "verb_cover_toggle",
    ("valve", "open_valve"): "verb_cover_open",
    ("valve", "set_valve_position"): "verb_cover_move",
    ("alarm_control_panel", "alarm_disarm"): "verb_alarm_disarm",
    ("alarm_control_panel", "alarm_arm_away"): "verb_alarm_arm_away",
    ("alarm_control_panel", "alarm_arm_home"): "verb_alarm_arm_home",
    ("alarm_control_panel", "alarm_arm_night"): "verb_alarm_arm_night",
    ("alarm_control_panel", "alarm_arm_vacation"): "verb_alarm_arm_vacation",
    ("alarm_control_panel", "alarm_trigger"): "verb_alarm_trigger",
    ("camera", "turn_off"): "verb_turn_off",
    ("camera", "turn_on"): "verb_turn_on",
    ("automation", "trigger"): "verb_automation_trigger",
    ("scene", "turn_on"): "verb_scene_activate",
}
# The integration's own calls (tasks/manager.py), confirmed like services:
# said with the task's id and the integration's description of it.
TASK_VERBS: Final = {
    (DOMAIN, "create_task"): "verb_task_create",
    (DOMAIN, "cancel_task"): "verb_task_cancel",
    # HA's timers on a voice satellite (tools/assist_api.py): the device's
    # name as "task", the duration and name as "summary".
    (DOMAIN, "start_timer"): "verb_timer_start",
    (DOMAIN, "cancel_timer"): "verb_timer_cancel",
}
# The same for a service of any domain.
SERVICE_VERBS: Final = {
    "turn_on": "verb_turn_on",
    "turn_off": "verb_turn_off",
    "toggle": "verb_toggle",
}
# The integration's descriptions of untrusted text (ToolContext.taint_sources)
# and how the Confirm message names them in the person's language.
PHOTO_SOURCE: Final = "a photo"
# Listed tasks whose messages were written while outside text was in a prompt.
TASKS_SOURCE: Final = "tasks made while outside text was in the conversation"
_SOURCE_KEYS: Final = {
    PHOTO_SOURCE: "source_photo",
    TASKS_SOURCE: "source_tasks",
    "a web search": "source_web",
    "the household's documents": "source_documents",
    NOT_KNOWN_SOURCE: "source_not_known",
    EXTRA_PROMPT_SOURCE: "source_extra_prompt",
    FORWARDED_SOURCE: "source_forwarded",
    VIA_BOT_SOURCE: "source_via_bot",
    QUOTED_SOURCE: "source_quoted",
    UNCHECKED_SOURCE: "source_unchecked",
}
_ENTITY_TEXT: Final = re.compile(r"text of ([a-z0-9_]+\.[a-z0-9_]+)")
_TOOL_RESULTS: Final = re.compile(r"([a-z_]+) results")


# Bounds of the confirmation message: one short line per value, and never
# more than Telegram's message can carry.
MAX_NAME_CHARS: Final = 60
MAX_VALUE_CHARS: Final = 80
MAX_KEY_CHARS: Final = 40
MAX_ENTITIES_SHOWN: Final = 10
MAX_VALUES_SHOWN: Final = 10
MAX_EFFECTS_SHOWN: Final = 10
MAX_CALLS_SHOWN: Final = 10
MAX_SOURCES_SHOWN: Final = 5
MAX_ERROR_CHARS: Final = 300
# A task's description in the Confirm message (tasks/describe.summary_line).
MAX_TASK_CHARS: Final = 240
# Combining marks kept per character: more stack up over the lines around.
MAX_MARKS: Final = 2
# Unicode categories dropped: format characters (bidi overrides and isolates,
# zero-width spaces and joiners, soft hyphens, tags), private use, surrogates
# and unassigned code points.
_DROPPED: Final = frozenset({"Cf", "Co", "Cs", "Cn"})
# Control characters and line or paragraph separators become spaces.
_SPACES: Final = frozenset({"Cc", "Zl", "Zp", "Zs"})
_PLAIN_KEY: Final = re.compile(r"[a-z][a-z0-9_]*")
_PLAIN_STATE: Final = re.compile(r"[a-z0-9_]+")
# Data keys whose value is never echoed: lock and alarm codes, PINs, passwords.
_SECRET_WORDS: Final = frozenset(
    {"code", "pin", "pass", "password", "passwd", "pwd", "secret", "token", "otp"}
)
_SECRET_ENDINGS: Final = ("code", "pin", "pass", "password", "pwd", "secret", "token")


def one_line(value: object, limit: int) -> str:
    """Reduce text to one line of at most ``limit`` characters.

    Newlines and control characters become spaces; bidi, zero-width and other
    invisible format characters are removed, so nothing can start a line of
    its own, reorder the text around it or hide inside it.
    """
    chars: list[str] = []
    marks = 0
    for char in str(value):
        category = unicodedata.category(char)
        if category in _DROPPED:
            continue
        if category in _SPACES:
            char = " "  # noqa: PLW2901 - the replacement is the point
        if category.startswith("M"):
            marks += 1
            if marks > MAX_MARKS:
                continue
        else:
            marks = 0
        chars.append(char)
    line = " ".join("".join(chars).split())
    if len(line) > limit:
        line = line[: limit - 1].rstrip() + "…"
    return line


def quoted(value: object, limit: int) -> str:
    """Return text as one bounded line in double quotes, inner quotes escaped."""
    return json.dumps(one_line(value, limit), ensure_ascii=False)


def is_secret_key(key: str) -> bool:
    """Tell whether a data key names a code, PIN or password (never echoed)."""
    words = re.split(r"[^a-z0-9]+", key.lower())
    return any(
        word in _SECRET_WORDS or word.endswith(_SECRET_ENDINGS) for word in words
    )


def _key_text(key: object) -> str:
    text = str(key)
    if _PLAIN_KEY.fullmatch(text) and len(text) <= MAX_KEY_CHARS:
        return text
    return quoted(text, MAX_KEY_CHARS)


def _cleaned(value: object, texts: Texts) -> object:
    """Return a list or mapping with its texts one-lined and its codes hidden."""
    if isinstance(value, Mapping):
        return {
            one_line(key, MAX_KEY_CHARS): (
                texts("not_shown") if is_secret_key(str(key)) else _cleaned(item, texts)
            )
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_cleaned(item, texts) for item in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return one_line(value, MAX_VALUE_CHARS)


def describe_value(key: str, value: object, texts: Texts) -> str:
    """Render one service data value as one bounded line; text quoted, codes hidden."""
    if is_secret_key(key):
        return texts("code_given")
    if value is None or isinstance(value, (bool, int, float)):
        return json.dumps(value)
    if isinstance(value, str):
        return quoted(value, MAX_VALUE_CHARS)
    text = json.dumps(
        _cleaned(value, texts), ensure_ascii=False, separators=(", ", ": "), default=str
    )
    return one_line(text, MAX_VALUE_CHARS)


def entity_label(
    hass: HomeAssistant, entity_id: str, *, for_model: bool = False
) -> str:
    """Name an entity as HA names it, on one bounded line, with its id.

    ``for_model``: the text goes to the model, which never reads a name a
    device chose (security/names.py).
    """
    state = hass.states.get(entity_id)
    if state is None:
        name = ""
    else:
        name = one_line(
            model_name(hass, state) if for_model else state.name, MAX_NAME_CHARS
        )
    return f"{name} ({entity_id})" if name else entity_id


def _scene_effects(hass: HomeAssistant, scene_id: str, texts: Texts) -> list[str]:
    """Describe what a scene of HA's own sets, one member per line."""
    states = scene_states(hass, scene_id)
    if not states:
        return []
    lines = []
    for entity_id, state in list(states.items())[:MAX_EFFECTS_SHOWN]:
        value = state.state
        shown = (
            value
            if _PLAIN_STATE.fullmatch(value) and len(value) <= MAX_KEY_CHARS
            else quoted(value, MAX_VALUE_CHARS)
        )
        lines.append(
            texts("scene_sets", entity=entity_label(hass, entity_id), state=shown)
        )
    if len(states) > MAX_EFFECTS_SHOWN:
        lines.append(texts("and_more", count=len(states) - MAX_EFFECTS_SHOWN))
    return lines


def describe_call(  # noqa: PLR0913 - the call and how it is rendered
    hass: HomeAssistant,
    call: ResolvedCall,
    texts: Texts,
    service_names: Mapping[str, str] | None = None,
    known_fields: KnownFields | None = None,
    *,
    for_model: bool = False,
) -> str:
    """Describe a resolved call from the entities it touches, never from model prose.

    The first line is the action and its entities (names from HA, one-lined);
    then one bounded line per data value (text in quotes, codes never shown)
    and, for a scene, one line per entity it sets. ``service_names`` holds
    Home Assistant's names of the services in the reader's language (the
    ``services`` translations), for the actions without a verb of our own.
    Only the data keys ``known_fields`` lists for the service (its
    description's fields, service_fields.py) are shown; the others are
    counted, none of their text shown (the model wrote the keys too).
    """
    if (task_key := TASK_VERBS.get((call.domain, call.service))) is not None:
        return texts(
            task_key,
            task=call.data.get("task"),
            summary=one_line(call.data.get("summary"), MAX_TASK_CHARS),
        )
    names = [
        entity_label(hass, e, for_model=for_model)
        for e in call.entity_ids[:MAX_ENTITIES_SHOWN]
    ]
    if len(call.entity_ids) > MAX_ENTITIES_SHOWN:
        names.append(texts("and_more", count=len(call.entity_ids) - MAX_ENTITIES_SHOWN))
    listed = ", ".join(names)
    key = VERBS.get((call.domain, call.service)) or SERVICE_VERBS.get(call.service)
    name = (service_names or {}).get(
        f"component.{call.domain}.services.{call.service}.name"
    )
    if key is not None:
        head = texts(key, names=listed)
    elif name:
        # Home Assistant's name, such as "Set target temperature".
        head = texts(
            "verb_service", service=one_line(name, MAX_NAME_CHARS), names=listed
        )
    else:
        # A service without a name in any language: its id.
        head = f"{call.service.replace('_', ' ').capitalize()} {listed}".rstrip()
    lines = [head]
    known = (known_fields or {}).get((call.domain, call.service), frozenset())
    data = {k: v for k, v in call.data.items() if k != ATTR_ENTITY_ID}
    details = sorted(
        ((k, v) for k, v in data.items() if isinstance(k, str) and k in known),
        key=lambda item: item[0],
    )
    others = len(data) - len(details)
    lines.extend(
        f"{_key_text(key)}: {describe_value(key, value, texts)}"
        for key, value in details[:MAX_VALUES_SHOWN]
    )
    if len(details) > MAX_VALUES_SHOWN:
        lines.append(texts("more_values", count=len(details) - MAX_VALUES_SHOWN))
    if others:
        lines.append(
            texts("other_field") if others == 1 else texts("other_fields", count=others)
        )
    if (call.domain, call.service) == ("scene", "turn_on"):
        for scene_id in call.entity_ids[:MAX_ENTITIES_SHOWN]:
            lines.extend(_scene_effects(hass, scene_id, texts))
    return "\n  ".join(lines)


def summarize(
    hass: HomeAssistant,
    calls: Sequence[ResolvedCall],
    texts: Texts,
    service_names: Mapping[str, str] | None = None,
    known_fields: KnownFields | None = None,
) -> str:
    """Describe every call of a pending action, one per line when several."""
    lines = [
        describe_call(hass, call, texts, service_names, known_fields)
        for call in calls[:MAX_CALLS_SHOWN]
    ]
    if len(calls) > MAX_CALLS_SHOWN:
        lines.append(texts("more_actions", count=len(calls) - MAX_CALLS_SHOWN))
    if len(lines) == 1:
        return lines[0]
    return "\n".join(f"• {line}" for line in lines)


async def async_summarize(
    hass: HomeAssistant, calls: Sequence[ResolvedCall], texts: Texts
) -> str:
    """Describe the calls, naming services as Home Assistant does in the language."""
    domains = {call.domain for call in calls}
    try:
        names = await async_get_translations(hass, texts.language, "services", domains)
    except Exception as err:  # noqa: BLE001 - the service ids still name them
        LOGGER.debug("No service names in %s: %s", texts.language, err)
        names = {}
    return summarize(hass, calls, texts, names, await async_known_fields(hass, calls))


def source_label(source: str, texts: Texts) -> str:
    """Name a source of untrusted text in the reader's language."""
    if (key := _SOURCE_KEYS.get(source)) is not None:
        return texts(key)
    if match := _ENTITY_TEXT.fullmatch(source):
        return texts("source_entity_text", entity=match.group(1))
    if match := _TOOL_RESULTS.fullmatch(source):
        return texts("source_tool_results", tool=match.group(1))
    return source


def taint_reason(verdicts: Sequence[Verdict], texts: Texts) -> str | None:
    """Say, in the integration's words, why outside text makes this ask.

    None when no outside text was in the conversation. The sources are the
    integration's own descriptions (ToolContext.taint_sources), one-lined.
    """
    sources = list(
        dict.fromkeys(
            line
            for verdict in verdicts
            for source in verdict.taint_sources
            if (line := one_line(source_label(source, texts), MAX_NAME_CHARS))
        )
    )
    if not sources:
        return None
    shown = sources[:MAX_SOURCES_SHOWN]
    if len(sources) > MAX_SOURCES_SHOWN:
        shown.append(texts("and_more", count=len(sources) - MAX_SOURCES_SHOWN))
    listed = ", ".join(shown)
    if any(verdict.because_of_taint for verdict in verdicts):
        return texts("taint_asks", sources=listed)
    return texts("taint_note", sources=listed)
