"""The search_documents tool: the household's documents, fenced as untrusted data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pydantic import BaseModel

from ..const import SEARCH_RESULTS
from ..documents.index import DocumentsUnavailable
from ..security.firewall import mark_untrusted_parts
from .registry import ToolContext, ToolError, ToolSpec

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..documents.index import DocumentHit, DocumentIndex
    from ..store.documents import Indexing

SOURCE: Final = "the household's documents"
MAX_DOCUMENT_RESULT_CHARS: Final = 4000
# A title named as still indexing is cut to this many characters.
TITLE_CHARS: Final = 80
DOCUMENTS_OFF: Final = (
    "Error: document search is not set up (no embedding model is configured "
    "for the Personal Assistant). Tell the user, and answer from what you know."
)


class SearchDocumentsArgs(BaseModel):
    """Arguments of search_documents."""

    query: str


def format_hits(hits: list[DocumentHit]) -> str:
    """Return the hits as the model reads them: HA knowledge plain, the rest fenced."""
    if not hits:
        return "No matching documents."
    lines: list[str] = []
    trusted = [hit for hit in hits if hit.trusted]
    untrusted = [hit for hit in hits if not hit.trusted]
    if trusted:
        lines.append("From Home Assistant's own registries:")
        lines.extend(f"- {hit.title}: {hit.content}" for hit in trusted)
    if untrusted:
        block, withheld = mark_untrusted_parts(
            [
                f"[{hit.title}] (similarity {hit.score:.2f})\n{hit.content}"
                for hit in untrusted
            ],
            source=SOURCE,
            max_chars=MAX_DOCUMENT_RESULT_CHARS,
        )
        if withheld:
            lines.append(f"{withheld} passage(s) were withheld as unsafe.")
        lines.append(block)
    return "\n".join(lines)


def still_indexing(indexing: Sequence[Indexing]) -> str:
    """Say which documents cannot be fully searched yet (added, not embedded)."""
    names = ", ".join(
        f'"{_shorten(item.title)}" ({item.ready} of {item.chunks} passages ready)'
        for item in indexing
    )
    return (
        f"Still indexing, so not (fully) searched yet: {names}. If the answer "
        "may be in it, tell the user it is still being indexed and to ask "
        "again in a few minutes."
    )


def _shorten(title: str) -> str:
    title = " ".join(title.split())
    return title if len(title) <= TITLE_CHARS else title[: TITLE_CHARS - 1] + "…"


def document_tools(index: DocumentIndex) -> tuple[ToolSpec, ...]:
    """Return search_documents over ``index``."""

    async def search_documents(_ctx: ToolContext, args: SearchDocumentsArgs) -> str:
        """Find the passages most similar to the query."""
        # Added but not embedded yet: said, never silently missed.
        indexing = await index.async_indexing()
        try:
            hits = await index.async_query(args.query, SEARCH_RESULTS)
        except DocumentsUnavailable as err:
            msg = (
                "document search is not available right now (the embedding "
                "model did not answer); tell the user"
            )
            raise ToolError(msg) from err
        # The firewall reads each passage several ways (milliseconds per long
        # text): off the event loop, like the search itself.
        result = await index.vectors.executor.run(format_hits, hits)
        if indexing:
            result = f"{result}\n{still_indexing(indexing)}"
        return result

    return (
        ToolSpec(
            name="search_documents",
            description="",  # its name and arguments say it
            args_schema=SearchDocumentsArgs,
            handler=search_documents,
            untrusted_output=True,
        ),
    )
