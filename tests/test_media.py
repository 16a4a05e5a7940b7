"""Voice notes, photos and files sent to the bot on Telegram.

Every test posts real Update JSON to telegram_bot's webhook; getFile and the
file download are answered by the fake Bot API, speech by test STT and TTS
engines set up through HA's own stt and tts components, and the model by
the fake Ollama server.
"""

from __future__ import annotations

import asyncio
import base64
import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from homeassistant.exceptions import HomeAssistantError
from homeassistant.setup import async_setup_component

from custom_components.ha_personal_assistant.const import (
    CONF_EMBEDDING_MODEL,
    CONF_STT_ENGINE,
    CONF_VISION_MODEL,
    CONF_VOICE_REPLIES,
)

from .common import async_setup_assistant, async_setup_house, fixed_text
from .speech_mocks import (
    SPOKEN,
    STT_ENTITY,
    TTS_ENTITY,
    async_setup_speech,
    speech_flow,
)
from .telegram_harness import ALICE_ID, GROUP_ID, MALLORY_ID, media_update

__all__ = ["speech_flow"]

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant
    from pytest_homeassistant_custom_component.common import MockConfigEntry

    from .fake_ollama import FakeOllama
    from .speech_mocks import MockSTT, MockTTS
    from .telegram_harness import TelegramHarness

OGG = b"OggS\x00\x02fake opus voice note"
VISION = "llava-tools:7b"
BED_LIGHT_ON = {
    "domain": "light",
    "service": "turn_on",
    "entity_id": "light.bed_light",
}
UNLOCK = {"domain": "lock", "service": "unlock", "entity_id": "lock.front_door"}


@pytest.fixture
async def speech(
    hass: HomeAssistant, telegram: TelegramHarness, speech_flow: None
) -> tuple[MockSTT, MockTTS]:
    """The demo house and a test STT and TTS engine."""
    await async_setup_house(hass)
    return await async_setup_speech(hass)


def transfer_files(hass: HomeAssistant) -> list[str]:
    """Return what is left in the integration's transfer folder."""
    folder = Path(hass.config.path("ha_personal_assistant", "transfer"))
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def buttons(message: dict[str, Any]) -> list[str]:
    """Return the callback data of a message's inline buttons."""
    markup = message.get("reply_markup") or {}
    return [
        button["callback_data"]
        for row in markup.get("inline_keyboard", [])
        for button in row
    ]


