"""Answers small models write instead of an answer, and answers that only look odd.

Each junk answer comes with its lead: the words before the junk, the most a
draft may show of it (usually nothing).
"""

# ruff: noqa: E501 -- one junk answer a line reads best as a table.

from __future__ import annotations

import json
from typing import Final, NamedTuple

from custom_components.ha_personal_assistant.agent.prompts import SYSTEM_PROMPT
from custom_components.ha_personal_assistant.tasks.tools import task_tools
from custom_components.ha_personal_assistant.tools.documents import document_tools
from custom_components.ha_personal_assistant.tools.ha import HA_TOOLS
from custom_components.ha_personal_assistant.tools.memory import memory_tools
from custom_components.ha_personal_assistant.tools.recorder import RECORDER_TOOLS
from custom_components.ha_personal_assistant.tools.registry import (
    ToolRegistry,
    ToolSpec,
)
from custom_components.ha_personal_assistant.tools.web import web_tools

# Every tool, in the integration's order (runtime.py): the described ones are
# read one after the other, as the model reads them.
SPECS: Final[list[ToolSpec]] = [
    *HA_TOOLS,
    *RECORDER_TOOLS,
    *web_tools(None),  # type: ignore[arg-type]
    *document_tools(None),  # type: ignore[arg-type]
    *memory_tools(None),  # type: ignore[arg-type]
    *task_tools(None),  # type: ignore[arg-type]
]
# Built like the integration builds it: the registry tells the checks what
# the model reads about its tools.
REGISTRY: Final = ToolRegistry(SPECS)
SCHEMAS: Final = REGISTRY.schemas()


class Junk(NamedTuple):
    """A junk answer, and what of it a draft may show."""

    name: str
    text: str
    lead: str = ""


_KITCHEN = '{"entity_id": "light.kitchen_lights"}'
# The answer that reached Telegram from a real small model: 3,646 characters.
TOOL_MODEL_SCHEMA: Final = "<tool_model>" + json.dumps(
    {
        "type": "object",
        "properties": {
            spec["function"]["name"]: spec["function"]["parameters"] for spec in SCHEMAS
        },
    }
)
TOOL_RESULT: Final = json.dumps(
    {
        "entity_id": "light.kitchen_lights",
        "state": "on",
        "attributes": {
            "friendly_name": "Kitchen Lights",
            "brightness": 180,
            "color_mode": "hs",
            "hs_color": [345, 75],
            "supported_color_modes": ["hs", "color_temp"],
            "min_color_temp_kelvin": 2000,
            "max_color_temp_kelvin": 6535,
        },
        "last_changed": "2026-01-01T10:00:00+00:00",
    }
)

