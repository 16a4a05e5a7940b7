"""A fake OpenAI-compatible model server that speaks the real HTTP API.

Like :mod:`tests.fake_ollama` (whose scripting it shares: ``reply``,
``tool_call``, ``tool_calls``, ``error``, ``hang``, ``cut``, ``delay`` and the
default responder), this is an aiohttp application on 127.0.0.1 in the test's
own event loop. The ``openai`` package, and langchain-openai's ChatOpenAI on
top of it, talk to it over real HTTP, unmodified. It serves what llama.cpp's
``llama-server``, vLLM, LocalAI and LM Studio serve under ``/v1``:

- ``GET /v1/models``: ``{"object": "list", "data": [{"id", "object":
  "model", "created", "owned_by"}]}``;
- ``POST /v1/chat/completions``: with ``"stream": true`` server-sent events,
  one ``chat.completion.chunk`` per ``data:`` line and ``data: [DONE]`` at the
  end; text arrives as ``delta.content`` pieces, each tool call as a first
  delta with its ``index``, ``id``, ``type`` and ``function.name`` and then
  ``function.arguments`` as pieces of a JSON string; the last chunk carries
  ``finish_reason`` (``stop``, ``tool_calls`` or ``length``), followed by a
  ``usage`` chunk with empty ``choices`` when ``stream_options.include_usage``
  asks for it. Without streaming, one ``chat.completion`` object;
- ``POST /v1/embeddings``: ``{"object": "list", "data": [{"object":
  "embedding", "index", "embedding"}], "model", "usage"}``, floats or
  base64 (little-endian float32) as ``encoding_format`` asks;
- errors as ``{"error": {"message", "type", "code"}}``: 401 without the API
  key the server was started with, 404 for a model it does not serve, 400
  for tools sent to a model that cannot call them (vLLM's words without
  ``--enable-auto-tool-choice``) and for embeddings from a chat model;
- ``GET /health``: llama-server's 503 "Loading model" while a scripted
  reply's ``load`` lasts, else ``{"status": "ok"}``; with ``health_hangs``
  no answer at all, as from a llama-server whose HTTP threads are all busy.

Servers that are not quite that: the paths in ``web_pages`` answer 200
with an HTML page (a web UI's single-page fallback at the address, or a
proxy that forwards only some routes to the server); ``no_embeddings`` is
llama-server started without ``--embeddings`` (501); ``empty_embeddings``
answers an empty vector per input.

The output cap is ``max_tokens`` (or ``max_completion_tokens``); a word
stands for a token, as in the Ollama fake. The same server answers Ollama's
API as well, so one fixture can serve either backend.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import struct
import time
from typing import TYPE_CHECKING, Any, Final

import pytest
from aiohttp import web

from .fake_ollama import (
    FakeOllama,
    JsonDict,
    OllamaReply,
    RecordedRequest,
    split_text,
)

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Iterable, Sequence

    from aiohttp.typedefs import Handler

OWNED_BY: Final = "llamacpp"
# What vLLM answers for tools without --enable-auto-tool-choice.
NO_TOOLS_MESSAGE: Final = (
    '"auto" tool choice requires --enable-auto-tool-choice and '
    "--tool-call-parser to be set"
)
# What llama-server answers at /v1/embeddings without --embeddings.
NO_EMBEDDINGS_MESSAGE: Final = (
    "This server does not support embeddings. Start it with `--embeddings`"
)
WEB_PAGE: Final = (
    "<!doctype html><html><head><title>Open WebUI</title></head>"
    '<body><div id="app"></div></body></html>'
)


class FakeOpenAI(FakeOllama):
    """A scriptable OpenAI-compatible server (and Ollama server) on 127.0.0.1.

    ``backend`` says which API the test's config entry uses ("ollama" or
    "openai_compatible"); :func:`tests.common.async_setup_assistant` reads it.
    ``api_key``, when set, is required on every ``/v1`` request.
    """

    def __init__(self, *, backend: str = "openai_compatible", **kwargs: Any) -> None:
        """Create a stopped server with the default models."""
        super().__init__(**kwargs)
        self.backend = backend
        self.api_key: str | None = None
        # Models being loaded: /health answers 503 meanwhile.
        self.loading: set[str] = set()
        # The /v1/chat/completions bodies (also in chat_requests).
        self.openai_requests: list[JsonDict] = []
        self.web_pages: set[str] = set()
        self.health_hangs = False
        self.no_embeddings = False
        self.empty_embeddings = False
        # Argument strings sent instead of the next tool calls' JSON, as a
        # model that writes broken JSON does (the server passes it through).
        self.raw_arguments: list[str] = []
        # Prompt tokens reported as served from the cache, as llama.cpp's
        # server does (``usage.prompt_tokens_details.cached_tokens``); None:
        # not reported.
        self.cached_tokens: int | None = None

    @property
    def base_url(self) -> str:
        """The API's base URL, e.g. ``http://127.0.0.1:43117/v1``."""
        return f"{self.url}/v1"

    def _routes(self, app: web.Application) -> None:
        """Serve OpenAI's API under /v1 besides Ollama's."""
        app.router.add_get("/v1/models", self._handle_models)
        app.router.add_post("/v1/chat/completions", self._handle_completions)
        app.router.add_post("/v1/embeddings", self._handle_embeddings)
        app.router.add_get("/health", self._handle_health)
        app.middlewares.append(self._web_page_middleware)

    @web.middleware
    async def _web_page_middleware(
        self, request: web.Request, handler: Handler
    ) -> web.StreamResponse:
        """Answer the paths in ``web_pages`` with a web page."""
        if request.path in self.web_pages:
            self.requests.append(RecordedRequest(request.method, request.path))
            return web.Response(text=WEB_PAGE, content_type="text/html")
        return await handler(request)

    # --------------------------------------------------------------- helpers

    @staticmethod
    def _openai_error(
        status: int, message: str, kind: str = "invalid_request_error"
    ) -> web.Response:
        """Return an error the way OpenAI-compatible servers do."""
        return web.json_response(
            {"error": {"message": message, "type": kind, "code": status}},
            status=status,
        )

    def _refuse_key(self, request: web.Request) -> web.Response | None:
        """Return 401 unless the request carries the server's API key."""
        if self.api_key is None:
            return None
        if request.headers.get("Authorization") == f"Bearer {self.api_key}":
            return None
        return self._openai_error(401, "Invalid API Key", "authentication_error")

    # -------------------------------------------------------------- handlers

    async def _handle_models(self, request: web.Request) -> web.Response:
        """``GET /v1/models``: every model the server serves."""
        self.requests.append(
            RecordedRequest(request.method, request.path, None, dict(request.headers))
        )
        if (refusal := self._refuse_key(request)) is not None:
            return refusal
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {
                        "id": name,
                        "object": "model",
                        "created": 1_746_000_000,
                        "owned_by": OWNED_BY,
                    }
                    for name in self.models
                ],
            }
        )

    async def _handle_health(self, request: web.Request) -> web.Response:
        """``GET /health``: llama-server's 503 while a model loads, else ok."""
        self.requests.append(RecordedRequest(request.method, request.path))
        if self.health_hangs:
            await self._closing.wait()
            return self._drop(request)
        if self.loading:
            return self._openai_error(503, "Loading model", "unavailable_error")
        return web.json_response({"status": "ok"})

    async def _handle_embeddings(  # noqa: PLR0911 - one return per outcome
        self, request: web.Request
    ) -> web.Response:
        """``POST /v1/embeddings``: one vector per input, floats or base64."""
        if (refusal := self._refuse_key(request)) is not None:
            return refusal
        body = await self._read_json(request)
        if isinstance(body, web.Response):
            return body
        self.embed_requests.append(body)
        if self.no_embeddings:
            return self._openai_error(501, NO_EMBEDDINGS_MESSAGE, "not_supported_error")
        name = str(body.get("model") or "")
        model = self.get_model(name)
        if model is None:
            return self._openai_error(404, f"The model `{name}` does not exist.")
        if "embedding" not in model.capabilities:
            return self._openai_error(
                400, f"The model `{name}` does not support embeddings."
            )
        raw_input = body.get("input", [])
        inputs = [raw_input] if isinstance(raw_input, str) else list(raw_input)
        if not inputs or not all(isinstance(item, str) for item in inputs):
            return self._openai_error(400, "input must be a string or strings")
        delay = (
            self.embed_delay(inputs) if callable(self.embed_delay) else self.embed_delay
        )
        if delay and await self._sleep_or_close(delay):
            return self._drop(request)
        dim = model.embedding_length or self.embedding_dim
        data: list[JsonDict] = []
        for index, text in enumerate(inputs):
            vector = [] if self.empty_embeddings else self.embedding_for(text, dim)
            embedding: Any = vector
            if body.get("encoding_format") == "base64":
                embedding = base64.b64encode(
                    struct.pack(f"<{len(vector)}f", *vector)
                ).decode()
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        tokens = sum(len(text.split()) for text in inputs)
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "model": name,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    async def _handle_completions(  # noqa: PLR0911, PLR0912 - one return per outcome
        self, request: web.Request
    ) -> web.StreamResponse:
        """``POST /v1/chat/completions``: validate, then the next reply."""
        if (refusal := self._refuse_key(request)) is not None:
            return refusal
        body = await self._read_json(request)
        if isinstance(body, web.Response):
            return body
        if self.is_warmup(body):
            self.warmup_requests.append(body)
        else:
            self.chat_requests.append(body)
            self.openai_requests.append(body)
        name = str(body.get("model") or "")
        model = self.get_model(name)
        if model is None:
            return self._openai_error(404, f"The model `{name}` does not exist.")
        if "completion" not in model.capabilities:
            return self._openai_error(400, f"The model `{name}` does not support chat.")
        if body.get("tools") and "tools" not in model.capabilities:
            return self._openai_error(400, NO_TOOLS_MESSAGE)

        delay, reply = self._next_reply(body)
        if reply.load > 0:
            self.loading.add(name)
            try:
                if await self._sleep_or_close(reply.load):
                    return self._drop(request)
            finally:
                self.loading.discard(name)
        self.loaded.add(name)
        delay += reply.delay
        stopped = delay > 0 and await self._sleep_or_close(delay)
        if reply.hang and not stopped:
            await self._closing.wait()
        if stopped or reply.hang:
            return self._drop(request)
        if reply.error_status is not None:
            return self._openai_error(reply.error_status, reply.error_message)
        reply, finish_reason = self._capped(body, reply)
        chunks = list(self._completion_chunks(body, name, reply, finish_reason))
        if not body.get("stream"):
            return web.json_response(self._whole(chunks))
        return await self._stream_events(request, chunks, reply)

    def _capped(self, body: JsonDict, reply: OllamaReply) -> tuple[OllamaReply, str]:
        """Cut the reply at max_tokens, as the server's generation stops there."""
        cap = body.get("max_tokens") or body.get("max_completion_tokens")
        finish_reason = "tool_calls" if reply.tool_calls else "stop"
        if reply.done_reason == "length":
            finish_reason = "length"
        if isinstance(cap, int) and cap > 0 and len(reply.content.split()) > cap:
            reply = dataclasses.replace(
                reply,
                content=" ".join(reply.content.split()[:cap]),
                tool_calls=(),
                text_chunks=None,
            )
            finish_reason = "length"
            self.capped += 1
        return reply, finish_reason

    def _completion_chunks(
        self, body: JsonDict, name: str, reply: OllamaReply, finish_reason: str
    ) -> Iterable[JsonDict]:
        """Yield the chunks of one streamed answer, in a real server's order."""
        created = int(time.time())
        ident = f"chatcmpl-{next(self._call_ids):08x}"

        def chunk(delta: JsonDict, finish: str | None = None) -> JsonDict:
            return {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": created,
                "model": name,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }

        yield chunk({"role": "assistant", "content": ""})
        pieces = reply.text_chunks
        if pieces is None:
            pieces = self.text_chunks
        content = (
            split_text(reply.content, pieces)
            if isinstance(pieces, int)
            else list(pieces)
        )
        for piece in content:
            yield chunk({"content": piece})
        for index, (tool, arguments) in enumerate(reply.tool_calls):
            yield chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": f"call_{next(self._call_ids):08x}",
                            "type": "function",
                            "function": {"name": tool, "arguments": ""},
                        }
                    ]
                }
            )
            text = (
                self.raw_arguments.pop(0)
                if self.raw_arguments
                else json.dumps(dict(arguments))
            )
            middle = len(text) // 2
            for part in (text[:middle], text[middle:]):
                yield chunk(
                    {"tool_calls": [{"index": index, "function": {"arguments": part}}]}
                )
        yield chunk({}, finish_reason)
        if (body.get("stream_options") or {}).get("include_usage") or not body.get(
            "stream"
        ):
            prompt = (
                self.prompt_tokens(body)
                if self.prompt_tokens is not None
                else sum(
                    len(str(message.get("content") or "").split())
                    for message in body.get("messages") or []
                )
            )
            completion = max(len(content) + len(reply.tool_calls), 1)
            yield {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": created,
                "model": name,
                "choices": [],
                "usage": {
                    "prompt_tokens": max(prompt, 1),
                    "completion_tokens": completion,
                    "total_tokens": max(prompt, 1) + completion,
                    **(
                        {
                            "prompt_tokens_details": {
                                "cached_tokens": min(self.cached_tokens, prompt)
                            }
                        }
                        if self.cached_tokens is not None
                        else {}
                    ),
                },
            }

    @staticmethod
    def _whole(chunks: Sequence[JsonDict]) -> JsonDict:
        """Fold the chunks into the one object a request without streaming gets."""
        content = ""
        calls: dict[int, JsonDict] = {}
        finish_reason = "stop"
        usage: JsonDict | None = None
        for item in chunks:
            usage = item.get("usage", usage)
            for choice in item["choices"]:
                delta = choice["delta"]
                content += delta.get("content") or ""
                for call in delta.get("tool_calls", []):
                    merged = calls.setdefault(
                        call["index"],
                        {"id": "", "type": "function", "function": {"name": ""}},
                    )
                    merged["id"] = call.get("id") or merged["id"]
                    function = call.get("function", {})
                    merged["function"]["name"] += function.get("name", "")
                    merged["function"]["arguments"] = merged["function"].get(
                        "arguments", ""
                    ) + function.get("arguments", "")
                finish_reason = choice["finish_reason"] or finish_reason
        message: JsonDict = {"role": "assistant", "content": content or None}
        if calls:
            message["tool_calls"] = [calls[index] for index in sorted(calls)]
        return {
            "id": chunks[0]["id"],
            "object": "chat.completion",
            "created": chunks[0]["created"],
            "model": chunks[0]["model"],
            "choices": [
                {"index": 0, "message": message, "finish_reason": finish_reason}
            ],
            "usage": usage,
        }

    async def _stream_events(
        self, request: web.Request, chunks: Sequence[JsonDict], reply: OllamaReply
    ) -> web.StreamResponse:
        """Write the chunks as server-sent events; cut or stall as scripted."""
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        if reply.end_after is not None:
            chunks = chunks[: reply.end_after]
        for number, item in enumerate(chunks):
            if reply.stall_after is not None and number >= reply.stall_after:
                await self._closing.wait()
                self._drop(request)
                return response
            if reply.cut_after is not None and number >= reply.cut_after:
                self._drop(request)
                return response
            if (
                number
                and reply.chunk_delay
                and await self._sleep_or_close(reply.chunk_delay)
            ):
                self._drop(request)
                return response
            event = f"data: {json.dumps(item)}\n\n".encode()
            if not await self._write(request, response, number, event):
                return response
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


@pytest.fixture
async def fake_openai(socket_enabled: None) -> AsyncGenerator[FakeOpenAI]:
    """Start a :class:`FakeOpenAI` for the test and stop it at teardown."""
    server = FakeOpenAI()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
