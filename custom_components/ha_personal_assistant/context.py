"""The live context added after the user's message: time, home and entities."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from homeassistant.util import dt as dt_util

from .tools.ha import area_name, exposed_states

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant

# Rough share of the context window for the entity list: 4 characters a token
# over-counts English, which is the safe side here.
ENTITY_SHARE: Final = 0.25
CHARS_PER_TOKEN: Final = 4
MIN_ENTITY_CHARS: Final = 1000
PROFILE_SHARE: Final = 0.05
MIN_PROFILE_CHARS: Final = 400


def entity_lines(hass: HomeAssistant, max_chars: int) -> tuple[list[str], int]:
    """Return a line per exposed entity within ``max_chars``, and the count left out."""
    lines: list[str] = []
    used = 0
    states = exposed_states(hass)
    for index, state in enumerate(states):
        area = area_name(hass, state.entity_id)
        line = f"{state.entity_id} | {state.name} | {state.state}"
        if area:
            line += f" | {area}"
        if used + len(line) + 1 > max_chars:
            return lines, len(states) - index
        lines.append(line)
        used += len(line) + 1
    return lines, 0


def profile_budget(num_ctx: int) -> int:
    """Return the characters the profile may take in the context."""
    return max(MIN_PROFILE_CHARS, int(num_ctx * PROFILE_SHARE * CHARS_PER_TOKEN))


def build_context(
    hass: HomeAssistant, *, user_name: str | None, num_ctx: int, profile: str = ""
) -> str:
    """Describe the moment, the person and the house for this turn."""
    now = dt_util.now()
    parts = [
        f"Time: {now:%Y-%m-%d %H:%M} ({now:%A}), time zone {hass.config.time_zone}",
        f"Home: {hass.config.location_name}",
    ]
    if user_name:
        parts.append(f"User: {user_name}")
    if profile:
        parts.append("What you know about this user:")
        parts.append(profile)
    max_chars = max(MIN_ENTITY_CHARS, int(num_ctx * ENTITY_SHARE * CHARS_PER_TOKEN))
    lines, left_out = entity_lines(hass, max_chars)
    if lines:
        parts.append("Entities (entity_id | name | state | area):")
        parts.extend(lines)
        if left_out:
            parts.append(f"({left_out} more: use list_entities)")
    else:
        parts.append("No entities are exposed to the assistant.")
    return "\n".join(parts)
