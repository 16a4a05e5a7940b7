"""llama-server's own OpenAI API, recorded: the integration's OpenAI backend.

The bench's other path puts an Ollama-API shim (shim.py) in front of
llama-server. This one lets the integration talk to llama-server's own
``/v1/chat/completions`` through its OpenAI-compatible backend (ChatOpenAI
on the ``openai`` package): llama-server renders the chat template
(``--jinja``), parses the tool calls and streams server-sent events. A thin
pass-through in between records what every request cost, from the
``timings`` llama-server adds to the last event (``prompt_n`` evaluated,
``cache_n`` reused, ``predicted_n`` generated), into the same
:class:`~shim.ChatRecord` the shim writes, so the two paths print alike.

Forced tool calls and scripted replies (the shim's ``force`` and
``force_reply``): llama-server refuses a grammar together with tools, so a
forced request is rendered by the same template (``/apply-template``, what
``/v1/chat/completions`` does with the same messages and tools) and run
through ``/completion`` with the grammar, as the shim does; the answer goes
back as OpenAI events with ``tool_calls`` deltas. The model still decodes
every token of the call, so the KV cache holds what it would hold. Every
other request goes to llama-server's own OpenAI endpoint unchanged, apart
from the sampling defaults the shim uses too (seed 42, temperature 0.8).
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from typing import TYPE_CHECKING, Any, Final

import aiohttp
from aiohttp import web
from shim import (
    BACKGROUND_MARKERS,
    CLOSED,
    DEFAULT_SEED,
    DEFAULT_TEMPERATURE,
    ChatRecord,
    JsonDict,
    OllamaShim,
    _rewrite,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

_STOP: Final = ["<|im_end|>", "<|im_start|>"]


def _text(content: Any) -> str:
    """Return a message's text, whether a string or a list of parts."""
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content)
    return str(content or "")


