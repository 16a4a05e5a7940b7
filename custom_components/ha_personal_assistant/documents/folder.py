"""The documents folder: the text files a user puts there for the assistant."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..const import DOCUMENT_SUFFIXES, LOGGER, MAX_FILE_BYTES

if TYPE_CHECKING:
    from pathlib import Path


def read_folder(folder: Path) -> dict[str, str]:
    """Return the text of every .txt and .md file under ``folder``, by path.

    Blocking: run in the executor. The folder is created when missing, so
    users find where to put files.
    """
    folder.mkdir(parents=True, exist_ok=True)
    found: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        if path.suffix.lower() not in DOCUMENT_SUFFIXES or not path.is_file():
            continue
        name = path.relative_to(folder).as_posix()
        if path.stat().st_size > MAX_FILE_BYTES:
            LOGGER.warning(
                "The document %s is larger than %s bytes and was skipped",
                name,
                MAX_FILE_BYTES,
            )
            continue
        text = path.read_text(encoding="utf-8", errors="replace").strip()
        if text:
            found[name] = text
    return found
