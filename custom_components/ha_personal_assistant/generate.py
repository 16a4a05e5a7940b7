"""AI Task requests: attachments read, the prompt built, the structure checked."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from .media import (
    MAX_FILE_BYTES,
    MAX_IMAGE_BYTES,
    Attachment,
    Kind,
    MediaError,
    document_type,
    extract_text,
)
from .security.firewall import mark_untrusted

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

# Image types vision models take (the GIF and WebP Telegram stickers are not).
IMAGE_TYPES: Final = frozenset({"image/jpeg", "image/png"})
IMAGE_SUFFIXES: Final = frozenset({".jpg", ".jpeg", ".png"})
SYSTEM_PROMPT: Final = (
    "You carry out a task for a Home Assistant automation. Answer with the "
    "result only, no greeting and no explanation."
)
STRUCTURE_PROMPT: Final = (
    "Answer with one JSON object only, no other text, matching this JSON "
    "schema:\n{schema}"
)
RETRY_PROMPT: Final = (
    "That answer did not match the schema ({error}). Answer again with one "
    "JSON object only that matches it."
)


class UnsupportedAttachmentError(Exception):
    """An attachment that is neither an image nor a text file."""

    def __init__(self, name: str) -> None:
        """Keep the file's name for the error the user reads."""
        super().__init__(name)
        self.name = name


@dataclass(slots=True)
class Inputs:
    """What the attachments hold: images (base64) and the text of text files."""

    images: list[str] = field(default_factory=list)
    # (file name, text), in the order they were attached.
    texts: list[tuple[str, str]] = field(default_factory=list)


def is_image(path: Path, mime_type: str | None) -> bool:
    """Tell whether an attachment is an image a vision model takes."""
    if mime_type:
        return mime_type in IMAGE_TYPES
    return path.suffix.casefold() in IMAGE_SUFFIXES


def read_attachments(attachments: Sequence[tuple[Path, str | None]]) -> Inputs:
    """Read the images and text files; blocking (run it in the executor).

    Raises UnsupportedAttachmentError for any other kind of file, and the
    media module's MediaError for a file too large or without text.
    """
    inputs = Inputs()
    for path, mime_type in attachments:
        if is_image(path, mime_type):
            inputs.images.append(
                base64.b64encode(_read(path, MAX_IMAGE_BYTES)).decode("ascii")
            )
            continue
        file = Attachment(
            kind=Kind.DOCUMENT,
            file_id=None,
            file_name=path.name,
            mime_type=mime_type,
            file_size=None,
        )
        if (kind := document_type(file)) is None:
            raise UnsupportedAttachmentError(path.name)
        text = extract_text(_read(path, MAX_FILE_BYTES), kind, path.name)
        inputs.texts.append((path.name, text))
    return inputs


def _read(path: Path, limit: int) -> bytes:
    if path.stat().st_size > limit:
        raise MediaError(key="media_too_large_unknown", limit=f"{limit >> 20} MB")
    return path.read_bytes()


def user_text(instructions: str, texts: Sequence[tuple[str, str]]) -> str:
    """Return the task's message: the instructions, then each file fenced as data.

    A file's text was written outside the house: it is information for the
    task, never instructions (the firewall withholds what reads like them).
    """
    parts = [instructions.strip()]
    parts.extend(
        mark_untrusted(text, source=f"the attached file {name}") for name, text in texts
    )
    return "\n\n".join(parts)


def system_text(schema: dict[str, Any] | None) -> str:
    """Return the system prompt, asking for JSON of ``schema`` when there is one."""
    if schema is None:
        return SYSTEM_PROMPT
    shape = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    return f"{SYSTEM_PROMPT}\n{STRUCTURE_PROMPT.format(schema=shape)}"


class StructureError(Exception):
    """The answer is not JSON of the requested structure; says why, briefly."""


def parse_structured(text: str, validate: Callable[[Any], Any]) -> Any:
    """Return the answer's JSON validated by ``validate`` (the task's schema).

    A model may wrap JSON in a Markdown code block; that is taken off first.
    """
    body = text.strip()
    if body.startswith("```"):
        body = body.strip("`").removeprefix("json").strip()
    try:
        data = json.loads(body)
    except ValueError as err:
        msg = "not JSON"
        raise StructureError(msg) from err
    try:
        return validate(data)
    except Exception as err:
        # voluptuous' (or probatio's) Invalid: its message names the key.
        raise StructureError(str(err)[:200]) from err
