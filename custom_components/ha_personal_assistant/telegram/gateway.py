"""Telegram in and out: events from HA's telegram_bot, replies through its services."""

from __future__ import annotations

import asyncio
import base64
import secrets
import sqlite3
import time
import warnings
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

import httpx
from homeassistant.config_entries import SIGNAL_CONFIG_ENTRY_CHANGED, ConfigEntryChange
from homeassistant.core import ServiceResponse, callback
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers import issue_registry as ir
from homeassistant.helpers.dispatcher import async_dispatcher_connect
from homeassistant.helpers.event import async_track_time_interval
from homeassistant.util import dt as dt_util
from telegram import Update
from telegram.ext import TypeHandler

from ..const import (
    ADD_DOCUMENT_WAIT,
    DOMAIN,
    LOGGER,
    MAX_DOCUMENT_CHARS,
    MAX_DOCUMENT_TITLE_CHARS,
    TELEGRAM_MESSAGE_LIMIT,
    TYPING_REFRESH_SECONDS,
)
from ..documents import DocumentsUnavailable
from ..i18n import async_texts, pick_language
from ..media import (
    MAX_AUDIO_BYTES,
    MAX_FILE_BYTES,
    MAX_IMAGE_BYTES,
    SUPPORTED_FILES,
    Attachment,
    Kind,
    MediaError,
    MediaSettings,
    async_download,
    check_size,
    classify,
    delete_file,
    document_type,
    extract_text,
    transfer_dir,
    write_transfer_file,
)
from ..memory.profile import async_memory_command
from ..model_server import ModelNotFound, ModelServerError
from ..models import Speaker
from ..security.confirmations import (
    ADD_FILE,
    PHOTO_SOURCE,
    ConfirmationManager,
    DecisionResult,
    Outcome,
    async_summarize,
)
from ..security.people import is_known
from ..security.permissions import ResolvedCall
from ..speech import async_speak, async_transcribe, resolve_engines
from ..store import search_audit
from ..store.database import InFlight
from ..store.shared import async_claim_telegram, async_release_telegram
from ..tasks.briefing_chat import CMD_BRIEFING, Asker, async_briefing_command
from ..tasks.chat import (
    CMD_TASK_CANCEL,
    CMD_TASKS,
    Keyboard,
    async_cancel_press,
    async_listing,
)
from ..tasks.notices import CMD_NOTICES, Notices, Subscriber, async_notices_command
from ..tools.registry import ToolError
from .origin import Origin, OriginLog
from .watch import (
    RAW_HANDLER_GROUP,
    TELEGRAM_DOMAIN,
    EarlyUpdates,
    SignalWatch,
    bot_application,
    bot_signal,
)

if TYPE_CHECKING:
    from homeassistant.config_entries import ConfigEntry
    from homeassistant.core import HomeAssistant
    from langchain_core.messages import AIMessage, AnyMessage
    from langchain_core.runnables import Runnable

    from ..assistant import Assistant
    from ..documents import DocumentIndex
    from ..executor import BlockingExecutor
    from ..i18n import Texts
    from ..models import TurnResult
    from ..security.permissions import Verdict
    from ..store.actions import PendingAction
    from ..tasks.manager import TaskManager

EVENT_TEXT: Final = "telegram_text"
EVENT_COMMAND: Final = "telegram_command"
EVENT_CALLBACK: Final = "telegram_callback"
# Voice notes, audio, photos, documents, and also stickers, videos, animations
# and locations: telegram_bot reports them all as attachments.
EVENT_ATTACHMENT: Final = "telegram_attachment"
EVENT_TYPES: Final = frozenset(
    {EVENT_TEXT, EVENT_COMMAND, EVENT_CALLBACK, EVENT_ATTACHMENT}
)
# Telegram retries a webhook update for at most a day; a week is ample to
# recognize edits and replays, and keeps the table small.
SEEN_RETENTION: Final = 7 * 24 * 3600  # seconds
PRUNE_INTERVAL: Final = timedelta(hours=6)
SEND_TIMEOUT: Final = 30  # seconds for one Telegram API call
# A stop or unload that comes while an answer is being sent waits this long
# for it before cutting it off.
DELIVERY_GRACE: Final = 3.0  # seconds
# Delivery of replies. telegram_bot does not retry: its services raise
# HomeAssistantError on the first error of python-telegram-bot, which, as
# telegram_bot builds its Bot (an HTTPXRequest, no AIORateLimiter), makes
# one HTTP request per call and raises RetryAfter for a 429 with
# retry_after, NetworkError for a 5xx (and a 429 without it) or a transport
# error, TimedOut for a timeout. The retries below are therefore the only
# ones, and they never stack. A message is sent at most once: it is sent
# again only when Telegram certainly did not take it (an error status, a
# connection that was never made); after a read timeout or a dropped
# answer it may have arrived, and it is not sent again.
SEND_ATTEMPTS: Final = 4
SEND_BACKOFF: Final = 1.0  # seconds before the first retry; doubles each time
MAX_RETRY_WAIT: Final = 60.0  # seconds a message waits for retries in all
# Files checked and waiting for Confirm whose text is kept in memory (each
# at most MAX_DOCUMENT_CHARS); older ones are fetched again on Confirm.
MAX_OFFERED_FILES: Final = 4
# Replies in a row that could not be delivered before a repair issue says so.
UNDELIVERED_ISSUE_AFTER: Final = 3
ISSUE_UNDELIVERED: Final = "telegram_undelivered"
# httpx errors raised before the request reached Telegram: safe to send again.
_NOT_SENT: Final = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# A message quoted in the notice after a restart is cut to this many characters.
QUOTE_CHARS: Final = 60
CALLBACK_TEXT_LIMIT: Final = 200  # Telegram's limit for a callback answer
SEARCH_OUTCOMES: Final = defaultdict(
    lambda: "search_unknown",
    {
        search_audit.OUTCOME_SENT: "search_sent",
        search_audit.OUTCOME_NOT_SENT: "search_not_sent",
        search_audit.OUTCOME_SANITIZER_ERROR: "search_privacy_failed",
        search_audit.OUTCOME_FAILED: "search_failed",
        search_audit.OUTCOME_TIMEOUT: "search_timed_out",
    },
)
# The audit's words for how an action was decided and how it ended, shown by
# /actions in the reader's language (an error message stays as it came).
AUDIT_WORDS: Final = frozenset(
    {
        "requested",
        "confirmed",
        "cancelled",
        "late",
        "expired",
        "not_needed",
        "pending",
        "executing",
        "executed",
        "done",
        "failed",
        "refused",
        "interrupted",
    }
)
# The python-telegram-bot handler group that learns each sender's language:
# below telegram_bot's own (0), so it runs before the update's event is fired.
LANGUAGE_HANDLER_GROUP: Final = RAW_HANDLER_GROUP
# Streaming replies: the first partial text after about a second, then drafts
# at most once a second (private chats) or edits at most every 3 s (groups,
# where drafts do not exist and each edit counts against the rate limit).
DRAFT_FIRST_SECONDS: Final = 1.0
DRAFT_INTERVAL_SECONDS: Final = 1.0
EDIT_FIRST_SECONDS: Final = 2.0
EDIT_INTERVAL_SECONDS: Final = 3.0
CMD_CONFIRM: Final = "/confirm"
CMD_CANCEL: Final = "/cancel"
RECENT_ACTIONS: Final = 10
RECENT_SEARCHES: Final = 10
# What the model reads with a photo (prompt text stays English).
PHOTO_MARK: Final = "[Photo]"
PHOTO_PROMPT: Final = "[Photo without a caption] Describe this photo briefly."
# Decisions that leave the request as it was: its message is not edited.
_NOT_DECIDED: Final = (Outcome.NOT_YOURS, Outcome.NOT_FOUND, Outcome.NOT_ALLOWED)


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
    # Whose words the message carries (telegram/origin.py), read from the raw
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


