"""Run the development house: a model server, Home Assistant, and their setup.

Started by ``scripts/develop`` (which writes the config folder and links the
integration into it). This script:

1. starts the model server, unless ``OLLAMA_URL`` names a real Ollama:
   llama.cpp's ``llama-server`` with SmolLM2-135M behind the Ollama-API shim,
   both from bench/real_model (installed when missing, as the bench does);
2. starts Home Assistant on the config folder;
3. once, on a fresh config folder, through HA's own HTTP and websocket APIs:
   creates a development owner and a long-lived access token, exposes the
   demo lights, locks and covers to Assist, sets up the integration with the
   config flow and makes its conversation agent the preferred Assist
   pipeline's; on later runs it only points the entry at the model server
   when that changed; on every run, with the embedded model, it sets the
   entry's reply length (``num_predict``) to the smallest, so a question the
   model answers takes a minute or two, not several;
4. prints a banner with the link, the credentials, the token and a curl line;
5. on Ctrl-C (SIGINT) or SIGTERM stops all it started, Home Assistant first.

What it keeps is in ``<config>/develop/``: ``owner.json`` (credentials and
token) and the logs of Home Assistant's console and of llama-server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import secrets
import signal
import sys
import time
from pathlib import Path
from typing import Any, Final

import aiohttp

ROOT: Final = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench" / "real_model"))

from server import (  # noqa: E402
    CONTEXT,
    GGUF,
    LlamaServer,
    llama_server_path,
    model_path,
)
from shim import MODEL_NAME, OllamaShim  # noqa: E402

DOMAIN: Final = "ha_personal_assistant"
CLIENT_ID: Final = "http://localhost:8123/"
OWNER_NAME: Final = "Developer"
OWNER_USERNAME: Final = "dev"
EXPOSED_DOMAINS: Final = ("light", "lock", "cover")
# The embedded 135M model's replies: short, so a question takes seconds, not
# minutes (the integration's smallest; a capable model gets its default back).
DEVELOP_NUM_PREDICT: Final = 64
DEFAULT_NUM_PREDICT: Final = 512
HA_START_TIMEOUT: Final = 900.0
STOP_TIMEOUT: Final = 60.0

type JsonDict = dict[str, Any]


def say(text: str) -> None:
    """Print a step of the start-up."""
    print(f"[develop] {text}", flush=True)


def _select_options(field: JsonDict) -> list[str]:
    """Return the values a form field's select offers (none: free input)."""
    select = (field.get("selector") or {}).get("select") or {}
    return [
        option["value"] if isinstance(option, dict) else str(option)
        for option in select.get("options", [])
    ]


def options_answer(flow: JsonDict) -> JsonDict:
    """Return the options form's current values, as the form suggests them.

    Folded sections (the permission lists) are left out: the flow keeps them
    as they are. Empty optional fields are left out too (an entity field
    refuses an empty string).
    """
    answer: JsonDict = {}
    for field in flow.get("data_schema") or []:
        if field.get("type") == "expandable":
            continue
        value = (field.get("description") or {}).get("suggested_value")
        if value is None:
            value = field.get("default")
        if value is None or value == "":
            continue
        answer[field["name"]] = value
    return answer


