"""An Ollama API in front of llama-server, recording what every request cost.

The integration speaks Ollama's API; llama-server speaks its own. This shim
does what Ollama does with a chat request: it renders the messages and tools
with the model's chat template (llama-server's ``/apply-template``, our
``chatml_tools.jinja``), runs the prompt through ``/completion`` with the
prompt cache on, and parses ``<tool_call>`` blocks out of the generated text.
The answer goes back in Ollama's shapes (NDJSON stream or one object), with
``prompt_eval_count`` and ``eval_count`` taken from llama-server's timings:
``prompt_n`` (tokens evaluated) and ``predicted_n`` (tokens generated), as
Ollama reports them (a prompt-cache hit counts only the tokens read anew).

Every chat request is recorded (:class:`ChatRecord`): tokens in the prompt,
reused from the KV cache (``cache_n``), evaluated (``prompt_n``), generated
(``predicted_n``), and the seconds it took.

Forced tool calls. No tool-trained model is available (SmolLM2-135M rarely
writes a tool call), so the bench makes the scripted tool rounds happen with
:meth:`OllamaShim.force`: the next chat request that carries tools is run
with a GBNF grammar made of the exact token ids of the call, rendered by the
same template the next request will re-render it with. The model still runs:
the server evaluates the prompt and decodes every token of the call, so the
call is in the KV cache exactly as if the model had chosen it, and the next
request can reuse it. :meth:`OllamaShim.force_reply` does the same with a
reply's text (the bench's ``--replies scripted``, so that two checkouts get
the same answers and differ only in how they lay out the prompt). Every
other request is the model's own.

Endpoints: ``/api/version``, ``/api/tags``, ``/api/show`` (capabilities
completion and tools, the server's context length), ``/api/ps``,
``/api/chat`` (streaming and not; ``options.num_predict``, ``temperature``,
``top_k``, ``top_p``, ``repeat_penalty`` and ``seed`` passed through;
``num_ctx`` recorded) and ``/api/embed``, which answers 404: the bench
configures no embedding model, and llama-server's ``--embeddings`` mode
serves nothing else.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
import uuid
from collections import deque
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import aiohttp
from aiohttp import web

MODEL_NAME: Final = "smollm2:135m"
# Ollama's defaults when a request gives no sampling options.
DEFAULT_TEMPERATURE: Final = 0.8
DEFAULT_SEED: Final = 42
# Ollama generates until the model stops (or the window is full) when no
# num_predict is given; the bench caps such requests and reports every cap.
DEFAULT_CAP: Final = 256
BACKGROUND_MARKERS: Final = ("[Summary request", "[Learning request")
_STOP: Final = ["<|im_end|>", "<|im_start|>"]
_TOOL_CALL_RE: Final = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_TOOL_OPEN: Final = "<tool_call>"
_ASSISTANT: Final = "<|im_start|>assistant\n"
_END: Final = "<|im_end|>"

type JsonDict = dict[str, Any]

# stop_type of a request the client closed before the model had finished
# (the integration stops an answer that loops).
CLOSED: Final = "closed"


class ClientClosed(Exception):  # noqa: N818 - an event, not an error
    """The client closed the stream; the last event and the text by then."""

    def __init__(self, last: JsonDict, text: str) -> None:
        """Keep what llama-server had reported when the client left."""
        super().__init__("the client closed the stream")
        self.last = last
        self.text = text


@dataclass
class ChatRecord:
    """One /api/chat request and what it cost on the server."""

    started: float
    seconds: float = 0.0
    tools: bool = False
    # A summary or learning request: old layouts send them without tools,
    # newer ones with the chat's own tools (the same cached prefix) and a
    # final "[Summary request" / "[Learning request" message.
    background: bool = False
    stream: bool = True
    messages: int = 0
    forced: list[str] = field(default_factory=list)
    prompt_n: int = 0
    cache_n: int = 0
    predicted_n: int = 0
    prompt_ms: float = 0.0
    predicted_ms: float = 0.0
    stop_type: str = ""
    # The shim applied DEFAULT_CAP because the request had no num_predict.
    capped: bool = False
    num_predict: int | None = None
    num_ctx: int | None = None
    temperature: float | None = None
    tool_calls: list[str] = field(default_factory=list)
    content: str = ""
    # The tool results the request carried (role "tool"), in order.
    tool_results: list[str] = field(default_factory=list)
    last_user: str = ""
    system: str = ""
    error: str = ""
    # Where the prompt stopped matching what the server's one slot held (the
    # previous prompt and its generated text), when it changed earlier bytes
    # instead of only adding to them: the characters around the break, the
    # break marked with "⟨|⟩". Empty when the prompt only grew.
    rewrote: str = ""
    # The rendered prompt, for looking into a figure afterwards.
    prompt: str = ""

    @property
    def prompt_tokens(self) -> int:
        """Tokens in the prompt: reused from the cache plus evaluated."""
        return self.prompt_n + self.cache_n

    def as_dict(self) -> JsonDict:
        """Return the record as JSON-ready data."""
        data = asdict(self)
        data["prompt_tokens"] = self.prompt_tokens
        # A prompt warm-up (output cap of one token): background too.
        data["warmup"] = self.num_predict == 1
        return data


def _background(tools: object, last_user: str, options: JsonDict) -> bool:
    """Tell a summary, learning or warm-up request from a turn's."""
    warmup = options.get("num_predict") == 1
    return warmup or not tools or last_user.startswith(BACKGROUND_MARKERS)


