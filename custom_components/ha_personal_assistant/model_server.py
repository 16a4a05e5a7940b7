"""What the integration needs from a model server, whatever API it speaks."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final, Protocol

from yarl import URL

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

# Host names that only resolve inside a home network.
_LOCAL_SUFFIXES: Final = (
    ".local",
    ".lan",
    ".home",
    ".home.arpa",
    ".internal",
    ".localdomain",
    ".intranet",
)
_RESOLVE_TIMEOUT: Final = 3.0  # seconds
_SCHEMES: Final = frozenset({"http", "https"})

# What a model can do, in Ollama's words (/api/show, Ollama 0.6.4 and later).
CAPABILITY_COMPLETION: Final = "completion"
CAPABILITY_EMBEDDING: Final = "embedding"
CAPABILITY_TOOLS: Final = "tools"


class Backend(StrEnum):
    """The API a model server speaks (config entry key ``backend``)."""

    OLLAMA = "ollama"
    OPENAI_COMPATIBLE = "openai_compatible"


class ModelServerError(Exception):
    """Anything that went wrong talking to a model server.

    The one error type of both backends: each maps its client library's
    errors (``ollama``, ``openai``, httpx) to this class or a subclass, and
    the message is a short reason, safe to log and show (no credentials).
    """


class ServerUnreachable(ModelServerError):  # noqa: N818 - reads as what happened
    """The server is unreachable, failed (5xx) or did not answer what it should."""


class ServerTimeout(ServerUnreachable):
    """The server did not answer in time."""


class ModelNotFound(ModelServerError):  # noqa: N818 - reads as what happened
    """The requested model is not on the server."""


class AuthFailed(ModelServerError):  # noqa: N818 - reads as what happened
    """The server refused the API key (HTTP 401 or 403)."""


class ToolsRefused(ModelServerError):  # noqa: N818 - reads as what happened
    """The server refused the request's tools (started without tool calls)."""


class InvalidUrl(ModelServerError):  # noqa: N818 - reads as what happened
    """The URL is not an http(s) URL with a host."""


@dataclass(frozen=True, slots=True)
class ServerModel:
    """A model the server offers.

    ``capabilities`` uses Ollama's words (``completion``, ``tools``,
    ``embedding``); empty when the server does not say.
    """

    name: str
    label: str
    capabilities: tuple[str, ...] = ()


class ModelBackend(Protocol):
    """One model server: the chat model, the model list, checks and embeddings.

    Every method that talks to the server raises :class:`ModelServerError`
    subclasses only; the chat model raises its client library's errors,
    which :meth:`chat_error` maps to the same type.
    """

    backend: Backend
    # The server's address without credentials: safe to log and show.
    where: str

    async def async_list_models(self) -> list[ServerModel]:
        """Return the models the server offers."""

    async def async_capabilities(self, model: str) -> tuple[str, ...]:
        """Return what ``model`` can do; empty if the server does not say.

        Raise ModelNotFound if the server does not have it.
        """

    async def async_supports_tools(self, model: str) -> bool:
        """Tell whether ``model`` accepts tool definitions (a config-time check)."""

    async def async_loading(self, model: str) -> bool:
        """Tell whether the server is still loading ``model`` into memory."""

    async def async_embed(
        self,
        model: str,
        texts: list[str],
        timeout: float,  # noqa: ASYNC109 - one deadline for the whole batch
    ) -> list[list[float]]:
        """Return one vector per text, in order."""

    async def async_close(self) -> None:
        """Close the connections this backend opened (the entry is unloaded)."""

    def build_chat_model(self, model: str, settings: ChatSettings) -> BaseChatModel:
        """Create the chat model; blocking (clients, imports): in the executor."""

    def chat_error(self, err: BaseException) -> ModelServerError | None:
        """Return what a failed chat call's library error means, if known."""


@dataclass(frozen=True, slots=True)
class ChatSettings:
    """How every chat request is made, the same on every request."""

    num_ctx: int
    num_predict: int
    keep_alive: int
    timeout: float
    extra: dict[str, Any] | None = None


def is_bad_tool_call(err: BaseException) -> bool:
    """Tell whether the server refused the model's own malformed tool call.

    Ollama answers HTTP 500 "error parsing tool call"; llama-server answers
    "Failed to parse input at pos ...", quoting the model's ``<tool_call>``
    text. The model gets a correction, as for any malformed call.
    """
    text = str(err).lower()
    return isinstance(getattr(err, "status_code", None), int) and (
        "tool call" in text or "tool_call" in text
    )


def url_without_credentials(url: str) -> str:
    """Return the URL with any user name and password removed, safe to show or log."""
    return str(URL(url).with_user(None))


def parse_http_url(url: str, example: str) -> URL:
    """Return ``url`` parsed, scheme and host lower-cased, default port dropped.

    Raise InvalidUrl (saying ``example``) unless it is http(s) with a host.
    """
    try:
        parsed = URL(url.strip())
    except ValueError as err:
        raise InvalidUrl(str(err)) from err
    host = parsed.host
    if (
        parsed.scheme not in _SCHEMES
        or not host
        or any(char.isspace() for char in host)
    ):
        msg = f"Expected a URL like {example}"
        raise InvalidUrl(msg)
    return parsed


def _private_address(address: str) -> bool:
    """Tell whether an IP address stays inside the home (or this machine)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    return ip.is_private or ip.is_loopback or ip.is_link_local


async def async_is_private_url(url: str) -> bool:
    """Tell whether a server URL points into the home network.

    An IP address is judged as it is; a single-label name or a name under a
    home-network suffix (``.local``, ``.lan``, ``.home.arpa`` ...) is local;
    any other name is local only when every address it resolves to is. A name
    that does not resolve counts as leaving the home: the user is asked.
    """
    host = (URL(url).host or "").rstrip(".").lower()
    if not host:
        return False
    with contextlib.suppress(ValueError):
        ipaddress.ip_address(host.split("%", 1)[0])
        return _private_address(host)
    if host == "localhost" or "." not in host or host.endswith(_LOCAL_SUFFIXES):
        return True
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(_RESOLVE_TIMEOUT):
            infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except Exception:  # noqa: BLE001 - whatever stops resolving it: ask the user
        return False
    addresses = {str(info[4][0]) for info in infos}
    return bool(addresses) and all(_private_address(a) for a in addresses)
