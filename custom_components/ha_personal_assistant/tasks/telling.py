"""How a task tells its maker: their texts, their chat, and the fired event.

A task made in Telegram answers in the chat it was made in, in its maker's
language; one made through Assist leaves a notification in Home Assistant.
Every firing that told, acted or asked fires ``ha_personal_assistant_task_fired``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Protocol

from homeassistant.components import persistent_notification
from homeassistant.core import Context, callback

from ..const import DOMAIN
from ..i18n import async_texts
from .describe import action_call, made_text

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from homeassistant.core import HomeAssistant

    from ..i18n import Texts
    from ..policy.verdict import Verdict
    from .store import Task

EVENT_TASK_FIRED: Final = f"{DOMAIN}_task_fired"
# What the event says happened; every other ending is "failed".
EVENT_OUTCOMES: Final = frozenset(
    {"told", "done", "asked to confirm", "refused", "missed"}
)


class TaskGateway(Protocol):
    """What tasks need of the Telegram side (``telegram.outbox.Outbox``).

    A protocol, so that the tasks and the gateway (which lists them in
    /tasks) do not import each other.
    """

    @property
    def allowed_user_ids(self) -> frozenset[int]:
        """Telegram users the assistant's options let in (empty: all)."""
        ...

    @property
    def user_mapping(self) -> Mapping[str, str]:
        """Telegram user id -> the HA user id they act as."""
        ...

    def language_of(self, user_id: int) -> str | None:
        """Return a Telegram user's language_code, if their messages told it."""
        ...

    async def async_send_text(self, bot_entry_id: str, chat_id: int, text: str) -> None:
        """Send a message the integration wrote."""

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
        """Ask ``person`` to confirm the restricted calls in ``proposals``."""


def is_group(task: Task) -> bool:
    """Tell whether a task was made in a Telegram group."""
    return task.chat_id is not None and task.chat_id < 0


def telegram_user(owner: str) -> int | None:
    """Return the Telegram user id of a task's maker, if they are one."""
    kind, _, ident = owner.partition(":")
    if kind != "telegram" or not ident.lstrip("-").isdigit():
        return None
    return int(ident)


def gone_text(task: Task, texts: Texts) -> str:
    """Return the message of a watch whose entity was removed or hidden."""
    if task.message:
        ended = texts("task_gone_message", task=task.id, message=task.message)
    else:
        ended = texts("task_gone", task=task.id)
    return ended + "\n" + made_text(task, texts, group=is_group(task))


class Teller:
    """Tells a task's maker, through the gateway when there is one."""

    def __init__(
        self, hass: HomeAssistant, gateway: Callable[[], TaskGateway | None]
    ) -> None:
        """Read the gateway through ``gateway()`` when telling."""
        self.hass = hass
        self._gateway = gateway

    async def async_texts(self, task: Task) -> Texts:
        """Return the maker's texts: their Telegram language now, else the task's.

        A task keeps the language its maker read when it was made; HA's
        language when neither is known.
        """
        language = task.language
        telegram_id = telegram_user(task.owner)
        gateway = self._gateway()
        if gateway is not None and telegram_id is not None:
            language = gateway.language_of(telegram_id) or language
        return await async_texts(self.hass, language)

    async def async_tell(self, task: Task, *lines: str) -> None:
        """Tell the maker, in the chat the task was made in."""
        text = "\n".join(lines)
        gateway = self._gateway()
        if (
            gateway is not None
            and task.bot_entry_id is not None
            and task.chat_id is not None
        ):
            await gateway.async_send_text(task.bot_entry_id, task.chat_id, text)
            return
        # Made through Assist: a notification in Home Assistant.
        persistent_notification.async_create(
            self.hass,
            text,
            title="Personal Assistant",
            notification_id=f"{DOMAIN}_task_{task.id}_{task.fired_count}",
        )

    @callback
    def event(self, task: Task, outcome: str, *, late: bool) -> None:
        """Fire the event of a task that fired (or was missed)."""
        outcome = outcome if outcome in EVENT_OUTCOMES else "failed"
        domain, service, data = (
            action_call(task.action) if task.action else ("", "", {})
        )
        self.hass.bus.async_fire(
            EVENT_TASK_FIRED,
            {
                "task_id": task.id,
                "kind": task.kind,
                "owner": task.owner,
                "message": task.message,
                "entity_id": task.entity_id,
                "action": f"{domain}.{service}" if task.action else None,
                "entity_ids": data.get("entity_id", []),
                "repeat": task.repeat,
                "outcome": outcome,
                "late": late,
            },
            context=Context(),
        )
