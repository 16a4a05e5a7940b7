"""Which entity values are the house's own, and which are text from outside.

The taint rule needs to know, value by value, whether what an entity reports
could carry somebody else's words. An update's release notes, a news or
e-mail sensor, a to-do item, a notification's text, a song title: a service
outside the house filled them, and a gullible model obeys what it reads. So a
value is trusted only when its shape leaves no room for words:

* numbers, booleans and None; ``unknown`` and ``unavailable``; ISO dates,
  times and timestamps (and ``H:MM:SS`` durations);
* a state from the set Home Assistant fixes for the domain (``on``/``off``,
  lock, cover, valve, alarm, media player, climate, vacuum, ... states), a
  person's or tracker's ``home``, ``not_home`` or the name of one of the
  house's zones;
* a state or attribute chosen from the entity's own option list: ``options``
  (enum sensors, select, input_select), ``hvac_modes``, ``operation_list``;
  ``preset_mode`` from ``preset_modes``, ``fan_mode`` from ``fan_modes``,
  ``effect`` from ``effect_list`` and the like. These lists are written by the
  integration's code, the device's firmware or the household's own config.
  ``source_list`` is not one of them: it is filled at run time with what the
  device finds (streaming apps named by their publishers, Spotify Connect
  speakers, playlists, favourite radio stations), so ``source`` is free text;
* structural attributes: units, device and state classes, colour modes, the
  option lists themselves (each item a short token), entity ids of groups and
  persons, version numbers of updates, values from a fixed enumeration
  (``hvac_action``, ``repeat``, ``media_content_type``, ...).

Everything else that is a string is free text, hence untrusted. Names and
areas come from the registries the household edits and are not judged here.
"""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta
from enum import Enum
from typing import TYPE_CHECKING, Any, Final

from homeassistant.core import async_get_hass_or_none, valid_entity_id

if TYPE_CHECKING:
    from collections.abc import Mapping

    from homeassistant.core import HomeAssistant, State

# What the [Context] block shows instead of a state written outside the house:
# the context never carries such text, so an ordinary turn is never tainted.
STATE_PLACEHOLDER: Final = "(text: read with get_state)"

# The longest value that counts as a token of an option list or enumeration.
MAX_TOKEN_CHARS: Final = 64
# ISO dates and timestamps are never longer than this.
MAX_ISO_CHARS: Final = 40

UNKNOWN_STATES: Final = frozenset({"unknown", "unavailable", ""})
_ON_OFF: Final = frozenset({"on", "off"})
_OPEN_CLOSED: Final = frozenset({"open", "opening", "closed", "closing"})
_LOCK: Final = frozenset(
    {"locked", "locking", "unlocked", "unlocking", "jammed", "open", "opening"}
)
ALARM_STATES: Final = frozenset(
    {
        "disarmed",
        "armed_home",
        "armed_away",
        "armed_night",
        "armed_vacation",
        "armed_custom_bypass",
        "pending",
        "arming",
        "disarming",
        "triggered",
    }
)
_MEDIA_PLAYER: Final = frozenset(
    {"off", "on", "idle", "playing", "paused", "standby", "buffering"}
)
_HVAC_MODES: Final = frozenset(
    {"off", "heat", "cool", "heat_cool", "auto", "dry", "fan_only"}
)
_WATER_HEATER: Final = frozenset(
    {"eco", "electric", "performance", "high_demand", "heat_pump", "gas", "off", "on"}
)
_WEATHER: Final = frozenset(
    {
        "clear-night",
        "cloudy",
        "exceptional",
        "fog",
        "hail",
        "lightning",
        "lightning-rainy",
        "partlycloudy",
        "pouring",
        "rainy",
        "snowy",
        "snowy-rainy",
        "sunny",
        "windy",
        "windy-variant",
    }
)
_PRESENCE: Final = frozenset({"home", "not_home"})

