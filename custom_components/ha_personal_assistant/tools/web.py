# ruff: noqa: RUF001 - street names, quotes and letters of many scripts
"""The web_search tool: a sanitized query out, fenced untrusted results in."""

from __future__ import annotations

import asyncio
import re
import sqlite3
import time
from typing import TYPE_CHECKING, Any, Final

from ddgs import DDGS
from homeassistant.helpers import area_registry as ar
from homeassistant.helpers import device_registry as dr
from pydantic import BaseModel

from ..const import LOGGER
from ..security.firewall import mark_untrusted_parts
from ..security.links import remember_urls
from ..security.pii.names import GENERIC_WORDS
from ..security.pii.sanitizer import PiiContext, sanitize
from ..store import profile as profile_store
from ..store import search_audit
from .registry import ToolContext, ToolError, ToolSpec

if TYPE_CHECKING:
    from collections.abc import Iterable

    from homeassistant.core import HomeAssistant

    from ..executor import BlockingExecutor
    from ..security.pii.redactor import Sanitized

WEB_SEARCH_TIMEOUT: Final = 15  # seconds for one search, end to end
MAX_RESULTS: Final = 5
MAX_TITLE_CHARS: Final = 200
MAX_SNIPPET_CHARS: Final = 500
MAX_RESULTS_CHARS: Final = 3000
BACKEND: Final = "duckduckgo"
SOURCE: Final = "a web search"
# Capitalized words of a profile entry that name nobody.
_PROFILE_COMMON: Final = (
    frozenset(
        [
            "i",
            "i'm",
            "i've",
            "me",
            "my",
            "mine",
            "you",
            "your",
            "he",
            "his",
            "him",
            "she",
            "her",
            "they",
            "their",
            "them",
            "we",
            "our",
            "us",
            "it",
            "its",
            "a",
            "an",
            "the",
            "this",
            "that",
            "these",
            "those",
            "and",
            "or",
            "but",
            "if",
            "when",
            "while",
            "after",
            "before",
            "at",
            "on",
            "in",
            "to",
            "of",
            "for",
            "with",
            "from",
            "by",
            "about",
            "likes",
            "like",
            "prefers",
            "prefer",
            "loves",
            "love",
            "hates",
            "hate",
            "lives",
            "live",
            "works",
            "work",
            "goes",
            "go",
            "has",
            "have",
            "had",
            "is",
            "are",
            "was",
            "were",
            "be",
            "been",
            "being",
            "does",
            "do",
            "did",
            "wants",
            "want",
            "needs",
            "need",
            "usually",
            "always",
            "never",
            "often",
            "sometimes",
            "every",
            "each",
            "wife",
            "husband",
            "partner",
            "son",
            "daughter",
            "kid",
            "kids",
            "child",
            "children",
            "mother",
            "father",
            "mom",
            "dad",
            "mum",
            "brother",
            "sister",
            "friend",
            "dog",
            "cat",
            "pet",
            "neighbour",
            "neighbor",
            "boss",
            "colleague",
            "monday",
            "tuesday",
            "wednesday",
            "thursday",
            "friday",
            "saturday",
            "sunday",
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
            "morning",
            "evening",
            "night",
            "weekend",
            "weekends",
            "birthday",
            "called",
            "named",
            "name",
            "bed",
            "wakes",
            "gets",
            "takes",
        ]
    )
    | GENERIC_WORDS
)
_CAPITALIZED: Final = re.compile(r"\b[A-ZÀ-ÖØ-ÞĀ-ſА-ЯЁ][\w'’-]{2,}")


class WebSearchArgs(BaseModel):
    """Arguments of web_search."""

    query: str


def _registry_names(hass: HomeAssistant) -> list[str]:
    """Return the names of people, zones, areas and devices the house knows."""
    names: list[str] = [hass.config.location_name]
    names.extend(state.name for state in hass.states.async_all(("person", "zone")))
    for area in ar.async_get(hass).async_list_areas():
        names.append(area.name)
        names.extend(area.aliases)
    for device in dr.async_get(hass).devices:
        names.extend(n for n in (device.name_by_user, device.name) if n)
    return names


def profile_names(contents: Iterable[str]) -> tuple[list[str], list[str]]:
    """Return the names and the literal personal values found in profile entries."""
    names: list[str] = []
    values: list[str] = []
    for content in contents:
        found = sanitize(content, PiiContext())
        values.extend(found.found)
        names.extend(
            word
            for word in _CAPITALIZED.findall(content)
            if re.sub(r"['’]s$", "", word).casefold() not in _PROFILE_COMMON
        )
    return names, values


async def _user_names(hass: HomeAssistant) -> list[str]:
    """Return the names of Home Assistant's users, with a person entity or not.

    System users (Supervisor, Home Assistant Content) name nobody.
    """
    return [
        user.name
        for user in await hass.auth.async_get_users()
        if user.name and not user.system_generated
    ]