class OpenAIRecorder(OllamaShim):
    """Serve llama-server's /v1 API (recorded) besides the shim's Ollama API."""

    def _more_routes(self, app: web.Application) -> None:
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/chat/completions", self._completions)
        app.router.add_get("/health", self._health)

    @property
    def base_url(self) -> str:
        """The base URL the integration's OpenAI backend is given."""
        return f"{self.url}/v1"

    async def _models(self, _request: web.Request) -> web.Response:
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {
                        "id": self.model,
                        "object": "model",
                        "created": 1_738_911_720,
                        "owned_by": "llamacpp",
                    }
                ],
            }
        )

    async def _health(self, _request: web.Request) -> web.Response:
        assert self._session is not None
        async with self._session.get(f"{self.llama_url}/health") as response:
            return web.Response(status=response.status, body=await response.read())

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if str(body.get("model") or "") != self.model:
            return web.json_response(
                {"error": {"message": "model not found", "code": 404}}, status=404
            )
        self.in_flight += 1
        self.last_activity = time.monotonic()
        record = ChatRecord(started=time.monotonic())
        try:
            return await self._answer_openai(request, body, record)
        finally:
            record.seconds = time.monotonic() - record.started
            self.records.append(record)
            self.in_flight -= 1
            self.last_activity = time.monotonic()

    def _describe(self, body: JsonDict, record: ChatRecord) -> None:
        """Fill in what the request carried."""
        messages = list(body.get("messages") or [])
        tools = list(body.get("tools") or [])
        record.tools = bool(tools)
        if tools:
            self.tools_seen = tools
        record.stream = bool(body.get("stream"))
        record.messages = len(messages)
        record.tool_results = [
            _text(m.get("content")) for m in messages if m.get("role") == "tool"
        ]
        record.last_user = next(
            (
                _text(m.get("content"))
                for m in reversed(messages)
                if m.get("role") == "user"
            ),
            "",
        )
        record.system = next(
            (_text(m.get("content")) for m in messages if m.get("role") == "system"),
            "",
        )
        cap = body.get("max_tokens") or body.get("max_completion_tokens")
        if isinstance(cap, int) and cap > 0:
            record.num_predict = cap
        else:
            record.capped = True
        record.background = (
            cap == 1 or not tools or record.last_user.startswith(BACKGROUND_MARKERS)
        )

    async def _answer_openai(
        self, request: web.Request, body: JsonDict, record: ChatRecord
    ) -> web.StreamResponse:
        self._describe(body, record)
        tools = list(body.get("tools") or [])
        forced = (
            self._forced.popleft()
            if tools and not record.background and self._forced
            else None
        )
        temperature = float(body.get("temperature", DEFAULT_TEMPERATURE))
        record.temperature = temperature
        try:
            record.prompt = await self.render(list(body.get("messages") or []), tools)
        except (RuntimeError, aiohttp.ClientError, ValueError) as err:
            record.error = str(err)
            return web.json_response({"error": {"message": str(err)}}, status=500)
        record.rewrote = _rewrite(self._slot_text, record.prompt)
        if forced is not None:
            return await self._forced_answer(request, body, record, forced)
        return await self._pass_through(request, body, record)

    async def _pass_through(
        self, request: web.Request, body: JsonDict, record: ChatRecord
    ) -> web.StreamResponse:
        """Send the request to llama-server's /v1 and stream its events back."""
        assert self._session is not None
        upstream = {
            **body,
            "cache_prompt": True,
            "seed": int(body.get("seed", DEFAULT_SEED)),
            "temperature": record.temperature,
            # Timings in every event: known even if the client leaves early.
            "timings_per_token": True,
        }
        if record.capped:
            upstream["max_tokens"] = self.default_cap
        content = ""
        calls: dict[int, JsonDict] = {}
        finish_reason = ""
        timings: JsonDict = {}
        async with self._session.post(
            f"{self.llama_url}/v1/chat/completions", json=upstream
        ) as answer:
            if answer.status >= 400 or not record.stream:  # noqa: PLR2004
                raw = await answer.read()
                if answer.status >= 400:  # noqa: PLR2004
                    record.error = raw.decode(errors="replace")[:500]
                else:
                    whole = json.loads(raw)
                    timings = whole.get("timings") or {}
                    choice = whole["choices"][0]
                    content = _text(choice["message"].get("content"))
                    finish_reason = str(choice.get("finish_reason") or "")
                    calls = dict(enumerate(choice["message"].get("tool_calls") or []))
                await self._record(record, content, calls, finish_reason, timings)
                return web.Response(
                    status=answer.status,
                    body=raw,
                    content_type="application/json",
                )
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            async for line in answer.content:
                try:
                    await response.write(line)
                except ConnectionError:
                    # The integration stopped the answer (a loop): leaving
                    # this request makes llama-server stop generating.
                    finish_reason = CLOSED
                    break
                text = line.decode().strip()
                if not text.startswith("data:") or text == "data: [DONE]":
                    continue
                event = json.loads(text[5:])
                timings = event.get("timings") or timings
                for choice in event.get("choices") or []:
                    delta = choice.get("delta") or {}
                    content += delta.get("content") or ""
                    for call in delta.get("tool_calls") or []:
                        merged = calls.setdefault(
                            int(call.get("index", 0)),
                            {"function": {"name": "", "arguments": ""}},
                        )
                        function = call.get("function") or {}
                        merged["function"]["name"] += function.get("name") or ""
                        merged["function"]["arguments"] += (
                            function.get("arguments") or ""
                        )
                    finish_reason = choice.get("finish_reason") or finish_reason
            if finish_reason != CLOSED:
                # Closed after the last event: the answer was whole.
                with contextlib.suppress(ConnectionError):
                    await response.write_eof()
        await self._record(record, content, calls, finish_reason, timings)
        return response

    async def _record(
        self,
        record: ChatRecord,
        content: str,
        calls: dict[int, JsonDict],
        finish_reason: str,
        timings: JsonDict,
    ) -> None:
        record.prompt_n = int(timings.get("prompt_n", 0))
        record.cache_n = int(timings.get("cache_n", 0))
        record.predicted_n = int(timings.get("predicted_n", 0))
        record.prompt_ms = float(timings.get("prompt_ms", 0.0))
        record.predicted_ms = float(timings.get("predicted_ms", 0.0))
        record.stop_type = "limit" if finish_reason == "length" else finish_reason
        record.content = content
        record.tool_calls = [
            f"{call['function']['name']}({call['function']['arguments']})"
            for _, call in sorted(calls.items())
        ]
        # What the slot holds after the answer, for the next request's
        # rewrite check (a tool call as the template writes it back).
        written = content
        if calls:
            try:
                written += await self.forced_text(
                    [
                        (
                            call["function"]["name"],
                            json.loads(call["function"]["arguments"] or "{}"),
                        )
                        for _, call in sorted(calls.items())
                    ]
                )
            except (RuntimeError, aiohttp.ClientError, ValueError) as err:
                record.error = record.error or f"rendering the call back: {err}"
        self._slot_text = record.prompt + written

    async def _forced_answer(
        self,
        request: web.Request,
        body: JsonDict,
        record: ChatRecord,
        forced: list[tuple[str, JsonDict]] | str,
    ) -> web.StreamResponse:
        """Make the model write exactly the forced text; answer as OpenAI does."""
        if isinstance(forced, str):
            text, record.forced = forced, ["reply"]
        else:
            text = await self.forced_text(forced)
            record.forced = [name for name, _ in forced]
        ids = await self.tokenize(text)
        completion: JsonDict = {
            "prompt": record.prompt,
            "cache_prompt": True,
            "stop": _STOP,
            "seed": int(body.get("seed", DEFAULT_SEED)),
            "temperature": record.temperature,
            "grammar": "root ::= " + " ".join(f"<[{t}]>" for t in ids),
            "n_predict": len(ids) + 8,
        }
        try:
            final, generated = await self._complete(completion, None)
        except (RuntimeError, aiohttp.ClientError, ValueError) as err:
            record.error = str(err)
            return web.json_response({"error": {"message": str(err)}}, status=500)
        content, ollama_calls = self._finish(record, final, generated)
        calls = [
            {
                "id": str(call["id"]),
                "type": "function",
                "function": {
                    "name": call["function"]["name"],
                    "arguments": json.dumps(call["function"]["arguments"]),
                },
            }
            for call in ollama_calls
        ]
        finish_reason = "tool_calls" if calls else "stop"
        usage = {
            "prompt_tokens": record.prompt_n + record.cache_n,
            "completion_tokens": record.predicted_n,
            "total_tokens": record.prompt_n + record.cache_n + record.predicted_n,
        }
        ident = f"chatcmpl-{uuid.uuid4().hex[:12]}"
        model = str(body.get("model"))
        if not record.stream:
            message: JsonDict = {"role": "assistant", "content": content or None}
            if calls:
                message["tool_calls"] = calls
            return web.json_response(
                {
                    "id": ident,
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [
                        {"index": 0, "message": message, "finish_reason": finish_reason}
                    ],
                    "usage": usage,
                }
            )
        events = _events(
            ident,
            model,
            content=content,
            calls=calls,
            finish_reason=finish_reason,
            usage=usage,
        )
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for event in events:
            await response.write(f"data: {json.dumps(event)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def _events(  # noqa: PLR0913 - the parts of one answer
    ident: str,
    model: str,
    *,
    content: str,
    calls: Sequence[JsonDict],
    finish_reason: str,
    usage: JsonDict,
) -> list[JsonDict]:
    """Return the chunks of a streamed answer, as llama-server sends them."""
    created = int(time.time())

    def chunk(delta: JsonDict, finish: str | None = None) -> JsonDict:
        return {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    events = [chunk({"role": "assistant", "content": None})]
    if content:
        events.append(chunk({"content": content}))
    events.extend(
        chunk({"tool_calls": [{"index": index, **call}]})
        for index, call in enumerate(calls)
    )
    events.append(chunk({}, finish_reason))
    events.append(
        {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": usage,
        }
    )
    return events
