"""What a telegram_bot event becomes: an ``Incoming`` message, read from its data."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..media import Attachment, classify
from ..tasks.chat import CMD_TASK_CANCEL
from .origin import Origin

EVENT_TEXT: Final = "telegram_text"
EVENT_COMMAND: Final = "telegram_command"
EVENT_CALLBACK: Final = "telegram_callback"
# Voice notes, audio, photos, documents, and also stickers, videos, animations
# and locations: telegram_bot reports them all as attachments.
EVENT_ATTACHMENT: Final = "telegram_attachment"
EVENT_TYPES: Final = frozenset(
    {EVENT_TEXT, EVENT_COMMAND, EVENT_CALLBACK, EVENT_ATTACHMENT}
)
CMD_CONFIRM: Final = "/confirm"
CMD_CANCEL: Final = "/cancel"


@dataclass(frozen=True, slots=True)
class Incoming:
    """A message from Telegram, reduced to what the assistant uses."""

    bot_entry_id: str
    chat_id: int
    user_id: int
    message_id: int | None
    first_name: str | None
    text: str
    command: str | None = None
    # Set for inline-button presses: the callback query to answer.
    callback_id: str | None = None
    # The sender's Telegram language_code (such as "de" or "pt-br"), if known.
    language: str | None = None
    # A voice note, photo or file sent with the message (its caption is text).
    attachment: Attachment | None = None
    # Whose words the message carries (origin.py), read from the raw
    # update; a message whose update was not seen is UNCHECKED.
    origin: Origin = Origin.UNCHECKED

    @property
    def own_words(self) -> bool:
        """Tell whether the text is the sender's own words.

        Typed, spoken in a voice note, or a caption the sender wrote; not
        forwarded, written by an inline bot, answering someone else's
        message, or of an origin that could not be checked. Anything else
        is outside text: it never takes a shortcut past the model's taint
        rule (state changes wait for Confirm, memory is not written).
        """
        return self.origin is Origin.OWN

    @property
    def outside_sources(self) -> tuple[str, ...]:
        """Return the taint sources the message's own text brings (none: own words)."""
        source = self.origin.source
        return () if source is None else (source,)

    @property
    def key(self) -> str:
        """Return the conversation key: one conversation per bot and chat."""
        return f"telegram:{self.bot_entry_id}:{self.chat_id}"


def person(incoming: Incoming) -> str:
    """Return who wrote or pressed, as stored with pending actions and audits."""
    return f"telegram:{incoming.user_id}"


def as_int(value: object) -> int | None:
    """Return an integer id from an event's value (a number or digits), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return None


def parse_update(  # noqa: PLR0911 - each check rejects
    bot_entry_id: str, event_type: str, data: Mapping[str, Any]
) -> Incoming | None:
    """Return the message telegram_bot reported for a bot, else None.

    ``bot_entry_id`` is the telegram_bot entry whose signal carried the update;
    the data cannot change it.
    """
    if not isinstance(data, Mapping) or event_type not in EVENT_TYPES:
        return None
    bot = data.get("bot")
    if not isinstance(bot, Mapping):
        bot = {}
    chat_id = as_int(data.get("chat_id"))
    user_id = as_int(data.get("user_id"))
    if chat_id is None or user_id is None:
        return None
    first_name = data.get("from_first")
    name_or_none = first_name if isinstance(first_name, str) else None
    if event_type == EVENT_CALLBACK:
        return _parse_callback(data, bot_entry_id, chat_id, user_id, name_or_none)
    message_id = as_int(data.get("id"))
    if event_type == EVENT_ATTACHMENT:
        caption = data.get("text")
        return Incoming(
            bot_entry_id,
            chat_id,
            user_id,
            message_id,
            name_or_none,
            caption.strip() if isinstance(caption, str) else "",
            attachment=classify(data),
        )
    if event_type == EVENT_COMMAND:
        command = data.get("command")
        if not isinstance(command, str) or not command.startswith("/"):
            return None
        name, _, addressee = command.partition("@")
        if (
            addressee
            and addressee.casefold() != str(bot.get("username", "")).casefold()
        ):
            # In a group, "/new@OtherBot" is meant for another bot.
            return None
        args = data.get("args")
        arg_text = " ".join(str(a) for a in args) if isinstance(args, list) else ""
        return Incoming(
            bot_entry_id,
            chat_id,
            user_id,
            message_id,
            first_name if isinstance(first_name, str) else None,
            arg_text,
            command=name.casefold(),
        )
    text = data.get("text")
    if not isinstance(text, str) or not text.strip():
        return None
    return Incoming(
        bot_entry_id,
        chat_id,
        user_id,
        message_id,
        first_name if isinstance(first_name, str) else None,
        text.strip(),
    )


def _parse_callback(
    data: Mapping[str, Any],
    bot_entry_id: str,
    chat_id: int,
    user_id: int,
    first_name: str | None,
) -> Incoming | None:
    """Return a press of one of our Confirm or Cancel buttons, else None."""
    payload = data.get("data")
    callback_id = data.get("id")
    if not isinstance(payload, str) or callback_id is None:
        return None
    command, _, token = payload.partition("_")
    if command not in (CMD_CONFIRM, CMD_CANCEL, CMD_TASK_CANCEL) or not token.isalnum():
        # Another automation's button: not ours to answer.
        return None
    message = data.get("message")
    message_id = (
        as_int(message.get("message_id")) if isinstance(message, Mapping) else None
    )
    return Incoming(
        bot_entry_id,
        chat_id,
        user_id,
        message_id,
        first_name,
        token,
        command=command,
        callback_id=str(callback_id),
    )
