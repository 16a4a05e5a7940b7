"""Voice notes, photos and files from Telegram: what they are, fetching, reading.

telegram_bot reports every message with an attachment as one kind of update
(``telegram_attachment``) with the file's id, name, MIME type and size; what
kind of attachment it was is read from those. Files are fetched with
telegram_bot's ``download_file`` service into the integration's own transfer
folder, read in the integration's executor, and deleted at once: nothing is
kept that the user did not ask to keep.
"""

from __future__ import annotations

import asyncio
import secrets
import shutil
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from homeassistant.exceptions import HomeAssistantError

from .const import LOGGER, STORAGE_DIR

if TYPE_CHECKING:
    from collections.abc import Mapping

    from homeassistant.core import HomeAssistant

    from .executor import BlockingExecutor

TELEGRAM_DOMAIN: Final = "telegram_bot"
TRANSFER_DIR: Final = "transfer"
# Limits. Telegram lets bots download files of up to 20 MB; a household
# document beyond 10 MB or 200 pages is a book, not a note for the assistant.
MAX_FILE_BYTES: Final = 10 * 1024 * 1024
MAX_FILE_MB: Final = MAX_FILE_BYTES // (1024 * 1024)
MAX_PDF_PAGES: Final = 200
# A voice note of a few minutes; longer audio is a podcast, not a request.
MAX_AUDIO_BYTES: Final = 5 * 1024 * 1024
# A photo as Telegram sends it is well below this (its largest size).
MAX_IMAGE_BYTES: Final = 10 * 1024 * 1024
DOWNLOAD_TIMEOUT: Final = 60.0  # seconds
# Text files and PDFs the household may file, by MIME type and by name.
TEXT_TYPES: Final = frozenset({"text/plain", "text/markdown", "text/x-markdown"})
PDF_TYPES: Final = frozenset({"application/pdf", "application/x-pdf"})
TEXT_SUFFIXES: Final = frozenset({".txt", ".md", ".markdown", ".text"})
PDF_SUFFIXES: Final = frozenset({".pdf"})
SUPPORTED_FILES: Final = "TXT, Markdown, PDF"


class Kind(StrEnum):
    """What an attachment is, as far as the assistant is concerned."""

    VOICE = "voice"  # a voice note or an audio file
    PHOTO = "photo"
    DOCUMENT = "document"
    UNSUPPORTED = "unsupported"  # stickers, videos, animations, locations, ...


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file telegram_bot reported with a message."""

    kind: Kind
    file_id: str | None
    file_name: str | None
    mime_type: str | None
    file_size: int | None

    @property
    def display_name(self) -> str:
        """Return the file's name as the user sent it (or a neutral one)."""
        return self.file_name or self.kind.value


@dataclass(frozen=True, slots=True)
class MediaSettings:
    """The options for voice notes and photos."""

    stt_engine: str | None = None
    voice_replies: bool = False
    vision_model: str | None = None


class MediaError(Exception):
    """A file could not be used; ``key`` names the reply, with placeholders."""

    def __init__(self, *, key: str, **placeholders: object) -> None:
        """Keep the reply's key and its placeholders."""
        super().__init__(key)
        self.key = key
        self.placeholders = placeholders


def classify(data: Mapping[str, Any]) -> Attachment:
    """Tell what telegram_bot's attachment update carries.

    telegram_bot reports photos as ``image/jpeg`` without a name, voice notes
    and audio with an ``audio/*`` type, documents with their name and type;
    stickers have no type, videos and animations a ``video/*`` one, and
    locations, contacts or polls no file at all.
    """
    file_id = data.get("file_id")
    name = data.get("file_name")
    mime = data.get("file_mime_type")
    size = data.get("file_size")
    file_id = file_id if isinstance(file_id, str) and file_id else None
    name = name if isinstance(name, str) and name.strip() else None
    mime = mime.casefold() if isinstance(mime, str) and mime else None
    size = size if isinstance(size, int) and not isinstance(size, bool) else None
    kind = Kind.UNSUPPORTED
    if file_id is None or mime is None:
        kind = Kind.UNSUPPORTED
    elif mime.startswith("audio/"):
        kind = Kind.VOICE
    elif mime.startswith("image/") and mime not in ("image/gif", "image/webp"):
        kind = Kind.PHOTO
    elif mime.startswith("video/") or mime == "application/x-tgsticker":
        kind = Kind.UNSUPPORTED
    else:
        kind = Kind.DOCUMENT
    return Attachment(kind, file_id, name, mime, size)


def document_type(attachment: Attachment) -> str | None:
    """Return ``"text"`` or ``"pdf"`` for a file the household may file, else None."""
    suffix = Path(attachment.file_name or "").suffix.casefold()
    mime = attachment.mime_type or ""
    if mime in PDF_TYPES or suffix in PDF_SUFFIXES:
        return "pdf"
    if mime in TEXT_TYPES or suffix in TEXT_SUFFIXES:
        return "text"
    return None


def check_size(attachment: Attachment, limit: int) -> None:
    """Refuse a file Telegram says is larger than ``limit``, before fetching it."""
    if attachment.file_size is not None and attachment.file_size > limit:
        raise MediaError(
            key="media_too_large",
            name=attachment.display_name,
            size=_megabytes(attachment.file_size),
            limit=_megabytes(limit),
        )


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


