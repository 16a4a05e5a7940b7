"""Assist: the same agent, memory and permission rules in HA's own conversations."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Final, Literal, override

from homeassistant.components import conversation
from homeassistant.components.conversation.models import AbstractConversationAgent
from homeassistant.const import MATCH_ALL
from homeassistant.helpers import intent

from .agent.chat_log import ChatLogFeed, asks_question, trace_tokens
from .agent.satellite import Satellite, satellite_of
from .entity import PersonalAssistantEntity
from .i18n import async_texts, pick_language
from .models import Speaker

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant
    from homeassistant.helpers.entity_platform import AddConfigEntryEntitiesCallback

    from .data import PersonalAssistantConfigEntry
    from .i18n import Texts

# What answers a pending confirmation, in the languages households use most.
# Anything else is a new request and leaves the confirmation pending.
YES_WORDS: Final = frozenset(
    {
        "yes", "yeah", "yep", "sure", "confirm", "do it", "ok", "okay", "yes please",
        "ja", "jawohl", "bestätigen", "oui", "confirmer", "sí", "si", "confirmar",
        "sì", "conferma", "bevestig", "bevestigen", "sim", "tak", "da", "jo",
        "да", "подтвердить", "підтвердити", "так", "是", "是的", "好", "确认",
    }
)  # fmt: skip
NO_WORDS: Final = frozenset(
    {
        "no", "nope", "cancel", "stop", "don't", "do not", "no thanks",
        "nein", "abbrechen", "non", "annuler", "cancelar", "annulla", "nee",
        "annuleer", "não", "nao", "nie", "anuluj", "nej", "nei", "avbryt", "net",
        "нет", "отмена", "ні", "скасувати", "不", "不要", "取消",
    }
)  # fmt: skip
_PUNCTUATION: Final = re.compile(r"[^\w\s']+")
PARALLEL_UPDATES: Final = 0


def ask_confirmation(summary: str, reason: str | None, texts: Texts) -> str:
    """Ask to confirm an action, in the integration's words only.

    A summary of several lines (service data, several actions) keeps its last
    line to itself, so nothing reads as part of a value.
    """
    key = "assist_confirm_lines" if "\n" in summary else "assist_confirm"
    if reason:
        return texts(f"{key}_tainted", summary=summary, reason=reason)
    return texts(key, summary=summary)


def parse_answer(text: str) -> bool | None:
    """Return True for a yes, False for a no, None for anything else."""
    words = " ".join(_PUNCTUATION.sub(" ", text.casefold()).split())
    if words in YES_WORDS:
        return True
    if words in NO_WORDS:
        return False
    return None


async def async_setup_entry(
    hass: HomeAssistant,  # noqa: ARG001
    entry: PersonalAssistantConfigEntry,
    async_add_entities: AddConfigEntryEntitiesCallback,
) -> None:
    """Add the entry's conversation agent."""
    async_add_entities([PersonalAssistantConversationEntity(entry)])


