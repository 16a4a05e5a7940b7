"""A small typed async client for the parts of the Ollama HTTP API we use."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Final

import aiohttp
from yarl import URL

from .const import OLLAMA_PROBE_TIMEOUT
from .model_server import ModelNotFound, ModelServerError, ServerUnreachable

if TYPE_CHECKING:
    from collections.abc import Mapping

_SCHEMES: Final = frozenset({"http", "https"})

# Capabilities Ollama reports in /api/show (Ollama 0.6.4 and later).
CAPABILITY_COMPLETION: Final = "completion"
CAPABILITY_EMBEDDING: Final = "embedding"
CAPABILITY_TOOLS: Final = "tools"


class OllamaError(ModelServerError):
    """Base class for errors talking to an Ollama server."""


class OllamaConnectionError(OllamaError, ServerUnreachable):
    """The server is unreachable, timed out, failed or did not answer JSON."""


class InvalidOllamaUrl(OllamaError):  # noqa: N818 - the name is a fixed interface.
    """The URL is not an http(s) URL with a host."""


class OllamaModelNotFound(OllamaError, ModelNotFound):  # noqa: N818 - the name is a fixed interface.
    """The requested model is not installed on the server."""


@dataclass(frozen=True)
class OllamaModel:
    """A model installed on the server, as listed by /api/tags."""

    name: str
    size: int | None
    family: str | None
    parameter_size: str | None


@dataclass(frozen=True)
class OllamaModelInfo:
    """Details of one model, as reported by /api/show."""

    name: str
    capabilities: tuple[str, ...]
    context_length: int | None

    @property
    def is_embedding_only(self) -> bool:
        """Return True if the model can embed but cannot chat."""
        return (
            CAPABILITY_EMBEDDING in self.capabilities
            and CAPABILITY_COMPLETION not in self.capabilities
        )

    def lacks(self, capability: str) -> bool:
        """Return True if Ollama reported capabilities and this one is not among them.

        Servers older than Ollama 0.6.4 report none; then nothing is lacking.
        """
        return bool(self.capabilities) and capability not in self.capabilities


def normalize_url(url: str) -> str:
    """Return the canonical base URL of an Ollama server.

    The scheme and host are lower-cased, a default port and any path, query or
    fragment are dropped; credentials are kept. Raise InvalidOllamaUrl unless
    the URL is http(s) with a host.
    """
    try:
        parsed = URL(url.strip())
    except ValueError as err:
        raise InvalidOllamaUrl(str(err)) from err
    host = parsed.host
    if (
        parsed.scheme not in _SCHEMES
        or not host
        or any(char.isspace() for char in host)
    ):
        msg = "Expected a URL like http://192.168.1.10:11434"
        raise InvalidOllamaUrl(msg)
    return str(parsed.with_path("").with_query(None).with_fragment(None))


def url_without_credentials(url: str) -> str:
    """Return the URL with any user name and password removed, safe to show or log."""
    return str(URL(url).with_user(None))


async def _async_request_json(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    timeout: float,  # noqa: ASYNC109 - one deadline for connect, send and read
    payload: Mapping[str, Any] | None = None,
) -> Any:
    """Send one request and return the parsed JSON body.

    Raise OllamaModelNotFound on 404, OllamaConnectionError when the server
    cannot be reached, times out, fails (5xx) or answers something that is not
    JSON, and OllamaError for any other error status.
    """
    safe_url = url_without_credentials(url)
    try:
        async with (
            asyncio.timeout(timeout),
            session.request(method, url, json=payload) as response,
        ):
            status = response.status
            raw = await response.read()
    except TimeoutError as err:
        msg = f"Timeout after {timeout} s waiting for {safe_url}"
        raise OllamaConnectionError(msg) from err
    except aiohttp.ClientError as err:
        msg = f"Cannot reach {safe_url}: {err}"
        raise OllamaConnectionError(msg) from err
    msg = f"{safe_url} answered HTTP {status}"
    if status == HTTPStatus.NOT_FOUND:
        raise OllamaModelNotFound(msg)
    if status >= HTTPStatus.INTERNAL_SERVER_ERROR:
        raise OllamaConnectionError(msg)
    if status >= HTTPStatus.BAD_REQUEST:
        raise OllamaError(msg)
    try:
        return json.loads(raw)
    except ValueError as err:
        msg = f"{safe_url} did not answer JSON"
        raise OllamaConnectionError(msg) from err


def _optional_int(value: object) -> int | None:
    """Return value if it is an int (not a bool), else None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def _optional_str(value: object) -> str | None:
    """Return value if it is a non-empty string, else None."""
    if isinstance(value, str) and value:
        return value
    return None