async def async_pii_context(ctx: ToolContext) -> PiiContext:
    """Gather what must not leave the house: the config, registries and profile."""
    hass = ctx.hass
    names = _registry_names(hass)
    names.extend(await _user_names(hass))
    if ctx.user_name:
        names.append(ctx.user_name)
    values: list[str] = []
    if ctx.database is not None:
        person = ctx.profile_key or ctx.person
        entries = await ctx.database.async_run(
            lambda conn: profile_store.entries(conn, person)
        )
        extra_names, values = profile_names(e.content for e in entries)
        names.extend(extra_names)
    return PiiContext(
        country=hass.config.country,
        home=(hass.config.latitude, hass.config.longitude),
        names=tuple(dict.fromkeys(names)),
        values=tuple(dict.fromkeys(values)),
    )


async def _audit(
    ctx: ToolContext, query: str, categories: Iterable[str], outcome: str, results: int
) -> None:
    if ctx.database is None:
        return
    row = search_audit.SearchAuditRow(
        ts=time.time(),
        person=ctx.person,
        chat_id=ctx.chat_id,
        query=query,
        categories=tuple(categories),
        outcome=outcome,
        results=results,
    )
    try:
        await ctx.database.async_run(lambda conn: search_audit.add(conn, row))
    except sqlite3.Error as err:
        LOGGER.warning("Could not write the search audit log: %s", err)


def _search(query: str) -> list[dict[str, Any]]:
    """Ask DuckDuckGo through ddgs; blocking, run in the dedicated executor."""
    return list(
        DDGS(timeout=WEB_SEARCH_TIMEOUT - 5).text(
            query, backend=BACKEND, max_results=MAX_RESULTS
        )
    )


def _format(result: dict[str, Any]) -> tuple[str, str]:
    title = " ".join(str(result.get("title") or "").split())[:MAX_TITLE_CHARS]
    url = str(result.get("href") or result.get("url") or "").strip()
    body = " ".join(str(result.get("body") or "").split())[:MAX_SNIPPET_CHARS]
    return f"{title}\n{url}\n{body}".strip(), url


def web_tools(executor: BlockingExecutor) -> tuple[ToolSpec, ...]:
    """Return web_search, running its blocking work in ``executor``."""

    async def web_search(ctx: ToolContext, args: WebSearchArgs) -> str:
        """Search the web with a sanitized query; return fenced results."""
        try:
            cleaned: Sanitized = sanitize(args.query, await async_pii_context(ctx))
        except Exception as err:
            LOGGER.warning("The PII sanitizer failed; no query was sent: %s", err)
            await _audit(ctx, "", (), search_audit.OUTCOME_SANITIZER_ERROR, 0)
            ctx.notices.append(ctx.texts("web_privacy_failed"))
            msg = (
                "the search was not sent because the privacy check failed; tell "
                "the user the web search did not work"
            )
            raise ToolError(msg) from err
        if not cleaned.sendable:
            await _audit(
                ctx, cleaned.text, cleaned.categories, search_audit.OUTCOME_NOT_SENT, 0
            )
            ctx.notices.append(
                ctx.texts("web_not_sent", kinds=", ".join(cleaned.categories) or "none")
            )
            msg = (
                "the search was not sent: without the personal details it "
                f"contained ({', '.join(cleaned.categories)}) nothing searchable "
                "was left. "
                "Tell the user that searches never carry personal details and "
                "that they can ask in general words"
            )
            raise ToolError(msg)
        try:
            async with asyncio.timeout(WEB_SEARCH_TIMEOUT):
                results = await executor.run(_search, cleaned.text)
        except TimeoutError as err:
            await _audit(
                ctx, cleaned.text, cleaned.categories, search_audit.OUTCOME_TIMEOUT, 0
            )
            msg = "the web search took too long; tell the user to try again later"
            raise ToolError(msg) from err
        except Exception as err:
            LOGGER.debug("The web search failed: %s", err)
            await _audit(
                ctx, cleaned.text, cleaned.categories, search_audit.OUTCOME_FAILED, 0
            )
            msg = (
                "the web search is not available right now; tell the user and "
                "answer from what you know if you can"
            )
            raise ToolError(msg) from err
        await _audit(
            ctx,
            cleaned.text,
            cleaned.categories,
            search_audit.OUTCOME_SENT,
            len(results),
        )
        formatted = [_format(r) for r in results[:MAX_RESULTS]]
        remember_urls(ctx, (url for _, url in formatted if url))
        # The firewall reads each result several ways (milliseconds per long
        # text): off the event loop, like the search itself.
        block, withheld = await executor.run(
            mark_untrusted_parts,
            [text for text, _ in formatted],
            source=SOURCE,
            max_chars=MAX_RESULTS_CHARS,
        )
        lines = [f"Searched for: {cleaned.text}"]
        if cleaned.categories:
            lines.append(
                "Personal details were removed from the query before it was sent: "
                + ", ".join(cleaned.categories)
            )
        if not formatted:
            lines.append("No results.")
        if withheld:
            lines.append(f"{withheld} result(s) were withheld as unsafe.")
        lines.append(block)
        return "\n".join(lines)

    return (
        ToolSpec(
            name="web_search",
            description="",  # its name and arguments say it
            args_schema=WebSearchArgs,
            handler=web_search,
            untrusted_output=True,
        ),
    )


WEB_SEARCH_OFF: Final = (
    "Error: web search is switched off in the Personal Assistant's options. "
    "Tell the user you cannot search the web, and answer from what you know."
)
