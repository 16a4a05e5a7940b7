"""When a task fires, in the home's time zone, and what a watch waits for.

Pure functions, no Home Assistant state: the times the model writes (``19:00``,
``2025-03-28 07:30``, ``20m``, ``in 2 hours``), the next occurrence of a
repeating task, and the condition of a watch (``open``, ``>25``, ``below 5``).

Wall-clock times are kept as wall-clock times: a daily 07:00 reminder is at
07:00 on both sides of a daylight-saving change. A time that does not exist
on a spring-forward night (02:30) fires when the clock has jumped (03:30);
one that happens twice on an autumn night fires once, the first time.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from enum import StrEnum
from functools import lru_cache
from typing import Final

# The furthest ahead a task may be set.
MAX_AHEAD: Final = timedelta(days=366)
# A delay shorter than this is almost certainly a mistake of the model.
MIN_DELAY: Final = timedelta(seconds=10)

WEEKDAYS: Final = (
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
)
_UNITS: Final = {
    "s": 1,
    "sec": 1,
    "secs": 1,
    "second": 1,
    "seconds": 1,
    "m": 60,
    "min": 60,
    "mins": 60,
    "minute": 60,
    "minutes": 60,
    "h": 3600,
    "hr": 3600,
    "hrs": 3600,
    "hour": 3600,
    "hours": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
}
_DELAY_PART: Final = re.compile(
    r"(\d+(?:[.,]\d+)?)\s*(seconds|second|secs|sec|s|minutes|minute|mins|min|m"
    r"|hours|hour|hrs|hr|h|days|day|d)(?![a-z])"
)
_DELAY: Final = re.compile(
    rf"(?:in\s+)?(?:{_DELAY_PART.pattern})(?:\s*(?:and\s+)?(?:{_DELAY_PART.pattern}))*"
)
_CLOCK: Final = re.compile(
    r"(?:at\s+)?(\d{1,2})(?:(?::|\.|h)(\d{2}))?(?::(\d{2}))?\s*(am|pm|a\.m\.|p\.m\.)?"
)
_DATE_ONLY: Final = re.compile(r"\d{4}-\d{2}-\d{2}")
HELP: Final = (
    "use a local time such as 19:00 or 7:30pm (the next one), a local date and "
    "time such as 2025-03-28 19:00, 'tomorrow 07:00', 'friday 18:00', or a "
    "delay such as 20m, 2h, 1h30m or 'in 20 minutes'"
)


class Repeat(StrEnum):
    """How often a scheduled task comes back."""

    NONE = "none"
    DAILY = "daily"
    WEEKDAYS = "weekdays"
    WEEKLY = "weekly"


class WhenError(ValueError):
    """A time, repeat or condition the model wrote that cannot be read."""


@dataclass(frozen=True, slots=True)
class When:
    """A parsed ``at``: the instant, and whether it named a time of day."""

    at: datetime
    # The wall-clock time the person named (19:00); None for a delay.
    clock: time | None = None


def local_instant(day: date, clock: time, tz: tzinfo) -> datetime:
    """Return ``clock`` on ``day`` in ``tz`` as an aware instant.

    The first of an ambiguous time (autumn); a time in a spring-forward gap
    becomes the instant the clock shows after jumping (02:30 -> 03:30).
    """
    aware = datetime.combine(day, clock.replace(tzinfo=None), tzinfo=tz)
    return aware.astimezone(UTC).astimezone(tz)


def parse_repeat(value: str | None) -> Repeat:
    """Read ``repeat``; empty means none."""
    text = (value or "none").strip().lower().replace("-", "").replace(" ", "")
    aliases = {
        "": Repeat.NONE,
        "no": Repeat.NONE,
        "never": Repeat.NONE,
        "once": Repeat.NONE,
        "everyday": Repeat.DAILY,
        "day": Repeat.DAILY,
        "weekday": Repeat.WEEKDAYS,
        "workdays": Repeat.WEEKDAYS,
        "everyweekday": Repeat.WEEKDAYS,
        "week": Repeat.WEEKLY,
        "everyweek": Repeat.WEEKLY,
    }
    if text in aliases:
        return aliases[text]
    try:
        return Repeat(text)
    except ValueError:
        msg = f"repeat must be one of none, daily, weekdays or weekly, not {value!r}"
        raise WhenError(msg) from None


def _delay(text: str) -> timedelta | None:
    if not _DELAY.fullmatch(text):
        return None
    seconds = 0.0
    for number, unit in _DELAY_PART.findall(text):
        seconds += float(number.replace(",", ".")) * _UNITS[unit]
    return timedelta(seconds=seconds)


def _clock(text: str) -> time | None:
    match = _CLOCK.fullmatch(text)
    if match is None:
        return None
    hour, minute, second = (int(match[1]), int(match[2] or 0), int(match[3] or 0))
    if suffix := match[4]:
        if not 1 <= hour <= 12:  # noqa: PLR2004 - a 12-hour clock
            return None
        hour = hour % 12 + (12 if suffix.startswith("p") else 0)
    if hour > 23 or minute > 59 or second > 59:  # noqa: PLR2004
        return None
    return time(hour, minute, second)


def _date_time(text: str, tz: tzinfo) -> datetime | None:
    if _DATE_ONLY.fullmatch(text):
        msg = f"{text!r} needs a time of day too, e.g. '{text} 09:00'"
        raise WhenError(msg)
    candidate = text.upper().replace("T", " ").strip()
    try:
        parsed = datetime.fromisoformat(candidate.replace(" ", "T", 1))
    except ValueError:
        return None
    if parsed.tzinfo is not None:
        return parsed.astimezone(tz)
    return local_instant(parsed.date(), parsed.time(), tz)


def parse_at(value: str, now: datetime) -> When:  # noqa: PLR0912 - one branch per form
    """Read ``at`` relative to ``now`` (aware, in the home's time zone).

    Raises WhenError with a sentence the model can act on.
    """
    tz = now.tzinfo
    if tz is None:
        msg = "now must be aware"
        raise ValueError(msg)
    text = " ".join(str(value).strip().lower().split())
    text = text.removesuffix(" from now").removesuffix(" later")
    if not text:
        msg = f"'at' is empty: {HELP}"
        raise WhenError(msg)
    if (delay := _delay(text)) is not None:
        if delay < MIN_DELAY:
            msg = f"a delay of {value!r} is too short; the shortest is 10 seconds"
            raise WhenError(msg)
        return _checked(When(now + delay), now, value)
    if (moment := _date_time(text, tz)) is not None:
        if moment <= now:
            msg = f"{value!r} has already passed; it is now {now:%Y-%m-%d %H:%M}"
            raise WhenError(msg)
        return _checked(When(moment, moment.timetz().replace(tzinfo=None)), now, value)
    day_word, _, rest = text.partition(" ")
    offset: int | None = None
    if day_word in ("today", "tonight", "tomorrow"):
        offset = 1 if day_word == "tomorrow" else 0
    elif day_word in WEEKDAYS or day_word.rstrip("s") in WEEKDAYS:
        target = WEEKDAYS.index(day_word.rstrip("s"))
        offset = (target - now.weekday()) % 7
    if offset is not None:
        clock = _clock(rest.removeprefix("at ").strip()) if rest else None
        if clock is None:
            msg = f"{value!r} needs a time of day, e.g. '{day_word} 07:00'"
            raise WhenError(msg)
        moment = local_instant(now.date() + timedelta(days=offset), clock, tz)
        if moment <= now:
            if day_word in ("today", "tonight"):
                msg = f"{value!r} has already passed; it is now {now:%H:%M}"
                raise WhenError(msg)
            # The same weekday, later than today's time: next week.
            moment = local_instant(now.date() + timedelta(days=offset + 7), clock, tz)
        return _checked(When(moment, clock), now, value)
    if (clock := _clock(text)) is not None:
        moment = local_instant(now.date(), clock, tz)
        if moment <= now:
            moment = local_instant(now.date() + timedelta(days=1), clock, tz)
        return _checked(When(moment, clock), now, value)
    msg = f"cannot read the time {value!r}: {HELP}"
    raise WhenError(msg)


def _checked(when: When, now: datetime, value: str) -> When:
    if when.at - now > MAX_AHEAD:
        msg = f"{value!r} is more than a year ahead"
        raise WhenError(msg)
    return when


def _allowed(repeat: Repeat, day: date, weekday: int | None) -> bool:
    if repeat is Repeat.WEEKDAYS:
        return day.weekday() < 5  # noqa: PLR2004 - Monday to Friday
    if repeat is Repeat.WEEKLY:
        return weekday is None or day.weekday() == weekday
    return True


def first_occurrence(when: When, repeat: Repeat) -> datetime:
    """Return the first time a task fires.

    A time of day on a repeating task moves to the first day the repeat
    allows ("every weekday at 06:30", said on a Saturday: Monday).
    """
    if repeat is not Repeat.WEEKDAYS or when.clock is None:
        return when.at
    tz = when.at.tzinfo
    assert tz is not None  # noqa: S101 - parse_at returns aware times
    day = when.at.date()
    while not _allowed(repeat, day, None):
        day += timedelta(days=1)
    return local_instant(day, when.clock, tz)


def next_occurrence(
    repeat: Repeat, clock: time, previous: datetime, after: datetime
) -> datetime:
    """Return the next time a repeating task fires, strictly after ``after``.

    ``previous`` is the last scheduled time, in the home's time zone: weekly
    tasks keep its weekday. ``clock`` is the wall-clock time of the task.
    """
    tz = previous.tzinfo
    assert tz is not None  # noqa: S101 - callers pass aware times
    after = after.astimezone(tz)
    weekday = previous.weekday() if repeat is Repeat.WEEKLY else None
    day = max(previous.date(), after.date())
    for _ in range(15):
        if _allowed(repeat, day, weekday):
            moment = local_instant(day, clock, tz)
            if moment > after and moment > previous:
                return moment
        day += timedelta(days=1)
    msg = f"no next occurrence for {repeat}"  # unreachable: a week has weekdays
    raise WhenError(msg)


class Compare(StrEnum):
    """How a watch compares the entity's state."""

    EQUAL = "eq"
    NOT_EQUAL = "ne"
    ABOVE = "above"
    BELOW = "below"


# Words a model may use for the two states of a binary sensor.
_BINARY_ALIASES: Final = {
    "open": "on",
    "opened": "on",
    "detected": "on",
    "motion": "on",
    "occupied": "on",
    "wet": "on",
    "running": "on",
    "closed": "off",
    "clear": "off",
    "dry": "off",
    "not detected": "off",
    "unoccupied": "off",
    "stopped": "off",
}
_NUMERIC: Final = re.compile(
    r"(>=|<=|>|<|above|over|more than|greater than|higher than|below|under"
    r"|less than|lower than)\s*(-?\d+(?:[.,]\d+)?)\s*[^\d\s]{0,4}"
)
_ABOVE_WORDS: Final = (">", ">=", "above", "over", "more than", "greater than")


@dataclass(frozen=True, slots=True)
class Condition:
    """What a watch waits for."""

    compare: Compare
    value: str
    number: float | None = None

    def matches(self, state: str | None) -> bool:
        """Tell whether an entity's state meets the condition."""
        if state is None or state in ("unavailable", "unknown"):
            return False
        if self.number is not None:
            try:
                current = float(state)
            except ValueError:
                return False
            if not math.isfinite(current):
                return False
            if self.compare is Compare.ABOVE:
                return current > self.number
            return current < self.number
        equal = state.strip().casefold() == self.value
        return equal if self.compare is Compare.EQUAL else not equal

    def describe(self) -> str:
        """Say the condition in words (for lists and messages)."""
        if self.compare is Compare.ABOVE:
            return f"above {self.value}"
        if self.compare is Compare.BELOW:
            return f"below {self.value}"
        if self.compare is Compare.NOT_EQUAL:
            return f"no longer {self.value}"
        return self.value


@lru_cache(maxsize=512)
def parse_condition(value: str, domain: str) -> Condition:
    """Read the ``state`` of a watch: a state, ``not X``, or above/below a number.

    Cached (a condition is immutable): the open watches are armed again at
    every start, many of them waiting for the same state ("on", "open").
    """
    text = " ".join(str(value).strip().casefold().split())
    if not text:
        msg = "state is empty: give the state to wait for, e.g. 'off' or '>25'"
        raise WhenError(msg)
    if (match := _NUMERIC.fullmatch(text)) is not None:
        number = float(match[2].replace(",", "."))
        above = match[1] in _ABOVE_WORDS
        shown = f"{number:g}"
        return Condition(
            Compare.ABOVE if above else Compare.BELOW, shown, number=number
        )
    compare = Compare.EQUAL
    for prefix in ("not ", "no longer ", "!=", "!"):
        if text.startswith(prefix):
            compare = Compare.NOT_EQUAL
            text = text.removeprefix(prefix).strip()
            break
    if domain == "binary_sensor":
        text = _BINARY_ALIASES.get(text, text)
    if len(text) > 100:  # noqa: PLR2004 - no state is that long
        msg = "state is too long"
        raise WhenError(msg)
    return Condition(compare, text)