def _now_iso() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _arguments(value: Any) -> Any:
    """Return tool-call arguments as an object (Ollama sends objects)."""
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return json.loads(value)
    return value


def to_openai_messages(messages: list[JsonDict]) -> list[JsonDict]:
    """Translate Ollama chat messages into the OpenAI shape the template takes."""
    result: list[JsonDict] = []
    for number, message in enumerate(messages):
        role = str(message.get("role") or "user")
        content = str(message.get("content") or "")
        if role == "assistant" and message.get("tool_calls"):
            calls = []
            for index, call in enumerate(message["tool_calls"]):
                function = call.get("function") or {}
                calls.append(
                    {
                        "id": str(call.get("id") or f"call_{number}_{index}"),
                        "type": "function",
                        "function": {
                            "name": str(function.get("name") or ""),
                            "arguments": _arguments(function.get("arguments") or {}),
                        },
                    }
                )
            result.append(
                {"role": "assistant", "content": content, "tool_calls": calls}
            )
        elif role == "tool":
            result.append(
                {
                    "role": "tool",
                    "content": content,
                    "tool_call_id": str(message.get("tool_call_id") or ""),
                }
            )
        else:
            result.append({"role": role, "content": content})
    return result


def parse_tool_calls(text: str) -> tuple[str, list[JsonDict]]:
    """Split generated text into its plain text and ``<tool_call>`` blocks.

    What Ollama does with a model whose template has tool calls: blocks that
    hold JSON with a name become tool calls; anything else stays text.
    """
    calls: list[JsonDict] = []

    def take(match: re.Match[str]) -> str:
        try:
            data = json.loads(match.group(1))
        except ValueError:
            return match.group(0)
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            return match.group(0)
        arguments = _arguments(data.get("arguments") or {})
        if not isinstance(arguments, dict):
            return match.group(0)
        calls.append({"name": data["name"], "arguments": arguments})
        return ""

    rest = _TOOL_CALL_RE.sub(take, text)
    return (rest.strip() if calls else text), calls


def _rewrite(held: str, prompt: str, width: int = 70) -> str:
    """Show where ``prompt`` departs from ``held``, unless it only extends it."""
    # Character by character on purpose: these are texts, not paths.
    common = len(os.path.commonprefix([held, prompt]))  # noqa: RUF071
    if common >= len(held) or not held:
        return ""
    before = prompt[max(0, common - width) : common]
    after = prompt[common : common + width]
    return f"{before}⟨|⟩{after}"


def _before_tool_call(text: str) -> str:
    """Return the part of ``text`` that cannot be the start of a tool call."""
    index = text.find(_TOOL_OPEN)
    if index >= 0:
        return text[:index]
    for size in range(min(len(_TOOL_OPEN) - 1, len(text)), 0, -1):
        if text.endswith(_TOOL_OPEN[:size]):
            return text[:-size]
    return text


