"""Household notices: things left in a bad state, told to the people who opted in.

Built-in kinds, on exposed entities only (hidden ones are never looked at):

* a door, garage door or window open for ``open_minutes`` during the night
  hours (option ``night_hours``, default 22:00-07:00);
* a lock unlocked during the night, at once;
* a leak, smoke, CO or gas sensor on, at any hour, at once;
* a battery below 10 % and a device unavailable for an hour: low priority,
  held until the night hours end.

One notice per cause until it clears, then a short "cleared" follow-up. A
notice about a cover or a lock carries one button for the obvious fix
(close it, lock it): a pending action of the usual confirmations
(security/confirmations.py), proposed for the person it is sent to, rendered
by the integration from the resolved call. Pressing it is that person's
confirmation: it runs once, as their HA user, judged again by the permission
layer at the press; it expires like a Confirm button; anyone else's press is
refused. A call the policy blocks gets no button.

Who gets notices. A person is subscribed when they sent ``/notices on``, or
when their Telegram user id is in the option ``notice_user_ids`` and they have
not sent ``/notices off``: each person's latest command wins, and an explicit
off beats the option. A listed person who never wrote is told in their private
chat (its id is their user id) through the first Telegram bot, in Home
Assistant's language. ``/notices on`` sends a short "cleared" follow-up when a
cause clears; ``/notices on quiet`` does not. Both choices are kept in HA's
storage (``.storage/ha_personal_assistant.notices``).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from datetime import time as dt_time
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final, Protocol

from homeassistant.components.homeassistant.exposed_entities import (
    async_should_expose,
)
from homeassistant.const import EVENT_STATE_CHANGED
from homeassistant.core import callback
from homeassistant.helpers.event import (
    async_track_point_in_utc_time,
    async_track_time_change,
)
from homeassistant.helpers.storage import Store
from homeassistant.util import dt as dt_util

from ..const import DEFAULT_NIGHT_HOURS, DOMAIN, LOGGER
from ..i18n import async_texts
from ..policy.judge import evaluate_call
from ..policy.verdict import Decision
from ..policy.visibility import ASSISTANT, is_visible
from ..security.confirm_text import one_line

if TYPE_CHECKING:
    from homeassistant.core import CALLBACK_TYPE, Event, HomeAssistant, State

    from ..i18n import Texts
    from ..policy.rules import Policy
    from ..security.confirmations import ConfirmationManager

CMD_NOTICES: Final = "/notices"
LOW_BATTERY: Final = 10.0
UNAVAILABLE_FOR: Final = timedelta(hours=1)
STORAGE_VERSION: Final = 1
MAX_NAME_CHARS: Final = 60
OPENINGS: Final = frozenset({"door", "garage_door", "window", "opening"})
COVER_OPENINGS: Final = frozenset({"door", "garage", "gate", "window"})
ALERTS: Final = frozenset({"moisture", "smoke", "carbon_monoxide", "gas"})
_DOMAINS: Final = frozenset({"binary_sensor", "cover", "lock", "sensor"})
CONFIRM: Final = "/confirm"
# ``/notices on quiet``: notices without the "cleared" follow-ups.
QUIET: Final = "quiet"
TELEGRAM_DOMAIN: Final = "telegram_bot"


class Kind(StrEnum):
    """What a notice is about (its text is ``notice_<kind>``)."""

    OPEN = "open"
    UNLOCKED = "unlocked"
    ALERT = "alert"
    BATTERY = "battery"
    UNAVAILABLE = "unavailable"


LOW: Final = frozenset({Kind.BATTERY, Kind.UNAVAILABLE})
# The fix a button offers, by kind and domain.
FIXES: Final = {
    (Kind.OPEN, "cover"): ("cover", "close_cover", "notice_button_close"),
    (Kind.UNLOCKED, "lock"): ("lock", "lock", "notice_button_lock"),
}


class NoticeGateway(Protocol):
    """What notices need of the Telegram gateway."""

    async def async_send_text(
        self,
        bot_entry_id: str,
        chat_id: int,
        text: str,
        keyboard: list[list[list[str]]] | None = None,
    ) -> None:
        """Send a message the integration wrote."""


@dataclass(frozen=True, slots=True)
class Subscriber:
    """A person who asked for notices, and where they get them."""

    person: str
    bot_entry_id: str
    chat_id: int
    language: str
    ha_user_id: str | None = None
    # Whether they get a short "cleared" follow-up when a cause clears.
    cleared: bool = True


@dataclass(slots=True)
class Cause:
    """A bad state that was noticed, until it clears."""

    entity_id: str
    kind: Kind
    # Told to these people; held (low priority at night) while empty.
    told: set[str] = field(default_factory=set)


def valid_night(value: str) -> bool:
    """Tell whether ``night_hours`` reads as "HH:MM-HH:MM"."""
    parts = value.replace(" ", "").split("-")
    if len(parts) != 2:  # noqa: PLR2004 - a start and an end
        return False
    try:
        for part in parts:
            dt_time.fromisoformat(part)
    except ValueError:
        return False
    return True


def parse_night(value: object) -> tuple[dt_time, dt_time]:
    """Read ``night_hours`` ("22:00-07:00"); the default when unreadable."""
    text = value if isinstance(value, str) else DEFAULT_NIGHT_HOURS
    try:
        start, end = (dt_time.fromisoformat(p.strip()) for p in text.split("-"))
    except ValueError:
        return parse_night(DEFAULT_NIGHT_HOURS)
    return start, end


def in_night(moment: datetime, night: tuple[dt_time, dt_time]) -> bool:
    """Tell whether a local moment falls in the night hours."""
    start, end = night
    now = moment.time()
    if start <= end:
        return start <= now < end
    return now >= start or now < end


def classify(state: State) -> Kind | None:
    """Return the kind of notice an entity can give, by domain and class."""
    domain = state.domain
    device_class = state.attributes.get("device_class")
    if domain == "binary_sensor":
        if device_class in OPENINGS:
            return Kind.OPEN
        return Kind.ALERT if device_class in ALERTS else None
    if domain == "cover":
        return Kind.OPEN if device_class in COVER_OPENINGS else None
    if domain == "lock":
        return Kind.UNLOCKED
    if domain == "sensor" and device_class == "battery":
        return Kind.BATTERY
    return None


def is_bad(kind: Kind, state: State) -> bool:
    """Tell whether a state is the bad one for its kind."""
    value = state.state
    if kind is Kind.OPEN:
        return value in ("on", "open", "opening")
    if kind is Kind.UNLOCKED:
        return value in ("unlocked", "open")
    if kind is Kind.ALERT:
        return value == "on"
    if kind is Kind.BATTERY:
        try:
            return float(value) < LOW_BATTERY
        except ValueError:
            return False
    return value == "unavailable"


class Notices:
    """Watches the exposed house and tells the people who opted in."""

    def __init__(  # noqa: PLR0913 - keyword-only wiring
        self,
        hass: HomeAssistant,
        *,
        confirmations: ConfirmationManager,
        gateway: NoticeGateway,
        policy: Policy | None,
        night: tuple[dt_time, dt_time],
        open_minutes: float,
        listed: frozenset[int] = frozenset(),
        user_mapping: dict[str, str] | None = None,
    ) -> None:
        """Keep what notices need; ``async_start`` begins watching."""
        self.hass = hass
        self.confirmations = confirmations
        self.gateway = gateway
        self.policy = policy
        self.night = night
        self.open_minutes = open_minutes
        # Telegram user ids the options list (``notice_user_ids``).
        self.listed = listed
        self.user_mapping = user_mapping or {}
        self.subscribers: dict[str, Subscriber] = {}
        # People who sent /notices off: beats the option's list.
        self.off: set[str] = set()
        self.causes: dict[tuple[str, Kind], Cause] = {}
        self._store: Store[dict[str, Any]] = Store(
            hass, STORAGE_VERSION, f"{DOMAIN}.notices"
        )
        self._timers: dict[tuple[str, Kind], CALLBACK_TYPE] = {}
        self._unsubs: list[CALLBACK_TYPE] = []

    async def async_start(self) -> None:
        """Load who opted in and start watching."""
        stored = await self._store.async_load() or {}
        for item in stored.get("subscribers", []):
            try:
                subscriber = Subscriber(**item)
            except TypeError:
                continue
            self.subscribers[subscriber.person] = subscriber
        self.off = {str(person) for person in stored.get("off", [])}
        self._unsubs.append(
            self.hass.bus.async_listen(EVENT_STATE_CHANGED, self._async_changed)
        )
        start, end = self.night
        self._unsubs.append(
            async_track_time_change(
                self.hass,
                self._async_night_starts,
                hour=start.hour,
                minute=start.minute,
                second=0,
            )
        )
        self._unsubs.append(
            async_track_time_change(
                self.hass,
                self._async_night_ends,
                hour=end.hour,
                minute=end.minute,
                second=0,
            )
        )
        for state in self.hass.states.async_all(tuple(_DOMAINS)):
            self._check(state)

    @callback
    def async_stop(self) -> None:
        """Stop watching (unload)."""
        while self._unsubs:
            self._unsubs.pop()()
        for unsub in self._timers.values():
            unsub()
        self._timers.clear()

    # ------------------------------------------------------------ people

    def is_listed(self, person: str) -> bool:
        """Tell whether the options list a person for notices."""
        telegram_id = person.removeprefix("telegram:")
        return telegram_id.isdigit() and int(telegram_id) in self.listed

    def recipients(self) -> dict[str, Subscriber]:
        """Return who gets notices now.

        Those who sent /notices on, and the people the options list who did
        not send /notices off.
        """
        recipients = dict(self.subscribers)
        bots = self.hass.config_entries.async_entries(TELEGRAM_DOMAIN)
        if not bots:
            return recipients
        for telegram_id in sorted(self.listed):
            person = f"telegram:{telegram_id}"
            if person in recipients or person in self.off:
                continue
            recipients[person] = Subscriber(
                person=person,
                bot_entry_id=bots[0].entry_id,
                chat_id=telegram_id,
                language="",
                ha_user_id=self.user_mapping.get(str(telegram_id)) or None,
            )
        return recipients

    async def async_set(self, subscriber: Subscriber, *, on: bool) -> bool:
        """Turn notices on or off for a person; return whether they were on."""
        was = subscriber.person in self.recipients()
        if on:
            self.subscribers[subscriber.person] = subscriber
            self.off.discard(subscriber.person)
        else:
            self.subscribers.pop(subscriber.person, None)
            self.off.add(subscriber.person)
        await self._store.async_save(
            {
                "subscribers": [asdict(s) for s in self.subscribers.values()],
                "off": sorted(self.off),
            }
        )
        return was

    # ------------------------------------------------------------ watching

    def _now_night(self) -> bool:
        return in_night(dt_util.now(), self.night)

    @callback
    def _async_changed(self, event: Event[Any]) -> None:
        entity_id: str = event.data["entity_id"]
        if entity_id.partition(".")[0] not in _DOMAINS:
            return
        new: State | None = event.data["new_state"]
        old: State | None = event.data["old_state"]
        if new is not None and old is not None and new.state == old.state:
            return
        if new is None:
            self._forget(entity_id)
            return
        if (
            classify(new) is None
            and new.state != "unavailable"
            and (old is None or old.state != "unavailable")
        ):
            # A plain sensor's reading (the common case): nothing to notice,
            # and no exposure lookup for it.
            return
        self._check(new)

    @callback
    def _check(self, state: State) -> None:
        """Look at one entity's state: raise, arm, or clear its causes."""
        entity_id = state.entity_id
        if not self._visible(entity_id):
            self._forget(entity_id)
            return
        unavailable = (entity_id, Kind.UNAVAILABLE)
        if state.state == "unavailable":
            if unavailable not in self._timers and unavailable not in self.causes:
                self._arm(
                    unavailable,
                    state.last_changed.timestamp() + UNAVAILABLE_FOR.total_seconds(),
                )
            return
        self._disarm(unavailable)
        self._clear(unavailable)
        kind = classify(state)
        if kind is None:
            return
        key = (entity_id, kind)
        if not is_bad(kind, state):
            self._disarm(key)
            self._clear(key)
            return
        if kind is Kind.OPEN:
            due = state.last_changed.timestamp() + 60.0 * self.open_minutes
            if key not in self._timers and key not in self.causes:
                self._arm(key, due)
            return
        if kind is Kind.UNLOCKED and not self._now_night():
            return
        self._raise(key)

    def _visible(self, entity_id: str) -> bool:
        return async_should_expose(self.hass, ASSISTANT, entity_id) and is_visible(
            self.hass, entity_id
        )

    @callback
    def _arm(self, key: tuple[str, Kind], when: float) -> None:
        @callback
        def _due(_now: datetime) -> None:
            self._timers.pop(key, None)
            self._due(key)

        self._timers[key] = async_track_point_in_utc_time(
            self.hass, _due, dt_util.utc_from_timestamp(max(when, time.time()))
        )

    @callback
    def _disarm(self, key: tuple[str, Kind]) -> None:
        if (unsub := self._timers.pop(key, None)) is not None:
            unsub()

    @callback
    def _due(self, key: tuple[str, Kind]) -> None:
        entity_id, kind = key
        state = self.hass.states.get(entity_id)
        if state is None or not self._visible(entity_id):
            return
        if kind is Kind.UNAVAILABLE:
            if state.state == "unavailable":
                self._raise(key)
            return
        if is_bad(kind, state) and (kind is not Kind.OPEN or self._now_night()):
            # Open in the day: the night's start looks again.
            self._raise(key)

    @callback
    def _async_night_starts(self, _now: datetime) -> None:
        """Report what is open long enough, or unlocked, as the night begins."""
        limit = time.time() - 60.0 * self.open_minutes
        for state in self.hass.states.async_all(("binary_sensor", "cover", "lock")):
            kind = classify(state)
            if kind not in (Kind.OPEN, Kind.UNLOCKED) or not is_bad(kind, state):
                continue
            if not self._visible(state.entity_id):
                continue
            key = (state.entity_id, kind)
            if kind is Kind.UNLOCKED or state.last_changed.timestamp() <= limit:
                self._raise(key)

    @callback
    def _async_night_ends(self, _now: datetime) -> None:
        """Send the low-priority notices held during the night."""
        for key, cause in list(self.causes.items()):
            if cause.kind in LOW and not cause.told:
                self._spawn_tell(key)

    @callback
    def _raise(self, key: tuple[str, Kind]) -> None:
        """Notice a cause once; tell now unless it is low priority at night."""
        if key in self.causes:
            return
        self.causes[key] = Cause(key[0], key[1])
        if key[1] in LOW and self._now_night():
            return
        self._spawn_tell(key)

    @callback
    def _spawn_tell(self, key: tuple[str, Kind]) -> None:
        self.hass.async_create_background_task(
            self._async_tell(key), f"{DOMAIN} notice"
        )

    @callback
    def _clear(self, key: tuple[str, Kind]) -> None:
        cause = self.causes.pop(key, None)
        if cause is not None and cause.told:
            self.hass.async_create_background_task(
                self._async_cleared(cause), f"{DOMAIN} notice cleared"
            )

    @callback
    def _forget(self, entity_id: str) -> None:
        """Drop an entity gone or hidden: silently (hidden is never named)."""
        for key in [k for k in self._timers if k[0] == entity_id]:
            self._disarm(key)
        for key in [k for k in self.causes if k[0] == entity_id]:
            del self.causes[key]

    # ------------------------------------------------------------ telling

    def _name(self, entity_id: str) -> str:
        state = self.hass.states.get(entity_id)
        return one_line(state.name, MAX_NAME_CHARS) if state else entity_id

    async def _async_tell(self, key: tuple[str, Kind]) -> None:
        cause = self.causes.get(key)
        if cause is None:
            return
        for subscriber in list(self.recipients().values()):
            if subscriber.person in cause.told:
                continue
            cause.told.add(subscriber.person)
            try:
                await self._async_tell_one(subscriber, cause)
            except Exception:  # noqa: BLE001 - the others are still told
                LOGGER.exception("Could not send a notice")

    async def _async_tell_one(self, subscriber: Subscriber, cause: Cause) -> None:
        texts = await async_texts(self.hass, subscriber.language)
        name = self._name(cause.entity_id)
        state = self.hass.states.get(cause.entity_id)
        lines = [
            texts(f"notice_{cause.kind}", name=name, minutes=f"{self.open_minutes:g}")
        ]
        keyboard = None
        fix = FIXES.get((cause.kind, cause.entity_id.partition(".")[0]))
        if fix is not None and state is not None:
            domain, service, label = fix
            verdict = evaluate_call(
                self.hass,
                domain,
                service,
                {"entity_id": cause.entity_id},
                policy=self.policy,
            )
            if verdict.decision is not Decision.BLOCK:
                action = await self.confirmations.async_propose(
                    conversation_key=(
                        f"telegram:{subscriber.bot_entry_id}:{subscriber.chat_id}"
                    ),
                    bot_entry_id=subscriber.bot_entry_id,
                    chat_id=subscriber.chat_id,
                    requester=subscriber.person,
                    ha_user_id=subscriber.ha_user_id,
                    verdicts=[verdict],
                    texts=texts,
                )
                if verdict.decision is Decision.CONFIRM:
                    lines.append(texts("notice_button_confirms"))
                keyboard = [[[texts(label, name=name), f"{CONFIRM}_{action.token}"]]]
        await self.gateway.async_send_text(
            subscriber.bot_entry_id, subscriber.chat_id, "\n".join(lines), keyboard
        )

    async def _async_cleared(self, cause: Cause) -> None:
        name = self._name(cause.entity_id)
        recipients = self.recipients()
        for person in cause.told:
            subscriber = recipients.get(person)
            if subscriber is None or not subscriber.cleared:
                continue
            texts = await async_texts(self.hass, subscriber.language)
            await self.gateway.async_send_text(
                subscriber.bot_entry_id,
                subscriber.chat_id,
                texts("notice_cleared", name=name),
            )


async def async_notices_command(
    notices: Notices | None,
    texts: Texts,
    subscriber: Subscriber,
    argument: str,
) -> str:
    """Turn the sender's notices on or off; return the reply.

    ``/notices on`` with "cleared" follow-ups, ``/notices on quiet`` without,
    ``/notices off`` (kept even for a person the options list).
    """
    if notices is None:
        return texts("notices_usage")
    words = argument.strip().lower().split()
    if words in (["on"], ["on", QUIET]):
        quiet = len(words) == 2  # noqa: PLR2004 - "on quiet"
        await notices.async_set(replace(subscriber, cleared=not quiet), on=True)
        return texts("notices_on_quiet" if quiet else "notices_on")
    if words == ["off"]:
        await notices.async_set(subscriber, on=False)
        if notices.is_listed(subscriber.person):
            return texts("notices_off_listed")
        return texts("notices_off")
    on = subscriber.person in notices.recipients()
    return texts("notices_are_on" if on else "notices_usage")
