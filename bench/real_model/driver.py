"""Hold the scripted conversation with one checkout of the integration.

Started by run.py in a process of its own, once per checkout and house:
``REAL_MODEL_CHECKOUT`` is the checkout whose ``custom_components`` Home
Assistant loads (the working tree, or a temporary worktree of ``--ref``),
``REAL_MODEL_CONFIG`` a JSON object (llama_url, context, entities, out, and
backend: "ollama" for the Ollama shim, "openai" for llama-server's own
OpenAI API through the integration's OpenAI-compatible backend).
Everything else (this driver, the shim, the Telegram harness) comes from the
bench's own tree, so both checkouts are driven the same way.

It runs under pytest for pytest-homeassistant-custom-component's ``hass``
and the Telegram harness (HA's real telegram_bot with webhooks), sets up the
demo house (plus generated entities), configures the integration against the
Ollama shim with only the fixed interface (config entry ``ollama_url`` and
``model``), and plays script.SCRIPT through Telegram: Assistant.async_turn
is reached the way a user reaches it. Results go to ``out`` as JSON.
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import json
import logging
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

HERE = Path(__file__).resolve().parent
BENCH_ROOT = HERE.parents[1]
CHECKOUT = Path(os.environ.get("REAL_MODEL_CHECKOUT", str(BENCH_ROOT))).resolve()
# The checkout's custom_components must be the first one Python finds.
for _entry in (str(CHECKOUT), str(HERE)):
    while _entry in sys.path:
        sys.path.remove(_entry)
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(CHECKOUT))


def _run_pytest() -> int:
    import pytest  # noqa: PLC0415 - only when run as a script

    return int(
        pytest.main(
            [
                __file__, "-q", "-s", "-p", "no:randomly", "-p", "no:cacheprovider",
                "--timeout=7200", "-o", "addopts=", "-W", "ignore::DeprecationWarning",
                "--rootdir", str(BENCH_ROOT), "-c", str(BENCH_ROOT / "setup.cfg"),
            ]
        )
    )  # fmt: skip


if __name__ == "__main__":
    # pytest imports this file again, after its plugins, for the fixtures.
    sys.exit(_run_pytest())

# ruff: noqa: E402, I001 -- the checkout's custom_components must be imported first
import custom_components
import pytest
from pytest_homeassistant_custom_component.common import (  # type: ignore[import-untyped]
    MockConfigEntry,
)

from script import SCRIPT, Step, async_setup_house, state_line
from direct import OpenAIRecorder
from shim import MODEL_NAME, OllamaShim

if TYPE_CHECKING:
    from homeassistant.core import HomeAssistant

_LOADED = [Path(p).resolve() for p in custom_components.__path__]
assert CHECKOUT / "custom_components" in _LOADED, (_LOADED, CHECKOUT)


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# The bench's own harness, whatever the checkout's tests/ hold.
_harness = _load(
    "real_model_telegram_harness", BENCH_ROOT / "tests" / "telegram_harness.py"
)
telegram = _harness.telegram
telegram_api = _harness.telegram_api
ALICE = _harness.ALICE_ID

DOMAIN = "ha_personal_assistant"
QUIET_SECONDS = 2.0
STEP_TIMEOUT = 1800.0


@pytest.fixture
def telegram_chat_ids() -> list[int]:
    """Alice's private chat only."""
    return [ALICE]


@pytest.fixture(autouse=True)
def auto_enable_custom_integrations(enable_custom_integrations: None) -> None:
    """Let HA load integrations from custom_components."""


@pytest.fixture
def hass_config_dir(hass_tmp_config_dir: str) -> str:
    """Give the run a fresh config directory: no database from an earlier run."""
    return hass_tmp_config_dir


class TimedCalls(list[Any]):
    """The fake Bot API's call list, stamping when each call was made."""

    def __init__(self, calls: list[Any]) -> None:
        """Take over the calls made so far (stamped now)."""
        super().__init__()
        for call in calls:
            self.append(call)

    def append(self, call: Any) -> None:
        """Record the call and its time."""
        call.at = time.monotonic()
        super().append(call)


