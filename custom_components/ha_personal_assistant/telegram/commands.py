"""The /-commands, answered without the model.

/help, /new, /confirm, /cancel, /tasks (and its Cancel buttons), /actions,
/searchlog, /briefing, /notices, /memory and /forget.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

from homeassistant.util import dt as dt_util

from ..memory.profile import async_memory_command
from ..models import Speaker
from ..store import search_audit
from ..tasks.briefing_chat import CMD_BRIEFING, Asker, async_briefing_command
from ..tasks.chat import CMD_TASKS, async_cancel_press, async_listing
from ..tasks.notices import CMD_NOTICES, Subscriber, async_notices_command
from .incoming import CMD_CANCEL, CMD_CONFIRM, person
from .origin import Origin

if TYPE_CHECKING:
    from ..assistant import Assistant
    from ..i18n import Texts
    from ..tasks.manager import TaskManager
    from ..tasks.notices import Notices
    from .confirm_ui import Decisions
    from .delivery import Delivery
    from .incoming import Incoming
    from .senders import Senders

RECENT_ACTIONS: Final = 10
RECENT_SEARCHES: Final = 10
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


class Commands:
    """Answer the /-commands and the Cancel buttons of /tasks."""

    def __init__(  # noqa: PLR0913 - keyword-only wiring
        self,
        *,
        assistant: Assistant,
        senders: Senders,
        delivery: Delivery,
        decisions: Decisions,
        tasks: TaskManager,
        notices: Notices,
    ) -> None:
        """Keep what the commands act on."""
        self.assistant = assistant
        self._senders = senders
        self._delivery = delivery
        self._decisions = decisions
        self.tasks = tasks
        self.notices = notices

    async def async_handle(self, incoming: Incoming) -> None:
        """Answer a /-command (its arguments are ``incoming.text``)."""
        command = incoming.command
        texts = await self._senders.async_texts(incoming)
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
            reply = await self._decisions.async_command(incoming, command, texts)
        elif command == CMD_TASKS:
            await self._async_show_tasks(incoming)
            return
        elif command == "/actions":
            reply = await self._async_recent_actions(incoming, texts)
        elif command == "/searchlog":
            reply = await self._async_recent_searches(incoming, texts)
        elif command in (
            "/forget",
            CMD_BRIEFING,
            CMD_NOTICES,
        ) and not self._senders.is_known(incoming):
            # Memory writes and briefings are for known people only.
            reply = texts("not_known_reply")
        elif command == CMD_BRIEFING:
            asker = Asker(
                person=person(incoming),
                name=incoming.first_name,
                ha_user_id=self._senders.ha_user_id(incoming),
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
                person=person(incoming),
                bot_entry_id=incoming.bot_entry_id,
                chat_id=incoming.chat_id,
                language=texts.language,
                ha_user_id=self._senders.ha_user_id(incoming),
            )
            reply = await async_notices_command(
                self.notices, texts, subscriber, incoming.text
            )
        elif command in ("/memory", "/forget"):
            # The sender's own profile only, answered without the model.
            profile_key = Speaker(
                person=person(incoming),
                name=incoming.first_name,
                ha_user_id=self._senders.ha_user_id(incoming),
            ).profile_key
            reply = await async_memory_command(
                self.assistant.memory, profile_key, command, incoming.text, texts
            )
        else:
            reply = texts("unknown_command", command=command)
        await self._delivery.async_send(incoming, reply)

    async def _async_show_tasks(
        self, incoming: Incoming, message_id: int | None = None
    ) -> None:
        """Send /tasks (or refresh the list in ``message_id``), a button per task."""
        text, keyboard = await async_listing(
            self.tasks,
            await self._senders.async_texts(incoming),
            person=person(incoming),
            ha_user_id=self._senders.ha_user_id(incoming),
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
            await self._delivery.async_call(
                "edit_message",
                {**target, "message_id": message_id, "inline_keyboard": keyboard},
            )
            return
        await self._delivery.async_send_text(
            incoming.bot_entry_id, incoming.chat_id, text, keyboard
        )

    async def async_on_task_press(self, incoming: Incoming) -> None:
        """Cancel the task a /tasks button names, then refresh the list."""
        texts = await self._senders.async_texts(incoming)
        if not self._senders.is_known(incoming):
            # Only people the assistant knows may cancel (security/people.py).
            await self._decisions.ui.async_answer_press(
                incoming, texts("not_known_decision")
            )
            return
        cancelled, text = await async_cancel_press(
            self.tasks,
            incoming.text,
            texts,
            person=person(incoming),
            ha_user_id=self._senders.ha_user_id(incoming),
        )
        await self._decisions.ui.async_answer_press(incoming, text)
        if cancelled and incoming.message_id is not None:
            # The list shows the presser's own tasks, left after the cancel.
            await self._async_show_tasks(
                replace(incoming, command=None, text=""),
                incoming.message_id,
            )

    async def _async_recent_actions(self, incoming: Incoming, texts: Texts) -> str:
        """Describe the sender's latest audited actions."""
        rows = await self._decisions.ui.confirmations.async_recent(
            person(incoming), RECENT_ACTIONS
        )
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
        sender = person(incoming)
        rows = await self.assistant.database.async_run(
            lambda conn: search_audit.recent(conn, sender, RECENT_SEARCHES)
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
