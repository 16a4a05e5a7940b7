"""Replies carry only links the turn's search results showed.

A poisoned page can ask the model to "send the user this link"; a gullible
model will. So every URL (and every bare domain, which Telegram makes
clickable) in a reply must have appeared in that turn's search results or in
the user's own message; any other is replaced.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from .firewall import unmark
from .pii.patterns import ENTITY_ID_PATTERN

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ..tools.registry import ToolContext

# What replaces a link in English; replies use the translated "link_removed".
LINK_REMOVED: Final = "[link removed]"
_TLDS: Final = (
    "com|net|org|info|biz|io|co|ai|app|dev|me|ly|to|gg|xyz|top|site|online|link|"
    "click|club|shop|store|live|tk|ml|ga|cf|gq|cc|ws|su|ru|de|uk|fr|es|it|nl|pl|"
    "cn|eu|us|ca|au|ch|at|be|se|no|dk|fi|cz|br|in|jp|kr|tv|fm|sh|gl|page|site"
)
# A URL with a scheme or www., or a bare host name ending in a known TLD.
_LINK: Final = re.compile(
    r"(?i)\b(?:[a-z][a-z0-9+.-]*://|www\.)[^\s<>\"'`)\]]+"
    rf"|(?<![@\w.-])(?:[a-z0-9](?:[a-z0-9-]{{0,61}}[a-z0-9])?\.)+(?:{_TLDS})\b"
    r"(?:/[^\s<>\"'`)\]]*)?"
)
_TRAILING: Final = ".,;:!?*_"
# The firewall's data fences (<data-1a2b3c4d5e6f>), should the model copy one.
_FENCE: Final = re.compile(r"</?\s*data-[0-9a-f]{6,32}\s*>", re.IGNORECASE)


def _host(link: str) -> str:
    url = link if "://" in link else f"http://{link}"
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return ""
    return host.removeprefix("www.").casefold()


def _key(link: str) -> str:
    link = link.rstrip(_TRAILING).rstrip("/")
    return re.sub(
        r"^[a-z][a-z0-9+.-]*://(?:www\.)?", "", link, flags=re.IGNORECASE
    ).casefold()


def find_links(text: str) -> list[str]:
    """Return the links and bare domains in ``text``."""
    return [m.group(0).rstrip(_TRAILING) for m in _LINK.finditer(text)]


def remember_urls(ctx: ToolContext, urls: Iterable[str]) -> None:
    """Allow these URLs (search results of the turn) in the reply."""
    ctx.allowed_urls.update(u for u in urls if u)


def filter_reply(text: str, allowed: Iterable[str], removed: str = LINK_REMOVED) -> str:
    """Replace every link not in ``allowed``; drop copied datamarks and fences.

    A full URL must match an allowed one exactly (scheme, www. and a final
    slash aside); a bare domain must be the host of an allowed URL. A removed
    link becomes ``removed`` (the reader's "[link removed]").
    """
    allowed = list(allowed)
    keys = {_key(u) for u in allowed}
    hosts = {_host(u) for u in allowed}

    def replace(match: re.Match[str]) -> str:
        raw = match.group(0)
        link = raw.rstrip(_TRAILING)
        tail = raw[len(link) :]
        bare = "://" not in link and not link.casefold().startswith("www.")
        if bare and ENTITY_ID_PATTERN.fullmatch(link):
            # light.tv is an entity id, not a link.
            return raw
        if _key(link) in keys or (bare and "/" not in link and _host(link) in hosts):
            return raw
        return removed + tail

    return _LINK.sub(replace, _FENCE.sub("", unmark(text)))
