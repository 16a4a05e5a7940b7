"""Task times: what ``at``, ``repeat`` and a watch's ``state`` mean, DST included."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from custom_components.ha_personal_assistant.tasks.when import (
    Compare,
    Repeat,
    WhenError,
    first_occurrence,
    local_instant,
    next_occurrence,
    parse_at,
    parse_condition,
    parse_repeat,
)

HOME = ZoneInfo("Europe/Berlin")
# Friday 28 March 2025, 17:00 in Berlin; DST starts on Sunday 30 March.
NOW = datetime(2025, 3, 28, 17, 0, tzinfo=HOME)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("19:00", datetime(2025, 3, 28, 19, 0, tzinfo=HOME)),
        ("07:30", datetime(2025, 3, 29, 7, 30, tzinfo=HOME)),
        ("7", datetime(2025, 3, 29, 7, 0, tzinfo=HOME)),
        ("at 7pm", datetime(2025, 3, 28, 19, 0, tzinfo=HOME)),
        ("7:30 am", datetime(2025, 3, 29, 7, 30, tzinfo=HOME)),
        ("12am", datetime(2025, 3, 29, 0, 0, tzinfo=HOME)),
        ("19.45", datetime(2025, 3, 28, 19, 45, tzinfo=HOME)),
        ("2025-03-28 19:00", datetime(2025, 3, 28, 19, 0, tzinfo=HOME)),
        ("2025-03-29T08:15:00", datetime(2025, 3, 29, 8, 15, tzinfo=HOME)),
        ("2025-03-28T18:00:00+00:00", datetime(2025, 3, 28, 19, 0, tzinfo=HOME)),
        ("tomorrow 07:00", datetime(2025, 3, 29, 7, 0, tzinfo=HOME)),
        ("today at 18:00", datetime(2025, 3, 28, 18, 0, tzinfo=HOME)),
        ("Monday 6:30", datetime(2025, 3, 31, 6, 30, tzinfo=HOME)),
        ("friday 16:00", datetime(2025, 4, 4, 16, 0, tzinfo=HOME)),
        ("friday 18:00", datetime(2025, 3, 28, 18, 0, tzinfo=HOME)),
        ("20m", NOW + timedelta(minutes=20)),
        ("2h", NOW + timedelta(hours=2)),
        ("1h30m", NOW + timedelta(minutes=90)),
        ("1h 30 min", NOW + timedelta(minutes=90)),
        ("in 20 minutes", NOW + timedelta(minutes=20)),
        ("in 1 hour and 15 minutes", NOW + timedelta(minutes=75)),
        ("In 2 Hours", NOW + timedelta(hours=2)),
        ("1.5h", NOW + timedelta(minutes=90)),
        ("45 seconds", NOW + timedelta(seconds=45)),
        ("3 days", NOW + timedelta(days=3)),
    ],
)
def test_at_reads_times_dates_and_delays(text: str, expected: datetime) -> None:
    """A time is the next one; a date-time is local; a delay counts from now."""
    assert parse_at(text, NOW).at == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "soon",
        "25:00",
        "13pm",
        "2025-03-27 19:00",
        "today 08:00",
        "2025-03-30",
        "5s",
        "400 days",
        "tomorrow",
    ],
)
def test_at_refuses_what_it_cannot_read(text: str) -> None:
    """Unreadable, past, too near or too far: a sentence the model can use."""
    with pytest.raises(WhenError):
        parse_at(text, NOW)


def test_a_named_time_keeps_its_wall_clock_across_daylight_saving() -> None:
    """07:00 tomorrow is 07:00 in summer time, 23 h after 07:00 today's winter."""
    saturday = datetime(2025, 3, 29, 6, 0, tzinfo=HOME)
    when = parse_at("07:00", saturday)
    assert when.clock == time(7, 0)
    sunday = next_occurrence(Repeat.DAILY, time(7, 0), when.at, when.at)
    assert sunday == datetime(2025, 3, 30, 7, 0, tzinfo=HOME)
    assert sunday.utcoffset() == timedelta(hours=2)
    assert sunday.timestamp() - when.at.timestamp() == 23 * 3600


