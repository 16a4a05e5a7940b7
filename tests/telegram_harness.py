"""Drive Home Assistant's real ``telegram_bot`` integration end to end.

Nothing of ``telegram_bot`` or python-telegram-bot is patched. The integration
is set up from a config entry exactly like its config flow creates one
(webhooks platform, allowed chats as subentries) and:

* its HTTP calls to ``https://api.telegram.org/bot<token>/<method>`` are
  answered by :class:`FakeTelegramApi`, a ``respx`` router that records every
  call with decoded parameters and answers like the Bot API does (including
  its common 400 errors);
* updates reach it the way Telegram delivers them: as Update JSON POSTed to
  the registered webhook ``/api/telegram_webhooks_<bot id>`` with the secret
  token header captured from the ``setWebhook`` call.

Loopback traffic passes through the router untouched, so a test can run the
fake Ollama server (``tests/fake_ollama.py``) next to this harness.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import time
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qsl

import httpx
import pytest
import respx
from homeassistant.config_entries import (
    ConfigEntryState,
    ConfigSubentry,
    ConfigSubentryData,
)
from pytest_homeassistant_custom_component.common import (  # type: ignore[import-untyped]
    MockConfigEntry,
)

if TYPE_CHECKING:
    from aiohttp.test_utils import TestClient
    from homeassistant.config_entries import ConfigEntry
    from homeassistant.core import HomeAssistant
    from pytest_homeassistant_custom_component.typing import (  # type: ignore[import-untyped]
        ClientSessionGenerator,
    )

type JsonDict = dict[str, Any]
type ApiHandler = Callable[[JsonDict], Any]

TELEGRAM_DOMAIN: Final = "telegram_bot"
BOT_ID: Final = 123456789
BOT_TOKEN: Final = f"{BOT_ID}:AAtesttoken"
BOT_FIRST_NAME: Final = "HA Assistant"
BOT_USERNAME: Final = "ha_assistant_test_bot"
WEBHOOK_BASE_URL: Final = "https://example.com"
WEBHOOK_PATH: Final = f"/api/telegram_webhooks_{BOT_ID}"
SECRET_HEADER: Final = "X-Telegram-Bot-Api-Secret-Token"  # noqa: S105 -- a name

# People and chats. A private chat's id equals its user's id in Telegram.
ALICE_ID: Final = 111111111
BOB_ID: Final = 222222222
MALLORY_ID: Final = 666666666  # never in the allowed chats
GROUP_ID: Final = -1001234567890
KNOWN_USERS: Final[Mapping[int, str]] = {
    ALICE_ID: "Alice",
    BOB_ID: "Bob",
    MALLORY_ID: "Mallory",
}
DEFAULT_CHAT_IDS: Final = (ALICE_ID, BOB_ID)

TELEGRAM_MESSAGE_LIMIT: Final = 4096

# Bot API parameters that carry free text or opaque ids. python-telegram-bot
# posts str values verbatim and JSON-encodes everything else, so these must
# not be JSON-decoded: a message text "42" must stay the string "42".
_TEXT_PARAMS: Final = frozenset(
    {
        "action",
        "address",
        "callback_query_id",
        "caption",
        "custom_title",
        "description",
        "emoji",
        "explanation",
        "first_name",
        "inline_message_id",
        "ip_address",
        "last_name",
        "name",
        "parse_mode",
        "question",
        "secret_token",
        "short_description",
        "sticker",
        "text",
        "title",
        "url",
    }
)


_NOT_MODIFIED: Final = (
    "Bad Request: message is not modified: specified new message content and "
    "reply markup are exactly the same as a current content and reply markup "
    "of the message"
)

# "send*" methods whose result is plain ``true`` rather than a Message.
_TRUE_SENDS: Final = frozenset({"sendchataction", "sendmessagedraft", "sendgift"})


def decode_bot_api_params(request: httpx.Request) -> tuple[JsonDict, JsonDict]:
    """Decode a Bot API request into ``(params, files)``.

    python-telegram-bot sends form-urlencoded bodies (multipart when a file
    is uploaded) whose non-string values are JSON strings; other clients may
    send a JSON body. Nested values such as ``reply_markup``,
    ``link_preview_options`` or ``allowed_updates`` come back as objects.
    """
    content_type = request.headers.get("content-type", "")
    body = request.content
    raw: dict[str, Any] = {}
    files: JsonDict = {}
    if not body:
        raw = {}
    elif content_type.startswith("application/json"):
        raw = json.loads(body)
    elif content_type.startswith("multipart/form-data"):
        message = BytesParser(policy=HTTP).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + body
        )
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True)
            if not isinstance(payload, bytes):
                payload = b""
            if part.get_filename():
                files[str(name)] = {"filename": part.get_filename(), "content": payload}
            else:
                raw[str(name)] = payload.decode()
    else:
        raw = dict(parse_qsl(body.decode(), keep_blank_values=True))
    params = {key: _decode_value(key, value) for key, value in raw.items()}
    return params, files


def _decode_value(key: str, value: Any) -> Any:
    """JSON-decode one form value unless it is a free-text parameter."""
    if key in _TEXT_PARAMS or not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value  # e.g. chat_id "@channelname"


def markdown_v1_error(text: str) -> str | None:
    """Return Telegram's error for legacy Markdown it cannot parse, if any.

    With ``parse_mode=Markdown`` (telegram_bot's default) Telegram rejects a
    message whose ``*``, ``_`` or backtick entity is never closed, e.g. an
    entity id like ``light.kitchen_lamp`` written as plain text. Entities do
    not nest; a backslash escapes the next special character.
    """
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text) and text[index + 1] in "_*`[":
            index += 2
            continue
        marker = "```" if text.startswith("```", index) else char
        if marker in ("*", "_", "`", "```"):
            end = text.find(marker, index + len(marker))
            if end == -1:
                offset = len(text[:index].encode())
                return (
                    "Bad Request: can't parse entities: Can't find end of the "
                    f"entity starting at byte offset {offset}"
                )
            index = end + len(marker)
            continue
        index += 1
    return None


@dataclass
class TelegramCall:
    """One Bot API call the integration made."""

    method: str
    params: JsonDict
    files: JsonDict = field(default_factory=dict)
    ok: bool = True
    error: str | None = None
    # When the call arrived (time.monotonic()).
    at: float = field(default_factory=time.monotonic)


@dataclass
class _Failure:
    """A scripted Bot API error for the next call(s) of one method."""

    error_code: int
    description: str
    retry_after: int | None
    remaining: int
    # Raised instead of answering (a network failure), if set.
    exception: Exception | None = None


class FakeTelegramApi:
    """The Telegram Bot API as seen by python-telegram-bot, via ``respx``.

    Answers ``getMe``, ``getWebhookInfo``, ``setWebhook`` (capturing the
    secret token), ``deleteWebhook``, ``sendMessage``, ``sendChatAction``,
    ``sendMessageDraft``, ``editMessageText``, ``editMessageReplyMarkup``,
    ``answerCallbackQuery``, ``deleteMessage``, ``getChat`` and the other
    ``send*`` methods; any other method answers ``true``. It keeps the bot's
    messages so edits and deletes behave like Telegram (400 for a missing
    message, 400 "message is not modified" for a no-op edit).
    """

    def __init__(
        self,
        *,
        token: str = BOT_TOKEN,
        first_name: str = BOT_FIRST_NAME,
        username: str = BOT_USERNAME,
    ) -> None:
        """Create a stopped API; :meth:`start` begins intercepting."""
        self.token = token
        self.bot_id = int(token.split(":", 1)[0])
        self.bot_user: JsonDict = {
            "id": self.bot_id,
            "is_bot": True,
            "first_name": first_name,
            "username": username,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }
        # Reject unbalanced legacy Markdown like Telegram does (see
        # markdown_v1_error); switch off to accept any text.
        self.strict_markdown = True
        self.calls: list[TelegramCall] = []
        self.secret_token: str | None = None
        self.webhook_url: str | None = None
        self.allowed_updates: list[str] | None = None
        # (chat_id, message_id) -> the bot's message as Telegram stores it.
        self.messages: dict[tuple[int | str, int], JsonDict] = {}
        self._message_ids = itertools.count(1)
        self._failures: dict[str, list[_Failure]] = {}
        self._overrides: dict[str, ApiHandler] = {}
        self._handlers: dict[str, ApiHandler] = {
            "getme": lambda _params: self.bot_user,
            "getwebhookinfo": self._get_webhook_info,
            "setwebhook": self._set_webhook,
            "deletewebhook": self._delete_webhook,
            "sendmessage": self._send_message,
            "editmessagetext": self._edit_message_text,
            "editmessagereplymarkup": self._edit_reply_markup,
            "editmessagecaption": self._edit_caption,
            "deletemessage": self._delete_message,
            "getchat": self._get_chat,
            "getfile": self._get_file,
        }
        self.router = respx.MockRouter(assert_all_called=False, assert_all_mocked=True)
        # Loopback (the fake Ollama, HA's own test client) goes to the wire.
        for host in ("127.0.0.1", "localhost", "::1"):
            self.router.route(host=host).pass_through()
        self.router.route(
            scheme="https",
            host="api.telegram.org",
            path__regex=r"^/bot(?P<token>[^/]+)/(?P<method>\w+)$",
        ).mock(side_effect=self._handle)
        # Files users sent, as Telegram keeps them: file_id -> content. getFile
        # answers for these (and a small stub for any other id); the download
        # URL ``/file/bot<token>/<file_path>`` serves them.
        self.files: dict[str, bytes] = {}
        self.downloads: list[str] = []
        self.router.route(
            scheme="https",
            host="api.telegram.org",
            path__regex=r"^/file/bot(?P<token>[^/]+)/(?P<file_path>.+)$",
        ).mock(side_effect=self._download)
        self._started = False

    # -------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Start intercepting httpx traffic."""
        if not self._started:
            self.router.start()
            self._started = True

    def stop(self) -> None:
        """Stop intercepting httpx traffic. Idempotent."""
        if self._started:
            self.router.stop(quiet=True)
            self._started = False

    # -------------------------------------------------------------- scripting

    def next_message_id(self) -> int:
        """Allocate a message id (users and the bot share one sequence)."""
        return next(self._message_ids)

    def fail_next(
        self,
        method: str,
        description: str,
        *,
        error_code: int = 400,
        count: int = 1,
        retry_after: int | None = None,
        exception: Exception | None = None,
    ) -> None:
        """Make the next ``count`` calls of ``method`` fail like Telegram.

        python-telegram-bot turns 400 into ``BadRequest``, 403 into
        ``Forbidden``, 429 (with ``retry_after``) into ``RetryAfter`` and
        other statuses (502) into ``NetworkError``. With ``exception`` (an
        httpx error such as ``ConnectError`` or ``ReadTimeout``) the request
        fails on the network instead, with no answer at all.
        """
        self._failures.setdefault(method.lower(), []).append(
            _Failure(error_code, description, retry_after, count, exception)
        )

    def set_handler(self, method: str, handler: ApiHandler) -> None:
        """Answer ``method`` with ``handler(params)`` as the ``result``."""
        self._overrides[method.lower()] = handler

    # ------------------------------------------------------------- inspection

    def calls_of(self, method: str, *, include_failed: bool = True) -> list[JsonDict]:
        """Return the decoded parameters of every call of ``method``."""
        return [
            call.params
            for call in self.calls
            if call.method.lower() == method.lower() and (include_failed or call.ok)
        ]

    def chat_json(self, chat_id: int | str, chat_type: str | None = None) -> JsonDict:
        """Return the ``Chat`` object Telegram sends for ``chat_id``."""
        if isinstance(chat_id, str) and not chat_id.lstrip("-").isdigit():
            return {"id": -1009999999999, "type": "channel", "username": chat_id[1:]}
        chat_id = int(chat_id)
        if chat_type is None:
            if chat_id > 0:
                chat_type = "private"
            elif str(chat_id).startswith("-100"):
                chat_type = "supergroup"
            else:
                chat_type = "group"
        if chat_type == "private":
            return {
                "id": chat_id,
                "type": "private",
                "first_name": KNOWN_USERS.get(chat_id, f"User {chat_id}"),
            }
        return {"id": chat_id, "type": chat_type, "title": f"Chat {chat_id}"}

    # --------------------------------------------------------------- dispatch

    def _handle(
        self, request: httpx.Request, token: str, method: str
    ) -> httpx.Response:
        """Answer one Bot API request (respx side effect)."""
        params, files = decode_bot_api_params(request)
        call = TelegramCall(method, params, files)
        self.calls.append(call)
        if token != self.token:
            return self._fail(call, 401, "Unauthorized")
        key = method.lower()
        if failures := self._failures.get(key):
            failure = failures[0]
            failure.remaining -= 1
            if failure.remaining <= 0:
                failures.pop(0)
            if failure.exception is not None:
                call.ok = False
                call.error = repr(failure.exception)
                raise failure.exception
            return self._fail(
                call, failure.error_code, failure.description, failure.retry_after
            )
        handler = self._overrides.get(key) or self._handlers.get(key)
        if handler is None and key.startswith("send") and key not in _TRUE_SENDS:
            handler = self._send_other
        try:
            result = handler(params) if handler is not None else True
        except BotApiError as err:
            return self._fail(call, err.error_code, err.description)
        return httpx.Response(200, json={"ok": True, "result": result})

    @staticmethod
    def _fail(
        call: TelegramCall,
        error_code: int,
        description: str,
        retry_after: int | None = None,
    ) -> httpx.Response:
        """Record a failed call and build Telegram's error body."""
        call.ok = False
        call.error = description
        body: JsonDict = {
            "ok": False,
            "error_code": error_code,
            "description": description,
        }
        if retry_after is not None:
            body["parameters"] = {"retry_after": retry_after}
        return httpx.Response(error_code, json=body)

    # --------------------------------------------------------------- methods

    def _get_webhook_info(self, _params: JsonDict) -> JsonDict:
        """``getWebhookInfo``: the currently registered webhook."""
        info: JsonDict = {
            "url": self.webhook_url or "",
            "has_custom_certificate": False,
            "pending_update_count": 0,
            "max_connections": 40,
        }
        if self.webhook_url and self.allowed_updates is not None:
            info["allowed_updates"] = self.allowed_updates
        return info

    def _set_webhook(self, params: JsonDict) -> bool:
        """``setWebhook``: remember the URL, secret and allowed updates."""
        self.webhook_url = params.get("url")
        self.secret_token = params.get("secret_token")
        self.allowed_updates = params.get("allowed_updates")
        return True

    def _delete_webhook(self, _params: JsonDict) -> bool:
        """``deleteWebhook``."""
        self.webhook_url = None
        self.secret_token = None
        return True

    def _new_message(self, params: JsonDict, **content: Any) -> JsonDict:
        """Store and return a message the bot sends to ``params['chat_id']``."""
        chat_id = params.get("chat_id")
        if chat_id is None:
            raise BotApiError(400, "Bad Request: chat_id is empty")
        message: JsonDict = {
            "message_id": self.next_message_id(),
            "from": self.bot_user,
            "chat": self.chat_json(chat_id),
            "date": int(time.time()),
            **content,
        }
        markup = params.get("reply_markup")
        # Telegram echoes inline keyboards only; reply keyboards are not part
        # of the message object.
        if isinstance(markup, dict) and "inline_keyboard" in markup:
            message["reply_markup"] = markup
        if thread := params.get("message_thread_id"):
            message["message_thread_id"] = thread
        self.messages[(chat_id, message["message_id"])] = message
        return message

    def _check_text(self, params: JsonDict, key: str = "text") -> str:
        """Apply Telegram's text checks: empty, too long, bad Markdown."""
        text = str(params.get(key) or "")
        if not text.strip():
            raise BotApiError(400, f"Bad Request: message {key} is empty")
        if len(text) > TELEGRAM_MESSAGE_LIMIT:
            raise BotApiError(400, "Bad Request: message is too long")
        markdown = self.strict_markdown and params.get("parse_mode") == "Markdown"
        if markdown and (error := markdown_v1_error(text)):
            raise BotApiError(400, error)
        return text

    def _send_message(self, params: JsonDict) -> JsonDict:
        """``sendMessage``."""
        return self._new_message(params, text=self._check_text(params))

    def _send_other(self, params: JsonDict) -> JsonDict:
        """``sendPhoto``, ``sendSticker``, ...: a message with the caption."""
        content: JsonDict = {}
        if caption := params.get("caption"):
            content["caption"] = caption
        return self._new_message(params, **content)

    def _stored(self, params: JsonDict, action: str) -> JsonDict:
        """Return the bot message an edit/delete targets, or Telegram's 400."""
        key = (params.get("chat_id"), params.get("message_id"))
        if (message := self.messages.get(key)) is None:  # type: ignore[arg-type]
            raise BotApiError(400, f"Bad Request: message to {action} not found")
        return message

    def _edit_message_text(self, params: JsonDict) -> JsonDict | bool:
        """``editMessageText``: edit a stored message (``true`` if inline)."""
        if "inline_message_id" in params:
            return True
        message = self._stored(params, "edit")
        text = self._check_text(params)
        markup = params.get("reply_markup")
        if text == message.get("text") and markup == message.get("reply_markup"):
            raise BotApiError(400, _NOT_MODIFIED)
        message["text"] = text
        self._set_markup(message, markup)
        message["edit_date"] = int(time.time())
        return message

    def _edit_reply_markup(self, params: JsonDict) -> JsonDict | bool:
        """``editMessageReplyMarkup``: replace or remove the inline keyboard."""
        if "inline_message_id" in params:
            return True
        message = self._stored(params, "edit")
        markup = params.get("reply_markup")
        if markup == message.get("reply_markup") or (
            markup in (None, {"inline_keyboard": []}) and "reply_markup" not in message
        ):
            raise BotApiError(400, _NOT_MODIFIED)
        self._set_markup(message, markup)
        message["edit_date"] = int(time.time())
        return message

    def _edit_caption(self, params: JsonDict) -> JsonDict | bool:
        """``editMessageCaption``."""
        if "inline_message_id" in params:
            return True
        message = self._stored(params, "edit")
        message["caption"] = params.get("caption", "")
        self._set_markup(message, params.get("reply_markup"))
        return message

    @staticmethod
    def _set_markup(message: JsonDict, markup: Any) -> None:
        """Set an inline keyboard on a stored message, or drop it."""
        if isinstance(markup, dict) and markup.get("inline_keyboard"):
            message["reply_markup"] = markup
        else:
            message.pop("reply_markup", None)

    def _delete_message(self, params: JsonDict) -> bool:
        """``deleteMessage``."""
        message = self._stored(params, "delete")
        self.messages.pop((params["chat_id"], message["message_id"]))
        return True

    def _get_chat(self, params: JsonDict) -> JsonDict:
        """``getChat``: a ``ChatFullInfo`` (used by the allowed-chat flow)."""
        return {
            **self.chat_json(params.get("chat_id", 0)),
            "accent_color_id": 0,
            "max_reaction_count": 11,
            "accepted_gift_types": {
                "unlimited_gifts": False,
                "limited_gifts": False,
                "unique_gifts": False,
                "premium_subscription": False,
                "gifts_from_channels": False,
            },
        }

    def _get_file(self, params: JsonDict) -> JsonDict:
        """``getFile``."""
        file_id = str(params.get("file_id", ""))
        return {
            "file_id": file_id,
            "file_unique_id": f"u{abs(hash(file_id)) % 10**8}",
            "file_size": len(self.files.get(file_id, b"abc")),
            "file_path": f"documents/{file_id}.bin",
        }

    def _download(
        self,
        _request: httpx.Request,
        token: str,
        file_path: str,
    ) -> httpx.Response:
        """A file's content, as ``https://api.telegram.org/file/bot...`` serves it."""
        self.downloads.append(file_path)
        if token != self.token:
            return httpx.Response(401, json={"ok": False, "error_code": 401})
        file_id = file_path.removeprefix("documents/").removesuffix(".bin")
        if file_id not in self.files:
            return httpx.Response(
                404, json={"ok": False, "error_code": 404, "description": "Not Found"}
            )
        return httpx.Response(200, content=self.files[file_id])


class BotApiError(Exception):
    """Raised by a method handler to answer with a Bot API error."""

    def __init__(self, error_code: int, description: str) -> None:
        """Store the error code and description."""
        super().__init__(description)
        self.error_code = error_code
        self.description = description


class TelegramHarness:
    """The real ``telegram_bot`` integration, set up and scriptable.

    Build Update JSON with the ``*_update`` methods and deliver it with
    :meth:`post_update`; inspect what the bot sent with :meth:`calls`,
    :meth:`sent_messages` and :meth:`wait_for_sent`.
    """

    def __init__(
        self,
        hass: HomeAssistant,
        api: FakeTelegramApi,
        client_factory: ClientSessionGenerator,
    ) -> None:
        """Wrap ``hass`` and the fake API; call :meth:`setup` next."""
        self.hass = hass
        self.api = api
        self.bot_id = api.bot_id
        self.token = api.token
        self.webhook_path = f"/api/telegram_webhooks_{api.bot_id}"
        # A MockConfigEntry; typed as its (typed) base class.
        self.bot_entry: ConfigEntry | None = None
        self.chat_ids: list[int] = []
        # Telegram's language_code of each sender (default "en").
        self.languages: dict[int, str] = {}
        self._client_factory = client_factory
        self._client: TestClient[Any, Any] | None = None
        self._update_ids = itertools.count(1)
        self._callback_ids = itertools.count(5_000_000_000_000_000_001)

    # ------------------------------------------------------------------ setup

    @property
    def entry_id(self) -> str:
        """The ``telegram_bot`` config entry id (``bot.config_entry_id``)."""
        if self.bot_entry is None:
            msg = "telegram_bot is not set up; call setup() first"
            raise RuntimeError(msg)
        return self.bot_entry.entry_id

    @property
    def secret_token(self) -> str:
        """The webhook secret telegram_bot registered with ``setWebhook``."""
        if self.api.secret_token is None:
            msg = "telegram_bot has not registered its webhook"
            raise RuntimeError(msg)
        return self.api.secret_token

    async def setup(
        self, chat_ids: Iterable[int] = DEFAULT_CHAT_IDS, *, entry_id: str | None = None
    ) -> MockConfigEntry:
        """Create the ``telegram_bot`` entry like its config flow and load it.

        ``entry_id``: the id of an entry stored before (after a restart of
        Home Assistant the entry keeps its id).
        """
        self.chat_ids = list(chat_ids)
        entry = MockConfigEntry(
            domain=TELEGRAM_DOMAIN,
            entry_id=entry_id,
            title=BOT_FIRST_NAME,
            # The config flow's unique id is the API token.
            unique_id=self.token,
            version=1,
            minor_version=3,
            data={
                "platform": "webhooks",
                "api_key": self.token,
                "api_endpoint": "https://api.telegram.org",
                "proxy_url": None,
                # With an explicit URL the webhook needs no get_url().
                "url": WEBHOOK_BASE_URL,
                "trusted_networks": ["127.0.0.0/8"],
            },
            options={"parse_mode": "markdown"},
            subentries_data=[
                ConfigSubentryData(
                    data={"chat_id": chat_id},
                    subentry_type="allowed_chat_ids",
                    title=KNOWN_USERS.get(chat_id, f"Chat {chat_id}"),
                    unique_id=str(chat_id),
                )
                for chat_id in self.chat_ids
            ],
        )
        entry.add_to_hass(self.hass)
        self.bot_entry = entry
        await self.hass.config_entries.async_setup(entry.entry_id)
        await self.hass.async_block_till_done()
        if entry.state is not ConfigEntryState.LOADED:
            msg = (
                f"telegram_bot did not load: {entry.state} {entry.reason}; "
                f"calls: {[call.method for call in self.api.calls]}"
            )
            raise AssertionError(msg)
        return entry

    async def add_allowed_chat(self, chat_id: int, title: str | None = None) -> None:
        """Add an allowed chat subentry (telegram_bot reloads its platforms)."""
        assert self.bot_entry is not None
        self.hass.config_entries.async_add_subentry(
            self.bot_entry,
            ConfigSubentry(
                data=MappingProxyType({"chat_id": chat_id}),
                subentry_type="allowed_chat_ids",
                title=title or KNOWN_USERS.get(chat_id, f"Chat {chat_id}"),
                unique_id=str(chat_id),
            ),
        )
        self.chat_ids.append(chat_id)
        await self.hass.async_block_till_done()

    async def async_teardown(self) -> None:
        """Unload telegram_bot while the fake API still answers.

        Unloading deletes the webhook over HTTP; done later by HA's own
        teardown, that call would hit the real network after respx stopped.
        """
        entry = self.bot_entry
        if entry is not None and entry.state is ConfigEntryState.LOADED:
            await self.hass.config_entries.async_unload(entry.entry_id)
            await self.hass.async_block_till_done()

    # ------------------------------------------------------------- inspection

    def calls(self, method: str, *, include_failed: bool = True) -> list[JsonDict]:
        """Return the decoded parameters of every ``method`` call, oldest first."""
        return self.api.calls_of(method, include_failed=include_failed)

    def sent_messages(self, chat_id: int | None = None) -> list[JsonDict]:
        """Return the params of successful ``sendMessage`` calls (to ``chat_id``)."""
        return [
            params
            for params in self.api.calls_of("sendMessage", include_failed=False)
            if chat_id is None or params.get("chat_id") == chat_id
        ]

    def bot_messages(self, chat_id: int | None = None) -> list[JsonDict]:
        """Return the bot's messages as they are now (after edits and deletes)."""
        return [
            message
            for (chat, _), message in self.api.messages.items()
            if chat_id is None or chat == chat_id
        ]

    def clear_calls(self) -> None:
        """Forget the recorded calls (e.g. the ones made during setup)."""
        self.api.calls.clear()

    async def wait_for_sent(
        self,
        count: int = 1,
        chat_id: int | None = None,
        timeout: float = 10.0,  # noqa: ASYNC109 -- polls; no awaited call to wrap
    ) -> list[JsonDict]:
        """Wait until ``count`` messages were sent (to ``chat_id``); return all.

        Polls with short real sleeps, so it works while the agent runs in
        background tasks; it does not move frozen time.
        """
        return await self._wait(
            lambda: self.sent_messages(chat_id), count, timeout, "sendMessage"
        )

    async def wait_for_calls(
        self,
        method: str,
        count: int = 1,
        timeout: float = 10.0,  # noqa: ASYNC109 -- polls; no awaited call to wrap
    ) -> list[JsonDict]:
        """Wait until ``method`` was called ``count`` times; return all calls."""
        return await self._wait(lambda: self.calls(method), count, timeout, method)

    async def _wait(
        self,
        current: Callable[[], list[JsonDict]],
        count: int,
        timeout: float,  # noqa: ASYNC109 -- polls; no awaited call to wrap
        what: str,
    ) -> list[JsonDict]:
        """Poll ``current`` until it holds ``count`` items or time runs out."""
        interval = 0.01
        for _ in range(max(1, math.ceil(timeout / interval))):
            if len(found := current()) >= count:
                return found
            await asyncio.sleep(interval)
        msg = (
            f"expected {count} {what} call(s) within {timeout}s, got "
            f"{len(current())}; all calls: "
            f"{[(call.method, call.params) for call in self.api.calls]}"
        )
        raise AssertionError(msg)

    # ---------------------------------------------------------------- posting

    async def post_update(
        self, update: Mapping[str, Any], *, secret_token: str | None = None
    ) -> int:
        """POST Update JSON to the webhook like Telegram; return HTTP status.

        The aiohttp test client is created on the first post only: starting
        it freezes HA's aiohttp application, and components set up later in
        the test (our integration) may still register views or middlewares.
        """
        if self._client is None:
            self._client = await self._client_factory()
        response = await self._client.post(
            self.webhook_path,
            json=dict(update),
            headers={SECRET_HEADER: secret_token or self.secret_token},
        )
        await response.read()
        return response.status

    async def send_text(
        self, text: str, chat_id: int = ALICE_ID, user_id: int | None = None
    ) -> int:
        """Post a text message from ``user_id`` (default: the chat's user)."""
        return await self.post_update(
            self.text_update(chat_id, _default_user(chat_id, user_id), text)
        )

    async def send_command(
        self,
        command: str,
        args: Sequence[str] | str = (),
        chat_id: int = ALICE_ID,
        user_id: int | None = None,
    ) -> int:
        """Post a ``/command`` message."""
        return await self.post_update(
            self.command_update(chat_id, _default_user(chat_id, user_id), command, args)
        )

    async def press_button(
        self,
        data: str,
        chat_id: int = ALICE_ID,
        user_id: int | None = None,
        message_id: int | None = None,
    ) -> int:
        """Post a callback query as if an inline button was pressed."""
        return await self.post_update(
            self.callback_update(
                chat_id, _default_user(chat_id, user_id), data, message_id=message_id
            )
        )

    # --------------------------------------------------------------- builders

    def _user_json(self, user_id: int, first_name: str | None) -> JsonDict:
        """Return the ``User`` object of a human sender."""
        return {
            "id": user_id,
            "is_bot": False,
            "first_name": first_name or KNOWN_USERS.get(user_id, "Alice"),
            "username": (first_name or KNOWN_USERS.get(user_id, "alice")).lower(),
            "language_code": self.languages.get(user_id, "en"),
        }

    def _message_json(
        self,
        chat_id: int,
        user_id: int,
        *,
        first_name: str | None,
        message_id: int | None,
        chat_type: str | None,
        **content: Any,
    ) -> JsonDict:
        """Return a ``Message`` sent by a user."""
        return {
            "message_id": message_id or self.api.next_message_id(),
            "from": self._user_json(user_id, first_name),
            "chat": self.api.chat_json(chat_id, chat_type),
            "date": int(time.time()),
            **content,
        }

    def text_update(
        self,
        chat_id: int,
        user_id: int,
        text: str,
        *,
        first_name: str | None = None,
        message_id: int | None = None,
        chat_type: str | None = None,
        reply_to_message_id: int | None = None,
    ) -> JsonDict:
        """Build an Update carrying a text message.

        ``first_name`` defaults to the known name of ``user_id`` ("Alice" for
        :data:`ALICE_ID`); ``chat_type`` defaults from the id (positive:
        private, ``-100...``: supergroup, other negative: group).
        """
        content: JsonDict = {"text": text}
        if reply_to_message_id is not None:
            content["reply_to_message"] = self.api.messages.get(
                (chat_id, reply_to_message_id),
                {
                    "message_id": reply_to_message_id,
                    "chat": self.api.chat_json(chat_id, chat_type),
                    "date": int(time.time()),
                },
            )
        return {
            "update_id": next(self._update_ids),
            "message": self._message_json(
                chat_id,
                user_id,
                first_name=first_name,
                message_id=message_id,
                chat_type=chat_type,
                **content,
            ),
        }

    def command_update(
        self,
        chat_id: int,
        user_id: int,
        command: str,
        args: Sequence[str] | str = (),
        *,
        first_name: str | None = None,
        message_id: int | None = None,
        chat_type: str | None = None,
        mention_bot: bool = False,
    ) -> JsonDict:
        """Build an Update with a ``/command`` (a ``bot_command`` entity).

        ``mention_bot`` appends ``@<bot username>`` as Telegram clients do in
        groups; telegram_bot then reports the command *with* that suffix.
        """
        command = command if command.startswith("/") else f"/{command}"
        if mention_bot:
            command = f"{command}@{self.api.bot_user['username']}"
        arg_text = args if isinstance(args, str) else " ".join(args)
        text = f"{command} {arg_text}".strip()
        return {
            "update_id": next(self._update_ids),
            "message": self._message_json(
                chat_id,
                user_id,
                first_name=first_name,
                message_id=message_id,
                chat_type=chat_type,
                text=text,
                entities=[{"type": "bot_command", "offset": 0, "length": len(command)}],
            ),
        }

    def callback_update(
        self,
        chat_id: int,
        user_id: int,
        data: str,
        *,
        message_id: int | None = None,
        first_name: str | None = None,
        chat_type: str | None = None,
    ) -> JsonDict:
        """Build an Update for a pressed inline button.

        The attached message is the bot's stored message ``message_id``;
        by default the newest bot message in the chat that has an inline
        keyboard (what a user can press), so it carries the real keyboard.
        The callback query id is numeric, like Telegram's, which
        ``telegram_bot.answer_callback_query`` requires.
        """
        message = self._button_message(chat_id, message_id, chat_type)
        return {
            "update_id": next(self._update_ids),
            "callback_query": {
                "id": str(next(self._callback_ids)),
                "from": self._user_json(user_id, first_name),
                "message": message,
                "chat_instance": f"-{abs(chat_id) % 10**9}424242",
                "data": data,
            },
        }

    def _button_message(
        self, chat_id: int, message_id: int | None, chat_type: str | None
    ) -> JsonDict:
        """Pick the bot message a callback query refers to."""
        if message_id is not None:
            stored = self.api.messages.get((chat_id, message_id))
            if stored is not None:
                return stored
        else:
            in_chat = [
                message
                for (chat, _), message in self.api.messages.items()
                if chat == chat_id
            ]
            with_keyboard = [m for m in in_chat if "reply_markup" in m]
            if with_keyboard or in_chat:
                return (with_keyboard or in_chat)[-1]
        return {
            "message_id": message_id or self.api.next_message_id(),
            "from": self.api.bot_user,
            "chat": self.api.chat_json(chat_id, chat_type),
            "date": int(time.time()),
            "text": "Choose",
        }

    def edited_text_update(
        self,
        chat_id: int,
        user_id: int,
        text: str,
        *,
        message_id: int,
        first_name: str | None = None,
        chat_type: str | None = None,
    ) -> JsonDict:
        """Build an Update for an edited text message.

        telegram_bot fires ``telegram_text`` for edits too, with the original
        message id; nothing in the event data says it was an edit.
        """
        message = self._message_json(
            chat_id,
            user_id,
            first_name=first_name,
            message_id=message_id,
            chat_type=chat_type,
            text=text,
        )
        message["edit_date"] = message["date"] + 1
        return {"update_id": next(self._update_ids), "edited_message": message}

    def channel_post_update(
        self,
        chat_id: int,
        text: str,
        *,
        message_id: int | None = None,
        title: str = "Home channel",
    ) -> JsonDict:
        """Build an Update for a channel post (no sender user at all)."""
        chat = {"id": chat_id, "type": "channel", "title": title}
        return {
            "update_id": next(self._update_ids),
            "channel_post": {
                "message_id": message_id or self.api.next_message_id(),
                "sender_chat": chat,
                "chat": chat,
                "date": int(time.time()),
                "text": text,
            },
        }

    def update_without_text(
        self,
        chat_id: int,
        user_id: int,
        kind: str = "sticker",
        *,
        first_name: str | None = None,
        message_id: int | None = None,
        chat_type: str | None = None,
    ) -> JsonDict:
        """Build an Update whose message has no text.

        ``kind``: ``sticker``, ``photo``, ``voice`` or ``location`` (fire
        ``telegram_attachment``), or ``new_chat_members`` (fires
        ``telegram_text`` with ``text`` None).
        """
        payloads: dict[str, JsonDict] = {
            "sticker": {
                "sticker": {
                    "file_id": "CAACAgIAAxkBAAIBsticker",
                    "file_unique_id": "AgADsticker",
                    "type": "regular",
                    "width": 512,
                    "height": 512,
                    "is_animated": False,
                    "is_video": False,
                    "emoji": "\N{THUMBS UP SIGN}",
                }
            },
            "photo": {
                "photo": [
                    {
                        "file_id": "AgACAgQAAxkBphoto_s",
                        "file_unique_id": "AQADphoto_s",
                        "width": 90,
                        "height": 90,
                        "file_size": 1200,
                    },
                    {
                        "file_id": "AgACAgQAAxkBphoto_m",
                        "file_unique_id": "AQADphoto_m",
                        "width": 800,
                        "height": 800,
                        "file_size": 64000,
                    },
                ]
            },
            "voice": {
                "voice": {
                    "file_id": "AwACAgQAAxkBvoice",
                    "file_unique_id": "AgADvoice",
                    "duration": 2,
                    "mime_type": "audio/ogg",
                    "file_size": 5000,
                }
            },
            "location": {"location": {"latitude": 52.3676, "longitude": 4.9041}},
            "new_chat_members": {
                "new_chat_members": [self._user_json(user_id, first_name)]
            },
        }
        if kind not in payloads:
            msg = f"unknown kind {kind!r}; one of {sorted(payloads)}"
            raise ValueError(msg)
        return {
            "update_id": next(self._update_ids),
            "message": self._message_json(
                chat_id,
                user_id,
                first_name=first_name,
                message_id=message_id,
                chat_type=chat_type,
                **payloads[kind],
            ),
        }


def media_update(
    harness: TelegramHarness,
    kind: str,
    content: bytes | None = None,
    *,
    chat_id: int = 111111111,
    user_id: int | None = None,
    caption: str | None = None,
    file_name: str | None = None,
    mime_type: str | None = None,
    file_size: int | None = None,
) -> JsonDict:
    """Build an Update with a voice note, audio, photo, document, video or animation.

    ``content`` is stored as the file Telegram keeps (getFile and the
    download serve it); ``file_size`` defaults to its length.
    """
    file_id = f"{kind}-{next(harness._update_ids)}"
    if content is not None:
        harness.api.files[file_id] = content
    size = file_size if file_size is not None else len(content or b"")
    common: JsonDict = {
        "file_id": file_id,
        "file_unique_id": f"u{file_id}",
        "file_size": size,
    }
    payload: JsonDict
    if kind == "voice":
        payload = {
            "voice": {**common, "duration": 2, "mime_type": mime_type or "audio/ogg"}
        }
    elif kind == "audio":
        payload = {
            "audio": {
                **common,
                "duration": 2,
                "mime_type": mime_type or "audio/mpeg",
                "file_name": file_name or "memo.mp3",
            }
        }
    elif kind == "photo":
        payload = {
            "photo": [
                {**common, "file_id": f"{file_id}-small", "width": 90, "height": 90},
                {**common, "width": 800, "height": 600},
            ]
        }
    elif kind == "document":
        payload = {
            "document": {
                **common,
                "file_name": file_name or "notes.txt",
                "mime_type": mime_type or "text/plain",
            }
        }
    elif kind == "video":
        payload = {
            "video": {
                **common,
                "width": 640,
                "height": 480,
                "duration": 3,
                "mime_type": "video/mp4",
            }
        }
    elif kind == "animation":
        animation = {
            **common,
            "width": 320,
            "height": 240,
            "duration": 2,
            "file_name": "funny.mp4",
            "mime_type": "video/mp4",
        }
        # Telegram sends an animation also as a document.
        payload = {"animation": animation, "document": dict(animation)}
    else:
        msg = f"unknown kind {kind!r}"
        raise ValueError(msg)
    if caption is not None:
        payload["caption"] = caption
    user = _default_user(chat_id, user_id)
    return {
        "update_id": next(harness._update_ids),
        "message": harness._message_json(
            chat_id, user, first_name=None, message_id=None, chat_type=None, **payload
        ),
    }


def _default_user(chat_id: int, user_id: int | None) -> int:
    """Return ``user_id``, or the user of a private chat."""
    if user_id is not None:
        return user_id
    if chat_id < 0:
        msg = "group chats need an explicit user_id"
        raise ValueError(msg)
    return chat_id


# ------------------------------------------------------------------ fixtures


@pytest.fixture
def telegram_chat_ids() -> list[int]:
    """Chats allowed in telegram_bot; override to change the default."""
    return list(DEFAULT_CHAT_IDS)


@pytest.fixture
def telegram_api() -> Iterable[FakeTelegramApi]:
    """Intercept the Telegram Bot API with :class:`FakeTelegramApi`."""
    api = FakeTelegramApi()
    api.start()
    try:
        yield api
    finally:
        api.stop()


@pytest.fixture
async def telegram(
    hass: HomeAssistant,
    telegram_api: FakeTelegramApi,
    hass_client_no_auth: ClientSessionGenerator,
    telegram_chat_ids: list[int],
) -> AsyncGenerator[TelegramHarness]:
    """HA's real telegram_bot, loaded with :func:`telegram_chat_ids` allowed."""
    harness = TelegramHarness(hass, telegram_api, hass_client_no_auth)
    await harness.setup(telegram_chat_ids)
    try:
        yield harness
    finally:
        await harness.async_teardown()