# States whose set Home Assistant fixes for the domain. Domains whose state is
# a number or a timestamp (sensor, number, counter, todo, zone, scene, button,
# event, notify, date, time, ...) need no entry: those shapes are trusted
# everywhere. text and input_text hold free text and have none on purpose.
FIXED_STATES: Final[Mapping[str, frozenset[str]]] = {
    **dict.fromkeys(
        (
            "light",
            "switch",
            "fan",
            "input_boolean",
            "automation",
            "script",
            "siren",
            "remote",
            "humidifier",
            "update",
            "calendar",
            "binary_sensor",
            "schedule",
        ),
        _ON_OFF,
    ),
    "alert": _ON_OFF | {"idle"},
    "lock": _LOCK,
    "cover": _OPEN_CLOSED,
    "valve": _OPEN_CLOSED,
    "alarm_control_panel": ALARM_STATES,
    "media_player": _MEDIA_PLAYER,
    "climate": _HVAC_MODES,
    "water_heater": _WATER_HEATER,
    "vacuum": frozenset({"cleaning", "docked", "error", "idle", "paused", "returning"}),
    "lawn_mower": frozenset(
        {"mowing", "docked", "error", "idle", "paused", "returning"}
    ),
    "camera": frozenset({"idle", "recording", "streaming"}),
    "assist_satellite": frozenset({"idle", "listening", "processing", "responding"}),
    "sun": frozenset({"above_horizon", "below_horizon"}),
    "timer": frozenset({"idle", "active", "paused"}),
    "weather": _WEATHER,
    "plant": frozenset({"ok", "problem"}),
    # A group takes the states of its members' domains.
    "group": _ON_OFF
    | _OPEN_CLOSED
    | _LOCK
    | _PRESENCE
    | frozenset({"ok", "problem", "playing", "paused", "idle"}),
    "person": _PRESENCE,
    "device_tracker": _PRESENCE,
}
# Domains whose state may also be the name of one of the house's zones.
ZONE_DOMAINS: Final = frozenset({"person", "device_tracker"})
# Attributes whose list is the set the state is chosen from.
STATE_OPTION_LISTS: Final = ("options", "hvac_modes", "operation_list")

# An attribute holding the entity's current choice -> the list it must be in.
CHOSEN_FROM: Final[Mapping[str, str]] = {
    "preset_mode": "preset_modes",
    "fan_mode": "fan_modes",
    "swing_mode": "swing_modes",
    "swing_horizontal_mode": "swing_horizontal_modes",
    "effect": "effect_list",
    "fan_speed": "fan_speed_list",
    "mode": "available_modes",
    "operation_mode": "operation_list",
    "event_type": "event_types",
    "tone": "available_tones",
    "current_activity": "activity_list",
}

# Attributes set by the integration's code or the household's configuration:
# trusted while every item is a short token (an option list with a sentence
# in it is free text after all).
STRUCTURAL: Final = frozenset(
    {
        "unit_of_measurement",
        "device_class",
        "state_class",
        "color_mode",
        "supported_color_modes",
        "code_format",
        "options",
        "hvac_modes",
        "fan_modes",
        "preset_modes",
        "swing_modes",
        "swing_horizontal_modes",
        "effect_list",
        "sound_mode_list",
        "fan_speed_list",
        "available_modes",
        "available_tones",
        "operation_list",
        "event_types",
        "activity_list",
        "temperature_unit",
        "pressure_unit",
        "wind_speed_unit",
        "visibility_unit",
        "precipitation_unit",
        "frontend_stream_type",
        "supported_speeds",
        # A receiver's listening mode ("Movie", "Dolby Atmos"): the device's
        # own vocabulary, reported even where the list is not.
        "sound_mode",
        # A text entity's allowed pattern: its configuration.
        "pattern",
    }
)
# Attributes that list entities (groups, persons, zones): trusted when every
# item is an entity id.
ENTITY_LISTS: Final = frozenset(
    {"entity_id", "device_trackers", "persons", "group_members"}
)
# Attributes whose value comes from a fixed enumeration.
ENUMERATED: Final[Mapping[str, frozenset[str]]] = {
    "hvac_action": frozenset(
        {
            "off",
            "preheating",
            "heating",
            "cooling",
            "drying",
            "idle",
            "fan",
            "defrosting",
        }
    ),
    "action": frozenset({"off", "idle", "humidifying", "drying"}),
    "direction": frozenset({"forward", "reverse"}),
    "repeat": frozenset({"off", "all", "one"}),
    "media_content_type": frozenset(
        {
            "album",
            "app",
            "apps",
            "artist",
            "channel",
            "channels",
            "composer",
            "contributing_artist",
            "episode",
            "game",
            "genre",
            "image",
            "movie",
            "music",
            "playlist",
            "podcast",
            "season",
            "track",
            "tvshow",
            "url",
            "video",
        }
    ),
    "previous_state": ALARM_STATES,
    "next_state": ALARM_STATES,
    "away_mode": _ON_OFF,
    "source_type": frozenset({"gps", "router", "bluetooth", "bluetooth_le"}),
    # number and text entities' input mode, automations' and scripts' run mode.
    "mode": frozenset(
        {
            "auto",
            "box",
            "slider",
            "text",
            "password",
            "single",
            "restart",
            "queued",
            "parallel",
        }
    ),
}
# Version numbers of update entities: digits first, no spaces.
VERSION_KEYS: Final = frozenset(
    {"installed_version", "latest_version", "skipped_version"}
)
_VERSION: Final = re.compile(r"v?\d[\w.+~-]{0,39}")
_DURATION: Final = re.compile(r"-?(?:\d+ days?, )?\d{1,3}:\d{2}:\d{2}(?:\.\d+)?")
# A person's tracker: an entity id in ``source``, for persons only (a media
# player's ``source`` is free text).
_ENTITY_ID_SOURCE_DOMAINS: Final = frozenset({"person"})