async def test_a_voice_note_turns_on_a_light(
    hass: HomeAssistant,
    speech: tuple[MockSTT, MockTTS],
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Heard by the STT engine, answered like typed text, transcript quoted first."""
    listener, speaker = speech
    await async_setup_assistant(hass, fake_ollama, **{CONF_STT_ENGINE: STT_ENTITY})
    assert hass.states.get("light.bed_light").state == "off"
    fake_ollama.tool_call("call_service", BED_LIGHT_ON).reply("The bed light is on.")
    assert await telegram.post_update(media_update(telegram, "voice", OGG)) == 200
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    await hass.async_block_till_done()
    assert hass.states.get("light.bed_light").state == "on"
    heard = fixed_text("voice_heard", text="turn on the bed light")
    assert sent[-1]["text"].split("\n")[0] == heard
    assert sent[-1]["text"].endswith("The bed light is on.")
    # The audio went to the engine as Telegram sent it, OGG/Opus, in English.
    ((metadata, audio),) = listener.received
    assert audio == OGG
    assert metadata.format == "ogg"
    assert metadata.codec == "opus"
    assert metadata.language == "en-US"
    # The model read the transcript as the user's words.
    assert fake_ollama.chat_requests[0]["messages"][-1]["content"].startswith(
        "turn on the bed light"
    )
    # No voice reply unless asked for, and no file left behind.
    assert not telegram.calls("sendVoice")
    assert not speaker.spoken
    assert transfer_files(hass) == []


async def test_a_voice_note_asking_to_unlock_still_needs_the_button(
    hass: HomeAssistant,
    speech: tuple[MockSTT, MockTTS],
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Voice is the user's own words, and restricted actions wait for Confirm."""
    listener, _ = speech
    listener.text = "unlock the front door"
    await async_setup_assistant(hass, fake_ollama, **{CONF_STT_ENGINE: STT_ENTITY})
    fake_ollama.tool_call("call_service", UNLOCK).reply("Please confirm.")
    await telegram.post_update(media_update(telegram, "voice", OGG))
    sent = await telegram.wait_for_sent(2, chat_id=ALICE_ID)
    await hass.async_block_till_done()
    assert hass.states.get("lock.front_door").state == "locked"
    request = sent[-1]
    data = buttons(request)
    assert data[0].startswith("/confirm_")
    # Not because of outside text: the transcript is the user's own.
    assert "outside" not in request["text"].casefold()
    await telegram.press_button(data[0])
    await telegram.wait_for_calls("answerCallbackQuery")
    await hass.async_block_till_done()
    assert hass.states.get("lock.front_door").state == "unlocked"


async def test_a_forwarded_voice_note_is_outside_text(
    hass: HomeAssistant,
    speech: tuple[MockSTT, MockTTS],
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Someone else's voice, forwarded: even a light waits for the sender's Confirm."""
    await async_setup_assistant(hass, fake_ollama, **{CONF_STT_ENGINE: STT_ENTITY})
    fake_ollama.tool_call("call_service", BED_LIGHT_ON).reply("Done.")
    update = media_update(telegram, "voice", OGG)
    update["message"]["forward_origin"] = {
        "type": "hidden_user",
        "date": update["message"]["date"],
        "sender_user_name": "Eve",
    }
    await telegram.post_update(update)
    sent = await telegram.wait_for_sent(2, chat_id=ALICE_ID)
    await hass.async_block_till_done()
    # The transcript reached the model, and the model made the call.
    assert fake_ollama.chat_requests[0]["messages"][-1]["content"].startswith(
        "turn on the bed light"
    )
    assert hass.states.get("light.bed_light").state == "off"
    assert buttons(sent[-1])[0].startswith("/confirm_")
    assert fixed_text("source_forwarded") in sent[-1]["text"]


async def test_a_voice_reply_is_sent_when_voice_replies_is_on(
    hass: HomeAssistant,
    speech: tuple[MockSTT, MockTTS],
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """The answer comes as text and as a voice note made by HA's TTS."""
    _, speaker = speech
    await async_setup_assistant(
        hass,
        fake_ollama,
        **{CONF_STT_ENGINE: STT_ENTITY, CONF_VOICE_REPLIES: True},
    )
    fake_ollama.reply("All lights are off.")
    await telegram.post_update(media_update(telegram, "voice", OGG))
    await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    (voice,) = await telegram.wait_for_calls("sendVoice")
    assert voice["chat_id"] == ALICE_ID
    (upload,) = [c.files for c in telegram.api.calls if c.method == "sendVoice"]
    assert upload["voice"]["content"] == SPOKEN
    # The answer is spoken, not the quoted transcript.
    assert speaker.spoken == ["All lights are off."]
    await hass.async_block_till_done()
    assert transfer_files(hass) == []


async def test_a_typed_message_gets_no_voice_reply(
    hass: HomeAssistant,
    speech: tuple[MockSTT, MockTTS],
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """voice_replies answers voice notes only."""
    await async_setup_assistant(
        hass,
        fake_ollama,
        **{CONF_STT_ENGINE: STT_ENTITY, CONF_VOICE_REPLIES: True},
    )
    fake_ollama.reply("Hello.")
    await telegram.send_text("Hi")
    await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    await asyncio.sleep(0.1)
    assert not telegram.calls("sendVoice")


# --------------------------------------------------------------------- files


def make_pdf(*pages: str) -> bytes:
    """Return a small, valid PDF whose pages hold ``pages`` as text ("" : no text).

    A page without text stands for a scan: a picture of text, nothing to read.
    """
    objects: list[bytes] = []
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(len(pages)))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    font = 3 + 2 * len(pages)
    for i, text in enumerate(pages):
        objects.append(
            (
                f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                f"/Resources << /Font << /F1 {font} 0 R >> >> "
                f"/Contents {4 + 2 * i} 0 R >>"
            ).encode()
        )
        lines = [
            f"BT /F1 12 Tf 72 {720 - 16 * n} Td ({line}) Tj ET"
            for n, line in enumerate(text.split("\n"))
            if line
        ]
        stream = "\n".join(lines).encode() or b"0 0 m"
        objects.append(
            b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream)
        )
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def encrypted_pdf(text: str) -> bytes:
    """Return a password-protected PDF (as a bank statement comes)."""
    from pypdf import PdfWriter

    writer = PdfWriter(clone_from=io.BytesIO(make_pdf(text)))
    writer.encrypt("secret", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


MANUAL = (
    "# Heat pump\n\nThe heat pump filter is cleaned every spring. "
    "The service code for the installer is on the sticker inside the hatch."
)
PDF_TEXT = "Warranty of the washing machine\nThe warranty runs until March 2029."
EMBED = "nomic-embed-text"


@pytest.fixture
async def documents_entry(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> MockConfigEntry:
    """The demo house and the assistant with documents (an embedding model)."""
    from pytest_homeassistant_custom_component.common import (
        MockConfigEntry,
    )

    from custom_components.ha_personal_assistant.const import (
        CONF_EMBEDDING_MODEL,
        CONF_MODEL,
        CONF_OLLAMA_URL,
        CONF_REQUEST_TIMEOUT,
        DOMAIN,
    )

    from .common import MODEL

    await async_setup_house(hass)
    entry = MockConfigEntry(
        domain=DOMAIN,
        title=MODEL,
        unique_id=fake_ollama.url,
        data={
            CONF_OLLAMA_URL: fake_ollama.url,
            CONF_MODEL: MODEL,
            CONF_EMBEDDING_MODEL: EMBED,
        },
        options={CONF_REQUEST_TIMEOUT: 10},
    )
    entry.add_to_hass(hass)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    await entry.runtime_data.documents.async_wait_idle()
    return entry


async def titles(entry: MockConfigEntry) -> list[str]:
    """Return the titles of the household's documents (what was added)."""
    rows = await entry.runtime_data.assistant.database.async_run(
        lambda conn: conn.execute(
            "SELECT title FROM rag_documents WHERE source = 'document'"
        ).fetchall()
    )
    return sorted(row[0] for row in rows)


async def send_file(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    content: bytes | None,
    file_name: str,
    mime_type: str,
    **kwargs: Any,
) -> dict[str, Any]:
    """Send a document and return the bot's answer to it."""
    before = len(telegram.sent_messages(ALICE_ID))
    await telegram.post_update(
        media_update(
            telegram,
            "document",
            content,
            file_name=file_name,
            mime_type=mime_type,
            **kwargs,
        )
    )
    sent = await telegram.wait_for_sent(before + 1, chat_id=ALICE_ID)
    await hass.async_block_till_done()
    return sent[-1]


@pytest.mark.parametrize(
    ("content", "file_name", "mime_type", "query", "found"),
    [
        (
            MANUAL.encode(),
            "heat pump.md",
            "text/markdown",
            "heat pump filter",
            "spring",
        ),
        (make_pdf(PDF_TEXT), "warranty.pdf", "application/pdf", "warranty", "2029"),
    ],
    ids=["markdown", "pdf"],
)
async def test_a_file_becomes_searchable_after_confirm_and_not_before(
    hass: HomeAssistant,
    documents_entry: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    content: bytes,
    file_name: str,
    mime_type: str,
    query: str,
    found: str,
) -> None:
    """Confirm/Cancel 'Add <file> to the household documents?', then add_document."""
    ask = await send_file(hass, telegram, content, file_name, mime_type)
    assert ask["text"].startswith(f'Add "{file_name}" to the household documents?')
    data = buttons(ask)
    assert [d.split("_")[0] for d in data] == ["/confirm", "/cancel"]
    # Not stored before Confirm, and no copy of the file kept.
    assert await titles(documents_entry) == []
    assert transfer_files(hass) == []
    assert not fake_ollama.chat_requests
    assert len(telegram.api.downloads) == 1
    await telegram.press_button(data[0])
    (answer,) = await telegram.wait_for_calls("answerCallbackQuery")
    await hass.async_block_till_done()
    assert answer["text"] == fixed_text(
        "done", summary=f'add "{file_name}" to the household documents'
    )
    assert await titles(documents_entry) == [file_name]
    hits = await documents_entry.runtime_data.documents.async_search(query)
    assert any(found in hit.content for hit in hits)
    assert transfer_files(hass) == []
    # The text read for the check was kept for the Confirm: one download.
    assert len(telegram.api.downloads) == 1


async def test_a_file_confirmed_after_a_reload_is_fetched_again(
    hass: HomeAssistant,
    documents_entry: MockConfigEntry,
    telegram: TelegramHarness,
) -> None:
    """The checked text lives in memory only; the pending Confirm outlives it."""
    ask = await send_file(
        hass, telegram, MANUAL.encode(), "heat pump.md", "text/markdown"
    )
    assert len(telegram.api.downloads) == 1
    assert await hass.config_entries.async_reload(documents_entry.entry_id)
    await hass.async_block_till_done()
    await telegram.press_button(buttons(ask)[0])
    (answer,) = await telegram.wait_for_calls("answerCallbackQuery")
    await hass.async_block_till_done()
    assert answer["text"] == fixed_text(
        "done", summary='add "heat pump.md" to the household documents'
    )
    assert len(telegram.api.downloads) == 2
    assert await titles(documents_entry) == ["heat pump.md"]
    hits = await documents_entry.runtime_data.documents.async_search("heat pump filter")
    assert any("spring" in hit.content for hit in hits)
    assert transfer_files(hass) == []


async def test_a_cancelled_file_is_not_stored(
    hass: HomeAssistant,
    documents_entry: MockConfigEntry,
    telegram: TelegramHarness,
) -> None:
    """Cancel leaves the documents as they were."""
    ask = await send_file(hass, telegram, MANUAL.encode(), "notes.md", "text/markdown")
    await telegram.press_button(buttons(ask)[1])
    await telegram.wait_for_calls("answerCallbackQuery")
    await hass.async_block_till_done()
    assert await titles(documents_entry) == []


@pytest.mark.parametrize(
    ("content", "file_name", "mime_type", "extra", "key", "placeholders"),
    [
        (
            b"PK\x03\x04 zip",
            "letter.docx",
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            {},
            "file_type",
            {"name": "letter.docx", "types": "TXT, Markdown, PDF"},
        ),
        (
            b"x",
            "big.pdf",
            "application/pdf",
            {"file_size": 11 * 1024 * 1024},
            "media_too_large",
            {"name": "big.pdf", "size": "11.0 MB", "limit": "10.0 MB"},
        ),
        (
            make_pdf("", ""),
            "scan.pdf",
            "application/pdf",
            {},
            "pdf_no_text",
            {"name": "scan.pdf"},
        ),
        (
            b"  \n\n ",
            "empty.txt",
            "text/plain",
            {},
            "file_empty",
            {"name": "empty.txt"},
        ),
        (
            b"\xff\xfe\x00\x00binary",
            "data.txt",
            "text/plain",
            {},
            "file_not_text",
            {"name": "data.txt"},
        ),
        (
            b"not a pdf at all",
            "broken.pdf",
            "application/pdf",
            {},
            "pdf_unreadable",
            {"name": "broken.pdf"},
        ),
        # Valid UTF-8 with NUL bytes: a binary file named .txt.
        (
            b"header\x00\x01\x02 data",
            "dump.txt",
            "text/plain",
            {},
            "file_not_text",
            {"name": "dump.txt"},
        ),
        (
            encrypted_pdf(PDF_TEXT),
            "statement.pdf",
            "application/pdf",
            {},
            "pdf_encrypted",
            {"name": "statement.pdf"},
        ),
        # Readable pages whose text is packed in a way pypdf does not know.
        (
            make_pdf(PDF_TEXT).replace(b"<< /Length", b"<< /Filter /Nonsense /Length"),
            "odd.pdf",
            "application/pdf",
            {},
            "pdf_unreadable",
            {"name": "odd.pdf"},
        ),
        # Telegram no longer has the file: the download fails.
        (None, "gone.md", "text/markdown", {"file_size": 10}, "download_failed", {}),
    ],
    ids=[
        "type",
        "size",
        "scan",
        "empty",
        "binary",
        "broken",
        "nul",
        "encrypted",
        "filter",
        "download",
    ],
)
async def test_a_bad_file_gets_a_clear_reply_and_nothing_is_stored(
    hass: HomeAssistant,
    documents_entry: MockConfigEntry,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    content: bytes | None,
    file_name: str,
    mime_type: str,
    extra: dict[str, Any],
    key: str,
    placeholders: dict[str, str],
) -> None:
    """Over a limit, the wrong type, no text, a failed download: said, not stored."""
    reply = await send_file(hass, telegram, content, file_name, mime_type, **extra)
    assert reply["text"] == fixed_text(key, **placeholders)
    assert not buttons(reply)
    assert await titles(documents_entry) == []
    assert transfer_files(hass) == []
    assert not fake_ollama.chat_requests


async def test_a_pdf_with_too_many_pages_is_refused(
    hass: HomeAssistant,
    documents_entry: MockConfigEntry,
    telegram: TelegramHarness,
) -> None:
    """The page limit is checked before anything is offered."""
    pdf = make_pdf(*(["page"] * 201))
    reply = await send_file(hass, telegram, pdf, "book.pdf", "application/pdf")
    assert reply["text"] == fixed_text(
        "pdf_too_many_pages", name="book.pdf", pages=201, limit=200
    )


async def test_files_need_documents_switched_on(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Without an embedding model there are no household documents to add to."""
    await async_setup_house(hass)
    await async_setup_assistant(hass, fake_ollama)
    reply = await send_file(hass, telegram, MANUAL.encode(), "a.md", "text/markdown")
    assert reply["text"] == fixed_text("documents_off")


async def test_a_file_from_someone_the_assistant_does_not_know_is_not_offered(
    hass: HomeAssistant,
    documents_entry: MockConfigEntry,
    telegram: TelegramHarness,
) -> None:
    """A stranger in an allowed group: told so, nothing fetched, no Confirm."""
    await telegram.add_allowed_chat(GROUP_ID)
    await telegram.post_update(
        media_update(
            telegram,
            "document",
            MANUAL.encode(),
            chat_id=GROUP_ID,
            user_id=MALLORY_ID,
            file_name="orders.md",
            mime_type="text/markdown",
        )
    )
    (reply,) = await telegram.wait_for_sent(1, chat_id=GROUP_ID)
    await hass.async_block_till_done()
    assert reply["text"] == fixed_text("not_known_reply")
    assert not buttons(reply)
    assert not telegram.api.downloads
    assert await titles(documents_entry) == []


async def test_a_file_longer_than_a_document_may_be_is_refused(
    hass: HomeAssistant,
    documents_entry: MockConfigEntry,
    telegram: TelegramHarness,
) -> None:
    """Over 500,000 characters (as add_document): said at once, no Confirm."""
    content = ("The boiler manual. " * 27_000).encode()
    assert len(content) > 500_000
    reply = await send_file(hass, telegram, content, "boiler.txt", "text/plain")
    assert reply["text"] == fixed_text(
        "file_too_long", name="boiler.txt", limit="500,000"
    )
    assert not buttons(reply)
    assert transfer_files(hass) == []


async def test_a_file_gone_from_telegram_before_a_late_confirm_is_explained(
    hass: HomeAssistant,
    documents_entry: MockConfigEntry,
    telegram: TelegramHarness,
) -> None:
    """After a reload Confirm fetches the file again; if it is gone, it says so."""
    ask = await send_file(hass, telegram, MANUAL.encode(), "pump.md", "text/markdown")
    assert await hass.config_entries.async_reload(documents_entry.entry_id)
    await hass.async_block_till_done()
    telegram.api.files.clear()
    await telegram.press_button(buttons(ask)[0])
    (answer,) = await telegram.wait_for_calls("answerCallbackQuery")
    await hass.async_block_till_done()
    assert answer["text"] == fixed_text(
        "failed",
        summary='add "pump.md" to the household documents',
        error=fixed_text("download_failed"),
    )
    assert await titles(documents_entry) == []
    assert transfer_files(hass) == []


async def test_a_file_confirmed_after_documents_were_switched_off_is_not_added(
    hass: HomeAssistant,
    documents_entry: MockConfigEntry,
    telegram: TelegramHarness,
) -> None:
    """The embedding model removed between the offer and Confirm: said, not added."""
    ask = await send_file(hass, telegram, MANUAL.encode(), "pump.md", "text/markdown")
    data = {k: v for k, v in documents_entry.data.items() if k != CONF_EMBEDDING_MODEL}
    hass.config_entries.async_update_entry(documents_entry, data=data)
    assert await hass.config_entries.async_reload(documents_entry.entry_id)
    await hass.async_block_till_done()
    await telegram.press_button(buttons(ask)[0])
    (answer,) = await telegram.wait_for_calls("answerCallbackQuery")
    await hass.async_block_till_done()
    assert answer["text"] == fixed_text(
        "failed",
        summary='add "pump.md" to the household documents',
        error=fixed_text("documents_off"),
    )
    assert await titles(documents_entry) == []


async def test_only_the_last_four_files_offered_wait_in_memory(
    hass: HomeAssistant,
    documents_entry: MockConfigEntry,
    telegram: TelegramHarness,
) -> None:
    """A fifth file pushes the first out: its Confirm fetches it again; both added."""
    asks = [
        await send_file(
            hass, telegram, f"Note {n}: {MANUAL}".encode(), f"n{n}.md", "text/markdown"
        )
        for n in range(5)
    ]
    assert len(telegram.api.downloads) == 5
    for number, ask in ((4, asks[4]), (0, asks[0])):
        await telegram.press_button(buttons(ask)[0])
        await telegram.wait_for_calls("answerCallbackQuery", 1 + (number == 0))
        await hass.async_block_till_done()
    answers = [call["text"] for call in telegram.calls("answerCallbackQuery")]
    assert answers == [
        fixed_text("done", summary=f'add "n{n}.md" to the household documents')
        for n in (4, 0)
    ]
    # The newest was kept in memory; the first was fetched again.
    assert len(telegram.api.downloads) == 6
    assert telegram.api.downloads[-1] == telegram.api.downloads[0]
    assert await titles(documents_entry) == ["n0.md", "n4.md"]


@pytest.mark.parametrize("kind", ["video", "animation"])
async def test_videos_and_animations_are_declined(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    kind: str,
) -> None:
    """Not supported, and said so; the model is not asked."""
    await async_setup_house(hass)
    await async_setup_assistant(hass, fake_ollama)
    await telegram.post_update(media_update(telegram, kind, b"\x00\x00video"))
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[-1]["text"] == fixed_text("media_unsupported")
    assert not fake_ollama.chat_requests


async def test_a_sticker_is_declined(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """A sticker (no MIME type) is not supported, and said so."""
    await async_setup_house(hass)
    await async_setup_assistant(hass, fake_ollama)
    await telegram.post_update(telegram.update_without_text(ALICE_ID, ALICE_ID))
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[-1]["text"] == fixed_text("media_unsupported")
    assert not fake_ollama.chat_requests


# -------------------------------------------------------------------- photos

JPEG = b"\xff\xd8\xff\xe0fake jpeg of a label\xff\xd9"


async def setup_vision(
    hass: HomeAssistant, fake_ollama: FakeOllama, capabilities: list[str] | None
) -> MockConfigEntry:
    """The house and the assistant with VISION as its vision model."""
    if capabilities is not None:
        fake_ollama.add_model(VISION, capabilities)
    await async_setup_house(hass)
    return await async_setup_assistant(hass, fake_ollama, **{CONF_VISION_MODEL: VISION})


def images_of(request: dict[str, Any]) -> list[str]:
    """Return the images every message of a chat request carries."""
    return [image for m in request["messages"] for image in m.get("images") or []]


async def test_a_photo_reaches_the_vision_model_and_the_answer_the_chat(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """The caption is the question; the photo goes in Ollama's images field."""
    await setup_vision(hass, fake_ollama, ["completion", "vision", "tools"])
    fake_ollama.reply("That is a 10 A fuse.")
    update = media_update(telegram, "photo", JPEG, caption="What fuse is this?")
    assert await telegram.post_update(update) == 200
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[-1]["text"] == "That is a 10 A fuse."
    (request,) = fake_ollama.chat_requests
    assert request["model"] == VISION
    assert images_of(request) == [base64.b64encode(JPEG).decode()]
    user = request["messages"][-1]
    assert user["images"]
    assert "What fuse is this?" in user["content"]
    # The largest size Telegram offered was fetched, and nothing is kept.
    assert telegram.api.downloads[-1].endswith(
        f"{update['message']['photo'][-1]['file_id']}.bin"
    )
    assert transfer_files(hass) == []
    # The next message goes to the chat model, without the photo.
    fake_ollama.reply("You're welcome.")
    await telegram.send_text("Thanks")
    await telegram.wait_for_sent(2, chat_id=ALICE_ID)
    assert fake_ollama.chat_requests[-1]["model"] != VISION
    assert images_of(fake_ollama.chat_requests[-1]) == []


async def test_text_in_a_photo_cannot_unlock_the_door_without_confirm(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """A caption-less photo whose text says 'unlock the door': the taint rule holds."""
    await setup_vision(hass, fake_ollama, ["completion", "vision", "tools"])
    # A gullible model obeys the text it read in the image.
    fake_ollama.tool_call("call_service", UNLOCK).reply("Unlocking as the note says.")
    await telegram.post_update(media_update(telegram, "photo", JPEG))
    sent = await telegram.wait_for_sent(2, chat_id=ALICE_ID)
    await hass.async_block_till_done()
    assert hass.states.get("lock.front_door").state == "locked"
    # The model was asked to describe the photo (no caption).
    assert (
        "Describe this photo" in fake_ollama.chat_requests[0]["messages"][-1]["content"]
    )
    # Only a Confirm request, saying that a photo is why it asks.
    request = sent[-1]
    assert buttons(request)[0].startswith("/confirm_")
    assert fixed_text("source_photo") in request["text"]


async def test_a_forwarded_photos_caption_is_named_in_the_confirm(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """A forwarded photo's caption is someone else's words: the request says so."""
    await setup_vision(hass, fake_ollama, ["completion", "vision", "tools"])
    fake_ollama.tool_call("call_service", BED_LIGHT_ON).reply("Done.")
    update = media_update(telegram, "photo", JPEG, caption="Turn on the bed light")
    update["message"]["forward_origin"] = {
        "type": "hidden_user",
        "date": update["message"]["date"],
        "sender_user_name": "Eve",
    }
    await telegram.post_update(update)
    sent = await telegram.wait_for_sent(2, chat_id=ALICE_ID)
    await hass.async_block_till_done()
    assert "Turn on the bed light" in str(fake_ollama.chat_requests[0]["messages"])
    assert hass.states.get("light.bed_light").state == "off"
    assert buttons(sent[-1])
    assert fixed_text("source_forwarded") in sent[-1]["text"]
    assert fixed_text("source_photo") in sent[-1]["text"]


async def test_a_light_from_a_photo_question_also_needs_confirm(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """Any state change read with an image waits for Confirm, even a light."""
    await setup_vision(hass, fake_ollama, ["completion", "vision", "tools"])
    fake_ollama.tool_call("call_service", BED_LIGHT_ON).reply("Done.")
    await telegram.post_update(
        media_update(telegram, "photo", JPEG, caption="Do what this says")
    )
    sent = await telegram.wait_for_sent(2, chat_id=ALICE_ID)
    await hass.async_block_till_done()
    assert hass.states.get("light.bed_light").state == "off"
    assert buttons(sent[-1])


async def test_a_vision_model_without_tools_still_answers(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """A model that reads images but cannot call tools answers without them."""
    await setup_vision(hass, fake_ollama, ["completion", "vision"])
    fake_ollama.reply("A cat on a sofa.")
    await telegram.post_update(media_update(telegram, "photo", JPEG))
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[-1]["text"] == "A cat on a sofa."
    assert not fake_ollama.chat_requests[-1].get("tools")


@pytest.mark.parametrize(
    ("capabilities", "key"),
    [
        (None, "vision_missing"),
        (["completion", "tools"], "vision_no_images"),
    ],
    ids=["missing", "no_images"],
)
async def test_a_vision_model_that_cannot_see_is_explained(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    capabilities: list[str] | None,
    key: str,
) -> None:
    """A vision model not installed, or one that refuses images: said, no download."""
    await setup_vision(hass, fake_ollama, capabilities)
    await telegram.post_update(media_update(telegram, "photo", JPEG))
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[-1]["text"] == fixed_text(key, model=VISION)
    assert not fake_ollama.chat_requests
    assert not telegram.api.downloads


async def test_a_photo_while_the_model_server_is_down_is_explained(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """Ollama cannot be asked about the vision model: said, nothing downloaded."""
    await setup_vision(hass, fake_ollama, ["completion", "vision", "tools"])
    await fake_ollama.stop()
    await telegram.post_update(media_update(telegram, "photo", JPEG, caption="What?"))
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[-1]["text"] == fixed_text("vision_unreachable", model=VISION)
    assert not telegram.api.downloads


async def test_without_a_vision_model_a_photo_gets_a_how_to(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """Photos need the vision_model option, and the reply says how to set it."""
    await async_setup_house(hass)
    await async_setup_assistant(hass, fake_ollama)
    await telegram.post_update(media_update(telegram, "photo", JPEG, caption="What?"))
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[-1]["text"] == fixed_text("photo_no_vision")
    assert not fake_ollama.chat_requests


# ----------------------------------------------------------- speech failures


@pytest.mark.parametrize(
    ("setup", "key", "placeholders"),
    [
        (
            lambda listener: setattr(listener, "fail", True),
            "stt_failed",
            {"engine": STT_ENTITY},
        ),
        (lambda listener: setattr(listener, "text", "   "), "stt_empty", {}),
        (
            lambda listener: setattr(listener, "formats", []),
            "stt_format",
            {"engine": STT_ENTITY},
        ),
        (
            lambda listener: setattr(
                listener, "error", HomeAssistantError("the engine crashed")
            ),
            "stt_failed",
            {"engine": STT_ENTITY},
        ),
        (
            lambda listener: setattr(listener, "languages", []),
            "stt_failed",
            {"engine": STT_ENTITY},
        ),
    ],
    ids=["failed", "empty", "format", "crashed", "no_language"],
)
async def test_a_voice_note_that_cannot_be_heard_gets_a_clear_reply(
    hass: HomeAssistant,
    speech: tuple[MockSTT, MockTTS],
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    setup: Any,
    key: str,
    placeholders: dict[str, str],
) -> None:
    """STT failing, hearing nothing or not taking OGG/Opus: said, no model call."""
    listener, _ = speech
    setup(listener)
    await async_setup_assistant(hass, fake_ollama, **{CONF_STT_ENGINE: STT_ENTITY})
    await telegram.post_update(media_update(telegram, "voice", OGG))
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[-1]["text"] == fixed_text(key, **placeholders)
    assert not fake_ollama.chat_requests
    assert transfer_files(hass) == []


async def test_a_voice_note_whose_engine_hangs_times_out(
    hass: HomeAssistant,
    speech: tuple[MockSTT, MockTTS],
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An STT engine that never answers: a reply after the time limit."""
    monkeypatch.setattr(
        "custom_components.ha_personal_assistant.speech.STT_TIMEOUT", 0.2
    )
    listener, _ = speech
    listener.hang = True
    await async_setup_assistant(hass, fake_ollama, **{CONF_STT_ENGINE: STT_ENTITY})
    await telegram.post_update(media_update(telegram, "voice", OGG))
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[-1]["text"] == fixed_text("stt_timeout", engine=STT_ENTITY)


async def test_without_an_stt_engine_a_voice_note_gets_a_how_to(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """No speech-to-text in Home Assistant at all: said, nothing downloaded."""
    assert await async_setup_component(hass, "homeassistant", {})
    await async_setup_assistant(hass, fake_ollama)
    await telegram.post_update(media_update(telegram, "voice", OGG))
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[-1]["text"] == fixed_text("stt_missing")
    assert not telegram.api.downloads


async def test_an_engine_that_does_not_take_ogg_opus_is_named(
    hass: HomeAssistant,
    speech: tuple[MockSTT, MockTTS],
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Without Assist and the option, HA's default engine (the demo's, WAV only)."""
    await async_setup_assistant(hass, fake_ollama)
    await telegram.post_update(media_update(telegram, "voice", OGG))
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[-1]["text"] == fixed_text("stt_format", engine="stt.demo_stt")


async def test_the_preferred_assist_pipelines_engine_is_used_by_default(
    hass: HomeAssistant,
    speech: tuple[MockSTT, MockTTS],
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """No stt_engine option: the preferred Assist pipeline's engine and language."""
    from homeassistant.components.assist_pipeline.pipeline import (
        async_get_pipeline,
        async_update_pipeline,
    )

    listener, _ = speech
    assert await async_setup_component(hass, "assist_pipeline", {})
    await async_update_pipeline(
        hass,
        async_get_pipeline(hass),
        stt_engine=STT_ENTITY,
        stt_language="de-DE",
    )
    await async_setup_assistant(hass, fake_ollama)
    fake_ollama.reply("OK.")
    await telegram.post_update(media_update(telegram, "voice", OGG))
    await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    ((metadata, _),) = listener.received
    assert metadata.language == "de-DE"


async def test_a_failed_voice_reply_leaves_the_text_reply_and_says_so(
    hass: HomeAssistant,
    speech: tuple[MockSTT, MockTTS],
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """TTS failing: the written answer arrives, then a short note."""
    _, speaker = speech
    speaker.fail = True
    await async_setup_assistant(
        hass,
        fake_ollama,
        **{CONF_STT_ENGINE: STT_ENTITY, CONF_VOICE_REPLIES: True},
    )
    fake_ollama.reply("All lights are off.")
    await telegram.post_update(media_update(telegram, "voice", OGG))
    sent = await telegram.wait_for_sent(2, chat_id=ALICE_ID)
    assert sent[0]["text"].endswith("All lights are off.")
    assert sent[1]["text"] == fixed_text("tts_failed", engine="tts.test_speaker")
    assert not telegram.calls("sendVoice")
    assert transfer_files(hass) == []


async def test_a_voice_reply_telegram_refuses_leaves_the_text_and_says_so(
    hass: HomeAssistant,
    speech: tuple[MockSTT, MockTTS],
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """The user's privacy settings forbid voice messages: the text, then a note."""
    await async_setup_assistant(
        hass,
        fake_ollama,
        **{CONF_STT_ENGINE: STT_ENTITY, CONF_VOICE_REPLIES: True},
    )
    telegram.api.fail_next("sendVoice", "Bad Request: VOICE_MESSAGES_FORBIDDEN")
    fake_ollama.reply("All lights are off.")
    await telegram.post_update(media_update(telegram, "voice", OGG))
    sent = await telegram.wait_for_sent(2, chat_id=ALICE_ID)
    await hass.async_block_till_done()
    assert sent[0]["text"].endswith("All lights are off.")
    assert sent[1]["text"] == fixed_text("voice_not_sent")
    assert len(telegram.calls("sendVoice")) == 1
    assert transfer_files(hass) == []


async def test_an_stt_engine_that_is_gone_is_named(
    hass: HomeAssistant,
    speech: tuple[MockSTT, MockTTS],
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """The option names an engine removed since: said, with its id."""
    await async_setup_assistant(hass, fake_ollama, **{CONF_STT_ENGINE: "stt.removed"})
    await telegram.post_update(media_update(telegram, "voice", OGG))
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[-1]["text"] == fixed_text("stt_not_found", engine="stt.removed")
    assert not fake_ollama.chat_requests


async def test_an_stt_option_without_speech_to_text_in_ha_gets_a_how_to(
    hass: HomeAssistant, telegram: TelegramHarness, fake_ollama: FakeOllama
) -> None:
    """The option names an engine, but HA has no speech-to-text set up at all."""
    assert await async_setup_component(hass, "homeassistant", {})
    await async_setup_assistant(hass, fake_ollama, **{CONF_STT_ENGINE: STT_ENTITY})
    await telegram.post_update(media_update(telegram, "voice", OGG))
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[-1]["text"] == fixed_text("stt_missing")
    assert not fake_ollama.chat_requests


async def test_a_language_the_engines_lack_gets_their_own(
    hass: HomeAssistant,
    speech: tuple[MockSTT, MockTTS],
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """French everywhere, engines in English and German: heard and spoken in English."""
    listener, speaker = speech
    hass.config.language = "fr"
    telegram.languages[ALICE_ID] = "fr"
    await async_setup_assistant(
        hass,
        fake_ollama,
        **{CONF_STT_ENGINE: STT_ENTITY, CONF_VOICE_REPLIES: True},
    )
    fake_ollama.reply("La lampe est allumée.")
    await telegram.post_update(media_update(telegram, "voice", OGG))
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    await telegram.wait_for_calls("sendVoice")
    ((metadata, _),) = listener.received
    assert metadata.language == "en-US"
    heard = fixed_text("voice_heard", "fr", text="turn on the bed light")
    assert sent[-1]["text"].split("\n")[0] == heard
    assert speaker.spoken == ["La lampe est allumée."]
    assert speaker.settings == [("en", {})]


async def test_the_assist_pipelines_voice_speaks_the_reply(
    hass: HomeAssistant,
    speech: tuple[MockSTT, MockTTS],
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """The preferred pipeline's TTS engine, language and voice say the answer."""
    from homeassistant.components.assist_pipeline.pipeline import (
        async_get_pipeline,
        async_update_pipeline,
    )

    _, speaker = speech
    assert await async_setup_component(hass, "assist_pipeline", {})
    await async_update_pipeline(
        hass,
        async_get_pipeline(hass),
        stt_engine=STT_ENTITY,
        tts_engine=TTS_ENTITY,
        tts_language="de",
        tts_voice="Anna",
    )
    await async_setup_assistant(hass, fake_ollama, **{CONF_VOICE_REPLIES: True})
    fake_ollama.reply("Das Licht ist an.")
    await telegram.post_update(media_update(telegram, "voice", OGG))
    (voice,) = await telegram.wait_for_calls("sendVoice")
    assert voice["chat_id"] == ALICE_ID
    assert speaker.spoken == ["Das Licht ist an."]
    assert speaker.settings == [("de", {"voice": "Anna"})]


async def test_a_broken_preferred_pipeline_falls_back_to_the_default_engine(
    hass: HomeAssistant,
    hass_storage: dict[str, Any],
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    speech_flow: None,
) -> None:
    """Assist's stored preferred pipeline is gone: HA's default engine hears it."""
    hass_storage["assist_pipeline.pipelines"] = {
        "version": 1,
        "minor_version": 2,
        "key": "assist_pipeline.pipelines",
        "data": {"items": [], "preferred_item": "01JGONE0000000000000000000"},
    }
    assert await async_setup_component(hass, "homeassistant", {})
    listener, _ = await async_setup_speech(hass)
    assert await async_setup_component(hass, "assist_pipeline", {})
    await async_setup_assistant(hass, fake_ollama)
    fake_ollama.reply("OK.")
    await telegram.post_update(media_update(telegram, "voice", OGG))
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[-1]["text"].endswith("OK.")
    assert len(listener.received) == 1


@pytest.mark.parametrize(
    ("case", "key", "placeholders"),
    [
        ("no_tts", "tts_missing", {}),
        ("engine_gone", "tts_failed", {"engine": "tts.removed"}),
        ("no_audio", "tts_failed", {"engine": TTS_ENTITY}),
    ],
    ids=["no_tts", "engine_gone", "no_audio"],
)
async def test_a_voice_reply_that_cannot_be_made_is_explained(
    hass: HomeAssistant,
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
    speech_flow: None,
    case: str,
    key: str,
    placeholders: dict[str, str],
) -> None:
    """No TTS in HA, Assist's engine removed, or no audio: the text, then a note."""
    from homeassistant.components.assist_pipeline.pipeline import (
        async_get_pipeline,
        async_update_pipeline,
    )

    assert await async_setup_component(hass, "homeassistant", {})
    _, speaker = await async_setup_speech(hass, with_tts=case != "no_tts")
    if case == "engine_gone":
        assert await async_setup_component(hass, "assist_pipeline", {})
        await async_update_pipeline(
            hass, async_get_pipeline(hass), tts_engine="tts.removed"
        )
    speaker.audio = b""
    await async_setup_assistant(
        hass,
        fake_ollama,
        **{CONF_STT_ENGINE: STT_ENTITY, CONF_VOICE_REPLIES: True},
    )
    fake_ollama.reply("All lights are off.")
    await telegram.post_update(media_update(telegram, "voice", OGG))
    sent = await telegram.wait_for_sent(2, chat_id=ALICE_ID)
    assert sent[0]["text"].endswith("All lights are off.")
    assert sent[1]["text"] == fixed_text(key, **placeholders)
    assert not telegram.calls("sendVoice")
    assert transfer_files(hass) == []


async def test_a_voice_note_over_the_limit_is_not_downloaded(
    hass: HomeAssistant,
    speech: tuple[MockSTT, MockTTS],
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """A long recording: refused by its size, before any download."""
    await async_setup_assistant(hass, fake_ollama, **{CONF_STT_ENGINE: STT_ENTITY})
    update = media_update(telegram, "voice", OGG, file_size=6 * 1024 * 1024)
    await telegram.post_update(update)
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[-1]["text"] == fixed_text(
        "media_too_large", name="voice", size="6.0 MB", limit="5.0 MB"
    )
    assert not telegram.api.downloads


async def test_a_voice_note_of_unstated_size_over_the_limit_is_not_heard(
    hass: HomeAssistant,
    speech: tuple[MockSTT, MockTTS],
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """Telegram did not say the size: the download is checked, refused, deleted."""
    listener, _ = speech
    await async_setup_assistant(hass, fake_ollama, **{CONF_STT_ENGINE: STT_ENTITY})
    audio = OGG + b"\x00" * (5 * 1024 * 1024)
    update = media_update(telegram, "voice", audio)
    # file_size is optional in the Bot API.
    del update["message"]["voice"]["file_size"]
    await telegram.post_update(update)
    sent = await telegram.wait_for_sent(1, chat_id=ALICE_ID)
    assert sent[-1]["text"] == fixed_text("media_too_large_unknown", limit="5.0 MB")
    assert len(telegram.api.downloads) == 1
    assert not listener.received
    assert not fake_ollama.chat_requests
    assert transfer_files(hass) == []


# ------------------------------------------------------------------ lifecycle


async def test_setup_unload_and_reload_leave_no_file_or_task_behind(
    hass: HomeAssistant,
    speech: tuple[MockSTT, MockTTS],
    telegram: TelegramHarness,
    fake_ollama: FakeOllama,
) -> None:
    """A file a crash left is removed at setup; unload removes the folder."""
    folder = Path(hass.config.path("ha_personal_assistant", "transfer"))
    await hass.async_add_executor_job(lambda: folder.mkdir(parents=True))
    await hass.async_add_executor_job((folder / "left-by-a-crash").write_bytes, b"x")
    entry = await async_setup_assistant(
        hass, fake_ollama, **{CONF_STT_ENGINE: STT_ENTITY, CONF_VOICE_REPLIES: True}
    )
    assert transfer_files(hass) == []
    assert str(folder) in hass.config.allowlist_external_dirs
    fake_ollama.reply("Done.")
    await telegram.post_update(media_update(telegram, "voice", OGG))
    await telegram.wait_for_calls("sendVoice")
    await hass.async_block_till_done()
    assert await hass.config_entries.async_reload(entry.entry_id)
    await hass.async_block_till_done()
    assert transfer_files(hass) == []
    assert await hass.config_entries.async_unload(entry.entry_id)
    await hass.async_block_till_done()
    assert not await hass.async_add_executor_job(folder.exists)
    assert str(folder) not in hass.config.allowlist_external_dirs
    tasks = [
        task
        for task in asyncio.all_tasks()
        if "ha_personal_assistant" in task.get_name() and not task.done()
    ]
    assert tasks == []
