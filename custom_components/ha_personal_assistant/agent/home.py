"""The lines that place a message: the date and time, who asks, and the home."""

from __future__ import annotations

from typing import TYPE_CHECKING

from homeassistant.util import dt as dt_util

from .entity_index import one_line

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant


def describe_moment(_hass: HomeAssistant, user_name: str | None) -> list[str]:
    """Return the lines of a message's header: date, time and who is asking.

    The date and the user are repeated only when they change (see
    ContextAssembler._live); the time comes with every message.
    """
    now = dt_util.now()
    lines = [f"Date: {now:%Y-%m-%d} ({now:%A})", f"Time: {now:%H:%M}"]
    if user_name:
        lines.append(f"User: {one_line(user_name)}")
    return lines


def describe_home(hass: HomeAssistant) -> list[str]:
    """Return the lines a session needs once: the home's name and time zone."""
    name = one_line(hass.config.location_name)
    return [f"Home: {name}, time zone {hass.config.time_zone}"]
