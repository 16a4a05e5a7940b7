"""get_history: what an exposed entity did over the last hours, from HA's recorder.

"When did the front door last unlock?", "how warm did the bedroom get last
night?", "how long was the washing machine running?". The answer comes from
Home Assistant's recorder, read through its own history API
(``get_significant_states``) on the recorder's own executor, never with SQL
of ours. The heavy part, turning thousands of rows into a summary, runs in
that same executor job; the event loop only formats the few lines the model
reads.

What the model reads is compact and capped (:data:`MAX_RESULT_TOKENS`):

* states such as on/off, open/closed, locked/unlocked: the changes with local
  times in words ("today 07:12", "yesterday 23:40", else a date) and how long
  each lasted, the most recent first to be kept, and how long the entity
  spent in each state;
* numbers: min and max with the times they were reached, the time-weighted
  mean, the unit, how many changes.

The same rules as get_state hold: a hidden entity gets the very answer a
missing one gets, and a free-text value written outside the house is fenced
after the JSON and taints the turn (security/trust.py). The recorder is
optional: without it, or for an entity it excludes, the answer says so and
gives what the state machine knows (the state and when it last changed).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from homeassistant.core import State
from homeassistant.util import dt as dt_util
from pydantic import BaseModel, Field

from ..const import LOGGER
from ..security.firewall import DATAMARKS, datamark, mark_untrusted_parts
from ..security.names import model_name
from ..security.trust import UNKNOWN_STATES, state_is_trusted
from ..tokens import estimate_tokens
from .ha import FENCED_VALUE, _visible_state, area_name
from .registry import ToolContext, ToolError, ToolSpec

if TYPE_CHECKING:
    from collections.abc import Sequence

    from homeassistant.core import HomeAssistant

RECORDER: Final = "recorder"
DEFAULT_HOURS: Final = 24.0
# A week: "while we were away over the weekend" fits, a month of rows does not.
MAX_HOURS: Final = 168.0
# The whole answer, JSON and fenced text, as estimated by tokens.py (which errs
# high): about 7 % of the default 8192-token context.
MAX_RESULT_TOKENS: Final = 600
# Changes looked at for the list, newest first; the token cap cuts sooner.
MAX_LISTED: Final = 100
# A free-text value is shown this long at most.
MAX_TEXT_CHARS: Final = 100
# Time in each state is listed for entities with at most this many states.
MAX_TOTALS: Final = 8
NO_RECORDER: Final = (
    "No history: the recorder integration is not running, so only the current "
    "state and when it last changed are known."
)
NOT_RECORDED: Final = (
    "No history: this entity is excluded from the recorder, so only the current "
    "state and when it last changed are known."
)
MIGRATING: Final = (
    "No history right now: the recorder is upgrading its database. Try again "
    "later; only the current state and when it last changed are known."
)


@dataclass(slots=True)
class Extreme:
    """A minimum or maximum: the value as recorded and when it was first reached."""

    value: float
    text: str
    at: float
    at_start: bool


@dataclass(slots=True)
class Numbers:
    """What a numeric history comes to."""

    low: Extreme
    high: Extreme
    mean: float
    decimals: int
    unknown_seconds: float


@dataclass(slots=True)
class Summary:
    """A window of history, reduced in the recorder's executor."""

    # (state, start) in time order, never empty; runs[0] may be the state at
    # the window's start (starts_before), whose start is then the window's.
    runs: list[tuple[str, float]] = field(default_factory=list)
    starts_before: bool = False
    # state -> (times it began in the window, seconds in it), or None when the
    # entity had more states than MAX_TOTALS.
    totals: dict[str, tuple[int, float]] | None = None
    numbers: Numbers | None = None
    query_seconds: float = 0.0
    reduce_seconds: float = 0.0

    @property
    def changes(self) -> int:
        """Return how many changes happened inside the window."""
        return len(self.runs) - (1 if self.starts_before else 0)


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _decimals(text: str) -> int:
    return len(text.partition(".")[2]) if "e" not in text.lower() else 2