class OllamaShim:
    """The aiohttp application; :meth:`start` serves it on 127.0.0.1."""

    def __init__(
        self,
        llama_url: str,
        *,
        context_length: int,
        model: str = MODEL_NAME,
        default_cap: int = DEFAULT_CAP,
    ) -> None:
        """Point at a running llama-server; nothing is served yet."""
        self.llama_url = llama_url.rstrip("/")
        self.context_length = context_length
        self.model = model
        self.default_cap = default_cap
        self.records: list[ChatRecord] = []
        self.in_flight = 0
        self.last_activity = time.monotonic()
        self._forced: deque[list[tuple[str, JsonDict]] | str] = deque()
        # The tools of the latest request that had any (the prompt's prefix).
        self.tools_seen: list[JsonDict] | None = None
        # What the server's one slot holds: the last prompt and its output.
        self._slot_text = ""
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._port: int | None = None

    @property
    def url(self) -> str:
        """Base URL of the running shim."""
        if self._port is None:
            msg = "the shim is not running"
            raise RuntimeError(msg)
        return f"http://127.0.0.1:{self._port}"

    async def start(self, port: int = 0) -> str:
        """Serve on ``port`` of 127.0.0.1 (0: a free one); return the URL."""
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_read=900),
            # A new connection per request: llama-server closes idle kept-alive
            # connections after a few seconds, and a POST on one it just
            # closed fails ("Server disconnected") instead of being retried.
            connector=aiohttp.TCPConnector(force_close=True),
        )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_get("/", self._root)
        app.router.add_get("/api/version", self._version)
        app.router.add_get("/api/tags", self._tags)
        app.router.add_get("/api/ps", self._ps)
        app.router.add_post("/api/show", self._show)
        app.router.add_post("/api/chat", self._chat)
        app.router.add_post("/api/embed", self._embed)
        app.router.add_post("/api/embeddings", self._embed)
        self._more_routes(app)
        self._runner = web.AppRunner(
            app, handle_signals=False, access_log=None, shutdown_timeout=1.0
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        self._port = int(self._runner.addresses[0][1])
        return self.url

    def _more_routes(self, app: web.Application) -> None:
        """Serve more (direct.py adds llama-server's own OpenAI API)."""

    async def stop(self) -> None:
        """Stop serving and close the client session. Idempotent."""
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    # ------------------------------------------------------------ scripting

    def force(self, calls: list[tuple[str, JsonDict]]) -> None:
        """Make the next chat request with tools generate exactly these calls."""
        self._forced.append(list(calls))

    def force_reply(self, text: str) -> None:
        """Make the next chat request with tools write exactly ``text``."""
        self._forced.append(text)

    def forced_pending(self) -> int:
        """Return how many forced calls no request has used yet."""
        return len(self._forced)

    def clear_forced(self) -> None:
        """Drop forced calls no request used (the turn did not ask the model)."""
        self._forced.clear()

    # ------------------------------------------------------- llama-server

    async def post(self, path: str, body: JsonDict) -> Any:
        """POST JSON to llama-server and return its JSON answer."""
        assert self._session is not None
        async with self._session.post(f"{self.llama_url}{path}", json=body) as response:
            data = await response.json(content_type=None)
            if response.status >= 400:  # noqa: PLR2004
                msg = f"llama-server {path} answered {response.status}: {data}"
                raise RuntimeError(msg)
            return data

    async def tokenize(self, text: str) -> list[int]:
        """Return the model's token ids of ``text`` (special tokens parsed)."""
        if not text:
            return []
        data = await self.post("/tokenize", {"content": text})
        return [int(t) for t in data["tokens"]]

    async def render(
        self,
        messages: list[JsonDict],
        tools: list[JsonDict] | None = None,
        *,
        generation_prompt: bool = True,
    ) -> str:
        """Return the prompt the chat template makes of OpenAI-shaped messages."""
        body: JsonDict = {
            "messages": messages,
            "add_generation_prompt": generation_prompt,
        }
        if tools:
            body["tools"] = tools
        data = await self.post("/apply-template", body)
        return str(data["prompt"])

    async def forced_text(self, calls: list[tuple[str, JsonDict]]) -> str:
        """Render the calls exactly as the template writes an assistant's calls."""
        message = {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": f"forced_{index}",
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
                for index, (name, arguments) in enumerate(calls)
            ],
        }
        prompt = await self.render(
            [
                {"role": "user", "content": "x"},
                message,
                {"role": "user", "content": "y"},
            ],
            generation_prompt=False,
        )
        start = prompt.rindex(_ASSISTANT) + len(_ASSISTANT)
        return prompt[start : prompt.index(_END, start)]

    # ------------------------------------------------------------- handlers

    async def _root(self, _request: web.Request) -> web.Response:
        return web.Response(text="Ollama is running")

    async def _version(self, _request: web.Request) -> web.Response:
        return web.json_response({"version": "0.13.0"})

    def _details(self) -> JsonDict:
        return {
            "parent_model": "",
            "format": "gguf",
            "family": "llama",
            "families": ["llama"],
            "parameter_size": "135M",
            "quantization_level": "Q4_1",
        }

    async def _tags(self, _request: web.Request) -> web.Response:
        return web.json_response(
            {
                "models": [
                    {
                        "name": self.model,
                        "model": self.model,
                        "modified_at": "2025-02-07T07:02:00Z",
                        "size": 98_362_432,
                        "digest": "0" * 64,
                        "details": self._details(),
                    }
                ]
            }
        )

    async def _ps(self, _request: web.Request) -> web.Response:
        return web.json_response({"models": []})

    async def _show(self, request: web.Request) -> web.Response:
        body = await request.json()
        name = str(body.get("model") or body.get("name") or "")
        if name.removesuffix(":latest") != self.model.removesuffix(":latest"):
            return web.json_response({"error": f"model '{name}' not found"}, status=404)
        return web.json_response(
            {
                "modelfile": f"FROM {self.model}\n",
                "parameters": "",
                "template": "chatml_tools.jinja (llama-server)",
                "details": self._details(),
                "model_info": {
                    "general.architecture": "llama",
                    "general.parameter_count": 134_515_008,
                    "llama.context_length": self.context_length,
                    "llama.embedding_length": 576,
                },
                "capabilities": ["completion", "tools"],
                "modified_at": "2025-02-07T07:02:00Z",
            }
        )

    async def _embed(self, request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response(
            {"error": f"model '{body.get('model')}' not found"}, status=404
        )

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        name = str(body.get("model") or "")
        if name.removesuffix(":latest") != self.model.removesuffix(":latest"):
            return web.json_response({"error": f"model '{name}' not found"}, status=404)
        self.in_flight += 1
        self.last_activity = time.monotonic()
        record = ChatRecord(started=time.monotonic())
        try:
            return await self._answer(request, body, record)
        finally:
            record.seconds = time.monotonic() - record.started
            self.records.append(record)
            self.in_flight -= 1
            self.last_activity = time.monotonic()

    async def _answer(
        self, request: web.Request, body: JsonDict, record: ChatRecord
    ) -> web.StreamResponse:
        messages = list(body.get("messages") or [])
        tools = list(body.get("tools") or [])
        options = dict(body.get("options") or {})
        record.tools = bool(tools)
        if tools:
            self.tools_seen = tools
        record.stream = body.get("stream", True) is not False
        record.messages = len(messages)
        record.tool_results = [
            str(m.get("content") or "") for m in messages if m.get("role") == "tool"
        ]
        record.last_user = next(
            (
                str(m.get("content") or "")
                for m in reversed(messages)
                if m.get("role") == "user"
            ),
            "",
        )
        record.system = next(
            (
                str(m.get("content") or "")
                for m in messages
                if m.get("role") == "system"
            ),
            "",
        )
        record.num_ctx = options.get("num_ctx")
        record.background = _background(tools, record.last_user, options)
        forced = (
            self._forced.popleft()
            if tools and not record.background and self._forced
            else None
        )
        completion: JsonDict = {
            "cache_prompt": True,
            "stop": _STOP,
            "seed": int(options.get("seed", DEFAULT_SEED)),
            "temperature": float(options.get("temperature", DEFAULT_TEMPERATURE)),
        }
        record.temperature = completion["temperature"]
        for option in ("top_k", "top_p", "repeat_penalty", "min_p"):
            if option in options:
                completion[option] = options[option]
        num_predict = options.get("num_predict")
        if isinstance(num_predict, int) and num_predict > 0:
            completion["n_predict"] = num_predict
            record.num_predict = num_predict
        else:
            completion["n_predict"] = self.default_cap
            record.capped = True
        try:
            prompt = await self.render(to_openai_messages(messages), tools)
            completion["prompt"] = record.prompt = prompt
            record.rewrote = _rewrite(self._slot_text, prompt)
            if forced is not None:
                if isinstance(forced, str):
                    text, record.forced = forced, ["reply"]
                else:
                    text = await self.forced_text(forced)
                    record.forced = [name for name, _ in forced]
                ids = await self.tokenize(text)
                completion["grammar"] = "root ::= " + " ".join(f"<[{t}]>" for t in ids)
                completion["n_predict"] = len(ids) + 8
        except (RuntimeError, aiohttp.ClientError, ValueError, KeyError) as err:
            record.error = str(err)
            return web.json_response({"error": str(err)}, status=500)
        if record.stream:
            return await self._stream(request, body, completion, record)
        try:
            final, text = await self._complete(completion, None)
        except (RuntimeError, aiohttp.ClientError, ValueError) as err:
            record.error = str(err)
            return web.json_response({"error": str(err)}, status=500)
        content, calls = self._finish(record, final, text)
        record.seconds = time.monotonic() - record.started
        message: JsonDict = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        return web.json_response(self._done(body, record, message))

    async def _complete(
        self, completion: JsonDict, on_piece: Any
    ) -> tuple[JsonDict, str]:
        """Run /completion streaming; return the final event and the whole text.

        Every event carries the timings so far (``timings_per_token``): if the
        client closes the stream (the integration stops an answer that loops),
        :class:`ClientClosed` holds what was evaluated and generated by then,
        and leaving this request makes llama-server stop generating.
        """
        assert self._session is not None
        pieces: list[str] = []
        final: JsonDict = {}
        last: JsonDict = {}
        async with self._session.post(
            f"{self.llama_url}/completion",
            json={**completion, "stream": True, "timings_per_token": True},
        ) as response:
            if response.status >= 400:  # noqa: PLR2004
                text = await response.text()
                msg = f"llama-server /completion answered {response.status}: {text}"
                raise RuntimeError(msg)
            async for raw in response.content:
                line = raw.decode().strip()
                if not line.startswith("data:"):
                    continue
                event = json.loads(line[5:])
                last = event
                if event.get("content"):
                    pieces.append(event["content"])
                    if on_piece is not None:
                        try:
                            await on_piece("".join(pieces))
                        except ConnectionError as err:
                            raise ClientClosed(last, "".join(pieces)) from err
                if event.get("stop"):
                    final = event
        return final, "".join(pieces)

    def _finish(
        self, record: ChatRecord, final: JsonDict, text: str
    ) -> tuple[str, list[JsonDict]]:
        self._slot_text = record.prompt + text
        timings = final.get("timings") or {}
        record.prompt_n = int(timings.get("prompt_n", 0))
        record.cache_n = int(timings.get("cache_n", 0))
        record.predicted_n = int(timings.get("predicted_n", 0))
        record.prompt_ms = float(timings.get("prompt_ms", 0.0))
        record.predicted_ms = float(timings.get("predicted_ms", 0.0))
        record.stop_type = str(final.get("stop_type") or "")
        content, calls = parse_tool_calls(text)
        record.content = content
        record.tool_calls = [
            f"{call['name']}({json.dumps(call['arguments'], ensure_ascii=False)})"
            for call in calls
        ]
        ollama_calls = [
            {
                "id": f"call_{uuid.uuid4().hex[:8]}",
                "function": {
                    "index": index,
                    "name": call["name"],
                    "arguments": call["arguments"],
                },
            }
            for index, call in enumerate(calls)
        ]
        return content, ollama_calls

    def _done(self, body: JsonDict, record: ChatRecord, message: JsonDict) -> JsonDict:
        return {
            "model": str(body.get("model")),
            "created_at": _now_iso(),
            "message": message,
            "done": True,
            "done_reason": "length" if record.stop_type == "limit" else "stop",
            "total_duration": int(record.seconds * 1e9) or 1,
            "load_duration": 0,
            "prompt_eval_count": max(record.prompt_n, 1),
            "prompt_eval_duration": int(record.prompt_ms * 1e6),
            "eval_count": max(record.predicted_n, 1),
            "eval_duration": int(record.predicted_ms * 1e6),
        }

    async def _stream(
        self,
        request: web.Request,
        body: JsonDict,
        completion: JsonDict,
        record: ChatRecord,
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)
        sent = 0

        def chunk(message: JsonDict) -> bytes:
            line = {
                "model": str(body.get("model")),
                "created_at": _now_iso(),
                "message": {"role": "assistant", "content": "", **message},
                "done": False,
            }
            return json.dumps(line).encode() + b"\n"

        async def on_piece(text: str) -> None:
            # Like Ollama: hold text back from where a tool call may begin.
            nonlocal sent
            safe = _before_tool_call(text)
            if len(safe) > sent:
                await response.write(chunk({"content": safe[sent:]}))
                sent = len(safe)

        try:
            final, text = await self._complete(completion, on_piece)
        except ClientClosed as closed:
            self._finish(record, {**closed.last, "stop_type": CLOSED}, closed.text)
            record.seconds = time.monotonic() - record.started
            return response
        except (RuntimeError, aiohttp.ClientError, ValueError) as err:
            record.error = str(err)
            await response.write(json.dumps({"error": str(err)}).encode() + b"\n")
            await response.write_eof()
            return response
        content, calls = self._finish(record, final, text)
        record.seconds = time.monotonic() - record.started
        shown = text[:sent]
        done = self._done(body, record, {"role": "assistant", "content": ""})
        with contextlib.suppress(ConnectionError):
            # The client may close once it has the answer's last words.
            if calls:
                rest = content[len(shown) :] if content.startswith(shown) else ""
                if rest:
                    await response.write(chunk({"content": rest}))
                await response.write(chunk({"tool_calls": calls}))
            elif len(text) > sent:
                await response.write(chunk({"content": text[sent:]}))
            await response.write(json.dumps(done).encode() + b"\n")
            await response.write_eof()
        return response