def _quiet_logs() -> None:
    """Run like production: no asyncio debug mode, warnings-only logging."""
    asyncio.get_running_loop().set_debug(False)
    logging.getLogger().setLevel(logging.WARNING)
    for name in ("homeassistant", "httpx", "aiohttp", "custom_components", "telegram"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _describe_checkout() -> str:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(CHECKOUT), *args], capture_output=True, text=True,
            check=False,
        ).stdout.strip()  # fmt: skip

    dirty = git("status", "--porcelain", "--", "custom_components")
    revision = git("rev-parse", "--short=10", "HEAD")
    return f"{revision} + uncommitted changes" if dirty else revision


async def _wait(condition: Any, timeout: float, what: str) -> None:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            msg = f"timed out after {timeout:.0f} s waiting for {what}"
            raise AssertionError(msg)
        await asyncio.sleep(0.05)


async def _settle(shim: OllamaShim, api: Any) -> None:
    """Wait until no model request runs and nothing happened for a while."""

    def quiet() -> bool:
        now = time.monotonic()
        last_call = api.calls[-1].at if api.calls else 0.0
        return (
            shim.in_flight == 0
            and now - shim.last_activity >= QUIET_SECONDS
            and now - last_call >= QUIET_SECONDS / 2
        )

    await _wait(quiet, STEP_TIMEOUT, "the house to settle")


def _sent(api: Any, method: str) -> list[Any]:
    return [
        call
        for call in api.calls
        if call.method.lower() == method.lower()
        and call.ok
        and call.params.get("chat_id") in (ALICE, None)
    ]


async def _async_step(
    hass: HomeAssistant, telegram: Any, shim: OllamaShim, step: Step, *, scripted: bool
) -> dict[str, Any]:
    """Play one step; return what the server did for it."""
    api = telegram.api
    facts = [state_line(hass, entity_id) for entity_id in step.about]
    facts += list(step.facts)
    first_record = len(shim.records)
    started = time.monotonic()
    reply = ""
    if step.kind == "press":

        def keyboard() -> list[Any]:
            return [m for m in telegram.bot_messages(ALICE) if "reply_markup" in m]

        await _wait(lambda: bool(keyboard()), 60, "a message with buttons")
        buttons = keyboard()[-1]["reply_markup"]["inline_keyboard"][0]
        data = next(b["callback_data"] for b in buttons if b["text"] == step.text)
        before = len(_sent(api, "answerCallbackQuery"))
        await telegram.press_button(data, chat_id=ALICE)
        await _wait(lambda: len(_sent(api, "answerCallbackQuery")) > before,
                    STEP_TIMEOUT, "the button's answer")  # fmt: skip
        answered = _sent(api, "answerCallbackQuery")[before]
        ended = answered.at
        reply = str(answered.params.get("text") or "")
    else:
        for calls in step.force:
            shim.force(list(calls))
        if scripted and step.reply:
            shim.force_reply(step.reply)
        before = len(_sent(api, "sendMessage"))
        if step.kind == "command":
            await telegram.send_command(step.text, chat_id=ALICE)
        else:
            await telegram.send_text(step.text, chat_id=ALICE)
        await _wait(lambda: len(_sent(api, "sendMessage")) > before,
                    STEP_TIMEOUT, "the reply")  # fmt: skip
        answer = _sent(api, "sendMessage")[before]
        ended = answer.at
        reply = str(answer.params.get("text") or "")
    await _settle(shim, api)
    unused = shim.forced_pending()
    shim.clear_forced()
    records = shim.records[first_record:]
    # The turn's requests start before the reply; summaries and learning are
    # told apart by the shim (no tools, or a final request marker).
    turn = [r for r in records if r.started <= ended and not r.background]
    background = [r for r in records if r not in turn]
    return {
        "kind": step.kind,
        "text": step.text,
        "note": step.note,
        "forced": [[name for name, _ in calls] for calls in step.force],
        "forced_unused": unused,
        "facts": facts,
        "reply": reply,
        "seconds": ended - started,
        "requests": [r.as_dict() for r in turn],
        "background": [
            {**r.as_dict(), "during_turn": r.started <= ended} for r in background
        ],
    }


