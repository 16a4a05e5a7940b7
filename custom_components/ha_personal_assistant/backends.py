"""The two kinds of model server: Ollama, and servers speaking OpenAI's API.

Each backend talks to its server through one client library and maps that
library's errors to the one error type, :class:`.model_server.ModelServerError`.

Ollama: one ``ollama.AsyncClient`` asks for the model list, capabilities,
loaded models and embeddings; the chat model is langchain-ollama's
ChatOllama, whose own client is the same package's.

OpenAI-compatible servers (llama.cpp's llama-server, vLLM, LocalAI, LM
Studio): one ``openai.AsyncOpenAI`` client on HA's shared httpx client serves
everything, and langchain-openai's ChatOpenAI is built on that same client.
"""

from __future__ import annotations

import asyncio
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Final, cast

import httpx
import ollama
import openai
from homeassistant.helpers.httpx_client import get_async_client
from homeassistant.util.ssl import get_default_context
from pydantic import ValidationError
from yarl import URL

from .const import (
    CONF_API_KEY,
    CONF_BACKEND,
    CONF_BASE_URL,
    CONF_OLLAMA_URL,
    LOGGER,
    MAX_LOADING_WAIT,
    OLLAMA_PROBE_TIMEOUT,
    TOOL_PROBE_TIMEOUT,
)
from .model_server import (
    CAPABILITY_TOOLS,
    AuthFailed,
    Backend,
    ChatSettings,
    ModelBackend,
    ModelNotFound,
    ModelServerError,
    ServerModel,
    ServerTimeout,
    ServerUnreachable,
    ToolsRefused,
    is_bad_tool_call,
    parse_http_url,
    url_without_credentials,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Mapping

    from homeassistant.core import HomeAssistant
    from langchain_core.language_models import BaseChatModel

# Sent as the key when the user gave none: servers without a key ignore it,
# and the openai package would otherwise read OPENAI_API_KEY from the
# environment and send a real OpenAI key to this server.
NO_API_KEY: Final = "no-key"
# The smallest tool definition: a server that cannot call tools refuses it.
_PROBE_TOOL: Final = {
    "type": "function",
    "function": {
        "name": "get_state",
        "description": "Return the state of an entity.",
        "parameters": {
            "type": "object",
            "properties": {"entity_id": {"type": "string"}},
            "required": ["entity_id"],
        },
    },
}


# What the client packages raise for a 200 that is not the answer they
# expect (a web UI's HTML page at the address, JSON of another shape): the
# openai package does not validate answers, so it fails reading them; the
# ollama package builds its pydantic models from the JSON (ValidationError
# is a ValueError), or fails unpacking JSON that is not an object.
_NOT_THE_ANSWER: Final = (ValueError, TypeError, AttributeError)
_UNEXPECTED_EMBEDDINGS: Final = "Unexpected answer from /embeddings"


def _model_key(name: str) -> str:
    """Return a model name as Ollama lists it ("qwen3" is "qwen3:latest")."""
    return name if ":" in name else f"{name}:latest"


def normalize_ollama_url(url: str) -> str:
    """Return the canonical base URL of an Ollama server.

    The scheme and host are lower-cased, a default port and any path, query or
    fragment are dropped; credentials are kept. Raise InvalidUrl unless the
    URL is http(s) with a host.
    """
    parsed = parse_http_url(url, "http://192.168.1.10:11434")
    return str(parsed.with_path("").with_query(None).with_fragment(None))


def _ollama_client(url: str) -> ollama.AsyncClient:
    """Return the ``ollama`` client for the server at ``url``.

    The package takes no HTTP session (it builds its own httpx client) and
    drops credentials from the host, so they go in as Basic auth. No client
    timeout: each call has its own deadline for connect, send and read.
    """
    parsed = URL(url)
    auth = (
        httpx.BasicAuth(parsed.user or "", parsed.password or "")
        if parsed.user is not None
        else None
    )
    return ollama.AsyncClient(
        host=url_without_credentials(url), verify=get_default_context(), auth=auth
    )


class OllamaBackend:
    """An Ollama server, through its native API and the ``ollama`` package."""

    backend = Backend.OLLAMA

    def __init__(self, url: str, probe_timeout: float = OLLAMA_PROBE_TIMEOUT) -> None:
        """Talk to the Ollama server at ``url`` through one ``ollama`` client.

        ``probe_timeout`` bounds each question about the models (seconds).
        """
        self.url = url
        self.where = url_without_credentials(url)
        self.client = _ollama_client(url)
        self.probe_timeout = probe_timeout

    async def _async_call[T](
        self,
        call: Awaitable[T],
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - one deadline per call
    ) -> T:
        """Return what ``call`` answers, or raise this backend's error for it.

        ``timeout`` bounds connect, send and read together; None: the probes'.

        A 404 is ModelNotFound; no connection, a timeout, a server failure
        (5xx) or an answer that is not JSON is ServerUnreachable; another
        error status or an answer of another shape is ModelServerError.
        """
        where = f"{self.where}{path}"
        if timeout is None:
            timeout = self.probe_timeout
        try:
            async with asyncio.timeout(timeout):
                return await call
        except TimeoutError as err:
            msg = f"Timeout after {timeout} s waiting for {where}"
            raise ServerTimeout(msg) from err
        except ollama.ResponseError as err:
            msg = f"{where} answered HTTP {err.status_code}"
            if err.status_code == HTTPStatus.NOT_FOUND:
                raise ModelNotFound(msg) from err
            if err.status_code >= HTTPStatus.INTERNAL_SERVER_ERROR:
                raise ServerUnreachable(msg) from err
            raise ModelServerError(msg) from err
        except (ConnectionError, httpx.TransportError) as err:
            # The package turns a refused connection into ConnectionError.
            msg = f"Cannot reach {where}: {type(err).__name__}"
            raise ServerUnreachable(msg) from err
        except ValidationError as err:
            msg = f"Unexpected answer from {path}"
            raise ModelServerError(msg) from err
        except ValueError as err:
            msg = f"{where} did not answer JSON"
            raise ServerUnreachable(msg) from err
        except TypeError as err:
            msg = f"Unexpected answer from {path}"
            raise ModelServerError(msg) from err

    async def async_list_models(self) -> list[ServerModel]:
        """Return the installed models (GET /api/tags)."""
        try:
            answer = await self._async_call(self.client.list(), "/api/tags")
        except ModelNotFound as err:
            # A 404 here means the URL does not point at an Ollama server.
            raise ModelServerError(str(err)) from err
        models: list[ServerModel] = []
        for model in answer.models:
            if not model.model:
                continue
            size = model.details.parameter_size if model.details else None
            label = f"{model.model} ({size})" if size else model.model
            models.append(ServerModel(name=model.model, label=label))
        return models

    async def async_capabilities(self, model: str) -> tuple[str, ...]:
        """Return what Ollama reports the model can do (POST /api/show).

        Servers older than Ollama 0.6.4 report nothing: then the empty tuple.
        """
        try:
            answer = await self._async_call(self.client.show(model), "/api/show")
        except ModelNotFound as err:
            msg = f"The model {model} is not installed"
            raise ModelNotFound(msg) from err
        except ModelServerError as err:
            if isinstance(err.__cause__, ValidationError):
                # An object the package cannot read (it requires model_info):
                # the server does not say what the model can do.
                LOGGER.debug("Unreadable /api/show answer for %s: %s", model, err)
                return ()
            raise
        return tuple(answer.capabilities or ())

    async def async_supports_tools(self, model: str) -> bool:
        """Tell whether Ollama reports tool support (older servers report none)."""
        capabilities = await self.async_capabilities(model)
        return not capabilities or CAPABILITY_TOOLS in capabilities

    async def async_loading(self, model: str) -> bool:
        """Tell whether Ollama is still loading the model (not yet in /api/ps)."""
        try:
            answer = await self._async_call(self.client.ps(), "/api/ps")
        except ModelServerError as err:
            LOGGER.debug("Could not ask Ollama what it has loaded: %s", err)
            return False
        running = {
            _model_key(name)
            for entry in answer.models
            for name in (entry.model, entry.name)
            if name
        }
        return _model_key(model) not in running

    async def async_embed(
        self,
        model: str,
        texts: list[str],
        timeout: float,  # noqa: ASYNC109 - one deadline for the whole batch
    ) -> list[list[float]]:
        """Return one vector per text (POST /api/embed), in order."""
        try:
            answer = await self._async_call(
                self.client.embed(model, texts, truncate=True), "/api/embed", timeout
            )
        except ModelNotFound as err:
            msg = f"The embedding model {model} is not installed"
            raise ModelNotFound(msg) from err
        vectors = [[float(x) for x in vector] for vector in answer.embeddings]
        if len(vectors) != len(texts) or not all(vectors):
            msg = "Unexpected answer from /api/embed"
            raise ModelServerError(msg)
        return vectors

    async def async_close(self) -> None:
        """Close the client's connections (its own, unlike HA's shared ones)."""
        await self.client.close()  # type: ignore[no-untyped-call]

    def build_chat_model(self, model: str, settings: ChatSettings) -> BaseChatModel:
        """Create ChatOllama; blocking (imports, httpx clients): in the executor."""
        # LangChain takes about a second to import: never on the event loop.
        from langchain_ollama import ChatOllama  # noqa: PLC0415

        return ChatOllama(
            model=model,
            base_url=self.url,
            # Always the same num_ctx: a different value makes Ollama reload it.
            num_ctx=settings.num_ctx,
            # Every call has an output cap: a small model can talk until num_ctx
            # is full, minutes on home hardware.
            num_predict=settings.num_predict,
            keep_alive=settings.keep_alive,
            # Thinking costs seconds per turn on home hardware and is not shown.
            reasoning=False,
            # The graph measures the silence of each answer itself (a model
            # still loading gets longer); the client only bounds connecting,
            # and gives up on a read well after that.
            client_kwargs={
                "timeout": httpx.Timeout(
                    settings.timeout + MAX_LOADING_WAIT, connect=settings.timeout
                ),
                "verify": get_default_context(),
            },
        )

    def chat_error(self, err: BaseException) -> ModelServerError | None:
        """Map the ``ollama`` package's HTTP errors (ChatOllama raises them)."""
        if not isinstance(err, ollama.ResponseError):
            return None
        if err.status_code == HTTPStatus.NOT_FOUND:
            return ModelNotFound("model not found")
        return ModelServerError(f"HTTP {err.status_code}: {err.error}")


def normalize_base_url(url: str) -> str:
    """Return the canonical base URL of an OpenAI-compatible server.

    The scheme and host are lower-cased and a default port, query, fragment
    and trailing slash are dropped; a URL without a path gets ``/v1``, where
    every such server serves the API. Credentials are kept. Raise InvalidUrl
    unless the URL is http(s) with a host.
    """
    parsed = parse_http_url(url, "http://192.168.1.10:8000/v1")
    path = parsed.path.rstrip("/") or "/v1"
    return str(parsed.with_path(path).with_query(None).with_fragment(None))


class OpenAIBackend:
    """A server speaking OpenAI's API: llama-server, vLLM, LocalAI, LM Studio."""

    backend = Backend.OPENAI_COMPATIBLE

    def __init__(self, hass: HomeAssistant, base_url: str, api_key: str | None) -> None:
        """Create the one client; HA's shared httpx client does the I/O."""
        self.hass = hass
        self.base_url = base_url
        self.where = url_without_credentials(base_url)
        self._api_key = api_key or NO_API_KEY
        self.client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=self._api_key,
            # The graph retries what is worth retrying; a silent retry would
            # make a slow server evaluate the whole prompt again.
            max_retries=0,
            timeout=OLLAMA_PROBE_TIMEOUT,
            # openai 3 speaks httpx2 and takes HA's httpx client at run time
            # only (as HA's own openai_conversation does).
            http_client=cast("Any", get_async_client(hass)),
        )

    async def async_prepare(self) -> None:
        """Read what the client sends about the platform, off the event loop."""
        await self.hass.async_add_executor_job(self.client.platform_headers)

    async def async_list_models(self) -> list[ServerModel]:
        """Return the served models (GET /models)."""
        try:
            page = await self.client.models.list()
            return [ServerModel(name=model.id, label=model.id) for model in page.data]
        except openai.NotFoundError as err:
            # No /models here: the URL does not point at such a server.
            msg = f"{self.where} has no /models"
            raise ServerUnreachable(msg) from err
        except openai.OpenAIError as err:
            raise _server_error(err, self.where) from err
        except _NOT_THE_ANSWER as err:
            msg = f"{self.where} did not answer with a model list"
            raise ServerUnreachable(msg) from err

    async def async_capabilities(self, model: str) -> tuple[str, ...]:
        """Return nothing: /models says only which models exist.

        Raise ModelNotFound if the server does not list the model.
        """
        if model not in {entry.name for entry in await self.async_list_models()}:
            msg = f"{self.where} does not serve {model}"
            raise ModelNotFound(msg)
        return ()

    async def async_supports_tools(self, model: str) -> bool:
        """Ask for one token with one tool: a server without tool calls refuses.

        llama-server without ``--jinja`` and vLLM without
        ``--enable-auto-tool-choice`` answer the request with an error that
        names the tools; any other refusal is raised.
        """
        try:
            await self.client.chat.completions.create(
                model=model,
                messages=[{"role": "user", "content": "Say OK."}],
                tools=[_PROBE_TOOL],  # type: ignore[list-item]
                max_tokens=1,
                stream=False,
                timeout=TOOL_PROBE_TIMEOUT,
            )
        except openai.APIStatusError as err:
            if _refuses_tools(err):
                LOGGER.debug("%s cannot call tools: %s", model, err.message)
                return False
            raise _server_error(err, self.where) from err
        except openai.OpenAIError as err:
            raise _server_error(err, self.where) from err
        return True

    async def async_loading(self, model: str) -> bool:  # noqa: ARG002 - the protocol
        """Tell whether the server is loading a model: /health answers 503.

        OpenAI's API says nothing about loading; llama-server (and vLLM
        while it starts) answer 503 at /health meanwhile. Anything else,
        including a server without /health, is not loading.
        """
        # Hand-written on HA's httpx client, the one call here that is:
        # /health is llama-server's and vLLM's own, outside OpenAI's API, and
        # the openai package has no call for it.
        url = URL(self.base_url)
        path = url.path.removesuffix("/v1")
        try:
            response = await get_async_client(self.hass).get(
                str(url.with_path(f"{path}/health")), timeout=OLLAMA_PROBE_TIMEOUT
            )
        except httpx.HTTPError as err:
            LOGGER.debug("Could not ask %s whether it is loading: %s", self.where, err)
            return False
        return response.status_code == HTTPStatus.SERVICE_UNAVAILABLE

    async def async_embed(
        self,
        model: str,
        texts: list[str],
        timeout: float,  # noqa: ASYNC109 - one deadline for the whole batch
    ) -> list[list[float]]:
        """Return one vector per text (POST /embeddings), in order."""
        try:
            response = await self.client.embeddings.create(
                model=model,
                input=texts,
                # The package asks for base64 by default, which not every
                # server speaks; floats are what all of them answer.
                encoding_format="float",
                timeout=timeout,
            )
            vectors = [
                [float(x) for x in item.embedding]
                for item in sorted(response.data, key=_index)
            ]
        except openai.OpenAIError as err:
            raise _server_error(err, self.where) from err
        except _NOT_THE_ANSWER as err:
            raise ModelServerError(_UNEXPECTED_EMBEDDINGS) from err
        if len(vectors) != len(texts) or not all(vectors):
            raise ModelServerError(_UNEXPECTED_EMBEDDINGS)
        return vectors

    async def async_close(self) -> None:
        """Close nothing: the connections are HA's shared httpx client's."""

    def build_chat_model(self, model: str, settings: ChatSettings) -> BaseChatModel:
        """Create ChatOpenAI on this backend's client; blocking: in the executor."""
        # LangChain takes about a second to import: never on the event loop.
        from langchain_openai import ChatOpenAI  # noqa: PLC0415

        client = self.client.with_options(
            # The graph measures the silence of each answer itself; the
            # client only bounds connecting, and gives up on a read well
            # after that.
            timeout=openai.Timeout(
                settings.timeout + MAX_LOADING_WAIT, connect=settings.timeout
            )
        )
        extra: dict[str, Any] = {
            # ChatOpenAI sends the cap as max_completion_tokens, which some
            # servers ignore; max_tokens is what all of them read.
            "max_tokens": settings.num_predict,
            # Thinking costs seconds per turn and is not shown: llama-server
            # and vLLM pass this to the model's chat template (Qwen3 and
            # others read it); other servers ignore it.
            "chat_template_kwargs": {"enable_thinking": False},
            **(settings.extra or {}),
        }
        return ChatOpenAI(
            model=model,
            base_url=self.base_url,
            api_key=self._api_key,  # type: ignore[arg-type]
            root_async_client=client,
            async_client=client.chat.completions,
            max_completion_tokens=settings.num_predict,
            max_retries=0,
            # Token counts after the stream: they calibrate the token budget.
            stream_usage=True,
            extra_body=extra,
        )

    def chat_error(  # noqa: PLR0911 - one return per kind of failure
        self, err: BaseException
    ) -> ModelServerError | None:
        """Map the ``openai`` package's errors (ChatOpenAI raises them).

        Unlike the checks, a chat request the server failed (5xx) is an
        error of that request, not an unreachable server.
        """
        if isinstance(err, openai.APITimeoutError):
            return ServerTimeout("no answer within the request timeout")
        if isinstance(err, openai.APIConnectionError):
            return ServerUnreachable(f"connection failed ({type(err).__name__})")
        if isinstance(err, openai.AuthenticationError | openai.PermissionDeniedError):
            return AuthFailed(f"HTTP {err.status_code}: the API key was refused")
        if isinstance(err, openai.NotFoundError):
            return ModelNotFound("model not found")
        if isinstance(err, openai.APIStatusError):
            reason = f"HTTP {err.status_code}: {err.message}"
            if _refuses_tools(err):
                return ToolsRefused(reason)
            return ModelServerError(reason)
        return None