def split_message(text: str, limit: int = TELEGRAM_MESSAGE_LIMIT) -> list[str]:
    """Split a reply into Telegram-sized parts, preferring paragraph boundaries."""
    text = text.strip()
    parts: list[str] = []
    while len(text) > limit:
        window = text[:limit]
        cut = -1
        for separator in ("\n\n", "\n", ". ", " "):
            cut = window.rfind(separator)
            if cut > limit // 2:
                cut += len(separator)
                break
            cut = -1
        if cut <= 0:
            cut = limit
        parts.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    if text:
        parts.append(text)
    return parts


def retry_delay(err: BaseException) -> float | None:
    """Return how long to wait before sending again, or None not to retry.

    Read from python-telegram-bot's error under telegram_bot's: RetryAfter
    gives Telegram's own wait; a NetworkError from an error status, or from
    a connection that was never made, may be retried after the backoff.
    Anything that may have reached Telegram (a timeout or a dropped
    connection after sending), or that a retry cannot fix (a bad request, a
    blocked bot), is not retried.
    """
    cause: BaseException | None = err
    while cause is not None:
        name = type(cause).__name__
        if name == "RetryAfter":
            with warnings.catch_warnings():
                # python-telegram-bot warns that it will become a timedelta.
                warnings.simplefilter("ignore")
                value = getattr(cause, "retry_after", 0)
            if isinstance(value, timedelta):
                return value.total_seconds()
            return float(value) if isinstance(value, int | float) else 0.0
        if name in ("NetworkError", "TimedOut"):
            inner = cause.__cause__
            if inner is None:
                # Telegram answered with an error status: nothing was sent.
                return 0.0 if name == "NetworkError" else None
            return 0.0 if isinstance(inner, _NOT_SENT) else None
        cause = cause.__cause__
    return None


def _not_modified(err: BaseException) -> bool:
    """Tell an edit that changed nothing (the text was already there)."""
    return "message is not modified" in str(err)


def _as_int(value: object) -> int | None:
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
    chat_id = _as_int(data.get("chat_id"))
    user_id = _as_int(data.get("user_id"))
    if chat_id is None or user_id is None:
        return None
    first_name = data.get("from_first")
    name_or_none = first_name if isinstance(first_name, str) else None
    if event_type == EVENT_CALLBACK:
        return _parse_callback(data, bot_entry_id, chat_id, user_id, name_or_none)
    message_id = _as_int(data.get("id"))
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
        _as_int(message.get("message_id")) if isinstance(message, Mapping) else None
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


class ReplyStream:
    """Show a reply while the model writes it, then deliver it once, whole.

    Private chats get ``send_message_draft`` (Telegram shows the text as the
    bot typing it, and the final ``send_message`` replaces it). Elsewhere, or
    when a draft is refused, a message is sent and then edited. The texts
    come through the assistant's reply filters, like the final reply.
    """

    def __init__(self, gateway: TelegramGateway, incoming: Incoming) -> None:
        """Prepare the stream; ``start`` begins showing text."""
        self._gateway = gateway
        self._incoming = incoming
        self._drafts = incoming.chat_id > 0
        self._draft_id = secrets.randbelow(2**31 - 2) + 1
        self._text = ""
        self._shown = ""
        self._message_id: int | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @callback
    def update(self, text: str) -> None:
        """Take the (filtered) reply so far; shown at the next tick."""
        self._text = text

    @callback
    def start(self) -> None:
        """Start showing partial text in the background."""
        gateway = self._gateway
        self._task = gateway.entry.async_create_background_task(
            gateway.hass, self._async_run(), "ha_personal_assistant reply stream"
        )

    async def _async_wait(self, seconds: float) -> bool:
        """Wait ``seconds``; return True at once when the stream is closed."""
        with suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._stop.wait()
        return self._stop.is_set()

    async def _async_run(self) -> None:
        first = DRAFT_FIRST_SECONDS if self._drafts else EDIT_FIRST_SECONDS
        if await self._async_wait(first):
            return
        while True:
            if self._text and self._text != self._shown:
                await self._async_show(self._text)
            interval = DRAFT_INTERVAL_SECONDS if self._drafts else EDIT_INTERVAL_SECONDS
            if await self._async_wait(interval):
                return

    async def _async_show(self, text: str) -> None:
        """Show ``text`` (its first Telegram-sized part) as a draft or a message."""
        gateway, incoming = self._gateway, self._incoming
        part = split_message(text)[0]
        if self._shown and part == split_message(self._shown)[0]:
            # The text grew past the first part, which is shown already: an
            # edit would change nothing (Telegram refuses it, and each one
            # counts against a group's rate limit).
            self._shown = text
            return
        target = {"config_entry_id": incoming.bot_entry_id, "chat_id": incoming.chat_id}
        # What the chat shows: set only once Telegram took it, so a failed
        # edit is made again (at the next tick, or by the final reply).
        if self._drafts:
            sent = await gateway._async_call(  # noqa: SLF001 - the gateway's sender
                "send_message_draft",
                {
                    **target,
                    "draft_id": self._draft_id,
                    "message": part,
                    "parse_mode": "plain_text",
                },
            )
            if sent:
                self._shown = text
                return
            # Drafts are refused (an older client or chat): edit a message instead.
            self._drafts = False
        if self._message_id is None:
            response = await gateway._async_call(  # noqa: SLF001
                "send_message",
                {
                    **target,
                    "message": part,
                    "parse_mode": "plain_text",
                    "disable_web_page_preview": True,
                },
                return_response=True,
            )
            self._message_id = _sent_message_id(response)
            if self._message_id is None:
                # Nothing to edit: the final reply comes as a new message.
                self._stop.set()
            else:
                self._shown = text
            return
        if await gateway._async_call(  # noqa: SLF001
            "edit_message",
            {
                **target,
                "message_id": self._message_id,
                "message": part,
                "parse_mode": "plain_text",
                "disable_web_page_preview": True,
            },
        ):
            self._shown = text

    @callback
    def close(self) -> None:
        """Stop showing partial text without a final reply."""
        self._stop.set()

    async def async_finish(self, reply: str) -> None:
        """Stop showing drafts and deliver the final reply exactly once."""
        self._stop.set()
        if self._task is not None:
            # Never cancelled mid-call: a message sent but not recorded would
            # be sent again.
            try:
                await self._task
            except Exception:  # noqa: BLE001 - the final reply must still go out
                LOGGER.exception("Showing a partial reply failed")
        gateway, incoming = self._gateway, self._incoming
        if self._message_id is None:
            await gateway._async_send(incoming, reply)  # noqa: SLF001
            return
        first, *rest = split_message(reply) or [""]
        if first and first != next(iter(split_message(self._shown)), ""):
            edited = await gateway._async_deliver(  # noqa: SLF001
                "edit_message",
                {
                    "config_entry_id": incoming.bot_entry_id,
                    "chat_id": incoming.chat_id,
                    "message_id": self._message_id,
                    "message": first,
                    "parse_mode": "plain_text",
                    "disable_web_page_preview": True,
                },
            )
            if not edited:
                # The rest after a first part that is not there would read
                # out of order.
                return
        if rest:
            await gateway._async_send(incoming, "\n\n".join(rest))  # noqa: SLF001