async def _quick_background(
    entry: MockConfigEntry, shim: OllamaShim, api: Any, work: Any = None
) -> list[dict[str, Any]]:
    """Run ``work`` as a background call now, then wait for the prefix warm-up.

    The quiet period (a minute) and the warm-up's debounce are shortened for
    this only, so the bench need not wait for them; a checkout without a
    warm-up (``runtime_data.warmer``) just runs ``work``. Returns the
    requests that went out meanwhile.
    """
    first = len(shim.records)
    assistant = entry.runtime_data.assistant
    model_queue = assistant.model_queue
    warmer = getattr(entry.runtime_data, "warmer", None)
    quiet = model_queue.quiet_seconds
    model_queue.quiet_seconds = 0.0
    try:
        sent = warmer.sent if warmer is not None else 0
        if warmer is not None:
            warmer.debounce = 0.2
        if work is not None:
            await model_queue.async_run(work, "bench background")
        elif warmer is not None:
            # After setup: the warm-up setup asked for, without the minute.
            warmer.request("bench: setup")
        if warmer is not None:
            await _wait(lambda: warmer.sent > sent, STEP_TIMEOUT, "the warm-up")
        await _settle(shim, api)
    finally:
        model_queue.quiet_seconds = quiet
    return [{**r.as_dict(), "during_turn": False} for r in shim.records[first:]]


def _summary_call(entry: MockConfigEntry) -> Any:
    """Return a background call laid out like a summary (prefix, then a request)."""
    from langchain_core.messages import HumanMessage  # noqa: PLC0415

    history = entry.runtime_data.assistant.history
    assert history is not None

    async def call() -> Any:
        # The system prompt first, as summaries and learning send it.
        return await history.background.async_ask(
            [
                HumanMessage(
                    content="[Summary request] Summarize the household's day so "
                    "far in one short sentence."
                ),
            ]
        )

    return call


async def _template_costs(shim: OllamaShim) -> dict[str, int]:
    """Measure the chat template's tokens around each kind of message."""

    async def count(messages: list[dict[str, Any]], *, gen: bool = False) -> int:
        return len(
            await shim.tokenize(await shim.render(messages, generation_prompt=gen))
        )

    def calls(k: int) -> dict[str, Any]:
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": f"c{i}", "type": "function",
                 "function": {"name": "get_state", "arguments": {"entity_id": "x"}}}
                for i in range(k)
            ],
        }  # fmt: skip

    user = {"role": "user", "content": "Hello there"}
    later = {"role": "user", "content": "And now?"}
    answer = {"role": "assistant", "content": "It is on."}
    word = len(await shim.tokenize("Hello there"))
    result = "Kitchen Lights (light.kitchen_lights): on"
    result_tokens = len(await shim.tokenize(result))
    costs = {
        "user": await count([user]) - word,
        "generation_prompt": await count([user], gen=True) - await count([user]),
    }
    costs["end_of_generation"] = (
        await count([user, answer, later])
        - await count([user])
        - len(await shim.tokenize("It is on."))
        - (await count([later]))
        - costs["generation_prompt"]
    )
    for k in (1, 2, 3):
        tools = [
            {"role": "tool", "tool_call_id": f"c{i}", "content": result}
            for i in range(k)
        ]
        costs[f"tool_results_{k}"] = (
            await count([user, calls(k), *tools, later])
            - await count([user, calls(k), later])
            - k * result_tokens
        )
    return costs


async def _tokens(shim: OllamaShim, texts: list[str]) -> list[int]:
    return [len(await shim.tokenize(text)) for text in texts]