JUNK: Final = [
    Junk("tool_model_schema", TOOL_MODEL_SCHEMA),
    Junk("tool_call_tag", f'<tool_call>\n{{"name": "get_state", "arguments": {_KITCHEN}}}\n</tool_call>'),
    Junk("function_tag", f"<function=get_state>{_KITCHEN}</function>"),
    Junk("json_name_arguments", '{"name": "call_service", "arguments": {"domain": "light", "service": "turn_on", "entity_id": "light.kitchen_lights"}}'),
    Junk("json_function", f'{{"function": "get_state", "parameters": {_KITCHEN}}}'),
    Junk("json_function_object", f'{{"type": "function", "function": {{"name": "get_state", "arguments": {_KITCHEN}}}}}'),
    Junk("json_list_of_calls", f'[{{"name": "get_state", "arguments": {_KITCHEN}}}, {{"name": "list_entities", "arguments": {{"domain": "light"}}}}]'),
    Junk("json_fenced", f'Let me check.\n```json\n{{"name": "get_state", "arguments": {_KITCHEN}}}\n```', "Let me check."),
    Junk("json_single_quotes", "{'name': 'get_state', 'arguments': {'entity_id': 'light.kitchen_lights'}}"),
    Junk("mistral_tool_calls", f'[TOOL_CALLS][{{"name": "get_state", "arguments": {_KITCHEN}}}]'),
    Junk("python_tag", '<|python_tag|>get_state.call(entity_id="light.kitchen_lights")'),
    Junk("functions_dot", f"functions.get_state({_KITCHEN})"),
    Junk("to_functions", f"to=functions.get_state {_KITCHEN}"),
    Junk("python_get_state", 'get_state(entity_id="light.kitchen_lights")'),
    Junk("python_call_service", 'Sure! call_service(domain="light", service="turn_on", entity_id="light.kitchen_lights")', "Sure!"),
    Junk("python_positional", "I'll check: get_state(\"light.kitchen_lights\")", "I'll check:"),
    Junk("python_list", '[get_state(entity_id="light.kitchen_lights")]'),
    Junk("tool_code_fence", '```tool_code\nprint(default_api.get_state(entity_id="light.kitchen_lights"))\n```'),
    Junk("service_as_function", 'Turning it on. light.turn_on(entity_id="light.kitchen_lights")', "Turning it on."),
    Junk("unknown_tool_call", 'HassTurnOn(name="kitchen lights", area="kitchen")'),
    Junk("tool_schemas_dump", json.dumps(SCHEMAS)),
    Junk("cut_off_schema", json.dumps(SCHEMAS)[:500]),
    Junk("json_data_dump", TOOL_RESULT),
    Junk("system_prompt_echo", SYSTEM_PROMPT + "\n\nThe kitchen lights are on."),
    Junk("system_prompt_run", "Sure. Use only entities listed here or returned by tools, by exact entity_id. Answer briefly in the user's language.", "Sure."),
    Junk("tool_description_echo", " ".join(spec.description for spec in SPECS if spec.description)),
]  # fmt: skip

JUNK_IDS: Final = [junk.name for junk in JUNK]

# Answers that must reach the user as they are.
GOOD: Final = [
    "The kitchen lights (light.kitchen_lights) are on.",
    "light.kitchen_lights is on at 70 % brightness.",
    'Its attributes are {"brightness": 255, "color_mode": "hs"}.',
    "Its hs_color is [345, 75].",
    '{"brightness": 255}',
    "I used get_state to check: the lights are on.",
    "I'll remember (as you asked) that you like tea.",
    "I'll remember (note: you like tea) next time.",
    "get_state (the tool) said the lights are on.",
    "I can forget that if you want. Should I?",
    "You are welcome! The lights are off.",
    (
        "I can see and control only the Home Assistant entities that are "
        "exposed to me, so I can't see the garage."
    ),
    "I can search the web for current public information if you like.",
    "If you are unsure, ask me: I answer in the language you write in.",
    (
        "Here is an automation you can paste:\n```yaml\nalias: Kitchen at sunset\n"
        "triggers:\n  - trigger: sun\n    event: sunset\nactions:\n"
        "  - action: light.turn_on\n    target:\n"
        "      entity_id: light.kitchen_lights\n```"
    ),
    (
        "In a python_script you can write:\n```python\n"
        'hass.services.call("light", "turn_on", {"entity_id": "light.kitchen"}, False)\n'
        "```\nThen reload the scripts."
    ),
    "Here is the service data as JSON, as you asked:\n```json\n"
    + json.dumps(
        {
            "brightness": 128,
            "color_temp_kelvin": 3000,
            "transition": 2,
            "effect": "none",
            "rgb_color": [255, 180, 120],
            "xy_color": [0.5, 0.4],
            "flash": "short",
            "profile": "relax",
        },
        indent=2,
    )
    + "\n```\nSend it with light.turn_on.",
    '```python\nprint("hello")\n```',
    "Lights on: kitchen, hall and porch [3 of 5].",
    "The lamp(s) in the hall are on; it is < 20 °C outside.",
    "Das Licht in der Küche ist an.",
    "客厅的灯已经打开了。",
    "1. Kitchen: on\n2. Hall: off\n3. Porch: on",
    "The timer is optional (default = 10 minutes).",
    "Turn it on (domain = light, if you set it up as one).",
]
