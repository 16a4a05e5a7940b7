"""AI Task entity: automations ask the model for text or JSON, images included."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Final, override

from homeassistant.components import ai_task, conversation
from homeassistant.exceptions import HomeAssistantError
from homeassistant.helpers import llm

from .const import (
    CONF_MODEL,
    CONF_REQUEST_TIMEOUT,
    DEFAULT_REQUEST_TIMEOUT,
    DOMAIN,
    LOGGER,
)
from .entity import PersonalAssistantEntity
from .generate import (
    RETRY_PROMPT,
    StructureError,
    UnsupportedAttachmentError,
    parse_structured,
    read_attachments,
    system_text,
    user_text,
)
from .media import MediaError

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant
    from homeassistant.helpers.entity_platform import AddConfigEntryEntitiesCallback
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import BaseMessage

    from .data import PersonalAssistantConfigEntry

PARALLEL_UPDATES: Final = 0


async def async_setup_entry(
    hass: HomeAssistant,  # noqa: ARG001
    entry: PersonalAssistantConfigEntry,
    async_add_entities: AddConfigEntryEntitiesCallback,
) -> None:
    """Add the entry's AI Task entity."""
    async_add_entities([PersonalAssistantTaskEntity(entry)])


class PersonalAssistantTaskEntity(ai_task.AITaskEntity, PersonalAssistantEntity):
    """Runs ``ai_task.generate_data`` on the assistant's model server.

    No tools and no memory: the model only reads the task and its
    attachments, and its answer goes back to the automation.
    """

    _attr_name = None
    _attr_supported_features = (
        ai_task.AITaskEntityFeature.GENERATE_DATA
        | ai_task.AITaskEntityFeature.SUPPORT_ATTACHMENTS
    )

    def __init__(self, entry: PersonalAssistantConfigEntry) -> None:
        """Attach the entity to the entry's device."""
        PersonalAssistantEntity.__init__(self, entry, "ai_task")
        # The chat model without tools, built on first use (in the executor).
        self._model: BaseChatModel | None = None

    async def _async_chat_model(self) -> BaseChatModel:
        if self._model is None:
            from .runtime import chat_settings  # noqa: PLC0415 - loaded by setup

            data = self.entry.runtime_data
            self._model = await data.storage.executor.run(
                data.assistant.backend.build_chat_model,
                self.entry.data[CONF_MODEL],
                chat_settings(dict(self.entry.options)),
            )
        return self._model

    @override
    async def _async_generate_data(
        self,
        task: ai_task.GenDataTask,
        chat_log: conversation.ChatLog,
    ) -> ai_task.GenDataTaskResult:
        """Answer the task: text, or JSON checked against its structure."""
        assistant = self.entry.runtime_data.assistant
        try:
            inputs = await self.entry.runtime_data.storage.executor.run(
                read_attachments,
                [(a.path, a.mime_type) for a in task.attachments or ()],
            )
        except UnsupportedAttachmentError as err:
            raise HomeAssistantError(
                translation_domain=DOMAIN,
                translation_key="ai_task_unsupported_attachment",
                translation_placeholders={"name": err.name},
            ) from err
        except MediaError as err:
            raise HomeAssistantError(
                translation_domain=DOMAIN,
                translation_key=err.key,
                translation_placeholders={
                    k: str(v) for k, v in err.placeholders.items()
                },
            ) from err
        if inputs.images:
            if assistant.vision_models is None:
                raise HomeAssistantError(
                    translation_domain=DOMAIN,
                    translation_key="ai_task_no_vision_model",
                )
            # Without tools: the vision model only looks.
            model: Any = assistant.vision_models[1]
        else:
            model = await self._async_chat_model()
        schema = _schema(task)
        if schema is not None:
            # Ollama's format, or OpenAI's response_format: both from this.
            model = model.bind(
                response_format={
                    "type": "json_schema",
                    "json_schema": {"name": "result", "schema": schema},
                }
            )
        messages = _messages(task, inputs.texts, inputs.images, schema)
        text = await self._async_ask(model, messages)
        if task.structure is None:
            data: Any = text
        else:
            try:
                data = parse_structured(text, task.structure)
            except StructureError as first:
                # One more try, told what was wrong.
                from langchain_core.messages import (  # noqa: PLC0415
                    AIMessage,
                    HumanMessage,
                )

                messages += [
                    AIMessage(content=text),
                    HumanMessage(content=RETRY_PROMPT.format(error=first)),
                ]
                text = await self._async_ask(model, messages)
                try:
                    data = parse_structured(text, task.structure)
                except StructureError as err:
                    raise HomeAssistantError(
                        translation_domain=DOMAIN,
                        translation_key="ai_task_bad_structure",
                        translation_placeholders={"error": str(err)},
                    ) from err
        chat_log.async_add_assistant_content_without_tools(
            conversation.AssistantContent(agent_id=self.entity_id or "", content=text)
        )
        return ai_task.GenDataTaskResult(
            conversation_id=chat_log.conversation_id, data=data
        )

    async def _async_ask(self, model: Any, messages: list[BaseMessage]) -> str:
        """Return the model's answer, one request within the model's slots."""
        assistant = self.entry.runtime_data.assistant
        timeout = float(
            self.entry.options.get(CONF_REQUEST_TIMEOUT, DEFAULT_REQUEST_TIMEOUT)
        )
        try:
            async with assistant.model_queue.turn(), assistant.model_slots:
                async with asyncio.timeout(timeout):
                    answer = await model.ainvoke(messages)
        except TimeoutError as err:
            raise HomeAssistantError(
                translation_domain=DOMAIN, translation_key="model_timeout"
            ) from err
        except Exception as err:
            known = assistant.backend.chat_error(err)
            reason = str(known) if known is not None else type(err).__name__
            LOGGER.warning("An AI task failed on the model server: %s", reason)
            raise HomeAssistantError(
                translation_domain=DOMAIN,
                translation_key="ai_task_model_failed",
                translation_placeholders={"reason": reason},
            ) from err
        return str(answer.text)


def _schema(task: ai_task.GenDataTask) -> dict[str, Any] | None:
    """Return the task's structure as a JSON schema, or None without one."""
    if task.structure is None:
        return None
    import probatio  # noqa: PLC0415 - HA's schema library, as core's ollama uses it

    schema: dict[str, Any] = probatio.to_openapi(
        task.structure, custom_serializer=llm.selector_serializer
    )
    return schema


def _messages(
    task: ai_task.GenDataTask,
    texts: list[tuple[str, str]],
    images: list[str],
    schema: dict[str, Any] | None,
) -> list[BaseMessage]:
    """Return the request: system prompt, then the task with its files and images."""
    from langchain_core.messages import HumanMessage, SystemMessage  # noqa: PLC0415

    from .agent.graph import with_images  # noqa: PLC0415 - loaded by setup

    user = HumanMessage(content=user_text(task.instructions, texts))
    message = with_images(user, images) if images else user
    return [SystemMessage(content=system_text(schema)), message]
