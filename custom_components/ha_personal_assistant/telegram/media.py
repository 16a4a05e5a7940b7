"""Voice notes, photos and files: heard, seen, or offered to the documents."""

from __future__ import annotations

import base64
import sqlite3
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from ..agent.fast_path import async_caption_is_command
from ..const import (
    ADD_DOCUMENT_WAIT,
    DOMAIN,
    LOGGER,
    MAX_DOCUMENT_CHARS,
    MAX_DOCUMENT_TITLE_CHARS,
)
from ..documents.index import DocumentsUnavailable
from ..i18n import pick_language
from ..media import (
    MAX_AUDIO_BYTES,
    MAX_FILE_BYTES,
    MAX_IMAGE_BYTES,
    SUPPORTED_FILES,
    Attachment,
    Kind,
    MediaError,
    async_download,
    check_size,
    delete_file,
    document_type,
    extract_text,
    transfer_dir,
    write_transfer_file,
)
from ..model_server import ModelNotFound, ModelServerError
from ..policy.verdict import ResolvedCall
from ..security.confirm_text import PHOTO_SOURCE
from ..security.confirmations import ADD_FILE
from ..speech import async_speak, async_transcribe, resolve_engines
from ..tools.registry import ToolError
from .confirm_ui import expiry_text
from .incoming import as_int, person

if TYPE_CHECKING:
    from homeassistant.config_entries import ConfigEntry
    from homeassistant.core import HomeAssistant
    from langchain_core.messages import AIMessage, AnyMessage
    from langchain_core.runnables import Runnable

    from ..assistant import Assistant
    from ..documents.index import DocumentIndex
    from ..executor import BlockingExecutor
    from ..i18n import Texts
    from ..media import MediaSettings
    from ..models import Speaker
    from .confirm_ui import ConfirmUI
    from .incoming import Incoming

# Files checked and waiting for Confirm whose text is kept in memory (each
# at most MAX_DOCUMENT_CHARS); older ones are fetched again on Confirm.
MAX_OFFERED_FILES: Final = 4
# What the model reads with a photo (prompt text stays English).
PHOTO_MARK: Final = "[Photo]"
PHOTO_PROMPT: Final = "[Photo without a caption] Describe this photo briefly."


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


class MediaHandler:
    """Turn an attachment into a turn for the model, or into a reply."""

    def __init__(  # noqa: PLR0913 - keyword-only wiring
        self,
        hass: HomeAssistant,
        entry: ConfigEntry[Any],
        *,
        assistant: Assistant,
        settings: MediaSettings,
        executor: BlockingExecutor,
        documents: DocumentIndex | None,
        confirm_ui: ConfirmUI,
    ) -> None:
        """Keep what hearing, seeing and adding files need."""
        self.hass = hass
        self.entry = entry
        self.assistant = assistant
        self.settings = settings
        self.executor = executor
        # The household documents (files sent are added there on Confirm);
        # None without an embedding model.
        self.documents = documents
        self._ui = confirm_ui
        self.confirmations = confirm_ui.confirmations
        self.confirmations.runners[ADD_FILE] = self._async_run_add_file
        # The text of each file offered for the documents, read when it was
        # checked, kept until its Confirm (in memory only: after a restart or
        # a reload, Confirm fetches the file again). (bot entry, file id) ->
        # (when it was read, its text).
        self._offered_files: OrderedDict[tuple[str, str], tuple[float, str]] = (
            OrderedDict()
        )

    async def async_read(
        self, incoming: Incoming, attachment: Attachment
    ) -> tuple[Incoming, MediaTurn] | str | None:
        """Hear or see an attachment, or offer a file; anything else is declined.

        Returns the turn to run (the message and how the media changes it),
        else the reply to send, if any.
        """
        delivery = self._ui.delivery
        texts = await self._ui.senders.async_texts(incoming)
        reply: str | None = None
        turn: tuple[Incoming, MediaTurn] | None = None
        typing = self.entry.async_create_background_task(
            self.hass,
            delivery.async_keep_typing(incoming),
            "ha_personal_assistant typing",
        )
        try:
            if attachment.kind is Kind.VOICE:
                transcript = await self._async_hear(incoming, attachment)
                heard = texts("voice_heard", text=transcript)
                turn = (
                    replace(incoming, text=transcript, attachment=None),
                    MediaTurn(prefix=f"{heard}\n\n", voice=True),
                )
            elif attachment.kind is Kind.PHOTO and await async_caption_is_command(
                self.assistant.fast_path,
                incoming.text,
                texts.language,
                sources=incoming.outside_sources,
                may_act=self._ui.senders.is_known(incoming),
            ):
                # The caption is the sender's own command: the fast path
                # answers it like a typed message; the photo is not needed.
                turn = (replace(incoming, attachment=None), MediaTurn())
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
        return turn or reply

    async def _async_hear(self, incoming: Incoming, attachment: Attachment) -> str:
        """Return what a voice note says, through Home Assistant's STT."""
        engines = resolve_engines(self.hass, self.settings.stt_engine)
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
        name = self.settings.vision_model
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
        if not self._ui.senders.is_known(incoming):
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
            requester=person(incoming),
            call=call,
            summary=texts("file_summary", name=title),
        )
        self._keep_offered_file(incoming.bot_entry_id, attachment.file_id, text)
        await self._ui.async_ask(
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
            as_int(data.get("file_size")),
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

    async def async_send_spoken(
        self, incoming: Incoming, speaker: Speaker, text: str
    ) -> None:
        """Send the answer to a voice note as a voice note too (option voice_replies).

        The text reply went out already; a voice that cannot be made or sent
        gets a short note instead.
        """
        texts = await self._ui.senders.async_texts(incoming)
        engines = resolve_engines(self.hass, self.settings.stt_engine)
        try:
            extension, audio = await async_speak(
                self.hass, engines, text, speaker.language or self.hass.config.language
            )
            path = await self.executor.run(
                write_transfer_file, transfer_dir(self.hass), extension, audio
            )
        except MediaError as err:
            await self._ui.delivery.async_send(
                incoming, texts(err.key, **err.placeholders)
            )
            return
        try:
            sent = await self._ui.delivery.async_deliver(
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
            await self._ui.delivery.async_send(incoming, texts("voice_not_sent"))


def _file_title(attachment: Attachment) -> str:
    """Return a file's title in the documents: its name, on one line."""
    title = " ".join(attachment.display_name.split())
    return title[:MAX_DOCUMENT_TITLE_CHARS]