def _numbers(
    runs: Sequence[tuple[str, float]], start: float, end: float
) -> Numbers | None:
    """Return min, max and time-weighted mean; None if a value is not a number."""
    low: Extreme | None = None
    high: Extreme | None = None
    weighted = 0.0
    known = 0.0
    unknown = 0.0
    decimals = 0
    for index, (text, begin) in enumerate(runs):
        until = runs[index + 1][1] if index + 1 < len(runs) else end
        seconds = max(until - begin, 0.0)
        if text.strip().casefold() in UNKNOWN_STATES:
            unknown += seconds
            continue
        value = _number(text)
        if value is None:
            return None
        decimals = max(decimals, _decimals(text))
        weighted += value * seconds
        known += seconds
        at_start = begin <= start
        if low is None or value < low.value:
            low = Extreme(value, text, begin, at_start)
        if high is None or value > high.value:
            high = Extreme(value, text, begin, at_start)
    if low is None or high is None:
        return None
    mean = weighted / known if known > 0 else low.value
    return Numbers(low, high, mean, min(decimals, 3), unknown)


def summarize(
    rows: Sequence[dict[str, Any]],
    start: float,
    end: float,
    live: tuple[str, float],
) -> Summary:
    """Reduce the recorder's rows (compressed format) to runs, totals and numbers.

    ``live`` is the state machine's (state, last changed): the recorder may
    not have committed the newest change yet, and without any row it still
    tells what the state was through the window.
    """
    runs: list[tuple[str, float]] = []
    for row in rows:
        state = str(row["s"])
        began = max(float(row["lu"]), start)
        if runs and runs[-1][0] == state:
            continue
        runs.append((state, began))
    state, changed = live
    if not runs:
        runs.append((state, max(changed, start)))
    elif state != runs[-1][0] and changed > runs[-1][1]:
        runs.append((state, changed))
    summary = Summary(runs=runs, starts_before=runs[0][1] <= start)
    summary.numbers = _numbers(runs, start, end)
    if summary.numbers is None:
        totals: dict[str, tuple[int, float]] = {}
        for index, (state, began) in enumerate(runs):
            until = runs[index + 1][1] if index + 1 < len(runs) else end
            times, seconds = totals.get(state, (0, 0.0))
            totals[state] = (
                times + (0 if began <= start else 1),
                seconds + max(until - began, 0.0),
            )
            if len(totals) > MAX_TOTALS:
                break
        else:
            summary.totals = totals
    return summary


def query_rows(hass: HomeAssistant, entity_id: str, start: datetime) -> list[Any]:
    """Return the entity's compressed state rows since ``start``; blocking."""
    from homeassistant.components.recorder.history import (  # noqa: PLC0415
        get_significant_states,
    )

    return get_significant_states(
        hass,
        start,
        None,
        [entity_id],
        include_start_time_state=True,
        significant_changes_only=True,
        minimal_response=True,
        no_attributes=True,
        compressed_state_format=True,
    ).get(entity_id, [])


def read_history(
    hass: HomeAssistant,
    entity_id: str,
    start: datetime,
    end: datetime,
    live: tuple[str, float],
) -> Summary:
    """Query the recorder and reduce the rows; runs in the recorder's executor."""
    began = time.perf_counter()
    rows = query_rows(hass, entity_id, start)
    queried = time.perf_counter()
    summary = summarize(
        [row for row in rows if isinstance(row, dict)],
        start.timestamp(),
        end.timestamp(),
        live,
    )
    summary.query_seconds = queried - began
    summary.reduce_seconds = time.perf_counter() - queried
    return summary


def spoken_time(when: float, now: datetime) -> str:
    """Return a local time to repeat: today 07:12, yesterday 23:40, else a date."""
    local = dt_util.as_local(dt_util.utc_from_timestamp(when))
    day = local.date()
    if day == now.date():
        return f"today {local:%H:%M}"
    if day == now.date() - timedelta(days=1):
        return f"yesterday {local:%H:%M}"
    return f"{local:%a %Y-%m-%d %H:%M}"