def _refuses_tools(err: openai.APIStatusError) -> bool:
    """Tell whether the server refused a request because it carried tools.

    llama-server without ``--jinja`` answers 500 "tools param requires
    --jinja flag"; vLLM without ``--enable-auto-tool-choice`` answers 400
    naming it. A tool call the model wrote badly is not this (the graph
    corrects the model instead).
    """
    return (
        err.status_code
        in {
            HTTPStatus.BAD_REQUEST,
            HTTPStatus.INTERNAL_SERVER_ERROR,
            HTTPStatus.NOT_IMPLEMENTED,
        }
        and "tool" in str(err.message).lower()
        and not is_bad_tool_call(err)
    )


def _index(item: Any) -> int:
    return int(item.index)


def _server_error(err: openai.OpenAIError, where: str) -> ModelServerError:
    """Return the ModelServerError that stands for one of the package's errors."""
    if isinstance(err, openai.APIConnectionError):
        return ServerUnreachable(f"Cannot reach {where}: {err}")
    if isinstance(err, openai.AuthenticationError | openai.PermissionDeniedError):
        return AuthFailed(f"{where} refused the API key (HTTP {err.status_code})")
    if isinstance(err, openai.NotFoundError):
        return ModelNotFound(f"{where}: {err.message}")
    if isinstance(err, openai.APIStatusError):
        if err.status_code >= HTTPStatus.INTERNAL_SERVER_ERROR:
            return ServerUnreachable(f"{where} answered HTTP {err.status_code}")
        return ModelServerError(f"{where} answered HTTP {err.status_code}")
    return ServerUnreachable(f"{where}: {err}")


def entry_url(data: Mapping[str, Any]) -> str:
    """Return the server URL of an entry's data, whichever the backend."""
    if data.get(CONF_BACKEND) == Backend.OPENAI_COMPATIBLE:
        return str(data[CONF_BASE_URL])
    return str(data[CONF_OLLAMA_URL])


async def async_create_backend(
    hass: HomeAssistant, data: Mapping[str, Any]
) -> ModelBackend:
    """Return the backend an entry's data describes; ``backend`` absent: Ollama."""
    if data.get(CONF_BACKEND) == Backend.OPENAI_COMPATIBLE:
        backend = OpenAIBackend(hass, data[CONF_BASE_URL], data.get(CONF_API_KEY))
        await backend.async_prepare()
        return backend
    return OllamaBackend(data[CONF_OLLAMA_URL])
