"""The fast path: what HA's intent recognizer understands is answered without the model.

Recognize (strict matching, exposed entities only, the speaker's language;
else HA's gazetteer, for the readings agent/recognition.py takes), then for
a command (every part of it): dry-run HA's handler to learn the exact
service calls, judge them with the permission layer, and run them through
the same ``call_service`` tool the model uses (the same audit, event and
tool log) or hold them all for Confirm. Questions (HassGetState and the
like) only read, so HA's handler answers them. The answer is HA's own
response text. Anything else (no match, an intent whose calls cannot be
known, targets HA finds ambiguous) goes to the model as before.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from homeassistant.components.conversation import ConversationInput
from homeassistant.components.conversation.agent_manager import get_agent_manager
from homeassistant.components.conversation.gazetteer import join_speech
from homeassistant.const import ATTR_ENTITY_ID
from homeassistant.core import Context
from homeassistant.helpers import intent, template
from langchain_core.messages import AIMessage, HumanMessage

from ..const import DOMAIN, LOGGER
from ..models import Interaction, TurnResult
from ..policy.confirmations import require_confirmation
from ..policy.judge import evaluate_call
from ..policy.people import acting_user_id
from ..policy.verdict import Decision, Verdict
from ..security.confirm_text import async_summarize
from ..tools.registry import ToolContext
from .intents import ACTING_INTENTS, READ_ONLY_INTENTS, PlannedCall, async_plan
from .recognition import Recognized, async_gazetteer, from_strict
from .turns import USER_TEXT

if TYPE_CHECKING:
    from collections.abc import Sequence

    from homeassistant.components.conversation.default_agent import DefaultAgent
    from homeassistant.core import HomeAssistant
    from langgraph.graph.state import CompiledStateGraph

    from ..i18n import Texts
    from ..models import Speaker
    from ..policy.rules import Policy
    from ..sessions import SessionKeeper
    from ..store.database import Database, Session
    from ..tools.registry import ToolRegistry
    from .graph import AgentState, TurnRuntime

# The agent id HA's intents see for our turns (satellite-less, like a chat).
AGENT_ID: Final = f"conversation.{DOMAIN}"
CALL_SERVICE: Final = "call_service"


def takes_fast_path(
    *, images: Sequence[str], sources: Sequence[str], may_act: bool
) -> bool:
    """Tell whether a message is the sender's own words, fit for the fast path.

    Not a photo (the model must see it), not text with outside sources
    (a forwarded or quoted message, text in a photo: their sources travel
    with the turn for the taint rule), and only from a person who may act
    (anyone else gets the model's path and today's refusal).
    """
    return not images and not sources and may_act


async def async_caption_is_command(
    fast_path: FastPath | None,
    caption: str,
    language: str,
    *,
    sources: Sequence[str],
    may_act: bool,
) -> bool:
    """Tell whether a photo's caption is a command the fast path answers.

    A caption is the sender's own words: one HA's recognizer knows ("turn on
    the kitchen lights") is answered as if typed, and the photo is not looked
    at. Any other caption is a question about the photo, for the model.
    """
    if fast_path is None or not caption:
        return False
    if not takes_fast_path(images=(), sources=sources, may_act=may_act):
        return False
    return await fast_path.async_recognizes(caption, language)


@dataclass(frozen=True, slots=True)
class FastAnswer:
    """What the fast path did: its reply and the actions waiting for Confirm."""

    reply: str
    proposals: tuple[Verdict, ...] = ()


class FastPath:
    """Answers what HA's recognizer understands, within the permission policy."""

    def __init__(
        self, hass: HomeAssistant, registry: ToolRegistry, policy: Policy | None
    ) -> None:
        """Keep the tools (call_service runs the calls) and the policy."""
        self.hass = hass
        self.registry = registry
        self.policy = policy

    def _agent(self) -> DefaultAgent | None:
        try:
            return get_agent_manager(self.hass).default_agent
        except KeyError, AttributeError:
            return None

    async def async_answer(
        self, text: str, language: str, ctx: ToolContext
    ) -> FastAnswer | None:
        """Answer ``text`` if HA understands it; None leaves it to the model."""
        if (agent := self._agent()) is None:
            return None
        acting = ctx.ha_user_id or acting_user_id(self.hass)
        user_input = ConversationInput(
            text=text,
            context=Context(user_id=acting),
            conversation_id=None,
            device_id=None,
            satellite_id=None,
            language=language,
            agent_id=AGENT_ID,
        )
        if not (recognized := await _async_recognize(agent, user_input)):
            return None
        names = [rec.name for rec in recognized]
        LOGGER.debug("Fast path: recognized %s", ", ".join(names))
        intents = [
            (rec, self._intent(rec, text, user_input.context, language))
            for rec in recognized
        ]
        if all(name in READ_ONLY_INTENTS for name in names):
            return await self._async_read(agent, intents, language)
        if any(name in READ_ONLY_INTENTS for name in names):
            # A question and a command in one message: the model's.
            return None
        return await self._async_act(agent, intents, language, ctx)

    async def async_recognizes(self, text: str, language: str) -> bool:
        """Tell whether ``text`` is a question or command the fast path takes."""
        if (agent := self._agent()) is None:
            return False
        user_input = ConversationInput(
            text=text,
            context=Context(user_id=acting_user_id(self.hass)),
            conversation_id=None,
            device_id=None,
            satellite_id=None,
            language=language,
            agent_id=AGENT_ID,
        )
        names = {rec.name for rec in await _async_recognize(agent, user_input) or []}
        return bool(names) and (names <= READ_ONLY_INTENTS or names <= ACTING_INTENTS)

    def _intent(
        self, rec: Recognized, text: str, context: Context, language: str
    ) -> intent.Intent:
        return intent.Intent(
            self.hass,
            DOMAIN,
            rec.name,
            rec.slots,
            text,
            context,
            language,
            assistant="conversation",
            conversation_agent_id=AGENT_ID,
        )

    async def _async_read(
        self,
        agent: DefaultAgent,
        intents: Sequence[tuple[Recognized, intent.Intent]],
        language: str,
    ) -> FastAnswer | None:
        """Let HA's handlers answer questions (they change nothing)."""
        handlers = self.hass.data.get(intent.DATA_KEY, {})
        parts: list[str] = []
        for rec, intent_obj in intents:
            if (handler := handlers.get(intent_obj.intent_type)) is None:
                return None
            try:
                response = await handler.async_handle(intent_obj)
            except intent.IntentError:
                return None
            if not (speech := await _async_speech(agent, rec, response, language)):
                return None
            parts.append(speech)
        return FastAnswer(_join(parts))

    async def _async_act(  # noqa: PLR0911 - an answer per verdict
        self,
        agent: DefaultAgent,
        intents: Sequence[tuple[Recognized, intent.Intent]],
        language: str,
        ctx: ToolContext,
    ) -> FastAnswer | None:
        """Judge the command's calls; run them, hold them, or refuse them."""
        if CALL_SERVICE not in self.registry:
            return None
        calls: list[PlannedCall] = []
        responses: list[tuple[Recognized, intent.IntentResponse]] = []
        for rec, intent_obj in intents:
            if (planned := await async_plan(self.hass, intent_obj)) is None:
                return None
            calls.extend(planned[0])
            responses.append((rec, planned[1]))
        verdicts = [
            evaluate_call(
                self.hass, call.domain, call.service, call.data, policy=self.policy
            )
            for call in calls
        ]
        if blocked := [v for v in verdicts if v.decision is Decision.BLOCK]:
            # Through the tool, so the refusal is audited like the model's.
            for call, verdict in zip(calls, verdicts, strict=True):
                if verdict.decision is Decision.BLOCK:
                    await self.registry.async_call(ctx, CALL_SERVICE, _args(call))
            return FastAnswer(ctx.texts("fast_path_refused", reason=blocked[0].reason))
        if held := [v for v in verdicts if v.decision is Decision.CONFIRM]:
            # One request for the whole command: what the policy allows waits
            # with what it holds, so nothing of it runs before the Confirm.
            reason = held[0].reason
            proposals = tuple(
                v
                if v.decision is Decision.CONFIRM
                else require_confirmation(v, reason=reason)
                for v in verdicts
            )
            return FastAnswer(ctx.texts("fast_path_confirm"), proposals=proposals)
        for call in calls:
            outcome = await self.registry.async_call(ctx, CALL_SERVICE, _args(call))
            if not outcome.ok:
                return FastAnswer(
                    ctx.texts("fast_path_failed", error=outcome.content[:300]),
                    proposals=tuple(ctx.proposals),
                )
        if ctx.proposals:
            # The policy changed its mind between the plan and the call
            # (a state or an option changed): the call waits for Confirm.
            return FastAnswer(
                ctx.texts("fast_path_confirm"), proposals=tuple(ctx.proposals)
            )
        parts: list[str] = []
        for rec, response in responses:
            # What HA's handler reports, with the states after the calls.
            response.async_set_states(
                [
                    self.hass.states.get(state.entity_id) or state
                    for state in response.matched_states
                ]
            )
            parts.append(await _async_speech(agent, rec, response, language))
        if not all(parts):
            summary = await async_summarize(
                self.hass,
                [c for v in verdicts for c in v.calls],
                ctx.texts,
            )
            return FastAnswer(ctx.texts("done", summary=summary))
        return FastAnswer(_join(parts))


async def _async_recognize(
    agent: DefaultAgent, user_input: ConversationInput
) -> list[Recognized] | None:
    """Return what HA's strict stage, or else its gazetteer, reads for sure."""
    try:
        result = await agent.async_recognize_intent(
            user_input, strict_intents_only=True
        )
    except Exception:  # noqa: BLE001 - the model answers instead
        LOGGER.debug("The intent recognizer failed on a message", exc_info=True)
        return None
    if result is not None and not result.unmatched_entities:
        return [from_strict(result)]
    return await async_gazetteer(agent, user_input.text, user_input.language or "")


def _join(parts: Sequence[str]) -> str:
    """One answer for one message: HA's own joining of a command's parts."""
    return parts[0] if len(parts) == 1 else join_speech(parts)


def _args(call: PlannedCall) -> dict[str, Any]:
    data = dict(call.data)
    entity_id = data.pop(ATTR_ENTITY_ID)
    return {
        "domain": call.domain,
        "service": call.service,
        "entity_id": entity_id,
        "data": data,
    }


async def _async_speech(
    agent: DefaultAgent,
    rec: Recognized,
    response: intent.IntentResponse,
    language: str,
) -> str:
    """Return HA's response text for the intent, in the speaker's language."""
    if speech := response.speech.get("plain", {}).get("speech", ""):
        return str(speech)
    lang_intents = await agent.async_get_or_load_intents(language)
    if lang_intents is None or not rec.response_key:
        return ""
    source = lang_intents.intent_responses.get(rec.name, {}).get(rec.response_key)
    if not source:
        return ""
    try:
        # HA's own rendering of its response templates (the default agent's).
        return await agent._build_speech(  # noqa: SLF001 - HA's renderer, no public one
            template.Template(source, agent.hass), response, rec.speech_slots
        )
    except Exception:  # noqa: BLE001 - the caller says it another way
        LOGGER.debug("Could not render HA's response", exc_info=True)
        return ""


async def async_record_fast_turn(  # noqa: PLR0913 - the turn and where it goes
    graph: CompiledStateGraph[AgentState, TurnRuntime, AgentState, AgentState],
    history: SessionKeeper | None,
    *,
    conversation_key: str,
    session: Session,
    text: str,
    speaker: Speaker,
    answer: FastAnswer,
) -> TurnResult:
    """Append the fast turn to the session, as the model's turns are appended.

    The checkpointed history gets the user's words and the reply (so a
    follow-up through the model reads them), the database gets the turn.
    No background work follows: nothing of it needs the model.
    """
    turn_id = f"turn-{uuid.uuid4().hex}"
    config: Any = {"configurable": {"thread_id": session.thread_id}}
    try:
        await graph.aupdate_state(
            config,
            {
                "messages": [
                    HumanMessage(
                        content=text, id=turn_id, additional_kwargs={USER_TEXT: text}
                    ),
                    AIMessage(content=answer.reply, id=f"final-{uuid.uuid4().hex}"),
                ]
            },
            as_node="finish",
        )
    except Exception as err:  # noqa: BLE001 - the answer stands without history
        LOGGER.debug("Could not add the fast turn to the history: %s", err)
    interaction = Interaction(
        conversation_key=conversation_key,
        session_id=session.id,
        thread_id=session.thread_id,
        speaker=speaker,
        user_text=text,
        reply=answer.reply,
        tainted=False,
        turn_id=turn_id,
    )
    if history is not None:
        await history.async_store_turn(interaction)
    return TurnResult(
        answer.reply, ok=True, model_seconds=0.0, proposals=answer.proposals
    )


def fast_context(  # noqa: PLR0913 - who asks, where
    hass: HomeAssistant,
    *,
    database: Database | None,
    policy: Policy | None,
    conversation_key: str,
    speaker: Speaker,
    texts: Texts,
) -> ToolContext:
    """Return the tool context of a fast turn: the speaker's, untainted."""
    return ToolContext(
        hass=hass,
        database=database,
        person=speaker.person,
        ha_user_id=speaker.ha_user_id,
        chat_id=speaker.chat_id,
        conversation_key=conversation_key,
        policy=policy,
        profile_key=speaker.profile_key,
        user_name=speaker.name,
        may_act=speaker.may_act,
        texts=texts,
    )