def spoken_duration(seconds: float) -> str:
    """Return a duration in words: 40 s, 3 min, 2 h 5 min, 1 d 3 h."""
    total = max(round(seconds), 0)
    if total < 60:  # noqa: PLR2004 - a minute
        return f"{total} s"
    minutes = round(total / 60)
    if minutes < 60:  # noqa: PLR2004 - an hour
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:  # noqa: PLR2004 - a day
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def _hours_text(hours: float) -> str:
    return f"{hours:g} h"


class GetHistoryArgs(BaseModel):
    """Arguments of get_history."""

    entity_id: str
    # Default DEFAULT_HOURS: the answer says what it covers.
    hours: float | None = Field(default=None, description=f"max {MAX_HOURS:g}")


# A value written outside the house, as it will be fenced: (text, label).
type Fenced = tuple[str, str]
# A line of the change list and the value it fences, if any.
type Line = tuple[str, Fenced | None]


class _Values:
    """How each shown value is written: as is, or fenced as outside text."""

    def __init__(self, hass: HomeAssistant, current: State) -> None:
        self._hass = hass
        self._current = current
        self._trust: dict[str, bool] = {}
        # Fenced values outside the change list (now, at_start).
        self.fixed: list[Fenced] = []

    def trusted(self, value: str) -> bool:
        """Tell whether a past value is the house's own (security/trust.py)."""
        if (known := self._trust.get(value)) is not None:
            return known
        # Judged against the entity's own option lists as they are now.
        state = State(self._current.entity_id, value, self._current.attributes)
        self._trust[value] = trusted = state_is_trusted(state, self._hass)
        return trusted

    def fence(self, value: str, when: str) -> Fenced | None:
        """Return the value to fence, or None when it may be shown as is."""
        if self.trusted(value):
            return None
        text = value if len(value) <= MAX_TEXT_CHARS else value[:MAX_TEXT_CHARS] + "…"
        return text, f"{self._current.entity_id} state {when}"

    def show(self, value: str, when: str) -> str:
        """Return the value for a field other than the change list."""
        if (fenced := self.fence(value, when)) is None:
            return value
        self.fixed.append(fenced)
        return FENCED_VALUE


def _dumps(info: dict[str, Any]) -> str:
    return json.dumps(info, ensure_ascii=False, separators=(",", ":"))


def _fence_cost(fenced: Fenced) -> int:
    """Return what one fenced value costs in tokens, with the costliest datamark."""
    text, label = fenced
    return 1 + max(
        estimate_tokens(f"{label}: {datamark(text, mark)}") for mark in DATAMARKS
    )


def _source(entity_id: str) -> str:
    return f"the past states of {entity_id}"


def _fence_header_cost(entity_id: str) -> int:
    """Return what the fence's header and tags cost, with room for a withheld note."""
    header, _ = mark_untrusted_parts([], source=_source(entity_id))
    return estimate_tokens(header) + 16


def _render(info: dict[str, Any], fenced: list[Fenced]) -> str:
    """Return the JSON, and after it the fenced values (as get_state shows them)."""
    text = _dumps(info)
    if not fenced:
        return text
    block, withheld = mark_untrusted_parts(
        [item[0] for item in fenced],
        source=_source(info["entity_id"]),
        labels=[item[1] for item in fenced],
    )
    lines = [text]
    if withheld:
        lines.append(f"{withheld} value(s) were withheld as unsafe.")
    lines.append(block)
    return "\n".join(lines)