class PersonalAssistantConversationEntity(
    conversation.ConversationEntity,
    AbstractConversationAgent,
    PersonalAssistantEntity,
):
    """Answers Assist with the same agent that answers Telegram."""

    _attr_name = None
    _attr_supports_streaming = True
    _attr_supported_features = conversation.ConversationEntityFeature.CONTROL

    def __init__(self, entry: PersonalAssistantConfigEntry) -> None:
        """Attach the agent to the entry's device."""
        PersonalAssistantEntity.__init__(self, entry, "")

    @property
    @override
    def supported_languages(self) -> list[str] | Literal["*"]:
        """Answer in whatever language the user speaks."""
        return MATCH_ALL

    @override
    async def async_added_to_hass(self) -> None:
        """Register as the entry's conversation agent."""
        await super().async_added_to_hass()
        conversation.async_set_agent(self.hass, self.entry, self)

    @override
    async def async_will_remove_from_hass(self) -> None:
        """Unregister the agent."""
        conversation.async_unset_agent(self.hass, self.entry)
        await super().async_will_remove_from_hass()

    async def _async_turn(
        self,
        key: str,
        text: str,
        speaker: Speaker,
        chat_log: conversation.ChatLog,
        satellite: Satellite | None = None,
    ) -> tuple[str, bool]:
        """Run a turn, streaming its text and tool calls into the chat log.

        Returns the reply and whether a confirmation was asked for (Assist
        then keeps listening for the answer).
        """
        data = self.entry.runtime_data
        feed = ChatLogFeed()

        async def run() -> tuple[str, bool]:
            started = time.monotonic()
            try:
                result = await data.assistant.async_turn(
                    key,
                    text,
                    speaker,
                    on_text=feed.text,
                    on_tool=feed.tool,
                    satellite=satellite,
                )
            finally:
                feed.close()
            trace_tokens(chat_log, result.tokens)
            reply, ask_again = result.reply, False
            if result.proposals:
                texts = await async_texts(self.hass, speaker.language)
                action = await data.gateway.confirmations.async_propose(
                    conversation_key=key,
                    bot_entry_id=None,
                    chat_id=None,
                    requester=speaker.person,
                    ha_user_id=speaker.ha_user_id,
                    verdicts=result.proposals,
                    texts=texts,
                )
                reply = "\n\n".join(
                    [reply, ask_confirmation(action.summary, action.reason, texts)]
                )
                ask_again = True
            data.assistant.stats.async_record_result(
                "assist", result, time.monotonic() - started
            )
            data.assistant.async_after_reply(result)
            return reply, ask_again

        turn = self.hass.async_create_task(run(), "ha_personal_assistant assist turn")
        async for _content in chat_log.async_add_delta_content_stream(
            self.entity_id or "", feed.deltas(turn)
        ):
            pass
        return await turn

    @override
    async def _async_handle_message(
        self,
        user_input: conversation.ConversationInput,
        chat_log: conversation.ChatLog,
    ) -> conversation.ConversationResult:
        """Decide a pending confirmation, or run a turn of the agent."""
        data = self.entry.runtime_data
        confirmations = data.gateway.confirmations
        key = f"assist:{chat_log.conversation_id}"
        user_id = user_input.context.user_id
        name: str | None = None
        if user_id is not None and (
            user := await self.hass.auth.async_get_user(user_id)
        ):
            name = user.name
        # The HA user is the person: the same profile as their mapped Telegram
        # account. A voice satellite without a user confirms within its own
        # conversation only.
        speaker = Speaker(
            person=f"ha:{user_id}" if user_id else "assist",
            name=name,
            ha_user_id=user_id,
            language=pick_language(user_input.language, self.hass.config.language),
        )
        ask_again = False
        pending = await confirmations.async_find(
            token=None, conversation_key=key, user=speaker.person
        )
        answer = parse_answer(user_input.text) if pending is not None else None
        if answer is not None:
            # Read by the integration, never by the model.
            decided = await confirmations.async_decide(
                pending,
                user=speaker.person,
                confirm=answer,
                may_act=speaker.may_act,
                texts=await async_texts(self.hass, speaker.language),
            )
            reply = decided.text
            data.assistant.stats.async_notify()
            chat_log.async_add_assistant_content_without_tools(
                conversation.AssistantContent(
                    agent_id=self.entity_id or "", content=reply
                )
            )
        else:
            reply, ask_again = await self._async_turn(
                key,
                user_input.text,
                speaker,
                chat_log,
                satellite_of(
                    self.hass,
                    user_input.device_id,
                    user_input.satellite_id,
                    user_input.extra_system_prompt,
                ),
            )
        response = intent.IntentResponse(language=user_input.language)
        response.async_set_speech(reply)
        return conversation.ConversationResult(
            response=response,
            conversation_id=chat_log.conversation_id,
            continue_conversation=ask_again or asks_question(reply),
        )