def test_a_time_that_does_not_exist_fires_after_the_jump() -> None:
    """02:30 on the spring-forward night is 03:30 summer time, once."""
    moment = local_instant(date(2025, 3, 30), time(2, 30), HOME)
    assert moment.hour == 3
    assert moment.minute == 30
    assert moment.utcoffset() == timedelta(hours=2)


def test_a_time_that_happens_twice_fires_the_first_time() -> None:
    """02:30 on the autumn night is the first 02:30 (summer time)."""
    moment = local_instant(date(2025, 10, 26), time(2, 30), HOME)
    assert moment.utcoffset() == timedelta(hours=2)


def test_weekdays_skip_the_weekend_and_weekly_keeps_its_day() -> None:
    """Every weekday from Friday: Monday next; weekly: the same weekday."""
    friday = datetime(2025, 3, 28, 6, 30, tzinfo=HOME)
    monday = next_occurrence(Repeat.WEEKDAYS, time(6, 30), friday, friday)
    assert monday == datetime(2025, 3, 31, 6, 30, tzinfo=HOME)
    assert next_occurrence(Repeat.WEEKLY, time(6, 30), friday, friday) == datetime(
        2025, 4, 4, 6, 30, tzinfo=HOME
    )
    # After a long stop, the next one after now (not every one missed).
    later = datetime(2025, 4, 9, 12, 0, tzinfo=HOME)
    assert next_occurrence(Repeat.DAILY, time(6, 30), friday, later) == datetime(
        2025, 4, 10, 6, 30, tzinfo=HOME
    )
    # "Every weekday at 06:30" said on Saturday starts on Monday.
    saturday = datetime(2025, 3, 29, 10, 0, tzinfo=HOME)
    when = parse_at("06:30", saturday)
    assert first_occurrence(when, Repeat.WEEKDAYS) == monday
    assert first_occurrence(when, Repeat.DAILY) == datetime(
        2025, 3, 30, 6, 30, tzinfo=HOME
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, Repeat.NONE),
        ("", Repeat.NONE),
        ("none", Repeat.NONE),
        ("Daily", Repeat.DAILY),
        ("every day", Repeat.DAILY),
        ("weekdays", Repeat.WEEKDAYS),
        ("every weekday", Repeat.WEEKDAYS),
        ("weekly", Repeat.WEEKLY),
    ],
)
def test_repeat_words(text: str | None, expected: Repeat) -> None:
    """The four repeats, and the words a model is likely to use for them."""
    assert parse_repeat(text) is expected


def test_repeat_refuses_others() -> None:
    """Monthly and the like are refused, naming the four that work."""
    with pytest.raises(WhenError, match="none, daily, weekdays or weekly"):
        parse_repeat("monthly")


def test_conditions() -> None:
    """A state, its negation, above and below a number; aliases for binary sensors."""
    assert parse_condition("Open", "cover").matches("open")
    assert not parse_condition("open", "cover").matches("closed")
    assert parse_condition("open", "binary_sensor").matches("on")
    not_playing = parse_condition("not playing", "media_player")
    assert not_playing.compare is Compare.NOT_EQUAL
    assert not_playing.matches("idle")
    assert not not_playing.matches("unavailable")
    above = parse_condition(">25", "sensor")
    assert above.matches("25.5")
    assert not above.matches("25")
    assert not above.matches("unknown")
    assert not above.matches("nan")
    below = parse_condition("below 5 W", "sensor")
    assert below.compare is Compare.BELOW
    assert below.matches("3.2")
    assert not below.matches("idle")
    assert parse_condition("less than 0,5", "sensor").number == 0.5
    assert parse_condition("above 30", "sensor").describe() == "above 30"
    with pytest.raises(WhenError):
        parse_condition("  ", "sensor")