class HassApi:
    """Home Assistant's REST and websocket APIs with one access token."""

    def __init__(self, session: aiohttp.ClientSession, base: str) -> None:
        """Talk to HA at ``base``; :meth:`set_token` before authorised calls."""
        self.session = session
        self.base = base
        self.token = ""
        self._ids = itertools.count(1)

    def set_token(self, token: str) -> None:
        """Use ``token`` from now on."""
        self.token = token

    async def request(
        self, method: str, path: str, body: JsonDict | None = None
    ) -> Any:
        """Call the REST API; return the JSON answer or raise on an error."""
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        async with self.session.request(
            method, f"{self.base}{path}", json=body, headers=headers
        ) as answer:
            text = await answer.text()
            if answer.status >= 400:  # noqa: PLR2004
                msg = f"{method} {path}: {answer.status} {text}"
                raise RuntimeError(msg)
            return json.loads(text) if text else None

    async def form(self, path: str, data: dict[str, str]) -> JsonDict:
        """POST a form (the token endpoint takes no JSON)."""
        async with self.session.post(f"{self.base}{path}", data=data) as answer:
            answer.raise_for_status()
            result: JsonDict = await answer.json()
            return result

    async def ws(self, *commands: JsonDict) -> list[Any]:
        """Send websocket commands in order; return their results."""
        results = []
        async with self.session.ws_connect(f"{self.base}/api/websocket") as socket:
            await socket.receive_json()  # auth_required
            await socket.send_json({"type": "auth", "access_token": self.token})
            if (answer := await socket.receive_json())["type"] != "auth_ok":
                msg = f"websocket auth failed: {answer}"
                raise RuntimeError(msg)
            for command in commands:
                number = next(self._ids)
                await socket.send_json({"id": number, **command})
                while (answer := await socket.receive_json()).get("id") != number:
                    pass
                if not answer.get("success"):
                    msg = f"{command['type']}: {answer.get('error')}"
                    raise RuntimeError(msg)
                results.append(answer.get("result"))
        return results


