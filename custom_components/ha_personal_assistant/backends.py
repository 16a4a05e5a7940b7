"""The two kinds of model server: Ollama, and servers speaking OpenAI's API.

Ollama: the model list, capabilities, loaded models and embeddings go
through ``ollama_api`` on HA's shared aiohttp session; the chat model is
langchain-ollama's ChatOllama, whose own client is the ``ollama`` package.

OpenAI-compatible servers (llama.cpp's llama-server, vLLM, LocalAI, LM
Studio): one ``openai.AsyncOpenAI`` client on HA's shared httpx client serves
everything, and langchain-openai's ChatOpenAI is built on that same client.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Final, cast

import httpx
import openai
from homeassistant.helpers.aiohttp_client import async_get_clientsession
from homeassistant.helpers.httpx_client import get_async_client
from homeassistant.util.ssl import get_default_context
from ollama import ResponseError
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
    AuthFailed,
    Backend,
    ChatSettings,
    Failure,
    ModelBackend,
    ModelNotFound,
    ModelServerError,
    ServerModel,
    ServerUnreachable,
    is_bad_tool_call,
)
from .ollama_api import (
    CAPABILITY_TOOLS,
    InvalidOllamaUrl,
    async_embed,
    async_list_models,
    async_running_models,
    async_show_model,
    url_without_credentials,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from homeassistant.core import HomeAssistant
    from langchain_core.language_models import BaseChatModel

# Sent as the key when the user gave none: servers without a key ignore it,
# and the openai package would otherwise read OPENAI_API_KEY from the
# environment and send a real OpenAI key to this server.
NO_API_KEY: Final = "no-key"
_SCHEMES: Final = frozenset({"http", "https"})
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


# What the openai package raises for a 200 that is not the answer it expects
# (a web UI's HTML page at the address, JSON of another shape): it does not
# validate answers, so it fails reading them.
_NOT_THE_ANSWER: Final = (ValueError, TypeError, AttributeError)
_UNEXPECTED_EMBEDDINGS: Final = "Unexpected answer from /embeddings"


def _model_key(name: str) -> str:
    """Return a model name as Ollama lists it ("qwen3" is "qwen3:latest")."""
    return name if ":" in name else f"{name}:latest"


class OllamaBackend:
    """An Ollama server, through its native API."""

    backend = Backend.OLLAMA

    def __init__(self, hass: HomeAssistant, url: str) -> None:
        """Talk to the Ollama server at ``url`` with HA's shared web session."""
        self.hass = hass
        self.url = url
        self.where = url_without_credentials(url)

    async def async_list_models(self) -> list[ServerModel]:
        """Return the installed models (GET /api/tags)."""
        return [
            ServerModel(
                name=model.name,
                label=(
                    f"{model.name} ({model.parameter_size})"
                    if model.parameter_size
                    else model.name
                ),
            )
            for model in await async_list_models(
                async_get_clientsession(self.hass), self.url
            )
        ]

    async def async_capabilities(self, model: str) -> tuple[str, ...]:
        """Return what Ollama reports the model can do (POST /api/show)."""
        info = await async_show_model(
            async_get_clientsession(self.hass), self.url, model
        )
        return info.capabilities

    async def async_supports_tools(self, model: str) -> bool:
        """Tell whether Ollama reports tool support (older servers report none)."""
        capabilities = await self.async_capabilities(model)
        return not capabilities or CAPABILITY_TOOLS in capabilities

    async def async_loading(self, model: str) -> bool:
        """Tell whether Ollama is still loading the model (not yet in /api/ps)."""
        try:
            running = await async_running_models(
                async_get_clientsession(self.hass), self.url
            )
        except ModelServerError as err:
            LOGGER.debug("Could not ask Ollama what it has loaded: %s", err)
            return False
        return _model_key(model) not in {_model_key(name) for name in running}

    async def async_embed(
        self,
        model: str,
        texts: list[str],
        timeout: float,  # noqa: ASYNC109 - one deadline for the whole batch
    ) -> list[list[float]]:
        """Return one vector per text (POST /api/embed)."""
        return await async_embed(
            async_get_clientsession(self.hass), self.url, model, texts, timeout
        )

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

    def classify(self, err: BaseException) -> tuple[Failure, str] | None:
        """Explain the ``ollama`` package's HTTP errors (ChatOllama raises them)."""
        if not isinstance(err, ResponseError):
            return None
        if err.status_code == HTTPStatus.NOT_FOUND:
            return Failure.MODEL_MISSING, "model not found"
        return Failure.ERROR, f"HTTP {err.status_code}: {err.error}"


def normalize_base_url(url: str) -> str:
    """Return the canonical base URL of an OpenAI-compatible server.

    The scheme and host are lower-cased and a default port, query, fragment
    and trailing slash are dropped; a URL without a path gets ``/v1``, where
    every such server serves the API. Credentials are kept. Raise
    InvalidOllamaUrl unless the URL is http(s) with a host.
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
        msg = "Expected a URL like http://192.168.1.10:8000/v1"
        raise InvalidOllamaUrl(msg)
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

    def classify(  # noqa: PLR0911 - one return per kind of failure
        self, err: BaseException
    ) -> tuple[Failure, str] | None:
        """Explain the ``openai`` package's errors (ChatOpenAI raises them)."""
        if isinstance(err, openai.APITimeoutError):
            return Failure.TIMEOUT, "no answer within the request timeout"
        if isinstance(err, openai.APIConnectionError):
            return Failure.UNREACHABLE, f"connection failed ({type(err).__name__})"
        if isinstance(err, openai.AuthenticationError | openai.PermissionDeniedError):
            return Failure.AUTH, f"HTTP {err.status_code}: the API key was refused"
        if isinstance(err, openai.NotFoundError):
            return Failure.MODEL_MISSING, "model not found"
        if isinstance(err, openai.APIStatusError):
            reason = f"HTTP {err.status_code}: {err.message}"
            if _refuses_tools(err):
                return Failure.NO_TOOLS, reason
            return Failure.ERROR, reason
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
    return OllamaBackend(hass, data[CONF_OLLAMA_URL])