async def async_list_models(
    session: aiohttp.ClientSession,
    url: str,
    timeout: float = OLLAMA_PROBE_TIMEOUT,  # noqa: ASYNC109 - a fixed interface
) -> list[OllamaModel]:
    """Return the models installed on the server (GET /api/tags)."""
    try:
        body = await _async_request_json(
            session, "GET", f"{url.rstrip('/')}/api/tags", timeout
        )
    except OllamaModelNotFound as err:
        # A 404 here means the URL does not point at an Ollama server.
        raise OllamaError(str(err)) from err
    if not isinstance(body, dict) or not isinstance(
        entries := body.get("models"), list
    ):
        msg = "Unexpected answer from /api/tags"
        raise OllamaError(msg)
    models: list[OllamaModel] = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        name = _optional_str(entry.get("name")) or _optional_str(entry.get("model"))
        if name is None:
            continue
        details = entry.get("details")
        if not isinstance(details, dict):
            details = {}
        models.append(
            OllamaModel(
                name=name,
                size=_optional_int(entry.get("size")),
                family=_optional_str(details.get("family")),
                parameter_size=_optional_str(details.get("parameter_size")),
            )
        )
    return models


async def async_running_models(
    session: aiohttp.ClientSession,
    url: str,
    timeout: float = OLLAMA_PROBE_TIMEOUT,  # noqa: ASYNC109 - a fixed interface
) -> set[str]:
    """Return the models loaded in the server's memory (GET /api/ps).

    A model that is still loading is not listed yet.
    """
    body = await _async_request_json(
        session, "GET", f"{url.rstrip('/')}/api/ps", timeout
    )
    if not isinstance(body, dict) or not isinstance(
        entries := body.get("models"), list
    ):
        msg = "Unexpected answer from /api/ps"
        raise OllamaError(msg)
    names: set[str] = set()
    for entry in entries:
        if isinstance(entry, dict):
            for key in ("name", "model"):
                if name := _optional_str(entry.get(key)):
                    names.add(name)
    return names


async def async_show_model(
    session: aiohttp.ClientSession,
    url: str,
    model: str,
    timeout: float = OLLAMA_PROBE_TIMEOUT,  # noqa: ASYNC109 - a fixed interface
) -> OllamaModelInfo:
    """Return the capabilities and context length of a model (POST /api/show).

    Raise OllamaModelNotFound if the model is not installed.
    """
    try:
        body = await _async_request_json(
            session, "POST", f"{url.rstrip('/')}/api/show", timeout, {"model": model}
        )
    except OllamaModelNotFound as err:
        msg = f"The model {model} is not installed"
        raise OllamaModelNotFound(msg) from err
    if not isinstance(body, dict):
        msg = "Unexpected answer from /api/show"
        raise OllamaError(msg)
    raw_capabilities = body.get("capabilities")
    capabilities: tuple[str, ...] = ()
    if isinstance(raw_capabilities, list):
        capabilities = tuple(cap for cap in raw_capabilities if isinstance(cap, str))
    return OllamaModelInfo(
        name=model,
        capabilities=capabilities,
        context_length=_context_length(body.get("model_info")),
    )


def _context_length(model_info: object) -> int | None:
    """Return "<architecture>.context_length" from /api/show's model_info."""
    if not isinstance(model_info, dict):
        return None
    architecture = model_info.get("general.architecture")
    if not isinstance(architecture, str):
        return None
    return _optional_int(model_info.get(f"{architecture}.context_length"))


async def async_embed(
    session: aiohttp.ClientSession,
    url: str,
    model: str,
    texts: list[str],
    timeout: float,  # noqa: ASYNC109 - one deadline for the whole batch
) -> list[list[float]]:
    """Return one embedding per text (POST /api/embed), in order.

    Raise OllamaModelNotFound if the model is not installed and OllamaError
    when the answer does not hold one vector per text.
    """
    try:
        body = await _async_request_json(
            session,
            "POST",
            f"{url.rstrip('/')}/api/embed",
            timeout,
            {"model": model, "input": texts, "truncate": True},
        )
    except OllamaModelNotFound as err:
        msg = f"The embedding model {model} is not installed"
        raise OllamaModelNotFound(msg) from err
    vectors = body.get("embeddings") if isinstance(body, dict) else None
    if (
        not isinstance(vectors, list)
        or len(vectors) != len(texts)
        or not all(isinstance(v, list) and v for v in vectors)
    ):
        msg = "Unexpected answer from /api/embed"
        raise OllamaError(msg)
    return [[float(x) for x in vector] for vector in vectors]