class _Answer:
    """Builds the capped answer for one entity."""

    def __init__(self, ctx: ToolContext, state: State, hours: float) -> None:
        self.ctx = ctx
        self.state = state
        self.now = dt_util.now()
        self.values = _Values(ctx.hass, state)
        # A name the device chose is left out (get_state fences it).
        self.info: dict[str, Any] = {
            "entity_id": state.entity_id,
            "name": model_name(ctx.hass, state),
        }
        if (area := area_name(ctx.hass, state.entity_id)) is not None:
            self.info["area"] = area
        self.hours = hours

    def when(self, ts: float) -> str:
        """Return a time in words."""
        return spoken_time(ts, self.now)

    def current_only(self, note: str) -> str:
        """Answer with the state machine alone: the state and when it changed."""
        self.info["now"] = self.values.show(self.state.state, "now")
        self.info["last_changed"] = self.when(self.state.last_changed_timestamp)
        self.info["note"] = note
        return self.finish([], 0)

    def history(self, summary: Summary, start: float, note: str | None) -> str:
        """Answer with a window of history."""
        self.info["window"] = f"{self.when(start)} to now ({_hours_text(self.hours)})"
        if summary.numbers is not None:
            self._numbers(summary, summary.numbers)
            if note:
                self.info["note"] = note
            return self.finish([], 0)
        runs = summary.runs
        current = self.state.state
        if (
            summary.changes
            and runs[-1][0] == current
            and not self.values.trusted(current)
        ):
            # The last change's value, fenced once below rather than twice.
            self.info["now"] = "(the last change)"
        else:
            self.info["now"] = self.values.show(current, "now")
        if summary.starts_before:
            self.info["at_start"] = self.values.show(
                runs[0][0], f"at {self.when(start)}"
            )
        if not summary.changes:
            since = self.state.last_changed_timestamp
            self.info["changes"] = []
            self.info["note"] = f"No change in these {_hours_text(self.hours)}" + (
                f"; unchanged since {self.when(since)}." if since <= start else "."
            )
            return self.finish([], 0)
        lines = self._lines(summary, self.now.timestamp())
        if summary.totals is not None:
            self._totals(summary.totals)
        if note:
            self.info["note"] = note
        return self.finish(lines, summary.changes)

    def _numbers(self, summary: Summary, numbers: Numbers) -> None:
        unit = self.state.attributes.get("unit_of_measurement")
        suffix = f" {unit}" if isinstance(unit, str) and 0 < len(unit) <= 16 else ""  # noqa: PLR2004

        def extreme(point: Extreme) -> str:
            when = self.when(point.at)
            where = " (start of the window)" if point.at_start else ""
            return f"{point.text}{suffix} at {when}{where}"

        now = self.state.state
        self.info["now"] = f"{now}{suffix}" if _number(now) is not None else now
        self.info["min"] = extreme(numbers.low)
        self.info["max"] = extreme(numbers.high)
        self.info["mean"] = f"{numbers.mean:.{max(numbers.decimals, 1)}f}{suffix}"
        self.info["changes"] = summary.changes
        if summary.changes:
            self.info["last_change"] = self.when(summary.runs[-1][1])
        if numbers.unknown_seconds >= 60:  # noqa: PLR2004 - under a minute is noise
            self.info["unavailable"] = spoken_duration(numbers.unknown_seconds)

    def _lines(self, summary: Summary, end: float) -> list[Line]:
        """Return the newest changes first, each 'when state (how long)'."""
        runs = summary.runs
        first = 1 if summary.starts_before else 0
        lines: list[Line] = []
        for index in range(len(runs) - 1, max(first, len(runs) - MAX_LISTED) - 1, -1):
            value, began = runs[index]
            until = runs[index + 1][1] if index + 1 < len(runs) else end
            when = self.when(began)
            lasted = spoken_duration(until - began)
            fenced = self.values.fence(value, when)
            shown = value if fenced is None else FENCED_VALUE
            tail = ", until now" if index == len(runs) - 1 else ""
            lines.append((f"{when} {shown} ({lasted}{tail})", fenced))
        return lines

    def _totals(self, totals: dict[str, tuple[int, float]]) -> None:
        if not all(self.values.trusted(state) for state in totals):
            return
        self.info["time_in_state"] = {
            state: (
                f"{times} time{'s' if times != 1 else ''}, "
                f"{spoken_duration(seconds)} in all"
            )
            for state, (times, seconds) in sorted(
                totals.items(), key=lambda item: -item[1][1]
            )
        }

    def _with_lines(self, newest_first: list[Line], keep: int, changes: int) -> str:
        """Return the answer with the ``keep`` most recent lines."""
        info = dict(self.info)
        fenced = list(self.values.fixed)
        if newest_first:
            kept = newest_first[:keep]
            info["changes"] = [line for line, _ in reversed(kept)]
            if (left := changes - keep) > 0:
                info["left_out"] = (
                    f"{left} earlier change{'s' if left != 1 else ''} not listed"
                )
            # Newest first, like the lines read from the end.
            fenced += [item for _, item in kept if item is not None]
        return _render(info, fenced)

    def finish(self, newest_first: list[Line], changes: int) -> str:
        """Fit the answer in MAX_RESULT_TOKENS, keeping the most recent changes."""
        fixed = self.values.fixed
        # A first guess line by line (erring high), then the whole is measured.
        used = estimate_tokens(_dumps(self.info)) + 24  # "changes", "left_out"
        used += sum(_fence_cost(item) for item in fixed)
        header = _fence_header_cost(self.state.entity_id)
        used += header if fixed else 0
        fences = len(fixed)
        keep = 0
        for line, fenced in newest_first:
            cost = estimate_tokens(line) + 2
            if fenced is not None:
                cost += _fence_cost(fenced) + (header if not fences else 0)
            if used + cost > MAX_RESULT_TOKENS:
                break
            used += cost
            keep += 1
            fences += fenced is not None
        text = self._with_lines(newest_first, keep, changes)
        while keep and estimate_tokens(text) > MAX_RESULT_TOKENS:
            keep -= 1
            text = self._with_lines(newest_first, keep, changes)
        if fixed or any(item for _, item in newest_first[:keep]):
            # The taint rule, as in get_state: outside text is now in the prompt.
            self.ctx.mark_tainted(f"text of {self.state.entity_id}")
        return text


