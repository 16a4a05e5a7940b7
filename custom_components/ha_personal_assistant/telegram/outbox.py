"""What tasks and notices send through: texts the integration wrote, Confirm requests.

Built before the tasks, the notices and the gateway, which all use it: the
tasks and notices never need the gateway, and the gateway is built whole
with them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..models import Speaker
from .confirm_ui import ConfirmUI
from .delivery import Delivery
from .incoming import Incoming, as_int
from .senders import Senders

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from homeassistant.core import HomeAssistant

    from ..policy.verdict import Verdict
    from ..security.confirmations import ConfirmationManager
    from ..tasks.chat import Keyboard


class Outbox:
    """Send texts and Confirm requests (tasks' TaskGateway, notices' NoticeGateway)."""

    def __init__(
        self,
        hass: HomeAssistant,
        *,
        confirmations: ConfirmationManager,
        allowed_user_ids: frozenset[int],
        user_mapping: Mapping[str, str],
    ) -> None:
        """Build the senders' settings, the delivery and the Confirm buttons."""
        self.senders = Senders(
            hass, allowed_user_ids=allowed_user_ids, user_mapping=user_mapping
        )
        self.delivery = Delivery(hass)
        self.confirm_ui = ConfirmUI(
            hass,
            confirmations=confirmations,
            delivery=self.delivery,
            senders=self.senders,
        )

    @property
    def allowed_user_ids(self) -> frozenset[int]:
        """Telegram users the assistant's options let in (empty: all)."""
        return self.senders.allowed_user_ids

    @property
    def user_mapping(self) -> Mapping[str, str]:
        """Telegram user id -> the HA user id they act as."""
        return self.senders.user_mapping

    def language_of(self, user_id: int) -> str | None:
        """Return a Telegram user's language_code, if their updates told it."""
        return self.senders.language_of(user_id)

    async def async_send_text(
        self,
        bot_entry_id: str,
        chat_id: int,
        text: str,
        keyboard: Keyboard | None = None,
    ) -> None:
        """Send a message the integration wrote (a task firing, a notice, /tasks)."""
        await self.delivery.async_send_text(bot_entry_id, chat_id, text, keyboard)

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
        user_id = as_int(person.partition(":")[2]) or 0
        await self.confirm_ui.async_request(
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
