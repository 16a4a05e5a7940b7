"""A fake Ollama server that speaks Ollama's real HTTP API.

The server is a small aiohttp application bound to 127.0.0.1 on a free port,
running inside the test's own event loop. ChatOllama, OllamaEmbeddings and
``ollama.AsyncClient`` talk to it over real HTTP, unmodified, so tests exercise
the same request/response shapes, NDJSON streaming, HTTP errors and timeouts a
real Ollama produces.

Tests script the model's answers with a queue consumed one per ``/api/chat``
request::

    fake_ollama.reply("Hello!")                          # streamed text
    fake_ollama.tool_call("get_state", {"entity_id": "light.kitchen"})
    fake_ollama.tool_calls([("get_state", {...}), ("list_entities", {})])
    fake_ollama.error(500, "model runner crashed")       # HTTP error
    fake_ollama.delay(0.2).reply("slow")                 # wait, then answer
    fake_ollama.hang()                                   # never answers
    fake_ollama.cut("partial answer")                    # stream, then abort

When the queue is empty, :attr:`FakeOllama.default` answers (text ``"OK"``).
Requests the real server would refuse before running the model (unknown
model: 404; chat with an embedding model, or ``tools`` for a model without
the ``tools`` capability: 400) are refused the same way and consume nothing
from the queue. Stopping the server drops the connections of hanging or
delayed requests, like a real Ollama going away.
Every request is recorded (:attr:`FakeOllama.chat_requests`,
:attr:`FakeOllama.embed_requests`, :attr:`FakeOllama.requests`). A prompt
warm-up (a chat whose output cap is one token: ``num_predict``, or OpenAI's
``max_tokens``, of 1, and whose last message is a dot) is answered at once
with a dot, consumes nothing from the queue and is recorded in
:attr:`FakeOllama.warmup_requests` only: the tests that script turns and
background calls never see it.

Shapes follow Ollama's ``api/types.go``: ``/api/tags`` models carry ``name``,
``model``, ``modified_at``, ``size``, ``digest`` and ``details``; ``/api/show``
returns ``details``, ``model_info``, ``template``, ``parameters`` and
``capabilities``; chat chunks carry ``model``, ``created_at``, ``message`` and
``done``, and the final chunk adds ``done_reason`` and the timing/count
metrics; tool calls are ``{"id", "function": {"index", "name", "arguments"}}``
with ``arguments`` a JSON object (not a string, unlike OpenAI's API).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import itertools
import json
import math
import random
import re
from collections import deque
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import pytest
from aiohttp import web

OLLAMA_VERSION: Final = "0.13.0"
DEFAULT_EMBEDDING_DIM: Final = 768
DEFAULT_TEXT_CHUNKS: Final = 3

# Real Ollama always lists models with a tag; a bare name means ":latest".
_DEFAULT_TAG: Final = "latest"
_WORD_RE: Final = re.compile(r"\S+\s*|\s+")
_TOKEN_RE: Final = re.compile(r"\w+")

type JsonDict = dict[str, Any]
type ToolCallSpec = tuple[str, Mapping[str, Any]]
type DefaultResponder = Callable[[JsonDict], "OllamaReply | str"]


def normalize_model_name(name: str) -> str:
    """Return ``name`` with Ollama's implicit ``:latest`` tag added.

    Ollama treats ``nomic-embed-text`` and ``nomic-embed-text:latest`` as the
    same model and always reports the tagged form, so lookups must too.
    """
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:{_DEFAULT_TAG}"


def _now_iso() -> str:
    """Return the current UTC time the way Ollama formats ``created_at``."""
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


@dataclass
class FakeModel:
    """An installed model as listed by ``/api/tags`` and ``/api/show``.

    ``capabilities`` uses Ollama's vocabulary: ``completion``, ``tools``,
    ``thinking``, ``vision``, ``insert``, ``embedding``.
    """

    name: str
    capabilities: list[str]
    family: str = "llama"
    parameter_size: str = "1B"
    quantization_level: str = "Q4_K_M"
    context_length: int = 8192
    size: int = 1_000_000_000
    template: str = "{{ .Prompt }}"
    # Vector size of an embedding model; None: the server's default.
    embedding_length: int | None = None

    @property
    def digest(self) -> str:
        """A stable fake sha256 digest derived from the model name."""
        return hashlib.sha256(self.name.encode()).hexdigest()

    def details(self) -> JsonDict:
        """Return the ``details`` object Ollama attaches to a model."""
        return {
            "parent_model": "",
            "format": "gguf",
            "family": self.family,
            "families": [self.family],
            "parameter_size": self.parameter_size,
            "quantization_level": self.quantization_level,
        }


def default_models() -> dict[str, FakeModel]:
    """Return the models a fresh :class:`FakeOllama` has installed.

    A tool-capable chat model, a chat model without tools (to exercise the
    "model cannot call tools" paths) and an embedding-only model.
    """
    models = [
        FakeModel(
            "qwen3:4b",
            ["completion", "tools", "thinking"],
            family="qwen3",
            parameter_size="4.0B",
            context_length=40960,
            size=2_497_293_931,
            template="{{- if .Tools }}<tools>{{ .Tools }}</tools>{{ end }}",
        ),
        FakeModel(
            "gemma:2b",
            ["completion"],
            family="gemma",
            parameter_size="3B",
            quantization_level="Q4_0",
            size=1_678_456_656,
        ),
        FakeModel(
            "nomic-embed-text:latest",
            ["embedding"],
            family="nomic-bert",
            parameter_size="137M",
            quantization_level="F16",
            context_length=2048,
            size=274_302_450,
        ),
    ]
    return {model.name: model for model in models}


@dataclass(frozen=True)
class OllamaReply:
    """One scripted answer to one ``/api/chat`` request.

    Build these with :func:`text_reply`, :func:`tool_call_reply`,
    :func:`error_reply`, :func:`hang_reply` and :func:`cut_reply`, or through
    the :class:`FakeOllama` shortcuts that enqueue them.
    """

    content: str = ""
    tool_calls: tuple[ToolCallSpec, ...] = ()
    thinking: str | None = None
    # None: use FakeOllama.text_chunks; int: split into that many chunks;
    # a sequence: stream exactly these pieces.
    text_chunks: int | tuple[str, ...] | None = None
    delay: float = 0.0
    done_reason: str = "stop"
    error_status: int | None = None
    error_message: str = ""
    hang: bool = False
    # Abort the connection after this many NDJSON lines (never sends "done").
    cut_after: int | None = None
    # Stop sending after this many NDJSON lines and keep the connection open
    # until the server stops (a model that hangs mid-answer).
    stall_after: int | None = None
    # Seconds between streamed chunks, like a model writing slowly.
    chunk_delay: float = 0.0
    # Seconds the model takes to load first: meanwhile /api/ps does not list
    # it and nothing is sent, as with a real Ollama.
    load: float = 0.0
    # End the stream cleanly after this many lines, without the final
    # ``done`` one (0: a 200 answer with an empty body, as a proxy that gave
    # up on the request sends).
    end_after: int | None = None


def text_reply(
    text: str,
    *,
    text_chunks: int | Sequence[str] | None = None,
    thinking: str | None = None,
    delay: float = 0.0,
    done_reason: str = "stop",
    chunk_delay: float = 0.0,
) -> OllamaReply:
    """Build a plain text answer, streamed over several NDJSON chunks.

    ``text_chunks`` as a sequence must join back to ``text``; this catches a
    test that scripts pieces and a text that disagree.
    """
    chunks: int | tuple[str, ...] | None
    if text_chunks is None or isinstance(text_chunks, int):
        chunks = text_chunks
    else:
        chunks = tuple(text_chunks)
        if "".join(chunks) != text:
            msg = "text_chunks must join back to text"
            raise ValueError(msg)
    return OllamaReply(
        content=text,
        text_chunks=chunks,
        thinking=thinking,
        delay=delay,
        done_reason=done_reason,
        chunk_delay=chunk_delay,
    )


def tool_call_reply(
    calls: Iterable[ToolCallSpec | Mapping[str, Any]],
    *,
    content: str = "",
    thinking: str | None = None,
    delay: float = 0.0,
) -> OllamaReply:
    """Build an answer that calls one or more tools.

    Each call is ``(name, arguments)`` or ``{"name": ..., "arguments": ...}``.
    """
    specs: list[ToolCallSpec] = []
    for call in calls:
        if isinstance(call, Mapping):
            specs.append((str(call["name"]), dict(call.get("arguments") or {})))
        else:
            name, arguments = call
            specs.append((name, dict(arguments)))
    if not specs:
        msg = "a tool call reply needs at least one call"
        raise ValueError(msg)
    return OllamaReply(
        content=content, tool_calls=tuple(specs), thinking=thinking, delay=delay
    )


def error_reply(status: int, message: str, *, delay: float = 0.0) -> OllamaReply:
    """Build an HTTP error answer with Ollama's ``{"error": message}`` body."""
    return OllamaReply(error_status=status, error_message=message, delay=delay)