class TelegramGateway:
    """Receive messages, keep each chat in order, and send the replies."""

    def __init__(  # noqa: PLR0913 - keyword-only wiring
        self,
        hass: HomeAssistant,
        entry: ConfigEntry[Any],
        assistant: Assistant,
        *,
        confirmations: ConfirmationManager,
        allowed_user_ids: frozenset[int],
        user_mapping: Mapping[str, str],
        executor: BlockingExecutor,
        media: MediaSettings | None = None,
    ) -> None:
        """Prepare the gateway; ``async_start`` subscribes to the events."""
        self.hass = hass
        self.media = media or MediaSettings()
        self.executor = executor
        # The household documents (files sent are added there on Confirm);
        # None without an embedding model. Set by runtime.
        self.documents: DocumentIndex | None = None
        confirmations.runners[ADD_FILE] = self._async_run_add_file
        self.entry = entry
        self.assistant = assistant
        self.confirmations = confirmations
        self.allowed_user_ids = allowed_user_ids
        self.user_mapping = dict(user_mapping)
        # Each chat's messages in arrival order, with the task that records
        # each one (durably, before it is answered).
        self._queues: dict[
            str, asyncio.Queue[tuple[Incoming, asyncio.Task[tuple[bool, int | None]]]]
        ] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._unsubs: list[Callable[[], None]] = []
        # telegram_bot entry id -> unsubscribe from its bot's update signal.
        self._bots: dict[str, Callable[[], None]] = {}
        # Each sender's Telegram language_code, from the raw updates, and the
        # bots' applications that report it (telegram_bot entry id -> the
        # application and our handler in it).
        self._languages: dict[int, str] = {}
        # Whose words each message carries, from the same raw updates.
        self.origins = OriginLog()
        self._language_handlers: dict[str, tuple[Any, TypeHandler[Any, Any, Any]]] = {}
        # Updates telegram_bot reported on the bus but not through the signal.
        self.signal_watch = SignalWatch(hass, EVENT_TYPES, self._bots.keys)
        self._send_failed = False
        # Replies in a row that could not be delivered, and the last error.
        self._undelivered = 0
        self.last_latency: float | None = None
        # Reminders, timers and watches (/tasks and its buttons); set by runtime.
        self.tasks: TaskManager | None = None
        self.notices: Notices | None = None
        # The text of each file offered for the documents, read when it was
        # checked, kept until its Confirm (in memory only: after a restart or
        # a reload, Confirm fetches the file again). (bot entry, file id) ->
        # (when it was read, its text).
        self._offered_files: OrderedDict[tuple[str, str], tuple[float, str]] = (
            OrderedDict()
        )

    async def async_start(self, early: EarlyUpdates | None = None) -> None:
        """Listen for telegram_bot's events, unless an older entry already does.

        The messages a stop left unanswered are taken first: a message that
        comes in at once (Telegram delivers what was sent while Home
        Assistant was down as soon as it is back) is this start's own, not
        one to report as interrupted. ``early`` holds what telegram_bot
        delivered while the entry was being set up: answered first, in order.
        """
        if not async_claim_telegram(self.hass, self.entry.entry_id):
            if early is not None:
                early.async_stop()
            # Only entries made before single_config_entry can be two.
            LOGGER.warning(
                "More than one Personal Assistant entry exists (made by an older "
                "version, which allowed that); entry %s does not answer Telegram. "
                "Delete the one you do not use",
                self.entry.entry_id,
            )
            return
        self._unsubs.append(
            lambda: async_release_telegram(self.hass, self.entry.entry_id)
        )
        try:
            interrupted = await self.assistant.database.async_take_in_flight()
        except sqlite3.Error as err:
            LOGGER.debug("Could not read the messages left unanswered: %s", err)
            interrupted = []
        # Not the telegram_* events: anyone may fire those on the bus (REST
        # API, websocket, automations, scripts), and the assistant must only
        # obey what telegram_bot received from Telegram.
        for bot_entry in self.hass.config_entries.async_entries(TELEGRAM_DOMAIN):
            self._async_follow_bot(bot_entry)
        if early is not None:
            # No await since the bots were followed: every update is either
            # in ``early`` or comes to the gateway itself, never both.
            self.origins.absorb(early.origins)
            for bot_entry_id, event_type, data in early.async_stop():
                self._async_on_update(bot_entry_id, event_type, data)
        self._unsubs.append(self.signal_watch.async_start())
        self._unsubs.append(self.signal_watch.async_remove_issue)
        self._unsubs.append(
            async_dispatcher_connect(
                self.hass, SIGNAL_CONFIG_ENTRY_CHANGED, self._async_entry_changed
            )
        )
        self._unsubs.append(self._async_unfollow_bots)
        self._unsubs.append(
            async_track_time_interval(
                self.hass,
                self._async_prune,
                PRUNE_INTERVAL,
                name="ha_personal_assistant prune",
                cancel_on_shutdown=True,
            )
        )
        # Messages a stop of Home Assistant left unanswered: say so.
        if interrupted:
            self.entry.async_create_background_task(
                self.hass,
                self._async_report_interrupted(interrupted),
                "ha_personal_assistant interrupted messages",
            )

    @callback
    def _async_follow_bot(self, bot_entry: ConfigEntry[Any]) -> None:
        """Receive the updates of a telegram_bot entry's bot."""
        if bot_entry.entry_id in self._bots or (name := bot_signal(bot_entry)) is None:
            return
        entry_id = bot_entry.entry_id

        @callback
        def _on_update(event_type: str, data: Mapping[str, Any]) -> None:
            self.signal_watch.async_delivered(event_type, data)
            self._async_on_update(entry_id, event_type, data)

        self._bots[entry_id] = async_dispatcher_connect(self.hass, name, _on_update)
        self._async_watch_languages(bot_entry)

    @callback
    def _async_watch_languages(self, bot_entry: ConfigEntry[Any]) -> None:
        """Learn each sender's language_code and each message's origin.

        telegram_bot's events leave the language out, and where the text came
        from (telegram/origin.py), but the update it came in has both. The
        bot's python-telegram-bot application (polling and webhooks; a
        broadcast bot receives nothing) runs a handler of a lower group
        before telegram_bot's own, which sends the update to us. If
        telegram_bot changes inside, the texts fall back to HA's language.
        """
        application = bot_application(bot_entry)
        watched = self._language_handlers.get(bot_entry.entry_id)
        if application is None:
            if bot_entry.data.get("platform") != "broadcast":
                # Polling and webhook bots have one: telegram_bot has changed.
                LOGGER.warning(
                    "Cannot read the Telegram users' languages from bot %s, "
                    "nor whose words its messages carry (telegram_bot has "
                    "changed); replies use Home Assistant's language and every "
                    "state change waits for Confirm. Update this integration",
                    bot_entry.title,
                )
            return
        if watched and watched[0] is application:
            return
        self._async_unwatch_languages(bot_entry.entry_id)
        handler: TypeHandler[Any, Any, Any] = TypeHandler(Update, self._note_language)
        try:
            application.add_handler(handler, group=LANGUAGE_HANDLER_GROUP)
        except Exception as err:  # noqa: BLE001 - the texts fall back to HA's language
            LOGGER.debug("Cannot learn the Telegram users' languages: %s", err)
            return
        self._language_handlers[bot_entry.entry_id] = (application, handler)

    @callback
    def _async_unwatch_languages(self, bot_entry_id: str) -> None:
        if (watched := self._language_handlers.pop(bot_entry_id, None)) is None:
            return
        application, handler = watched
        with suppress(Exception):
            application.remove_handler(handler, group=LANGUAGE_HANDLER_GROUP)

    async def _note_language(self, update: object, context: object) -> None:
        """Remember the sender's language_code and the message's origin.

        The update goes on unchanged.
        """
        bot_id = getattr(getattr(context, "bot", None), "id", None)
        self.origins.note_update(update, bot_id if isinstance(bot_id, int) else None)
        user = getattr(update, "effective_user", None)
        code = getattr(user, "language_code", None)
        if isinstance(code, str) and code and isinstance(user_id := user.id, int):  # type: ignore[union-attr]
            self._languages[user_id] = code

    @callback
    def _async_entry_changed(
        self, change: ConfigEntryChange, entry: ConfigEntry[Any]
    ) -> None:
        """Follow telegram_bot entries added later; drop removed ones."""
        if entry.domain != TELEGRAM_DOMAIN:
            return
        if change is ConfigEntryChange.REMOVED:
            if (unsub := self._bots.pop(entry.entry_id, None)) is not None:
                unsub()
            self._async_unwatch_languages(entry.entry_id)
            return
        self._async_follow_bot(entry)
        # A reloaded bot has a new application.
        self._async_watch_languages(entry)

    @callback
    def _async_unfollow_bots(self) -> None:
        while self._bots:
            self._bots.popitem()[1]()
        for bot_entry_id in list(self._language_handlers):
            self._async_unwatch_languages(bot_entry_id)

    async def _async_prune(self, _now: datetime) -> None:
        """Forget message ids old enough that Telegram will not send them again."""
        try:
            await self.assistant.database.async_prune(time.time() - SEEN_RETENTION)
        except sqlite3.Error as err:
            LOGGER.debug("Could not prune seen messages: %s", err)

    async def async_stop(self) -> None:
        """Stop listening and cancel the turns in flight."""
        while self._unsubs:
            self._unsubs.pop()()
        workers = list(self._workers.values())
        for task in workers:
            task.cancel()
        if workers:
            # Not ``await task`` under suppress(CancelledError): that would
            # also swallow a cancel of this stop (HA's stop has a time limit).
            await asyncio.wait(workers)
        for task in workers:
            if not task.cancelled() and (err := task.exception()) is not None:
                LOGGER.debug("A chat's worker had stopped: %s", err)
        self._workers.clear()
        self._queues.clear()

    @callback
    def _async_on_update(
        self, bot_entry_id: str, event_type: str, data: Mapping[str, Any]
    ) -> None:
        """Queue the message on its chat's queue, in arrival order."""
        try:
            incoming = parse_update(bot_entry_id, event_type, data)
        except Exception:  # noqa: BLE001 - a strange update must not reach telegram_bot
            LOGGER.debug("Ignoring an update that could not be read: %s", data)
            return
        if incoming is None:
            return
        if language := self._languages.get(incoming.user_id):
            incoming = replace(incoming, language=language)
        if incoming.callback_id is None:
            incoming = replace(
                incoming,
                origin=self.origins.take(incoming.chat_id, incoming.message_id),
            )
        if self.allowed_user_ids and incoming.user_id not in self.allowed_user_ids:
            LOGGER.debug(
                "Ignoring Telegram user %s: not in the allowed list", incoming.user_id
            )
            return
        if incoming.callback_id is not None:
            # A press is answered at once, not after the chat's queued turns;
            # the database makes concurrent presses safe.
            self.entry.async_create_background_task(
                self.hass,
                self._async_on_press(incoming),
                "ha_personal_assistant button press",
            )
            return
        # Recorded at once (seen, and in flight until answered), in the
        # background; the chat's worker waits for it before answering.
        receipt = self.entry.async_create_task(
            self.hass,
            self._async_receive(incoming),
            "ha_personal_assistant receive",
            eager_start=True,
        )
        queue = self._queues.setdefault(incoming.key, asyncio.Queue())
        queue.put_nowait((incoming, receipt))
        if incoming.key not in self._workers:
            # Not started eagerly: the worker must be registered before it can
            # finish, or a finished worker would stay registered and the chat
            # would never get another one.
            self._workers[incoming.key] = self.entry.async_create_background_task(
                self.hass,
                self._async_work(incoming.key, queue),
                f"ha_personal_assistant chat {incoming.key}",
                eager_start=False,
            )

    async def _async_work(
        self,
        key: str,
        queue: asyncio.Queue[tuple[Incoming, asyncio.Task[tuple[bool, int | None]]]],
    ) -> None:
        """Handle a chat's messages one after the other, then end."""
        try:
            while not queue.empty():
                incoming, receipt = queue.get_nowait()
                fresh, in_flight = await receipt
                if not fresh:
                    # An edited message or a replayed update: answered once.
                    LOGGER.debug("Ignoring message %s seen before", incoming.message_id)
                    continue
                try:
                    await self._async_handle(incoming, in_flight)
                except asyncio.CancelledError:
                    # Stopping before the answer went out: the message stays
                    # in flight, and the next start tells its sender.
                    raise
                except sqlite3.Error as err:
                    # A command that needs the database (/new, /confirm, ...)
                    # while it is locked or full: nothing was done.
                    LOGGER.debug("Storage unavailable for a command: %s", err)
                    texts = await self._async_texts(incoming)
                    await self._async_send(incoming, texts("storage_unavailable"))
                    await self._async_answered(in_flight)
                except Exception:  # noqa: BLE001 - one bad turn must not end the chat
                    LOGGER.exception("Could not handle a Telegram message")
                    texts = await self._async_texts(incoming)
                    await self._async_send(incoming, texts("internal_error"))
                    await self._async_answered(in_flight)
        finally:
            if self._workers.get(key) is asyncio.current_task():
                del self._workers[key]
            if queue.empty() and self._queues.get(key) is queue:
                del self._queues[key]

    async def _async_handle(self, incoming: Incoming, in_flight: int | None) -> None:
        """Answer a message; its in-flight row goes as soon as the answer is out."""
        if incoming.command is not None:
            await self._async_command(incoming)
            await self._async_answered(in_flight)
            return
        if incoming.attachment is not None:
            await self._async_handle_attachment(
                incoming, incoming.attachment, in_flight
            )
            return
        await self._async_answer(incoming, in_flight)

    def _speaker(self, incoming: Incoming) -> Speaker:
        """Return who wrote, as the assistant and its safety layers see them."""
        return Speaker(
            person=_person(incoming),
            name=incoming.first_name,
            ha_user_id=self.user_mapping.get(str(incoming.user_id)),
            chat_id=incoming.chat_id,
            may_act=self._is_known(incoming),
            language=pick_language(incoming.language, self.hass.config.language),
        )

    async def _async_answer(
        self, incoming: Incoming, in_flight: int | None, turn: MediaTurn | None = None
    ) -> None:
        """Run the agent on a message (typed, heard or seen) and send the answer."""
        turn = turn or MediaTurn()
        started = time.monotonic()
        speaker = self._speaker(incoming)
        typing = self.entry.async_create_background_task(
            self.hass, self._async_keep_typing(incoming), "ha_personal_assistant typing"
        )
        stream = ReplyStream(self, incoming)
        stream.start()
        prefix = turn.prefix

        def on_text(text: str) -> None:
            stream.update(prefix + text)

        try:
            result = await self.assistant.async_turn(
                incoming.key,
                incoming.text,
                speaker,
                on_text=on_text,
                images=turn.images,
                # Someone else's words (a forward, a quoted reply) are outside
                # text, whichever way they came: typed, heard or a caption.
                sources=(*turn.sources, *incoming.outside_sources),
                model=turn.model,
            )
        except BaseException:
            stream.close()
            raise
        finally:
            typing.cancel()
        spoken = result.reply
        if prefix:
            result = replace(result, reply=prefix + result.reply)
        # The answer exists: an unload or stop that comes now lets it go out
        # (briefly), rather than cutting it between the reply and its buttons
        # and then reporting an answered message as unanswered.
        delivery = self.hass.async_create_task(
            self._async_send_answer(
                incoming,
                speaker,
                result,
                stream,
                in_flight,
                spoken if turn.voice and self.media.voice_replies else None,
            ),
            "ha_personal_assistant delivery",
        )
        try:
            await asyncio.shield(delivery)
        except asyncio.CancelledError:
            await asyncio.wait({delivery}, timeout=DELIVERY_GRACE)
            delivery.cancel()
            raise
        self.last_latency = time.monotonic() - started
        self.assistant.stats.async_record_result("telegram", result, self.last_latency)
        # Only now: summaries and learning must never delay the reply.
        self.assistant.async_after_reply(result)

    async def _async_send_answer(  # noqa: PLR0913, PLR0917 - the answer and where it goes
        self,
        incoming: Incoming,
        speaker: Speaker,
        result: TurnResult,
        stream: ReplyStream,
        in_flight: int | None,
        spoken: str | None = None,
    ) -> None:
        """Send the reply and its Confirm buttons; cross the message off.

        ``spoken``: the answer to a voice note, also sent as a voice note.
        """
        await stream.async_finish(result.reply)
        if result.proposals and speaker.may_act:
            # Never a Confirm button for someone who may not act (the tools
            # already refused; this holds even if one did not).
            await self._async_request_confirmation(incoming, speaker, result.proposals)
        if spoken:
            await self._async_send_spoken(incoming, speaker, spoken)
        await self._async_answered(in_flight)

    async def _async_handle_attachment(
        self, incoming: Incoming, attachment: Attachment, in_flight: int | None
    ) -> None:
        """Answer a voice note, a photo or a file; anything else is declined."""
        texts = await self._async_texts(incoming)
        reply: str | None = None
        turn: tuple[Incoming, MediaTurn] | None = None
        typing = self.entry.async_create_background_task(
            self.hass, self._async_keep_typing(incoming), "ha_personal_assistant typing"
        )
        try:
            if attachment.kind is Kind.VOICE:
                transcript = await self._async_hear(incoming, attachment)
                heard = texts("voice_heard", text=transcript)
                turn = (
                    replace(incoming, text=transcript, attachment=None),
                    MediaTurn(prefix=f"{heard}\n\n", voice=True),
                )
            elif attachment.kind is Kind.PHOTO:
                model, image = await self._async_see(incoming, attachment)
                # The model's instruction stays English, like every prompt text.
                question = (
                    f"{PHOTO_MARK} {incoming.text}" if incoming.text else PHOTO_PROMPT
                )
                turn = (
                    replace(incoming, text=question, attachment=None),
                    MediaTurn(images=(image,), sources=(PHOTO_SOURCE,), model=model),
                )
            elif attachment.kind is Kind.DOCUMENT:
                reply = await self._async_offer_file(incoming, attachment, texts)
            else:
                reply = texts("media_unsupported")
        except MediaError as err:
            reply = texts(err.key, **err.placeholders)
        finally:
            typing.cancel()
        if turn is not None:
            await self._async_answer(turn[0], in_flight, turn[1])
            return
        if reply:
            await self._async_send(incoming, reply)
        await self._async_answered(in_flight)

    async def _async_hear(self, incoming: Incoming, attachment: Attachment) -> str:
        """Return what a voice note says, through Home Assistant's STT."""
        engines = resolve_engines(self.hass, self.media.stt_engine)
        if not engines.stt:
            raise MediaError(key="stt_missing")
        check_size(attachment, MAX_AUDIO_BYTES)
        audio = await async_download(
            self.hass,
            self.executor,
            incoming.bot_entry_id,
            attachment,
            MAX_AUDIO_BYTES,
        )
        return await async_transcribe(
            self.hass,
            engines,
            audio,
            pick_language(incoming.language, self.hass.config.language),
        )

    async def _async_see(
        self, incoming: Incoming, attachment: Attachment
    ) -> tuple[Runnable[list[AnyMessage], AIMessage], str]:
        """Check the vision model, fetch the photo; return the model and image."""
        name = self.media.vision_model
        models = self.assistant.vision_models
        # Texts that name the server say which kind it is.
        key = self.assistant.server_key
        if not name or models is None:
            raise MediaError(key=key("photo_no_vision"))
        backend = self.assistant.backend
        try:
            # Empty when the server does not say (OpenAI's API never does):
            # then the server's own answer tells.
            capabilities = await backend.async_capabilities(name)
        except ModelNotFound as err:
            raise MediaError(key=key("vision_missing"), model=name) from err
        except ModelServerError as err:
            LOGGER.debug("Could not ask %s about %s: %s", backend.where, name, err)
            raise MediaError(key=key("vision_unreachable"), model=name) from err

        def lacks(capability: str) -> bool:
            return bool(capabilities) and capability not in capabilities

        if lacks("vision"):
            raise MediaError(key="vision_no_images", model=name)
        bound, plain = models
        check_size(attachment, MAX_IMAGE_BYTES)
        data = await async_download(
            self.hass,
            self.executor,
            incoming.bot_entry_id,
            attachment,
            MAX_IMAGE_BYTES,
        )
        image = base64.b64encode(data).decode("ascii")
        return (plain if lacks("tools") else bound), image

    async def _async_read_file(
        self, bot_entry_id: str, attachment: Attachment, kind: str
    ) -> str:
        """Fetch a text file or PDF and return its text; raise MediaError."""
        data = await async_download(
            self.hass, self.executor, bot_entry_id, attachment, MAX_FILE_BYTES
        )
        text = await self.executor.run(
            extract_text, data, kind, attachment.display_name
        )
        if len(text) > MAX_DOCUMENT_CHARS:
            raise MediaError(
                key="file_too_long",
                name=attachment.display_name,
                limit=f"{MAX_DOCUMENT_CHARS:,}",
            )
        return text

    async def _async_offer_file(
        self, incoming: Incoming, attachment: Attachment, texts: Texts
    ) -> str | None:
        """Check a file and ask whether to add it; return a reply if not asked."""
        if not self._is_known(incoming):
            return texts("not_known_reply")
        if self.documents is None:
            return texts("documents_off")
        kind = document_type(attachment)
        if kind is None:
            raise MediaError(
                key="file_type", name=attachment.display_name, types=SUPPORTED_FILES
            )
        check_size(attachment, MAX_FILE_BYTES)
        # Read now, so a file that cannot be added is said before any Confirm;
        # the text waits in memory for the Confirm.
        text = await self._async_read_file(incoming.bot_entry_id, attachment, kind)
        title = _file_title(attachment)
        call = ResolvedCall(
            domain=DOMAIN,
            service=ADD_FILE,
            entity_ids=(),
            data={
                "bot_entry_id": incoming.bot_entry_id,
                "file_id": attachment.file_id,
                "file_name": title,
                "mime_type": attachment.mime_type,
                "file_size": attachment.file_size,
            },
        )
        action = await self.confirmations.async_propose_internal(
            conversation_key=incoming.key,
            bot_entry_id=incoming.bot_entry_id,
            chat_id=incoming.chat_id,
            requester=_person(incoming),
            call=call,
            summary=texts("file_summary", name=title),
        )
        self._keep_offered_file(incoming.bot_entry_id, attachment.file_id, text)
        await self._async_ask(
            incoming,
            action,
            texts(
                "file_confirm",
                name=title,
                expiry=expiry_text(texts, self.confirmations.timeout),
            ),
            texts,
        )
        return None

    async def _async_run_add_file(self, call: ResolvedCall, texts: Texts) -> None:
        """Add a confirmed file to the household documents; raise ToolError."""
        data = call.data
        attachment = Attachment(
            Kind.DOCUMENT,
            str(data.get("file_id") or "") or None,
            str(data.get("file_name") or "") or None,
            data.get("mime_type") if isinstance(data.get("mime_type"), str) else None,
            _as_int(data.get("file_size")),
        )
        kind = document_type(attachment)
        if kind is None:
            raise ToolError(
                texts("file_type", name=attachment.display_name, types=SUPPORTED_FILES)
            )
        if self.documents is None:
            raise ToolError(texts("documents_off"))
        bot_entry_id = str(data.get("bot_entry_id", ""))
        try:
            content = self._take_offered_file(bot_entry_id, attachment.file_id)
            if content is None:
                content = await self._async_read_file(bot_entry_id, attachment, kind)
            await self.documents.async_add(
                _file_title(attachment), content, wait=ADD_DOCUMENT_WAIT
            )
        except MediaError as err:
            raise ToolError(texts(err.key, **err.placeholders)) from err
        except (DocumentsUnavailable, sqlite3.Error, TimeoutError) as err:
            LOGGER.debug("Could not add a file to the documents: %s", err)
            raise ToolError(texts("storage_unavailable")) from err

    def _prune_offered_files(self) -> None:
        """Forget texts whose Confirm can no longer come (expired)."""
        oldest = time.monotonic() - self.confirmations.timeout - 60
        while self._offered_files:
            key, (read_at, _text) = next(iter(self._offered_files.items()))
            if read_at >= oldest:
                break
            del self._offered_files[key]

    def _keep_offered_file(
        self, bot_entry_id: str, file_id: str | None, text: str
    ) -> None:
        """Keep a checked file's text for its Confirm (a few, the newest)."""
        self._prune_offered_files()
        if file_id is None:
            return
        key = (bot_entry_id, file_id)
        self._offered_files.pop(key, None)
        self._offered_files[key] = (time.monotonic(), text)
        while len(self._offered_files) > MAX_OFFERED_FILES:
            self._offered_files.popitem(last=False)

    def _take_offered_file(self, bot_entry_id: str, file_id: str | None) -> str | None:
        """Return and forget a checked file's text, if it is still kept."""
        self._prune_offered_files()
        if file_id is None:
            return None
        kept = self._offered_files.pop((bot_entry_id, file_id), None)
        return None if kept is None else kept[1]

    async def _async_send_spoken(
        self, incoming: Incoming, speaker: Speaker, text: str
    ) -> None:
        """Send the answer to a voice note as a voice note too (option voice_replies).

        The text reply went out already; a voice that cannot be made or sent
        gets a short note instead.
        """
        texts = await self._async_texts(incoming)
        engines = resolve_engines(self.hass, self.media.stt_engine)
        try:
            extension, audio = await async_speak(
                self.hass, engines, text, speaker.language or self.hass.config.language
            )
            path = await self.executor.run(
                write_transfer_file, transfer_dir(self.hass), extension, audio
            )
        except MediaError as err:
            await self._async_send(incoming, texts(err.key, **err.placeholders))
            return
        try:
            sent = await self._async_deliver(
                "send_voice",
                {
                    "config_entry_id": incoming.bot_entry_id,
                    "chat_id": incoming.chat_id,
                    "file": str(path),
                },
            )
        finally:
            await self.executor.run(delete_file, path)
        if not sent:
            await self._async_send(incoming, texts("voice_not_sent"))

    async def _async_ask(
        self, incoming: Incoming, action: PendingAction, text: str, texts: Texts
    ) -> None:
        """Send a confirmation request with Confirm and Cancel buttons."""
        response = await self._async_deliver(
            "send_message",
            {
                "config_entry_id": incoming.bot_entry_id,
                "chat_id": incoming.chat_id,
                "message": text,
                "parse_mode": "plain_text",
                "disable_web_page_preview": True,
                "inline_keyboard": [
                    [
                        [texts("button_confirm"), f"{CMD_CONFIRM}_{action.token}"],
                        [texts("button_cancel"), f"{CMD_CANCEL}_{action.token}"],
                    ]
                ],
            },
            return_response=True,
        )
        message_id = _sent_message_id(response)
        if message_id is not None:
            await self.confirmations.async_attach_message(action, message_id)

    async def _async_request_confirmation(
        self,
        incoming: Incoming,
        speaker: Speaker,
        proposals: Sequence[Verdict],
    ) -> None:
        """Store the proposed actions, then ask with Confirm and Cancel buttons.

        Stored first: if the message cannot be sent, /confirm still works. An
        action that cannot be stored is refused: it could never be confirmed.
        """
        texts = await self._async_texts(incoming)
        try:
            action = await self.confirmations.async_propose(
                conversation_key=incoming.key,
                bot_entry_id=incoming.bot_entry_id,
                chat_id=incoming.chat_id,
                requester=speaker.person,
                ha_user_id=speaker.ha_user_id,
                verdicts=proposals,
                texts=texts,
            )
        except sqlite3.Error as err:
            LOGGER.debug("Confirmation request not stored: %s", err)
            summary = await async_summarize(
                self.hass,
                [call for verdict in proposals for call in verdict.calls],
                texts,
            )
            await self._async_send(
                incoming, texts("confirmation_not_stored", summary=summary)
            )
            return
        await self._async_ask(
            incoming,
            action,
            confirmation_text(
                texts, action.summary, self.confirmations.timeout, action.reason
            ),
            texts,
        )

    async def _async_on_press(self, incoming: Incoming) -> None:
        """Decide a pending action from a button press and show the outcome."""
        if incoming.command == CMD_TASK_CANCEL:
            await self._async_on_task_press(incoming)
            return
        texts = await self._async_texts(incoming)
        try:
            action = await self.confirmations.async_find(
                token=incoming.text,
                conversation_key=incoming.key,
                user=_person(incoming),
            )
            result = await self.confirmations.async_decide(
                action,
                user=_person(incoming),
                confirm=incoming.command == CMD_CONFIRM,
                may_act=self._is_known(incoming),
                texts=texts,
            )
        except Exception:  # noqa: BLE001 - the press must be answered
            # The claim makes a retry safe: it cannot run the action twice.
            LOGGER.exception("Could not decide a pending action")
            await self._async_answer_press(incoming, texts("press_failed"))
            return
        self.assistant.stats.async_notify()
        try:
            self.confirmations.fault("before_answer")
            await self._async_answer_press(incoming, result.text)
            self.confirmations.fault("before_edit")
            if result.outcome not in _NOT_DECIDED:
                await self._async_show_outcome(incoming, result, incoming.message_id)
        except Exception:  # noqa: BLE001 - the action is settled; only the display failed
            LOGGER.exception("Could not show the outcome of a pending action")

    async def _async_answer_press(self, incoming: Incoming, text: str) -> None:
        """Answer the callback query, so the button stops spinning."""
        await self._async_call(
            "answer_callback_query",
            {
                "config_entry_id": incoming.bot_entry_id,
                "callback_query_id": incoming.callback_id,
                "message": text[:CALLBACK_TEXT_LIMIT],
                "show_alert": False,
            },
        )

    async def _async_show_outcome(
        self, incoming: Incoming, result: DecisionResult, message_id: int | None
    ) -> None:
        """Replace the request's text and buttons with what happened."""
        if message_id is None:
            return
        await self._async_deliver(
            "edit_message",
            {
                "config_entry_id": incoming.bot_entry_id,
                "chat_id": incoming.chat_id,
                "message_id": message_id,
                "message": result.text,
                "parse_mode": "plain_text",
                "disable_web_page_preview": True,
            },
        )

    async def _async_decide_command(
        self, incoming: Incoming, command: str, texts: Texts
    ) -> str:
        """Handle /confirm and /cancel (optionally with a request's token)."""
        name, _, token = command.partition("_")
        action = await self.confirmations.async_find(
            token=token or None, conversation_key=incoming.key, user=_person(incoming)
        )
        result = await self.confirmations.async_decide(
            action,
            user=_person(incoming),
            confirm=name == CMD_CONFIRM,
            may_act=self._is_known(incoming),
            texts=texts,
        )
        if result.action is not None and result.outcome not in _NOT_DECIDED:
            await self._async_show_outcome(incoming, result, result.action.message_id)
        self.assistant.stats.async_notify()
        return result.text

    async def _async_recent_actions(self, incoming: Incoming, texts: Texts) -> str:
        """Describe the sender's latest audited actions."""
        rows = await self.confirmations.async_recent(_person(incoming), RECENT_ACTIONS)
        if not rows:
            return texts("actions_none")
        lines = [texts("actions_title")]
        for row in rows:
            when = dt_util.as_local(dt_util.utc_from_timestamp(row["ts"]))
            entities = ", ".join(row["entities"])
            how = [
                texts(f"audit_{word}") if word in AUDIT_WORDS else word
                for word in (row["confirmation"], row["outcome"])
                if word != "none"
            ]
            lines.append(
                f"{when:%m-%d %H:%M} {row['service']} {entities}: {', '.join(how)}"
            )
        return "\n".join(lines)

    async def _async_recent_searches(self, incoming: Incoming, texts: Texts) -> str:
        """Describe the sender's latest web searches, as they were sent."""
        person = _person(incoming)
        rows = await self.assistant.database.async_run(
            lambda conn: search_audit.recent(conn, person, RECENT_SEARCHES)
        )
        if not rows:
            return texts("searches_none")
        lines = [texts("searches_title")]
        for row in rows:
            when = dt_util.as_local(dt_util.utc_from_timestamp(row.ts))
            outcome = texts(SEARCH_OUTCOMES[row.outcome])
            line = f'{when:%m-%d %H:%M} "{row.query}": {outcome}'
            if row.outcome == search_audit.OUTCOME_SENT:
                line += ", " + texts("search_results", count=row.results)
            if row.categories:
                line += "; " + texts(
                    "search_removed", categories=", ".join(row.categories)
                )
            lines.append(line)
        return "\n".join(lines)

    async def _async_receive(self, incoming: Incoming) -> tuple[bool, int | None]:
        """Record a message before it is answered; tell whether it is new.

        Returns whether this message id is new in its chat, and its
        in-flight row: until the message is answered, a stop of Home
        Assistant leaves the row, and the next start tells the sender.
        """
        text = incoming.text
        if incoming.command is not None:
            text = f"{incoming.command} {text}".strip()
        try:
            return await self.assistant.database.async_receive(
                InFlight(
                    conversation_key=incoming.key,
                    bot_entry_id=incoming.bot_entry_id,
                    chat_id=incoming.chat_id,
                    message_id=incoming.message_id,
                    text=text,
                    received_at=time.time(),
                )
            )
        except sqlite3.Error as err:
            # Better to answer an edit twice than to leave a message unanswered.
            LOGGER.debug("Could not record message %s: %s", incoming.message_id, err)
            return True, None

    async def _async_answered(self, in_flight: int | None) -> None:
        """Forget a message's in-flight row once it was answered.

        Right after the answer went out, and not cut short by a stop or an
        unload that comes meanwhile (it is one short write): an answered
        message must not be reported as unanswered after the start.
        """
        if in_flight is None:
            return
        done = self.hass.async_create_task(
            self._async_forget(in_flight), "ha_personal_assistant answered"
        )
        try:
            await asyncio.shield(done)
        except asyncio.CancelledError:
            await done
            raise

    async def _async_forget(self, in_flight: int) -> None:
        try:
            await self.assistant.database.async_answered(in_flight)
        except sqlite3.Error as err:
            # Left behind: the next start may tell the sender needlessly.
            LOGGER.debug("Could not settle message row %s: %s", in_flight, err)

    async def _async_report_interrupted(self, messages: list[InFlight]) -> None:
        """Tell the senders of messages that a stop left unanswered.

        At most once: the rows were taken before the notices are sent.
        """
        chats: dict[tuple[str, int], list[str]] = {}
        for message in messages:
            chats.setdefault((message.bot_entry_id, message.chat_id), []).append(
                _quote(message.text)
            )
        if chats:
            LOGGER.info(
                "%s message(s) in %s chat(s) were not answered before the last "
                "stop; telling their senders",
                len(messages),
                len(chats),
            )
        # The senders' languages are not known yet after a start: HA's.
        texts = await async_texts(self.hass)
        for (bot_entry_id, chat_id), quotes in chats.items():
            text = (
                texts("interrupted_one", message=quotes[0])
                if len(quotes) == 1
                else texts(
                    "interrupted_many",
                    messages=", ".join(quotes[:-1]),
                    last=quotes[-1],
                )
            )
            await self._async_send_to(bot_entry_id, chat_id, text)

    async def _async_texts(self, incoming: Incoming) -> Texts:
        """Return the fixed texts in the sender's language, else HA's."""
        return await async_texts(self.hass, incoming.language)

    async def _async_command(self, incoming: Incoming) -> None:
        command = incoming.command
        texts = await self._async_texts(incoming)
        if incoming.origin in {Origin.FORWARDED, Origin.VIA_BOT}:
            # Someone else wrote the command (a forwarded "/confirm" or
            # "/forget"): never obeyed. A reply's command is the sender's own.
            reply = texts("forwarded_command")
        elif command in ("/help", "/start"):
            reply = texts("help")
        elif command == "/new":
            await self.assistant.async_new_session(incoming.key)
            reply = texts("new_session")
        elif command is not None and command.partition("_")[0] in (
            CMD_CONFIRM,
            CMD_CANCEL,
        ):
            reply = await self._async_decide_command(incoming, command, texts)
        elif command == CMD_TASKS:
            await self._async_show_tasks(incoming)
            return
        elif command == "/actions":
            reply = await self._async_recent_actions(incoming, texts)
        elif command == "/searchlog":
            reply = await self._async_recent_searches(incoming, texts)
        elif command in ("/forget", CMD_BRIEFING, CMD_NOTICES) and not self._is_known(
            incoming
        ):
            # Memory writes and briefings are for known people only.
            reply = texts("not_known_reply")
        elif command == CMD_BRIEFING:
            asker = Asker(
                person=_person(incoming),
                name=incoming.first_name,
                ha_user_id=self.user_mapping.get(str(incoming.user_id)),
                conversation_key=incoming.key,
                bot_entry_id=incoming.bot_entry_id,
                chat_id=incoming.chat_id,
                language=texts.language,
            )
            reply = await async_briefing_command(
                self.tasks, texts, asker, incoming.text
            )
        elif command == CMD_NOTICES:
            subscriber = Subscriber(
                person=_person(incoming),
                bot_entry_id=incoming.bot_entry_id,
                chat_id=incoming.chat_id,
                language=texts.language,
                ha_user_id=self.user_mapping.get(str(incoming.user_id)),
            )
            reply = await async_notices_command(
                self.notices, texts, subscriber, incoming.text
            )
        elif command in ("/memory", "/forget"):
            # The sender's own profile only, answered without the model.
            profile_key = Speaker(
                person=_person(incoming),
                name=incoming.first_name,
                ha_user_id=self.user_mapping.get(str(incoming.user_id)),
            ).profile_key
            reply = await async_memory_command(
                self.assistant.memory, profile_key, command, incoming.text, texts
            )
        else:
            reply = texts("unknown_command", command=command)
        await self._async_send(incoming, reply)

    async def _async_show_tasks(
        self, incoming: Incoming, message_id: int | None = None
    ) -> None:
        """Send /tasks (or refresh the list in ``message_id``), a button per task."""
        text, keyboard = await async_listing(
            self.tasks,
            await self._async_texts(incoming),
            person=_person(incoming),
            ha_user_id=self.user_mapping.get(str(incoming.user_id)),
            everyone=incoming.text.strip().lower() == "all",
        )
        target: dict[str, Any] = {
            "config_entry_id": incoming.bot_entry_id,
            "chat_id": incoming.chat_id,
            "message": text,
            "parse_mode": "plain_text",
            "disable_web_page_preview": True,
        }
        if message_id is not None:
            await self._async_call(
                "edit_message",
                {**target, "message_id": message_id, "inline_keyboard": keyboard},
            )
            return
        await self.async_send_text(
            incoming.bot_entry_id, incoming.chat_id, text, keyboard
        )

    async def _async_on_task_press(self, incoming: Incoming) -> None:
        """Cancel the task a /tasks button names, then refresh the list."""
        texts = await self._async_texts(incoming)
        if not self._is_known(incoming):
            # Only people the assistant knows may cancel (security/people.py).
            await self._async_answer_press(incoming, texts("not_known_decision"))
            return
        cancelled, text = await async_cancel_press(
            self.tasks,
            incoming.text,
            texts,
            person=_person(incoming),
            ha_user_id=self.user_mapping.get(str(incoming.user_id)),
        )
        await self._async_answer_press(incoming, text)
        if cancelled and incoming.message_id is not None:
            # The list shows the presser's own tasks, left after the cancel.
            await self._async_show_tasks(
                replace(incoming, command=None, text=""),
                incoming.message_id,
            )

    def language_of(self, user_id: int) -> str | None:
        """Return a Telegram user's language_code, if their updates told it."""
        return self._languages.get(user_id)

    async def async_send_text(
        self,
        bot_entry_id: str,
        chat_id: int,
        text: str,
        keyboard: Keyboard | None = None,
    ) -> None:
        """Send a message the integration wrote (a task firing, /tasks)."""
        parts = split_message(text)
        for index, part in enumerate(parts):
            data: dict[str, Any] = {
                "config_entry_id": bot_entry_id,
                "chat_id": chat_id,
                "message": part,
                "parse_mode": "plain_text",
                "disable_web_page_preview": True,
            }
            if keyboard and index == len(parts) - 1:
                data["inline_keyboard"] = keyboard
            await self._async_call("send_message", data)

    async def async_request_confirmation(  # noqa: PLR0913 - keyword-only
        self,
        *,
        bot_entry_id: str,
        chat_id: int,
        person: str,
        ha_user_id: str | None,
        proposals: Sequence[Verdict],
        language: str | None = None,
    ) -> None:
        """Ask ``person`` to confirm, as after a turn (a task's action when due).

        In ``language``, the one the task's maker reads (their Telegram
        language when known, else the task's, else HA's).
        """
        user_id = _as_int(person.partition(":")[2]) or 0
        await self._async_request_confirmation(
            Incoming(bot_entry_id, chat_id, user_id, None, None, "", language=language),
            Speaker(
                person=person,
                name=None,
                ha_user_id=ha_user_id,
                chat_id=chat_id,
                language=language,
            ),
            proposals,
        )

    def _is_known(self, incoming: Incoming) -> bool:
        """Tell whether the sender may change state and confirm (see people.py)."""
        return is_known(
            self.hass,
            bot_entry_id=incoming.bot_entry_id,
            user_id=incoming.user_id,
            allowed_user_ids=self.allowed_user_ids,
            user_mapping=self.user_mapping,
        )

    async def _async_keep_typing(self, incoming: Incoming) -> None:
        """Show 'typing…' until cancelled; Telegram clears it after 5 seconds."""
        while True:
            await self._async_call(
                "send_chat_action",
                {
                    "config_entry_id": incoming.bot_entry_id,
                    "chat_id": incoming.chat_id,
                    "chat_action": "typing",
                },
            )
            await asyncio.sleep(TYPING_REFRESH_SECONDS)

    async def _async_send(self, incoming: Incoming, text: str) -> bool:
        """Send a reply in Telegram-sized parts, link previews off."""
        return await self._async_send_to(incoming.bot_entry_id, incoming.chat_id, text)

    async def _async_send_to(self, bot_entry_id: str, chat_id: int, text: str) -> bool:
        """Deliver a text in order, part by part; False when a part failed.

        A part that cannot be delivered ends the message: the parts after it
        would arrive without it, out of order.
        """
        for part in split_message(text):
            sent = await self._async_deliver(
                "send_message",
                {
                    "config_entry_id": bot_entry_id,
                    "chat_id": chat_id,
                    "message": part,
                    "parse_mode": "plain_text",
                    "disable_web_page_preview": True,
                },
            )
            if not sent:
                return False
        return True

    async def _async_attempt(
        self, service: str, data: dict[str, Any], *, return_response: bool
    ) -> tuple[ServiceResponse | bool, Exception | None]:
        """Call a telegram_bot service once; return its response or the error."""
        try:
            async with asyncio.timeout(SEND_TIMEOUT):
                response = await self.hass.services.async_call(
                    TELEGRAM_DOMAIN,
                    service,
                    data,
                    blocking=True,
                    return_response=return_response,
                )
        except (HomeAssistantError, TimeoutError, ValueError) as err:
            return False, err
        return (response if return_response else True), None

    async def _async_deliver(
        self, service: str, data: dict[str, Any], *, return_response: bool = False
    ) -> ServiceResponse | bool:
        """Send a message (or its final edit), retrying what certainly failed.

        Waits as Telegram asks (retry_after) or with a doubling backoff, up
        to SEND_ATTEMPTS tries and MAX_RETRY_WAIT seconds; never sends again
        what may have arrived (see retry_delay). Returns False when it could
        not be delivered.
        """
        backoff, waited = SEND_BACKOFF, 0.0
        for attempt in range(1, SEND_ATTEMPTS + 1):
            response, err = await self._async_attempt(
                service, data, return_response=return_response
            )
            if err is None or (service == "edit_message" and _not_modified(err)):
                self._async_delivered()
                return response if err is None else True
            delay = retry_delay(err)
            if delay is None or attempt == SEND_ATTEMPTS:
                break
            delay = max(delay, backoff)
            if waited + delay > MAX_RETRY_WAIT:
                break
            LOGGER.debug(
                "Telegram refused %s (%s); trying again in %.1f s", service, err, delay
            )
            await asyncio.sleep(delay)
            waited += delay
            backoff *= 2
        self._async_undelivered(service, err)
        return False

    @callback
    def _async_delivered(self) -> None:
        if self._send_failed:
            self._send_failed = False
            LOGGER.info("Sending to Telegram works again")
        if self._undelivered:
            self._undelivered = 0
            ir.async_delete_issue(self.hass, DOMAIN, ISSUE_UNDELIVERED)

    @callback
    def _async_undelivered(self, service: str, err: Exception | None) -> None:
        """Log an undeliverable message once per outage; raise a repair if it lasts."""
        self._undelivered += 1
        if not self._send_failed:
            self._send_failed = True
            LOGGER.warning("Could not send to Telegram (%s): %s", service, err)
        else:
            LOGGER.debug("Could not send to Telegram (%s) either: %s", service, err)
        if self._undelivered == UNDELIVERED_ISSUE_AFTER:
            ir.async_create_issue(
                self.hass,
                DOMAIN,
                ISSUE_UNDELIVERED,
                is_fixable=False,
                severity=ir.IssueSeverity.ERROR,
                translation_key=ISSUE_UNDELIVERED,
                translation_placeholders={
                    "count": str(UNDELIVERED_ISSUE_AFTER),
                    "error": str(err),
                },
            )

    async def _async_call(
        self, service: str, data: dict[str, Any], *, return_response: bool = False
    ) -> ServiceResponse | bool:
        """Call a telegram_bot service once, for what can be lost.

        Typing, drafts, a growing message, answers to button presses: the
        next one (or the final reply) replaces it, so it is not retried and
        a failure is only logged at debug level.
        """
        response, err = await self._async_attempt(
            service, data, return_response=return_response
        )
        if err is not None:
            LOGGER.debug("Could not send to Telegram (%s): %s", service, err)
        return response


