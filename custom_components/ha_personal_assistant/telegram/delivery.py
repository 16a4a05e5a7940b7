"""Sending to Telegram through telegram_bot's services: parts, retries, outages."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final

import httpx
from homeassistant.core import ServiceResponse, callback
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers import issue_registry as ir

from ..const import DOMAIN, LOGGER, TELEGRAM_MESSAGE_LIMIT, TYPING_REFRESH_SECONDS
from .incoming import as_int
from .watch import TELEGRAM_DOMAIN

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant

    from ..tasks.chat import Keyboard
    from .incoming import Incoming

SEND_TIMEOUT: Final = 30  # seconds for one Telegram API call
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
# Replies in a row that could not be delivered before a repair issue says so.
UNDELIVERED_ISSUE_AFTER: Final = 3
ISSUE_UNDELIVERED: Final = "telegram_undelivered"
# httpx errors raised before the request reached Telegram: safe to send again.
_NOT_SENT: Final = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


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


def sent_message_id(response: ServiceResponse | bool) -> int | None:  # noqa: FBT001
    """Return the message id telegram_bot.send_message reported."""
    if not isinstance(response, Mapping):
        return None
    chats = response.get("chats")
    if isinstance(chats, list) and chats and isinstance(chats[0], Mapping):
        return as_int(chats[0].get("message_id"))
    return None


class Delivery:
    """Send what the integration and the model wrote; retry what certainly failed."""

    def __init__(self, hass: HomeAssistant) -> None:
        """Start with no outage."""
        self.hass = hass
        self._send_failed = False
        # Replies in a row that could not be delivered, and the last error.
        self._undelivered = 0

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
            await self.async_call("send_message", data)

    async def async_keep_typing(self, incoming: Incoming) -> None:
        """Show 'typing…' until cancelled; Telegram clears it after 5 seconds."""
        while True:
            await self.async_call(
                "send_chat_action",
                {
                    "config_entry_id": incoming.bot_entry_id,
                    "chat_id": incoming.chat_id,
                    "chat_action": "typing",
                },
            )
            await asyncio.sleep(TYPING_REFRESH_SECONDS)

    async def async_send(self, incoming: Incoming, text: str) -> bool:
        """Send a reply in Telegram-sized parts, link previews off."""
        return await self.async_send_to(incoming.bot_entry_id, incoming.chat_id, text)

    async def async_send_to(self, bot_entry_id: str, chat_id: int, text: str) -> bool:
        """Deliver a text in order, part by part; False when a part failed.

        A part that cannot be delivered ends the message: the parts after it
        would arrive without it, out of order.
        """
        for part in split_message(text):
            sent = await self.async_deliver(
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

    async def async_deliver(
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

    async def async_call(
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