def hang_reply() -> OllamaReply:
    """Build an answer that never comes; stopping the server drops it."""
    return OllamaReply(hang=True)


def cut_reply(
    text: str = "partial answer that never", *, after_chunks: int = 2
) -> OllamaReply:
    """Build a streamed answer whose connection is aborted mid-stream.

    ``after_chunks`` NDJSON lines of ``text`` are sent, then the TCP
    connection is dropped without the final ``done`` chunk, as when Ollama
    crashes or the network fails.
    """
    return OllamaReply(
        content=text, text_chunks=max(after_chunks, 1) + 1, cut_after=after_chunks
    )


def stall_reply(
    text: str = "partial answer that never", *, after_chunks: int = 2
) -> OllamaReply:
    """Build a streamed answer that stops mid-stream with the connection open."""
    return OllamaReply(
        content=text, text_chunks=max(after_chunks, 1) + 1, stall_after=after_chunks
    )


@dataclass
class _Delay:
    """A queue marker: wait this long before answering the next request."""

    seconds: float


@dataclass
class RecordedRequest:
    """One HTTP request the fake server received."""

    method: str
    path: str
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


def line_bytes(line: JsonDict) -> bytes:
    """Return one NDJSON line."""
    return json.dumps(line).encode() + b"\n"


def split_text(text: str, pieces: int) -> list[str]:
    """Split ``text`` into at most ``pieces`` chunks at word boundaries.

    Real Ollama streams one token per chunk; a few word-aligned chunks are
    enough to prove a client reassembles a stream without making tests slow.
    """
    if not text:
        return []
    words = _WORD_RE.findall(text)
    pieces = max(1, min(pieces, len(words)))
    size = math.ceil(len(words) / pieces)
    return ["".join(words[i : i + size]) for i in range(0, len(words), size)]