def _quote(text: str) -> str:
    """Quote a message, cut to QUOTE_CHARS characters."""
    text = " ".join(text.split())
    if len(text) > QUOTE_CHARS:
        text = text[: QUOTE_CHARS - 1] + "…"
    return f'"{text}"'


def _person(incoming: Incoming) -> str:
    """Return who wrote or pressed, as stored with pending actions and audits."""
    return f"telegram:{incoming.user_id}"


def _sent_message_id(response: ServiceResponse | bool) -> int | None:  # noqa: FBT001
    """Return the message id telegram_bot.send_message reported."""
    if not isinstance(response, Mapping):
        return None
    chats = response.get("chats")
    if isinstance(chats, list) and chats and isinstance(chats[0], Mapping):
        return _as_int(chats[0].get("message_id"))
    return None


def confirmation_text(
    texts: Texts, summary: str, timeout: float, reason: str | None = None
) -> str:
    """Write the confirmation request from the resolved action.

    ``reason`` says why outside text made it ask (the taint rule); /new is how
    the user ends that conversation.
    """
    expiry = expiry_text(texts, timeout)
    if reason:
        return texts(
            "confirm_request_tainted", summary=summary, reason=reason, expiry=expiry
        )
    return texts("confirm_request", summary=summary, expiry=expiry)


def expiry_text(texts: Texts, timeout: float) -> str:
    """Say how long a confirmation request lives."""
    if timeout < 120:  # noqa: PLR2004 - below two minutes, count seconds
        seconds = int(timeout)
        return (
            texts("expiry_one_second")
            if seconds == 1
            else texts("expiry_seconds", count=seconds)
        )
    return texts("expiry_minutes", count=int(timeout // 60))


def _file_title(attachment: Attachment) -> str:
    """Return a file's title in the documents: its name, on one line."""
    title = " ".join(attachment.display_name.split())
    return title[:MAX_DOCUMENT_TITLE_CHARS]


@dataclass(frozen=True, slots=True)
class MediaTurn:
    """How a voice note or photo changes a turn."""

    # Put before the answer (the transcript of a voice note).
    prefix: str = ""
    images: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    model: Runnable[list[AnyMessage], AIMessage] | None = None
    # Answer a voice note with a voice note too (when voice_replies is on).
    voice: bool = False