async def _floor(shim: OllamaShim, step: dict[str, Any], costs: dict[str, int]) -> None:
    """Add the step's floor: what the server must evaluate no matter what."""
    requests = step["requests"]
    step["floor"] = 0
    if step["kind"] != "say" or not requests:
        return
    user = len(await shim.tokenize(step["text"]))
    facts = len(await shim.tokenize("\n".join(step["facts"]))) if step["facts"] else 0
    rounds: list[list[str]] = []
    for previous, current in itertools.pairwise(requests):
        new = Counter(current["tool_results"]) - Counter(previous["tool_results"])
        if new:
            rounds.append(list(new.elements()))
    results = 0
    for texts in rounds:
        results += sum(await _tokens(shim, texts))
    wrappers = sum(
        costs.get(f"tool_results_{len(r)}", costs["tool_results_1"] * len(r))
        for r in rounds
    )
    per_request = costs["generation_prompt"] + costs["end_of_generation"]
    step["floor_parts"] = {
        "user_text": user,
        "live_facts": facts,
        "tool_results": results,
        "template": costs["user"] + wrappers + per_request * len(requests),
    }
    step["floor"] = sum(step["floor_parts"].values())


async def test_real_model(
    hass: HomeAssistant,
    telegram: Any,
    socket_enabled: None,  # noqa: ARG001 - llama-server is on loopback
) -> None:
    """Play the script; write what every model request cost to ``out``."""
    config = json.loads(os.environ["REAL_MODEL_CONFIG"])
    _quiet_logs()
    telegram.api.calls = TimedCalls(telegram.api.calls)
    # "ollama": the Ollama shim; "openai": llama-server's own OpenAI API
    # through the integration's OpenAI-compatible backend (direct.py).
    backend = config.get("backend", "ollama")
    shim_class = OpenAIRecorder if backend == "openai" else OllamaShim
    shim = shim_class(
        config["llama_url"], context_length=config["context"], default_cap=config["cap"]
    )
    url = await shim.start()
    data: dict[str, Any] = {"ollama_url": url, "model": MODEL_NAME}
    if backend == "openai":
        url = f"{url}/v1"
        data = {"backend": "openai_compatible", "base_url": url, "model": MODEL_NAME}
    steps: list[dict[str, Any]] = []
    try:
        exposed = await async_setup_house(hass, config["entities"])
        entry = MockConfigEntry(
            domain=DOMAIN,
            title=MODEL_NAME,
            unique_id=url,
            data=data,
            # A slow shared CPU: give each model request time to finish.
            options={"request_timeout": 600},
        )
        entry.add_to_hass(hass)
        assert await hass.config_entries.async_setup(entry.entry_id)
        await hass.async_block_till_done()
        await _settle(shim, telegram.api)
        # The setup's warm-up (a checkout that has one), as background.
        setup = (
            await _quick_background(entry, shim, telegram.api)
            if config.get("warm", True)
            else []
        )
        costs = await _template_costs(shim)
        for number, step in enumerate(SCRIPT, 1):
            result = await _async_step(
                hass, telegram, shim, step, scripted=config["replies"] == "scripted"
            )
            await _floor(shim, result, costs)
            if number in config.get("background_after", []):
                # A background call (as a summary) evicts the chat on one slot.
                result["background"] += await _quick_background(
                    entry, shim, telegram.api, _summary_call(entry)
                )
            steps.append(result)
            evaluated = sum(r["prompt_n"] for r in result["requests"])
            print(
                f"  step {number:2d} {step.kind:7s} {len(result['requests'])} requests,"
                f" {evaluated} tokens evaluated, {result['seconds']:.1f} s:"
                f" {step.text[:40]}",
                flush=True,
            )
        first = next(r for s in steps for r in s["requests"])
        tools = shim.tools_seen
        prefix = await shim.render(
            [{"role": "system", "content": first["system"]}],
            tools,
            generation_prompt=False,
        )
        prefix_tokens = len(await shim.tokenize(prefix))
        await hass.config_entries.async_unload(entry.entry_id)
        await hass.async_block_till_done()
    finally:
        await shim.stop()
    Path(config["out"]).write_text(  # noqa: ASYNC240 - the run is over
        json.dumps(
            {
                "checkout": str(CHECKOUT),
                "revision": _describe_checkout(),
                "backend": backend,
                "entities": config["entities"],
                "cap": config["cap"],
                "replies": config["replies"],
                "exposed": exposed,
                "template_costs": costs,
                "setup": setup,
                "prefix_tokens": prefix_tokens,
                "tools": len(tools or []),
                "steps": steps,
            },
            indent=1,
        )
    )