class ModelServer:
    """llama-server and the Ollama-API shim in front of it, or a real Ollama."""

    def __init__(self, state: Path, port: int) -> None:
        """Nothing runs yet."""
        self.state = state
        self.port = port
        self.llama: LlamaServer | None = None
        self.shim: OllamaShim | None = None
        self.url = ""
        self.model = ""
        self._reported = 0

    async def start(self) -> None:
        """Start llama-server and the shim; install them first when missing."""
        binary = await asyncio.to_thread(llama_server_path)
        gguf = await asyncio.to_thread(model_path)
        if binary is None or gguf is None:
            msg = "llama-server or the model is missing"
            raise RuntimeError(msg)
        threads = max(1, min(4, (os.cpu_count() or 2) // 2))
        self.llama = LlamaServer(
            binary,
            gguf,
            context=CONTEXT,
            threads=threads,
            log=self.state / "llama-server.log",
        )
        say(f"starting {binary.name} with {GGUF} ({threads} thread(s))")
        await asyncio.to_thread(self.llama.start)
        self.shim = OllamaShim(self.llama.url, context_length=CONTEXT)
        self.url = await self.shim.start(self.port)
        self.model = MODEL_NAME
        say(f"model server (Ollama API) on {self.url}, model {MODEL_NAME}")

    def report(self) -> None:
        """Print one line for each model request answered since the last call."""
        if self.shim is None:
            return
        for record in self.shim.records[self._reported :]:
            kind = "background" if record.background else "chat"
            what = (
                f"tool calls {', '.join(record.tool_calls)}"
                if record.tool_calls
                else f"{len(record.content)} characters"
            )
            error = f", error: {record.error}" if record.error else ""
            say(
                f"model: {kind} request, {record.prompt_tokens} prompt tokens, "
                f"{record.predicted_n} generated ({what}) in "
                f"{record.seconds:.1f} s{error}"
            )
        self._reported = len(self.shim.records)

    async def stop(self) -> None:
        """Stop the shim and llama-server. Idempotent."""
        if self.shim is not None:
            shim, self.shim = self.shim, None
            await shim.stop()
        if self.llama is not None:
            llama, self.llama = self.llama, None
            await asyncio.to_thread(llama.stop)


class Develop:
    """The whole run: start, set up once, print, wait, stop."""

    def __init__(self, config: Path, port: int, hass_args: list[str]) -> None:
        """Nothing runs yet."""
        self.config = config
        self.state = config / "develop"
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.hass_args = hass_args
        self.stopping = asyncio.Event()
        self.hass: asyncio.subprocess.Process | None = None
        self.models = ModelServer(
            self.state, int(os.environ.get("DEVELOP_MODEL_PORT", "11435"))
        )
        self.ollama_url = os.environ.get("OLLAMA_URL", "").rstrip("/")
        self.owner_file = self.state / "owner.json"
        self._agent = ""

    # ------------------------------------------------------------ processes

    async def start_hass(self) -> None:
        """Start Home Assistant, its console output going to a log file."""
        log = self.state / "home-assistant.console.log"
        say(f"starting Home Assistant on {self.base} (console output: {log})")
        with log.open("ab") as out:
            self.hass = await asyncio.create_subprocess_exec(
                str(ROOT / ".venv" / "bin" / "hass"),
                "--config",
                str(self.config),
                "--debug",
                *self.hass_args,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
            )

    async def stop_hass(self) -> None:
        """Stop Home Assistant (SIGTERM, then SIGKILL after a minute)."""
        process, self.hass = self.hass, None
        if process is None or process.returncode is not None:
            return
        say("stopping Home Assistant")
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        try:
            await asyncio.wait_for(process.wait(), STOP_TIMEOUT)
        except TimeoutError:
            say("Home Assistant did not stop in time: killing it")
            process.kill()
            await process.wait()

    def hass_exited(self) -> bool:
        """Return True when Home Assistant is no longer running."""
        return self.hass is None or self.hass.returncode is not None

    async def wait_for(self, what: str, check: Any, timeout: float) -> None:  # noqa: ASYNC109
        """Poll ``check()`` until it returns True; fail when HA or time runs out."""
        deadline = time.monotonic() + timeout
        while not await check():
            if self.stopping.is_set():
                raise asyncio.CancelledError
            if self.hass_exited():
                msg = f"Home Assistant exited while waiting for {what}"
                raise RuntimeError(msg)
            if time.monotonic() > deadline:
                msg = f"timed out waiting for {what}"
                raise RuntimeError(msg)
            await asyncio.sleep(1)

    # ------------------------------------------------------------- the setup

    async def owner(self, api: HassApi) -> JsonDict | None:
        """Create the owner and a long-lived token once; return what is known."""
        # Once onboarding is over, HA no longer serves its API (404).
        async with api.session.get(f"{self.base}/api/onboarding") as answer:
            steps = await answer.json() if answer.status == 200 else []  # noqa: PLR2004
        if not any(s["step"] == "user" and not s["done"] for s in steps):
            if self.owner_file.exists():
                owner: JsonDict = json.loads(self.owner_file.read_text())
                return owner
            say("this config folder was onboarded by hand: no token to print")
            return None
        password = secrets.token_urlsafe(12)
        say(f"creating the development owner {OWNER_USERNAME!r}")
        created = await api.request(
            "POST",
            "/api/onboarding/users",
            {
                "client_id": CLIENT_ID,
                "name": OWNER_NAME,
                "username": OWNER_USERNAME,
                "password": password,
                "language": "en",
            },
        )
        tokens = await api.form(
            "/auth/token",
            {
                "grant_type": "authorization_code",
                "code": created["auth_code"],
                "client_id": CLIENT_ID,
            },
        )
        api.set_token(tokens["access_token"])
        for step in ("core_config", "analytics"):
            await api.request("POST", f"/api/onboarding/{step}", {})
        await api.request(
            "POST",
            "/api/onboarding/integration",
            {"client_id": CLIENT_ID, "redirect_uri": f"{CLIENT_ID}?auth_callback=1"},
        )
        (token,) = await api.ws(
            {
                "type": "auth/long_lived_access_token",
                "client_name": "scripts/develop",
                "lifespan": 3650,
            }
        )
        owner = {"username": OWNER_USERNAME, "password": password, "token": token}
        self.owner_file.write_text(json.dumps(owner, indent=2) + "\n")
        self.owner_file.chmod(0o600)
        return owner

    async def expose(self, api: HassApi) -> None:
        """Expose the demo house's lights, locks and covers to Assist."""
        states = await api.request("GET", "/api/states")
        entity_ids = sorted(
            state["entity_id"]
            for state in states
            if state["entity_id"].split(".")[0] in EXPOSED_DOMAINS
        )
        await api.ws(
            {
                "type": "homeassistant/expose_entity",
                "assistants": ["conversation"],
                "entity_ids": entity_ids,
                "should_expose": True,
            }
        )
        say(f"exposed to Assist: {', '.join(entity_ids)}")

    async def run_flow(self, api: HassApi, start: JsonDict) -> JsonDict:
        """Run the config flow (new or reconfigure) to its end; return it.

        Each step is answered by the fields its form shows (its data_schema),
        not by a fixed list of steps: a step that asks for something this
        script cannot answer stops the run with the step and the field named.
        """
        flow = await api.request("POST", "/api/config/config_entries/flow", start)
        while flow["type"] == "form":
            if flow.get("errors"):
                msg = f"config flow step {flow['step_id']}: {flow['errors']}"
                raise RuntimeError(msg)
            answer = self.answer_step(flow)
            say(f"config flow step {flow['step_id']!r}: {json.dumps(answer)}")
            flow = await api.request(
                "POST", f"/api/config/config_entries/flow/{flow['flow_id']}", answer
            )
        if flow["type"] not in {"create_entry", "abort"}:
            msg = f"config flow ended with {flow}"
            raise RuntimeError(msg)
        if flow["type"] == "abort" and flow.get("reason") != "reconfigure_successful":
            msg = f"config flow aborted: {flow.get('reason')}"
            raise RuntimeError(msg)
        return dict(flow)

    def answer_step(self, flow: JsonDict) -> JsonDict:
        """Return the answer to one form: a value for each field this run knows.

        Fields this run has no value for are left to the flow when they are
        optional or have a default; a required field without a default fails.
        """
        step = flow["step_id"]
        answer: JsonDict = {}
        for field in flow.get("data_schema") or []:
            name = field["name"]
            value = self.field_value(name, field)
            if value is None:
                if field.get("required") and "default" not in field:
                    msg = (
                        f"config flow step {step!r} asks for {name!r}, which "
                        "scripts/develop_house.py cannot answer: teach "
                        "Develop.field_value about it"
                    )
                    raise RuntimeError(msg)
                continue
            options = _select_options(field)
            if options and value not in options:
                msg = (
                    f"config flow step {step!r}: {value!r} is not among the "
                    f"choices for {name!r} ({', '.join(options)})"
                )
                raise RuntimeError(msg)
            answer[name] = value
        return answer

    def field_value(self, name: str, field: JsonDict) -> str | None:
        """Return this run's value for a config-flow field, or None."""
        if name == "backend":
            # The embedded server's shim and OLLAMA_URL both speak Ollama's API.
            return "ollama"
        if name == "ollama_url":
            return self.models.url
        if name == "model":
            return self.pick_model(field)
        return None

    def pick_model(self, field: JsonDict) -> str | None:
        """Return the chat model: ours, OLLAMA_MODEL, or the flow's suggestion."""
        if self.models.model:
            return self.models.model
        wanted = os.environ.get("OLLAMA_MODEL")
        if wanted:
            return wanted
        suggested = (field.get("description") or {}).get("suggested_value")
        options = _select_options(field)
        if suggested:
            return str(suggested)
        return options[0] if options else None

    async def integration(self, api: HassApi) -> str:
        """Set up the entry once (or repoint it); return its conversation agent."""
        entries = await api.request(
            "GET", f"/api/config/config_entries/entry?domain={DOMAIN}"
        )
        created = False
        if not entries:
            say(f"setting up {DOMAIN} with {self.models.url}")
            await self.run_flow(api, {"handler": DOMAIN})
            created = True
        else:
            entry_id = entries[0]["entry_id"]
            current = await self.entry_url(api, entry_id)
            if current is not None and current != self.models.url:
                say(f"pointing {DOMAIN} at {self.models.url} (was {current})")
                await self.run_flow(api, {"handler": DOMAIN, "entry_id": entry_id})
        entries = await api.request(
            "GET", f"/api/config/config_entries/entry?domain={DOMAIN}"
        )
        await self.reply_length(api, entries[0]["entry_id"])
        agent = await self.agent(api)
        if created:
            await self.prefer_agent(api, agent)
        return agent

    async def reply_length(self, api: HassApi, entry_id: str) -> None:
        """Set the entry's ``num_predict`` for this model server by its options flow.

        The embedded 135M model gets the smallest reply length, a real Ollama
        the integration's default back when this script had set the small one;
        a length set by hand for a real Ollama is left alone.
        """
        flow = await api.request(
            "POST", "/api/config/config_entries/options/flow", {"handler": entry_id}
        )
        answer = options_answer(flow)
        current = answer.get("num_predict")
        wanted = current
        if not self.ollama_url:
            wanted = DEVELOP_NUM_PREDICT
        elif current == DEVELOP_NUM_PREDICT:
            wanted = DEFAULT_NUM_PREDICT
        if wanted == current:
            await api.request(
                "DELETE", f"/api/config/config_entries/options/flow/{flow['flow_id']}"
            )
            return
        say(f"options: num_predict {wanted} (was {current})")
        flow = await api.request(
            "POST",
            f"/api/config/config_entries/options/flow/{flow['flow_id']}",
            {**answer, "num_predict": wanted},
        )
        if flow["type"] != "create_entry":
            msg = f"options flow ended with {flow}"
            raise RuntimeError(msg)

    async def entry_url(self, api: HassApi, entry_id: str) -> str | None:
        """Return the entry's server URL, from the reconfigure form's suggestion."""
        flow = await api.request(
            "POST",
            "/api/config/config_entries/flow",
            {"handler": DOMAIN, "entry_id": entry_id},
        )
        await api.request(
            "DELETE", f"/api/config/config_entries/flow/{flow['flow_id']}"
        )
        for field in flow.get("data_schema", []):
            if field["name"] == "ollama_url":
                value = (field.get("description") or {}).get("suggested_value")
                return str(value).rstrip("/") if value else None
        return None

    async def agent(self, api: HassApi) -> str:
        """Return the entity id of the integration's conversation agent."""

        async def found() -> bool:
            (entities,) = await api.ws({"type": "config/entity_registry/list"})
            self._agent = next(
                (
                    e["entity_id"]
                    for e in entities
                    if e["platform"] == DOMAIN
                    and e["entity_id"].startswith("conversation.")
                ),
                "",
            )
            return bool(self._agent)

        await self.wait_for("the conversation agent", found, 120)
        return self._agent

    async def prefer_agent(self, api: HassApi, agent: str) -> None:
        """Make ``agent`` the preferred Assist pipeline's conversation agent."""
        (pipelines,) = await api.ws({"type": "assist_pipeline/pipeline/list"})
        preferred = next(
            p
            for p in pipelines["pipelines"]
            if p["id"] == pipelines["preferred_pipeline"]
        )
        fields = {
            key: preferred.get(key)
            for key in (
                "conversation_language",
                "language",
                "name",
                "stt_engine",
                "stt_language",
                "tts_engine",
                "tts_language",
                "tts_voice",
                "wake_word_entity",
                "wake_word_id",
            )
        }
        await api.ws(
            {
                "type": "assist_pipeline/pipeline/update",
                "pipeline_id": preferred["id"],
                **fields,
                "conversation_engine": agent,
                # Every sentence goes to the agent, not to HA's own intents.
                "prefer_local_intents": False,
            }
        )
        say(f"Assist pipeline {preferred['name']!r} now answers with {agent}")

    async def setup(self, session: aiohttp.ClientSession) -> None:
        """Bring HA to a house that answers; print the banner."""
        api = HassApi(session, self.base)

        async def http_up() -> bool:
            try:
                async with session.get(f"{self.base}/api/") as answer:
                    # 401 without a token: the HTTP server is up.
                    return answer.status > 0
            except aiohttp.ClientError:
                return False

        await self.wait_for("Home Assistant's HTTP server", http_up, HA_START_TIMEOUT)
        owner = await self.owner(api)
        if owner is None:
            self.banner(None, "")
            return
        api.set_token(owner["token"])

        async def running() -> bool:
            config = await api.request("GET", "/api/config")
            return bool(config["state"] == "RUNNING")

        await self.wait_for("Home Assistant to finish starting", running, 600)
        if not owner.get("exposed"):
            await self.expose(api)
            owner["exposed"] = True
            self.owner_file.write_text(json.dumps(owner, indent=2) + "\n")
        agent = await self.integration(api)
        self.banner(owner, agent)

    def banner(self, owner: JsonDict | None, agent: str) -> None:
        """Print what to open and how to talk to the house."""
        link = f"http://localhost:{self.port}"
        lines = ["", "=" * 78, f"  Home Assistant with the demo house: {link}"]
        if owner is not None:
            lines += [
                f"  Log in as {owner['username']!r}, password {owner['password']!r}",
                f"  (kept in {self.owner_file})",
                "",
                "  Long-lived access token:",
                f"    export TOKEN={owner['token']}",
                "",
                f"  Assist (the chat icon at the top right of {link}) talks to",
                f"  our agent {agent}. From a shell:",
                (
                    '    curl -H "Authorization: Bearer $TOKEN" '
                    "-H 'Content-Type: application/json' \\"
                ),
                (
                    '      -d \'{"text": "is the front door locked?", '
                    f'"agent_id": "{agent}"}}\' \\'
                ),
                f"      {link}/api/conversation/process",
            ]
        lines.append("")
        if self.ollama_url:
            lines.append(f"  Model server: the Ollama at {self.models.url}")
        else:
            lines += [
                (
                    f"  Model server: SmolLM2-135M ({MODEL_NAME}) in llama.cpp's "
                    "llama-server,"
                ),
                f"  behind the Ollama-API shim on {self.models.url}.",
                "",
                '  Known commands ("is the front door locked?", "turn on the kitchen',
                "  lights\") are answered at once and correctly by Home Assistant's",
                "  own intent recognizer, under the assistant's rules (its fast",
                "  path): no model call. Anything else goes to the model, and a 135M",
                "  model is far too small for this job: its replies (cut at",
                (
                    f"  {DEVELOP_NUM_PREDICT} tokens here, after a minute or two) are "
                    "often nonsense,"
                ),
                "  rarely a tool call. That part is a plumbing demo. For real answers",
                "  point the house at an Ollama with a capable model (the entry",
                "  follows on the next start):",
                (
                    "    OLLAMA_URL=http://my-ollama:11434 OLLAMA_MODEL=qwen3:4b "
                    "scripts/develop"
                ),
            ]
        lines += [
            "",
            "  Telegram is optional: see README.md, 'Development'.",
            f"  Logs: {self.config}/home-assistant.log. Ctrl-C stops everything.",
            "=" * 78,
            "",
        ]
        print("\n".join(lines), flush=True)

    # -------------------------------------------------------------- the run

    async def run(self) -> int:
        """Start everything, set up, wait for a stop; return the exit code."""
        loop = asyncio.get_running_loop()
        for number in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(number, self.stopping.set)
        self.state.mkdir(parents=True, exist_ok=True)
        code = 0
        try:
            if self.ollama_url:
                self.models.url = self.ollama_url
                say(f"using the Ollama at {self.ollama_url} (OLLAMA_URL)")
            else:
                await self.models.start()
            if self.stopping.is_set():
                return 0
            await self.start_hass()
            async with aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=60)
            ) as session:
                setup = asyncio.create_task(self.setup(session))
                while not self.stopping.is_set() and not self.hass_exited():
                    self.models.report()
                    await asyncio.sleep(0.5)
                    if setup.done() and setup.exception() is not None:
                        break
                self.models.report()
                if not setup.done():
                    setup.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await setup
        except Exception as err:  # noqa: BLE001 - said plainly, then everything stops
            say(f"failed: {err}")
            code = 1
        finally:
            if (
                self.hass is not None
                and self.hass.returncode is not None
                and not self.stopping.is_set()
            ):
                say(f"Home Assistant exited ({self.hass.returncode})")
                code = code or 1
            await self.stop_hass()
            await self.models.stop()
            say("stopped")
        return code


def main() -> int:
    """Parse the arguments and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--port", type=int, default=8123)
    parser.add_argument("hass_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    hass_args = [a for a in args.hass_args if a != "--"]
    return asyncio.run(Develop(args.config.resolve(), args.port, hass_args).run())


if __name__ == "__main__":
    sys.exit(main())
