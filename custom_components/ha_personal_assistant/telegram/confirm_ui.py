"""The Confirm and Cancel buttons: asking, deciding a press or /confirm, the outcome."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Final

from ..const import LOGGER
from ..security.confirm_text import async_summarize
from ..security.confirmations import Outcome
from .delivery import sent_message_id
from .incoming import CMD_CANCEL, CMD_CONFIRM, person

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from homeassistant.core import HomeAssistant

    from ..i18n import Texts
    from ..models import Speaker
    from ..policy.verdict import Verdict
    from ..security.confirmations import ConfirmationManager, DecisionResult
    from ..store.actions import PendingAction
    from .delivery import Delivery
    from .incoming import Incoming
    from .senders import Senders

CALLBACK_TEXT_LIMIT: Final = 200  # Telegram's limit for a callback answer
# Decisions that leave the request as it was: its message is not edited.
_NOT_DECIDED: Final = (Outcome.NOT_YOURS, Outcome.NOT_FOUND, Outcome.NOT_ALLOWED)


class ConfirmUI:
    """Ask with Confirm and Cancel buttons; show what a decision did."""

    def __init__(
        self,
        hass: HomeAssistant,
        *,
        confirmations: ConfirmationManager,
        delivery: Delivery,
        senders: Senders,
    ) -> None:
        """Keep the pending actions' manager and the way to Telegram."""
        self.hass = hass
        self.confirmations = confirmations
        self.delivery = delivery
        self.senders = senders

    async def async_ask(
        self, incoming: Incoming, action: PendingAction, text: str, texts: Texts
    ) -> None:
        """Send a confirmation request with Confirm and Cancel buttons."""
        response = await self.delivery.async_deliver(
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
        message_id = sent_message_id(response)
        if message_id is not None:
            await self.confirmations.async_attach_message(action, message_id)

    async def async_request(
        self,
        incoming: Incoming,
        speaker: Speaker,
        proposals: Sequence[Verdict],
    ) -> None:
        """Store the proposed actions, then ask with Confirm and Cancel buttons.

        Stored first: if the message cannot be sent, /confirm still works. An
        action that cannot be stored is refused: it could never be confirmed.
        """
        texts = await self.senders.async_texts(incoming)
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
            await self.delivery.async_send(
                incoming, texts("confirmation_not_stored", summary=summary)
            )
            return
        await self.async_ask(
            incoming,
            action,
            confirmation_text(
                texts, action.summary, self.confirmations.timeout, action.reason
            ),
            texts,
        )

    async def async_answer_press(self, incoming: Incoming, text: str) -> None:
        """Answer the callback query, so the button stops spinning."""
        await self.delivery.async_call(
            "answer_callback_query",
            {
                "config_entry_id": incoming.bot_entry_id,
                "callback_query_id": incoming.callback_id,
                "message": text[:CALLBACK_TEXT_LIMIT],
                "show_alert": False,
            },
        )

    async def async_show_outcome(
        self, incoming: Incoming, result: DecisionResult, message_id: int | None
    ) -> None:
        """Replace the request's text and buttons with what happened."""
        if message_id is None:
            return
        await self.delivery.async_deliver(
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


class Decisions:
    """Decide a pending action from a button press, /confirm or /cancel."""

    def __init__(self, ui: ConfirmUI, *, on_decided: Callable[[], None]) -> None:
        """Show through ``ui``; call ``on_decided`` after each decision."""
        self.ui = ui
        self._on_decided = on_decided

    async def async_on_press(self, incoming: Incoming) -> None:
        """Decide a pending action from a button press and show the outcome."""
        ui = self.ui
        texts = await ui.senders.async_texts(incoming)
        try:
            action = await ui.confirmations.async_find(
                token=incoming.text,
                conversation_key=incoming.key,
                user=person(incoming),
            )
            result = await ui.confirmations.async_decide(
                action,
                user=person(incoming),
                confirm=incoming.command == CMD_CONFIRM,
                may_act=ui.senders.is_known(incoming),
                texts=texts,
            )
        except Exception:  # noqa: BLE001 - the press must be answered
            # The claim makes a retry safe: it cannot run the action twice.
            LOGGER.exception("Could not decide a pending action")
            await ui.async_answer_press(incoming, texts("press_failed"))
            return
        self._on_decided()
        try:
            ui.confirmations.fault("before_answer")
            await ui.async_answer_press(incoming, result.text)
            ui.confirmations.fault("before_edit")
            if result.outcome not in _NOT_DECIDED:
                await ui.async_show_outcome(incoming, result, incoming.message_id)
        except Exception:  # noqa: BLE001 - the action is settled; only the display failed
            LOGGER.exception("Could not show the outcome of a pending action")

    async def async_command(
        self, incoming: Incoming, command: str, texts: Texts
    ) -> str:
        """Handle /confirm and /cancel (optionally with a request's token)."""
        ui = self.ui
        name, _, token = command.partition("_")
        action = await ui.confirmations.async_find(
            token=token or None, conversation_key=incoming.key, user=person(incoming)
        )
        result = await ui.confirmations.async_decide(
            action,
            user=person(incoming),
            confirm=name == CMD_CONFIRM,
            may_act=ui.senders.is_known(incoming),
            texts=texts,
        )
        if result.action is not None and result.outcome not in _NOT_DECIDED:
            await ui.async_show_outcome(incoming, result, result.action.message_id)
        self._on_decided()
        return result.text


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