def transfer_dir(hass: HomeAssistant) -> Path:
    """Return the folder files pass through on their way in and out."""
    return Path(hass.config.path(STORAGE_DIR, TRANSFER_DIR))


def prepare_transfer_dir(folder: Path) -> list[str]:
    """Create the transfer folder empty; return what an earlier run left; blocking."""
    left: list[str] = []
    if folder.is_dir():
        left = sorted(path.name for path in folder.iterdir())
        shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    return left


def remove_transfer_dir(folder: Path) -> None:
    """Delete the transfer folder and anything in it; blocking."""
    shutil.rmtree(folder, ignore_errors=True)


def read_and_delete(path: Path, limit: int) -> bytes:
    """Read a fetched file and delete it, whatever happens; blocking."""
    try:
        if path.stat().st_size > limit:
            raise MediaError(key="media_too_large_unknown", limit=_megabytes(limit))
        return path.read_bytes()
    finally:
        path.unlink(missing_ok=True)


def write_transfer_file(folder: Path, extension: str, data: bytes) -> Path:
    """Write outgoing audio under a random name in the transfer folder; blocking."""
    folder.mkdir(parents=True, exist_ok=True)
    suffix = "".join(c for c in extension if c.isalnum())[:8] or "bin"
    path = folder / f"{secrets.token_hex(8)}.{suffix}"
    path.write_bytes(data)
    return path


def delete_file(path: Path) -> None:
    """Delete a file if it is there; blocking."""
    path.unlink(missing_ok=True)


def extract_text(data: bytes, kind: str, name: str) -> str:
    """Return the text of a text file or a PDF; blocking (run in the executor).

    Raises MediaError for a file that is not what it says, a PDF with too
    many pages, and a file (or a scanned PDF) without text.
    """
    if kind == "pdf":
        text = _pdf_text(data, name)
    else:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as err:
            raise MediaError(key="file_not_text", name=name) from err
        if "\x00" in text:
            raise MediaError(key="file_not_text", name=name)
    text = "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").split("\n"))
    if not text.strip():
        raise MediaError(key="file_empty", name=name)
    return text.strip()


def _pdf_text(data: bytes, name: str) -> str:
    """Return a PDF's text, page by page; a scanned-only PDF has none."""
    import io  # noqa: PLC0415 - only for PDFs

    from pypdf import PdfReader  # noqa: PLC0415 - imported in the executor
    from pypdf.errors import PyPdfError  # noqa: PLC0415

    # pypdf's own errors (a damaged file, a loop or a bomb it stops at:
    # LimitReachedError is not a PdfReadError) and NotImplementedError for
    # a stream packed with a filter it does not know.
    unreadable = (
        PyPdfError,
        NotImplementedError,
        ValueError,
        KeyError,
        TypeError,
        OSError,
    )
    try:
        reader = PdfReader(io.BytesIO(data))
        encrypted = reader.is_encrypted
        pages = 0 if encrypted else len(reader.pages)
    except unreadable as err:
        LOGGER.debug("Could not read PDF %s: %s", name, err)
        raise MediaError(key="pdf_unreadable", name=name) from err
    if encrypted:
        raise MediaError(key="pdf_encrypted", name=name)
    if pages > MAX_PDF_PAGES:
        raise MediaError(
            key="pdf_too_many_pages", name=name, pages=pages, limit=MAX_PDF_PAGES
        )
    try:
        texts = [(page.extract_text() or "").strip() for page in reader.pages]
    except unreadable as err:
        LOGGER.debug("Could not read PDF %s: %s", name, err)
        raise MediaError(key="pdf_unreadable", name=name) from err
    if not any(texts):
        # Pages of pictures only (a scan, a photo of a letter): nothing to search.
        raise MediaError(key="pdf_no_text", name=name)
    return "\n\n".join(text for text in texts if text)


async def async_download(
    hass: HomeAssistant,
    executor: BlockingExecutor,
    bot_entry_id: str,
    attachment: Attachment,
    limit: int,
) -> bytes:
    """Fetch a file through telegram_bot's ``download_file``; return its bytes.

    It lands in the transfer folder under a random name and is deleted as
    soon as it is read (or when reading fails). Raises MediaError.
    """
    check_size(attachment, limit)
    if attachment.file_id is None:
        raise MediaError(key="download_failed")
    folder = transfer_dir(hass)
    name = secrets.token_hex(8)
    path = folder / name
    try:
        async with asyncio.timeout(DOWNLOAD_TIMEOUT):
            response = await hass.services.async_call(
                TELEGRAM_DOMAIN,
                "download_file",
                {
                    "config_entry_id": bot_entry_id,
                    "file_id": attachment.file_id,
                    "directory_path": str(folder),
                    "file_name": name,
                },
                blocking=True,
                return_response=True,
            )
    except (HomeAssistantError, ValueError, TimeoutError) as err:
        LOGGER.debug("Could not download a Telegram file: %s", err)
        await executor.run(delete_file, path)
        raise MediaError(key="download_failed") from err
    reported = response.get("file_path") if isinstance(response, dict) else None
    if isinstance(reported, str) and Path(reported) != path:
        # Not where it was asked to go: not ours to read.
        LOGGER.debug("telegram_bot stored a file at an unexpected place")
        raise MediaError(key="download_failed")
    try:
        return await executor.run(read_and_delete, path, limit)
    except OSError as err:
        LOGGER.debug("Could not read a downloaded file: %s", err)
        raise MediaError(key="download_failed") from err