class FakeOllama:
    """A scriptable Ollama server on 127.0.0.1 speaking the real HTTP API.

    Start it with :meth:`start` (the ``fake_ollama`` fixture does) and stop it
    with :meth:`stop`; :attr:`url` is the base URL to give ChatOllama.
    """

    def __init__(
        self,
        *,
        embedding_dim: int = DEFAULT_EMBEDDING_DIM,
        text_chunks: int = DEFAULT_TEXT_CHUNKS,
    ) -> None:
        """Create a stopped server with the default models installed."""
        self.models: dict[str, FakeModel] = default_models()
        self.embedding_dim = embedding_dim
        self.text_chunks = text_chunks
        self.version = OLLAMA_VERSION
        # Real Ollama >= 0.12 tags each tool call with an id and an index;
        # older servers omit both, and the python client ignores them.
        self.tool_call_ids = True
        self.default: DefaultResponder = self._answer_ok
        self.requests: list[RecordedRequest] = []
        self.chat_requests: list[JsonDict] = []
        # Chats with an output cap of one token (prompt warm-ups).
        self.warmup_requests: list[JsonDict] = []
        self.embed_requests: list[JsonDict] = []
        self.show_requests: list[JsonDict] = []
        # Models in memory, as /api/ps lists them (loaded by their first chat).
        self.loaded: set[str] = set()
        # Answers cut at the request's num_predict.
        self.capped = 0
        # Streamed answers the client closed before their last line, with the
        # lines it had been sent by then (a real server stops generating).
        self.closed_early: list[int] = []
        self.stream_closed = asyncio.Event()
        self._queue: deque[OllamaReply | _Delay] = deque()
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        # Set by stop(): wakes hanging and delayed handlers so shutdown never
        # waits on them and no handler task outlives the test.
        self._closing = asyncio.Event()
        self._call_ids = itertools.count(1)
        self._token_vectors: dict[str, list[float]] = {}
        # How the model's tokenizer counts a chat request (``prompt_eval_count``);
        # None: the words of the messages, a rough stand-in.
        self.prompt_tokens: Callable[[JsonDict], int] | None = None
        # Seconds each /api/embed request takes (a slow or busy server), or
        # a function of the request's inputs; stop() drops the ones waiting.
        self.embed_delay: float | Callable[[list[str]], float] = 0.0
        # An Ollama older than 0.1.38 has no /api/ps: it answers 404.
        self.no_ps = False
        # Seconds /api/tags takes (a server still starting with the house).
        self.tags_delay = 0.0

    # ------------------------------------------------------------------ setup

    @property
    def url(self) -> str:
        """Base URL of the running server, e.g. ``http://127.0.0.1:43117``."""
        if self._port is None:
            msg = "FakeOllama is not running"
            raise RuntimeError(msg)
        return f"http://127.0.0.1:{self._port}"

    async def start(self, port: int = 0) -> None:
        """Bind to ``port`` (a free one by default) on 127.0.0.1 and serve.

        Passing the old port after :meth:`stop` brings "Ollama" back at the
        same URL, as when a real server restarts.
        """
        self._closing = asyncio.Event()
        app = web.Application()
        app.router.add_get("/", self._handle_root)
        app.router.add_get("/api/version", self._handle_version)
        app.router.add_get("/api/tags", self._handle_tags)
        app.router.add_get("/api/ps", self._handle_ps)
        app.router.add_post("/api/show", self._handle_show)
        app.router.add_post("/api/chat", self._handle_chat)
        app.router.add_post("/api/embed", self._handle_embed)
        self._routes(app)
        # A short shutdown timeout: handlers are woken by _closing anyway,
        # so anything still running after it is a bug worth cutting short.
        self._runner = web.AppRunner(
            app, handle_signals=False, access_log=None, shutdown_timeout=1.0
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        self._port = int(self._runner.addresses[0][1])

    def _routes(self, app: web.Application) -> None:
        """Add more routes (a subclass serving another API does)."""

    async def stop(self) -> None:
        """Stop serving; wakes any hanging handler first. Idempotent."""
        self._closing.set()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    # -------------------------------------------------------------- scripting

    def enqueue(self, reply: OllamaReply | str) -> FakeOllama:
        """Queue a reply (a plain string is a text reply) for the next chat."""
        self._queue.append(text_reply(reply) if isinstance(reply, str) else reply)
        return self

    def reply(
        self,
        text: str,
        *,
        text_chunks: int | Sequence[str] | None = None,
        thinking: str | None = None,
        delay: float = 0.0,
        chunk_delay: float = 0.0,
    ) -> FakeOllama:
        """Queue a streamed text answer (``chunk_delay`` seconds between chunks)."""
        return self.enqueue(
            text_reply(
                text,
                text_chunks=text_chunks,
                thinking=thinking,
                delay=delay,
                chunk_delay=chunk_delay,
            )
        )

    def tool_call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        content: str = "",
        delay: float = 0.0,
    ) -> FakeOllama:
        """Queue an answer calling one tool."""
        return self.enqueue(
            tool_call_reply([(name, arguments or {})], content=content, delay=delay)
        )

    def tool_calls(
        self,
        calls: Iterable[ToolCallSpec | Mapping[str, Any]],
        *,
        content: str = "",
        delay: float = 0.0,
    ) -> FakeOllama:
        """Queue one answer calling several tools at once."""
        return self.enqueue(tool_call_reply(calls, content=content, delay=delay))

    def error(self, status: int, message: str) -> FakeOllama:
        """Queue an HTTP error answer with body ``{"error": message}``."""
        return self.enqueue(error_reply(status, message))

    def hang(self) -> FakeOllama:
        """Queue an answer that never comes; :meth:`stop` drops it."""
        return self.enqueue(hang_reply())

    def cut(
        self, text: str = "partial answer that never", *, after_chunks: int = 2
    ) -> FakeOllama:
        """Queue a streamed answer whose connection drops mid-stream."""
        return self.enqueue(cut_reply(text, after_chunks=after_chunks))

    def delay(self, seconds: float) -> FakeOllama:
        """Make the next chat request wait ``seconds`` before it is answered.

        Applies to whatever answers that request: the next queued reply, or
        the default responder when the queue holds nothing else.
        """
        self._queue.append(_Delay(seconds))
        return self

    @property
    def pending_replies(self) -> int:
        """Number of scripted replies not yet consumed."""
        return sum(1 for item in self._queue if isinstance(item, OllamaReply))

    def add_model(
        self, name: str, capabilities: Sequence[str], **details: Any
    ) -> FakeModel:
        """Install a model (``details`` are :class:`FakeModel` fields)."""
        model = FakeModel(normalize_model_name(name), list(capabilities), **details)
        self.models[model.name] = model
        return model

    def remove_model(self, name: str) -> None:
        """Uninstall a model; later requests for it get a 404."""
        self.models.pop(normalize_model_name(name), None)

    def get_model(self, name: str) -> FakeModel | None:
        """Return an installed model by (tagged or bare) name."""
        return self.models.get(normalize_model_name(name))

    # ------------------------------------------------------------- inspection

    @property
    def last_chat_request(self) -> JsonDict:
        """The body of the most recent ``/api/chat`` request."""
        if not self.chat_requests:
            msg = "no /api/chat request was received"
            raise AssertionError(msg)
        return self.chat_requests[-1]

    def images_received(self, request: JsonDict | None = None) -> list[str]:
        """Return the base64 images a chat request carried (default: the last).

        Ollama's API sends them in a message's ``images``; OpenAI's as
        ``image_url`` content parts with data URLs. Both are read.
        """
        body = self.last_chat_request if request is None else request
        images: list[str] = []
        for message in body.get("messages") or []:
            images.extend(message.get("images") or [])
            content = message.get("content")
            for part in content if isinstance(content, list) else []:
                url = str((part.get("image_url") or {}).get("url", ""))
                if part.get("type") == "image_url" and url.startswith("data:"):
                    images.append(url.split(",", 1)[1])
        return images

    def response_schema(self, request: JsonDict | None = None) -> JsonDict | None:
        """Return the JSON schema a chat request asked the answer to follow.

        Ollama's ``format`` holds it; OpenAI's ``response_format`` wraps it.
        """
        body = self.last_chat_request if request is None else request
        if isinstance(body.get("format"), dict):
            return dict(body["format"])
        wrapped = (body.get("response_format") or {}).get("json_schema") or {}
        schema = wrapped.get("schema")
        return dict(schema) if isinstance(schema, dict) else None

    async def wait_for_chat_requests(
        self,
        count: int = 1,
        timeout: float = 10.0,  # noqa: ASYNC109 -- polls; no awaited call to wrap
    ) -> list[JsonDict]:
        """Wait (real time, short polls) until ``count`` chats were received."""
        for _ in range(max(1, math.ceil(timeout / 0.01))):
            if len(self.chat_requests) >= count:
                return self.chat_requests
            await asyncio.sleep(0.01)
        msg = f"expected {count} /api/chat requests, got {len(self.chat_requests)}"
        raise AssertionError(msg)

    def embedding_for(self, text: str, dim: int | None = None) -> list[float]:
        """Return the vector ``/api/embed`` gives for ``text``.

        A normalised bag of per-word pseudo-random vectors, each seeded by
        the word's sha256: deterministic, and texts sharing words have a
        higher cosine similarity, so retrieval tests can rank results.
        """
        dim = dim or self.embedding_dim
        tokens = _TOKEN_RE.findall(text.lower()) or [text]
        total = [0.0] * dim
        for token in tokens:
            vector = self._token_vector(token, dim)
            total = [a + b for a, b in zip(total, vector, strict=True)]
        norm = math.sqrt(sum(value * value for value in total)) or 1.0
        return [value / norm for value in total]

    def _token_vector(self, token: str, dim: int) -> list[float]:
        """Return the cached pseudo-random vector of one token."""
        key = f"{dim}:{token}"
        if (vector := self._token_vectors.get(key)) is None:
            seed = int.from_bytes(hashlib.sha256(token.encode()).digest()[:8])
            # Reproducible test data, not cryptography.
            rng = random.Random(seed)  # noqa: S311
            vector = [rng.gauss(0.0, 1.0) for _ in range(dim)]
            self._token_vectors[key] = vector
        return vector

    # --------------------------------------------------------------- handlers

    @staticmethod
    def _answer_ok(_request: JsonDict) -> OllamaReply | str:
        """Answer every request with a plain ``OK`` (the default responder)."""
        return "OK"

    @staticmethod
    def _error(status: int, message: str) -> web.Response:
        """Return an error the way Ollama does: JSON ``{"error": ...}``."""
        return web.json_response({"error": message}, status=status)

    async def _read_json(self, request: web.Request) -> JsonDict | web.Response:
        """Decode and record a JSON body, or return Ollama's 400 for bad JSON."""
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            self.requests.append(RecordedRequest(request.method, request.path, raw))
            return self._error(400, "invalid character in request body")
        self.requests.append(
            RecordedRequest(request.method, request.path, body, dict(request.headers))
        )
        if not isinstance(body, dict):
            return self._error(400, "json: cannot unmarshal into Go value")
        return body

    async def _handle_root(self, _request: web.Request) -> web.Response:
        """``GET /``: Ollama's liveness text."""
        return web.Response(text="Ollama is running")

    async def _handle_version(self, request: web.Request) -> web.Response:
        """``GET /api/version``."""
        self.requests.append(RecordedRequest(request.method, request.path))
        return web.json_response({"version": self.version})

    async def _handle_tags(self, request: web.Request) -> web.Response:
        """``GET /api/tags``: the installed models."""
        self.requests.append(RecordedRequest(request.method, request.path))
        if self.tags_delay:
            await asyncio.sleep(self.tags_delay)
        modified_at = "2025-05-01T10:00:00.000000000Z"
        return web.json_response(
            {
                "models": [
                    {
                        "name": model.name,
                        "model": model.name,
                        "modified_at": modified_at,
                        "size": model.size,
                        "digest": model.digest,
                        "details": model.details(),
                    }
                    for model in self.models.values()
                ]
            }
        )

    async def _handle_ps(self, request: web.Request) -> web.Response:
        """``GET /api/ps``: the models loaded in memory."""
        self.requests.append(RecordedRequest(request.method, request.path))
        if self.no_ps:
            # Gin's answer for a route it does not have.
            return web.Response(status=404, text="404 page not found")
        return web.json_response(
            {"models": [{"name": name, "model": name} for name in sorted(self.loaded)]}
        )

    async def _handle_show(self, request: web.Request) -> web.Response:
        """``POST /api/show``: details, model_info and capabilities."""
        body = await self._read_json(request)
        if isinstance(body, web.Response):
            return body
        self.show_requests.append(body)
        # "name" is the deprecated spelling older clients still send.
        name = str(body.get("model") or body.get("name") or "")
        model = self.get_model(name)
        if model is None:
            return self._error(404, f"model '{name}' not found")
        arch = model.family
        model_info: JsonDict = {
            "general.architecture": arch,
            "general.basename": model.name.split(":")[0],
            "general.file_type": 15,
            "general.parameter_count": 1_000_000_000,
            "general.quantization_version": 2,
            f"{arch}.context_length": model.context_length,
            f"{arch}.embedding_length": (
                (model.embedding_length or self.embedding_dim)
                if "embedding" in model.capabilities
                else 2560
            ),
        }
        return web.json_response(
            {
                "license": "Apache License 2.0",
                "modelfile": f"FROM {model.name}\n",
                "parameters": "temperature 0.6\ntop_k 20\ntop_p 0.95",
                "template": model.template,
                "details": model.details(),
                "model_info": model_info,
                "tensors": [],
                "capabilities": list(model.capabilities),
                "modified_at": "2025-05-01T10:00:00.000000000+00:00",
            }
        )

    async def _handle_embed(self, request: web.Request) -> web.Response:
        """``POST /api/embed``: one normalised vector per input string."""
        body = await self._read_json(request)
        if isinstance(body, web.Response):
            return body
        self.embed_requests.append(body)
        name = str(body.get("model") or "")
        if not name:
            return self._error(400, "model is required")
        if self.get_model(name) is None:
            return self._error(404, f"model '{name}' not found")
        raw_input = body.get("input", [])
        inputs = [raw_input] if isinstance(raw_input, str) else list(raw_input)
        if not all(isinstance(item, str) for item in inputs):
            return self._error(400, "invalid input type")
        delay = (
            self.embed_delay(inputs) if callable(self.embed_delay) else self.embed_delay
        )
        if delay and await self._sleep_or_close(delay):
            return self._drop(request)
        model = self.get_model(name)
        dim = (
            body.get("dimensions")
            or (model.embedding_length if model is not None else None)
            or self.embedding_dim
        )
        return web.json_response(
            {
                "model": name,
                "embeddings": [self.embedding_for(text, dim) for text in inputs],
                "total_duration": 14_143_917,
                "load_duration": 1_019_500,
                "prompt_eval_count": sum(len(text.split()) for text in inputs),
            }
        )

    async def _handle_chat(  # noqa: PLR0911 - one return per scripted outcome
        self, request: web.Request
    ) -> web.StreamResponse:
        """``POST /api/chat``: validate, then answer with the next reply."""
        body = await self._read_json(request)
        if isinstance(body, web.Response):
            return body
        if self.is_warmup(body):
            self.warmup_requests.append(body)
        else:
            self.chat_requests.append(body)
        if (rejection := self._reject_chat(body)) is not None:
            return rejection

        delay, reply = self._next_reply(body)
        if reply.load > 0:
            self.loaded.discard(str(body["model"]))
            if await self._sleep_or_close(reply.load):
                return self._drop(request)
        self.loaded.add(str(body["model"]))
        delay += reply.delay
        stopped = delay > 0 and await self._sleep_or_close(delay)
        if reply.hang and not stopped:
            await self._closing.wait()
        if stopped or reply.hang:
            # The server is stopping: drop the connection, as a real Ollama
            # that is shut down or crashes does, instead of answering.
            return self._drop(request)
        if reply.error_status is not None:
            return self._error(reply.error_status, reply.error_message)

        name = str(body["model"])
        lines = list(self._chat_lines(body, name, reply))
        if body.get("stream", True) is False:
            return web.json_response(self._merge_lines(lines))
        return await self._stream(
            request,
            lines,
            reply.cut_after,
            reply.chunk_delay,
            stall_after=reply.stall_after,
            end_after=reply.end_after,
        )

    def _reject_chat(self, body: JsonDict) -> web.Response | None:
        """Return Ollama's error for a chat the model cannot run, if any.

        These checks happen before the model runs, so a rejected request
        does not consume a scripted reply (the real server never made one).
        """
        name = str(body.get("model") or "")
        if not name:
            return self._error(400, "model is required")
        model = self.get_model(name)
        if model is None:
            return self._error(404, f"model '{name}' not found")
        if "completion" not in model.capabilities:
            return self._error(400, f'"{name}" does not support chat')
        if "vision" not in model.capabilities and any(
            m.get("images") for m in body.get("messages") or []
        ):
            return self._error(400, f"{name} does not support images")
        if body.get("tools") and "tools" not in model.capabilities:
            return self._error(
                400, f"registry.ollama.ai/library/{name} does not support tools"
            )
        return None

    @staticmethod
    def is_warmup(body: JsonDict) -> bool:
        """Tell whether a chat request is a prompt warm-up (an output cap of 1)."""
        options = body.get("options") or {}
        cap = options.get("num_predict") or body.get("max_tokens")
        messages = body.get("messages") or [{}]
        # A dot after the prefix (agent/warmup.py): not a one-token probe.
        return cap == 1 and messages[-1].get("content") == "."

    def _next_reply(self, body: JsonDict) -> tuple[float, OllamaReply]:
        """Pop queued delays and the next reply, or ask the default responder."""
        if self.is_warmup(body):
            return 0.0, text_reply(".")
        delay = 0.0
        while self._queue and isinstance(self._queue[0], _Delay):
            marker = self._queue.popleft()
            assert isinstance(marker, _Delay)
            delay += marker.seconds
        if self._queue:
            item = self._queue.popleft()
            assert isinstance(item, OllamaReply)
            return delay, item
        answer = self.default(body)
        return delay, text_reply(answer) if isinstance(answer, str) else answer

    async def _sleep_or_close(self, seconds: float) -> bool:
        """Sleep ``seconds``; return True early if the server is stopping."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), timeout=seconds)
        return self._closing.is_set()

    def _chat_lines(
        self, body: JsonDict, name: str, reply: OllamaReply
    ) -> Iterable[JsonDict]:
        """Yield the NDJSON objects of one streamed chat answer, in order.

        Thinking first (only when the request asked for it), then content,
        then one chunk with all tool calls, then the final ``done`` chunk —
        the order a real Ollama streams them in.
        """

        def chunk(message: JsonDict) -> JsonDict:
            return {
                "model": name,
                "created_at": _now_iso(),
                "message": {"role": "assistant", "content": "", **message},
                "done": False,
            }

        cap = (body.get("options") or {}).get("num_predict")
        done_reason = reply.done_reason
        if isinstance(cap, int) and cap > 0 and len(reply.content.split()) > cap:
            # Like Ollama: generation stops at num_predict tokens (a word
            # stands for a token here), with done_reason "length".
            reply = dataclasses.replace(
                reply,
                content=" ".join(reply.content.split()[:cap]),
                tool_calls=(),
                text_chunks=None,
            )
            done_reason = "length"
            self.capped += 1
        pieces = reply.text_chunks
        if pieces is None:
            pieces = self.text_chunks
        content_chunks = (
            split_text(reply.content, pieces)
            if isinstance(pieces, int)
            else list(pieces)
        )
        eval_count = 0
        if reply.thinking and body.get("think"):
            for piece in split_text(reply.thinking, self.text_chunks):
                eval_count += 1
                yield chunk({"thinking": piece})
        for piece in content_chunks:
            eval_count += 1
            yield chunk({"content": piece})
        if reply.tool_calls:
            eval_count += 1
            yield chunk({"tool_calls": self._tool_calls_json(reply.tool_calls)})
        prompt_tokens = (
            self.prompt_tokens(body)
            if self.prompt_tokens is not None
            else sum(
                len(str(message.get("content") or "").split())
                for message in body.get("messages") or []
            )
        )
        yield {
            "model": name,
            "created_at": _now_iso(),
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": done_reason,
            "total_duration": 1_234_567_890,
            "load_duration": 12_345_678,
            "prompt_eval_count": max(prompt_tokens, 1),
            "prompt_eval_duration": 234_567_890,
            "eval_count": max(eval_count, 1),
            "eval_duration": 987_654_321,
        }

    def _tool_calls_json(self, calls: Sequence[ToolCallSpec]) -> list[JsonDict]:
        """Return tool calls in Ollama's native shape (arguments as object)."""
        result: list[JsonDict] = []
        for index, (name, arguments) in enumerate(calls):
            function: JsonDict = {"name": name, "arguments": dict(arguments)}
            call: JsonDict = {"function": function}
            if self.tool_call_ids:
                function["index"] = index
                call = {"id": f"call_{next(self._call_ids):08x}", **call}
            result.append(call)
        return result

    @staticmethod
    def _merge_lines(lines: Sequence[JsonDict]) -> JsonDict:
        """Fold streamed chunks into the single object ``stream: false`` gets."""
        final = dict(lines[-1])
        message: JsonDict = {"role": "assistant", "content": ""}
        for line in lines[:-1]:
            part = line["message"]
            message["content"] += part.get("content", "")
            if "thinking" in part:
                message["thinking"] = message.get("thinking", "") + part["thinking"]
            if "tool_calls" in part:
                message["tool_calls"] = part["tool_calls"]
        final["message"] = message
        return final

    @staticmethod
    def _drop(request: web.Request) -> web.Response:
        """Abort the request's TCP connection; the response is never sent."""
        if request.transport is not None:
            request.transport.abort()
        return web.Response(status=503)

    async def _write(
        self,
        request: web.Request,
        response: web.StreamResponse,
        number: int,
        data: bytes,
    ) -> bool:
        """Write a streamed line; False (and noted) if the client has closed."""
        closed = request.transport is None or request.transport.is_closing()
        if not closed:
            try:
                await response.write(data)
            except ConnectionError:
                closed = True
        if closed:
            self.closed_early.append(number)
            self.stream_closed.set()
        return not closed

    async def _stream(
        self,
        request: web.Request,
        lines: Sequence[JsonDict],
        cut_after: int | None,
        chunk_delay: float = 0.0,
        *,
        stall_after: int | None = None,
        end_after: int | None = None,
    ) -> web.StreamResponse:
        """Write ``lines`` as NDJSON; abort the connection after ``cut_after``."""
        if end_after is not None:
            lines = lines[:end_after]
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)
        for number, line in enumerate(lines):
            if stall_after is not None and number >= stall_after:
                # Keep the connection open, sending nothing, until stop().
                await self._closing.wait()
                self._drop(request)
                return response
            if cut_after is not None and number >= cut_after:
                # Drop the TCP connection without the terminating chunk: the
                # client sees an incomplete chunked body, like a crash.
                self._drop(request)
                return response
            if number and chunk_delay and await self._sleep_or_close(chunk_delay):
                self._drop(request)
                return response
            if not await self._write(request, response, number, line_bytes(line)):
                return response
        await response.write_eof()
        return response


@pytest.fixture
async def fake_ollama(socket_enabled: None) -> AsyncGenerator[FakeOllama]:
    """Start a :class:`FakeOllama` for the test and stop it at teardown."""
    server = FakeOllama()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
