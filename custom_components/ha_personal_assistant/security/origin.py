"""Whose words a Telegram message carries: the sender's own, or someone else's.

A forwarded message, or a reply that quotes a message from another chat,
carries outside text (DESIGN §3): it is marked as such for the taint rule,
and never takes the fast path.
"""

from __future__ import annotations

from typing import Final

# The taint source of a forwarded or quoted message (the Confirm message
# names it in the person's language: source_forwarded).
FORWARDED_SOURCE: Final = "a forwarded or quoted message"
# Messages noted between python-telegram-bot's handler and telegram_bot's
# event: a handful at most; more means none were collected.
MAX_NOTED: Final = 256


def carries_outside_words(message: object) -> bool:
    """Tell whether a python-telegram-bot Message holds someone else's words.

    Its ``forward_origin`` (a forward), ``external_reply`` (a reply to a
    message of another chat) or ``quote`` (a quoted part of a message).
    """
    return any(
        getattr(message, attribute, None) is not None
        for attribute in ("forward_origin", "external_reply", "quote")
    )


class OutsideWords:
    """The (chat, message) ids of updates seen to carry someone else's words."""

    def __init__(self) -> None:
        """Start with nothing noted."""
        self._noted: dict[tuple[int, int], None] = {}

    def note(self, update: object) -> None:
        """Note the update's message if it carries someone else's words."""
        message = getattr(update, "effective_message", None)
        chat_id = getattr(getattr(message, "chat", None), "id", None)
        message_id = getattr(message, "message_id", None)
        if not isinstance(chat_id, int) or not isinstance(message_id, int):
            return
        if carries_outside_words(message):
            if len(self._noted) >= MAX_NOTED:
                del self._noted[next(iter(self._noted))]
            self._noted[chat_id, message_id] = None

    def take(self, chat_id: int, message_id: int | None) -> bool:
        """Tell (once) whether that message was noted."""
        if message_id is None or (chat_id, message_id) not in self._noted:
            return False
        del self._noted[chat_id, message_id]
        return True