def _numeric(text: str) -> bool:
    if len(text) > MAX_ISO_CHARS:
        return False
    try:
        float(text)
    except ValueError:
        return False
    return True


def _iso(text: str) -> bool:
    if len(text) > MAX_ISO_CHARS or not text[:1].isdigit():
        return False
    for parse in (datetime.fromisoformat, date.fromisoformat, time.fromisoformat):
        try:
            parse(text)
        except ValueError:
            continue
        return True
    return _DURATION.fullmatch(text) is not None


def plain_value(value: object) -> bool:
    """Tell whether a value's shape leaves no room for words.

    Numbers, booleans, None, dates and times (as objects or ISO text),
    ``unknown``/``unavailable``, and lists of these.
    """
    if value is None or isinstance(value, (bool, int, float, date, time, timedelta)):
        return True
    if isinstance(value, str):
        text = value.strip()
        return text.casefold() in UNKNOWN_STATES or _numeric(text) or _iso(text)
    if isinstance(value, (list, tuple)):
        return all(plain_value(item) for item in value)
    return False


def _token(value: object) -> bool:
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, str):
        return len(value) <= MAX_TOKEN_CHARS and "\n" not in value
    return plain_value(value)


def _tokens(value: object) -> bool:
    if isinstance(value, (list, tuple, set, frozenset)):
        return all(_token(item) for item in value)
    return _token(value)


def _in_list(value: object, options: object) -> bool:
    """Tell whether ``value`` is a short item of the option list ``options``."""
    if not isinstance(options, (list, tuple)) or not _token(value):
        return False
    text = str(value.value if isinstance(value, Enum) else value)
    return any(
        str(item.value if isinstance(item, Enum) else item) == text for item in options
    )


def zone_names(hass: HomeAssistant | None) -> frozenset[str]:
    """Return the names of the house's zones (a person's state may be one)."""
    if hass is None:
        return frozenset()
    return frozenset(state.name for state in hass.states.async_all("zone"))


def state_is_trusted(state: State, hass: HomeAssistant | None = None) -> bool:
    """Tell whether an entity's state is the house's own and not outside text."""
    value = state.state
    if plain_value(value):
        return True
    if value in FIXED_STATES.get(state.domain, ()):
        return True
    attributes = state.attributes
    if any(_in_list(value, attributes.get(key)) for key in STATE_OPTION_LISTS):
        return True
    if state.domain in ZONE_DOMAINS:
        return value in zone_names(
            hass if hass is not None else async_get_hass_or_none()
        )
    return False


def attribute_is_trusted(  # noqa: PLR0911 - a return per rule reads best
    state: State, key: str, value: Any
) -> bool:
    """Tell whether an attribute's value is the house's own and not outside text."""
    if plain_value(value):
        return True
    if key in STRUCTURAL:
        return _tokens(value)
    if key in ENTITY_LISTS or (
        key == "source" and state.domain in _ENTITY_ID_SOURCE_DOMAINS
    ):
        items = value if isinstance(value, (list, tuple)) else [value]
        return all(isinstance(item, str) and valid_entity_id(item) for item in items)
    if key in VERSION_KEYS:
        return isinstance(value, str) and _VERSION.fullmatch(value) is not None
    if (options := CHOSEN_FROM.get(key)) is not None and _in_list(
        value, state.attributes.get(options)
    ):
        return True
    if (allowed := ENUMERATED.get(key)) is not None:
        text = value.value if isinstance(value, Enum) else value
        return text in allowed
    return False


def context_state(state: State) -> str:
    """Return the state as the [Context] block may show it.

    Outside text never enters the context: it would taint every turn. The
    model reads it with get_state, which fences it and taints that turn.
    """
    return state.state if state_is_trusted(state) else STATE_PLACEHOLDER
