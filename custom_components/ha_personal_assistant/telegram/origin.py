"""Whose words a Telegram message carries: the sender's own, or someone else's.

telegram_bot's events leave out where a message's text came from: a
forwarded message, a message an inline bot wrote for the sender ("via
@somebot"), or a reply that quotes someone else's message all arrive as
plain text from the sender. The update they came in says it, and the
gateway reads every raw update (telegram/inbound.py, before telegram_bot fires its
event). The rule, decided here from the update alone:

* ``FORWARDED``: the message has a ``forward_origin`` (or is an automatic
  forward of a channel post): its text, caption, voice note or file is
  someone else's.
* ``VIA_BOT``: an inline bot wrote the text (``via_bot``).
* ``QUOTED``: the sender's text answers someone else's words: a reply to a
  message of another person, another bot or a channel, a reply to a
  forwarded message, a ``quote`` of such a message, an ``external_reply``
  (a message of another chat) or a reply to a story. A reply to the
  sender's own message or to this bot's is the sender's own words; so is a
  topic message whose "reply" is only the topic's first message.
* ``UNCHECKED``: the raw update was never seen (telegram_bot changed inside,
  or the message came by another way): whose words it carries is unknown.
* ``OWN``: everything else.

Only ``OWN`` is the sender's own words. Anything else is outside text for
the taint rule (a state change waits for the sender's Confirm, memory is
never written), and a forwarded command is not obeyed.
"""

from __future__ import annotations

from collections import OrderedDict
from enum import StrEnum
from typing import Final

# Messages whose origin is kept until telegram_bot's event for them comes
# (it follows at once; the rest is a bound for updates never handed on).
MAX_ORIGINS: Final = 500

# How the Confirm message names each kind of outside text (the integration's
# words, ToolContext.taint_sources; translated in security/confirm_text.py).
FORWARDED_SOURCE: Final = "a forwarded message"
VIA_BOT_SOURCE: Final = "a message another bot wrote"
QUOTED_SOURCE: Final = "a reply to someone else's message"
UNCHECKED_SOURCE: Final = "a message whose origin could not be checked"


class Origin(StrEnum):
    """Whose words a message carries."""

    OWN = "own"
    FORWARDED = "forwarded"
    VIA_BOT = "via_bot"
    QUOTED = "quoted"
    UNCHECKED = "unchecked"

    @property
    def source(self) -> str | None:
        """Return how the taint rule names the message's text; None: own words."""
        return _SOURCES.get(self)


_SOURCES: Final = {
    Origin.FORWARDED: FORWARDED_SOURCE,
    Origin.VIA_BOT: VIA_BOT_SOURCE,
    Origin.QUOTED: QUOTED_SOURCE,
    Origin.UNCHECKED: UNCHECKED_SOURCE,
}


def _author(message: object) -> int | None:
    """Return the id of the user who wrote ``message`` (None: a channel or nobody)."""
    user = getattr(message, "from_user", None)
    user_id = getattr(user, "id", None)
    return user_id if isinstance(user_id, int) else None


def _forwarded(message: object) -> bool:
    return bool(
        getattr(message, "forward_origin", None)
        or getattr(message, "is_automatic_forward", False)
    )


def origin_of(message: object, bot_id: int | None) -> Origin:  # noqa: PLR0911 - a return per rule
    """Return whose words a python-telegram-bot ``Message`` carries.

    ``bot_id``: the user id of the bot that received it (a reply to its own
    messages is the sender's own words).
    """
    if _forwarded(message):
        return Origin.FORWARDED
    if getattr(message, "via_bot", None) is not None:
        return Origin.VIA_BOT
    if (
        getattr(message, "external_reply", None) is not None
        or getattr(message, "reply_to_story", None) is not None
    ):
        return Origin.QUOTED
    replied = getattr(message, "reply_to_message", None)
    if replied is None or getattr(replied, "forum_topic_created", None) is not None:
        # No reply, or only the topic's first message (every topic message
        # "replies" to it).
        return Origin.OWN
    sender = _author(message)
    author = _author(replied)
    if _forwarded(replied) or getattr(replied, "via_bot", None) is not None:
        return Origin.QUOTED
    if author is not None and author in {sender, bot_id}:
        return Origin.OWN
    return Origin.QUOTED


class OriginLog:
    """The origin of each message seen in a raw update, until its event comes."""

    def __init__(self, limit: int = MAX_ORIGINS) -> None:
        """Nothing seen yet."""
        self._limit = limit
        self._origins: OrderedDict[tuple[int, int], Origin] = OrderedDict()

    def note_update(self, update: object, bot_id: int | None) -> None:
        """Note the origin of the message in a python-telegram-bot ``Update``."""
        if getattr(update, "callback_query", None) is not None:
            # A button press carries no text of anyone's.
            return
        message = getattr(update, "effective_message", None)
        chat = getattr(message, "chat", None)
        chat_id = getattr(chat, "id", None)
        message_id = getattr(message, "message_id", None)
        if not isinstance(chat_id, int) or not isinstance(message_id, int):
            return
        self._origins[chat_id, message_id] = origin_of(message, bot_id)
        self._origins.move_to_end((chat_id, message_id))
        while len(self._origins) > self._limit:
            self._origins.popitem(last=False)

    def take(self, chat_id: int, message_id: int | None) -> Origin:
        """Return (and forget) a message's origin; ``UNCHECKED`` if never seen."""
        if message_id is None:
            return Origin.UNCHECKED
        return self._origins.pop((chat_id, message_id), Origin.UNCHECKED)

    def absorb(self, other: OriginLog) -> None:
        """Take over what another log saw (the updates kept while starting)."""
        for key, origin in other._origins.items():
            self._origins.setdefault(key, origin)
        other._origins.clear()