def _hours(value: float | None) -> tuple[float, str | None]:
    """Return the window's length and a note when it was capped."""
    if value is None:
        return DEFAULT_HOURS, None
    if not math.isfinite(value) or value <= 0:
        msg = f"hours must be more than 0 and at most {MAX_HOURS:g}"
        raise ToolError(msg)
    if value > MAX_HOURS:
        return MAX_HOURS, (
            f"History goes back at most {MAX_HOURS:g} h; these are the last "
            f"{MAX_HOURS:g} h."
        )
    return value, None


async def get_history(ctx: ToolContext, args: GetHistoryArgs) -> str:
    """Return the past states of one exposed entity, summarized and capped."""
    hass = ctx.hass
    # The same refusal as get_state, byte for byte, for hidden and missing.
    state = _visible_state(hass, args.entity_id.strip().lower())
    hours, note = _hours(args.hours)
    answer = _Answer(ctx, state, hours)
    if RECORDER not in hass.config.components:
        return answer.current_only(NO_RECORDER)
    from homeassistant.components.recorder.entity_options import (  # noqa: PLC0415
        is_entity_recorded,
    )
    from homeassistant.helpers.recorder import (  # noqa: PLC0415
        async_migration_in_progress,
        get_instance,
    )

    if async_migration_in_progress(hass):
        return answer.current_only(MIGRATING)
    if not is_entity_recorded(hass, state.entity_id):
        return answer.current_only(NOT_RECORDED)
    end = dt_util.as_utc(answer.now)
    start = end - timedelta(hours=hours)
    live = (state.state, state.last_changed_timestamp)
    try:
        summary = await get_instance(hass).async_add_executor_job(
            read_history, hass, state.entity_id, start, end, live
        )
    except Exception as err:
        LOGGER.warning("Could not read the history of %s: %s", state.entity_id, err)
        msg = "the recorder could not be read just now; try again later"
        raise ToolError(msg) from err
    LOGGER.debug(
        "History of %s: %d runs, query %.1f ms, reduce %.1f ms",
        state.entity_id,
        len(summary.runs),
        summary.query_seconds * 1000,
        summary.reduce_seconds * 1000,
    )
    return answer.history(summary, start.timestamp(), note)


RECORDER_TOOLS: Final = (
    ToolSpec(
        name="get_history",
        description="Past states; min/max/mean.",
        args_schema=GetHistoryArgs,
        handler=get_history,
    ),
)
