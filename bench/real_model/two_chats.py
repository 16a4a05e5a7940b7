"""Two chats that take turns on one model server: what each message costs.

Two Telegram chats (Alice and Bob) write in turn, five messages each, each
request the integration's real prefix (system prompt and every tool of the
working tree, or of ``--ref``'s checkout) followed by that chat's own
history. Sent straight to llama-server (``/apply-template``, then
``/completion`` with ``cache_prompt``), ten requests per setting:

- one slot, no host-RAM cache (``--parallel 1 --cache-ram 0``): a default
  Ollama before its llama-server engine;
- one slot, the host-RAM cache at llama-server's default (8 GiB): today's
  Ollama with the llama-server engine, and llama-server's own default;
- two slots, no RAM cache, the server choosing the slot (by how much of the
  prompt a slot holds): ``OLLAMA_NUM_PARALLEL=2``;
- two slots, each chat pinned to its slot with ``id_slot``.

Prints the tokens evaluated per message (the first message of each chat
apart: it must read its history's start anyway) and the reuse ratio.

    .venv/bin/python bench/real_model/two_chats.py [--ref REF] [--prefix-only]

``--prefix-only`` prints only each checkout's prefix in tokens (and its
parts), on one server.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from server import (  # noqa: E402
    CACHE,
    ROOT,
    LlamaServer,
    check_flags,
    llama_server_path,
    model_path,
    say,
)

ALICE = [
    "Are the kitchen lights on?",
    "Turn them off, please.",
    "Is the front door locked?",
    "How warm is it outside?",
    "Thanks, that's all.",
]
BOB = [
    "Is the garage door open?",
    "Close it.",
    "Which lights are on upstairs?",
    "Turn off the bed light.",
    "Good night.",
]
SETTINGS = (
    ("1 slot, --cache-ram 0", {"parallel": 1, "cache_ram": 0}, False),
    ("1 slot, RAM cache (default 8 GiB)", {"parallel": 1, "cache_ram": None}, False),
    ("2 slots, server picks", {"parallel": 2, "cache_ram": 0}, False),
    ("2 slots, id_slot per chat", {"parallel": 2, "cache_ram": 0}, True),
    ("2 slots + RAM cache, id_slot", {"parallel": 2, "cache_ram": None}, True),
)
DUMP = """
import json, sys
from unittest.mock import MagicMock
from custom_components.ha_personal_assistant.agent.prompts import SYSTEM_PROMPT
from custom_components.ha_personal_assistant.tools.ha import HA_TOOLS
from custom_components.ha_personal_assistant.tools.recorder import RECORDER_TOOLS
from custom_components.ha_personal_assistant.tools.web import web_tools
from custom_components.ha_personal_assistant.tools.documents import document_tools
from custom_components.ha_personal_assistant.tools.memory import memory_tools
from custom_components.ha_personal_assistant.tasks.tools import task_tools
from custom_components.ha_personal_assistant.tools.registry import ToolRegistry
registry = ToolRegistry([*HA_TOOLS, *RECORDER_TOOLS, *web_tools(MagicMock()),
    *document_tools(MagicMock()), *memory_tools(MagicMock()),
    *task_tools(MagicMock())])
json.dump({"system": SYSTEM_PROMPT, "tools": registry.schemas()}, sys.stdout)
"""


def _post(url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(  # noqa: S310 - loopback
        url + path, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=600) as answer:  # noqa: S310
        return dict(json.loads(answer.read()))


def prefix_of(checkout: Path) -> dict[str, Any]:
    """Return the checkout's system prompt and every tool's schema."""
    result = subprocess.run(
        [sys.executable, "-c", DUMP],
        cwd=checkout,
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(result.stdout))


def prefix_tokens(url: str, prefix: dict[str, Any]) -> int:
    """Return the prefix's real tokens: the system turn with the tools."""
    messages = [
        {"role": "system", "content": prefix["system"]},
        {"role": "user", "content": "X"},
    ]
    prompt = _post(
        url, "/apply-template", {"messages": messages, "tools": prefix["tools"]}
    )["prompt"]
    head = prompt[: prompt.index("<|im_start|>user")]
    return len(_post(url, "/tokenize", {"content": head})["tokens"])


def print_prefix(url: str, name: str, prefix: dict[str, Any]) -> None:
    """Print the prefix's tokens, and of its parts: the prompt, the tools' JSON."""

    def tokens(text: str) -> int:
        return len(_post(url, "/tokenize", {"content": text})["tokens"])

    spaced = "\n".join(json.dumps(tool) for tool in prefix["tools"])
    compact = "\n".join(
        json.dumps(tool, separators=(",", ":")) for tool in prefix["tools"]
    )
    print(
        f"{name:28s} | prefix {prefix_tokens(url, prefix):5d} "
        f"({len(prefix['tools'])} tools) | system prompt {tokens(prefix['system'])}"
        f" | tools' JSON as tojson {tokens(spaced)}, compact {tokens(compact)}",
        flush=True,
    )


def _turn(
    url: str, prefix: dict[str, Any], history: list[dict[str, Any]], slot: int | None
) -> tuple[int, int]:
    """Send one chat's next request; return (evaluated, cached) tokens."""
    messages = [{"role": "system", "content": prefix["system"]}, *history]
    prompt = _post(
        url,
        "/apply-template",
        {"messages": messages, "tools": prefix["tools"], "add_generation_prompt": True},
    )["prompt"]
    body: dict[str, Any] = {
        "prompt": prompt,
        "n_predict": 12,
        "temperature": 0,
        "seed": 42,
        "cache_prompt": True,
        "stop": ["<|im_end|>", "<|im_start|>"],
    }
    if slot is not None:
        body["id_slot"] = slot
    answer = _post(url, "/completion", body)
    history.append({"role": "assistant", "content": str(answer["content"]).strip()})
    timings = answer["timings"]
    return int(timings["prompt_n"]), int(timings["cache_n"])


def run_setting(
    url: str, prefix: dict[str, Any], *, pinned: bool
) -> list[tuple[str, int, int]]:
    """Alternate the two chats; return (chat, evaluated, cached) per request."""
    chats: dict[str, list[dict[str, Any]]] = {"alice": [], "bob": []}
    rows = []
    for alice, bob in zip(ALICE, BOB, strict=True):
        for name, text, slot in (("alice", alice, 0), ("bob", bob, 1)):
            chats[name].append(
                {
                    "role": "user",
                    "content": f"{text}\n\n[Context]\nTime: 19:{len(rows):02d}",
                }
            )
            evaluated, cached = _turn(
                url, prefix, chats[name], slot if pinned else None
            )
            rows.append((name, evaluated, cached))
    return rows


def main() -> None:
    """Measure every setting for the working tree (and --ref), print a table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", default=None, help="also measure this git ref")
    parser.add_argument(
        "--prefix-only",
        action="store_true",
        help="only each checkout's prefix in tokens, on one server",
    )
    args = parser.parse_args()
    binary = llama_server_path()
    assert binary is not None
    check_flags(binary)
    gguf = model_path()
    assert gguf is not None
    checkouts = [("working tree", ROOT)]
    worktree: Path | None = None
    if args.ref:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--verify", args.ref],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        worktree = CACHE / f"two-chats-{commit[:12]}"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet",
             str(worktree), commit], check=True,
        )  # fmt: skip
        checkouts.append((f"ref {args.ref} {commit[:10]}", worktree))
    logs = CACHE / "runs" / time.strftime("two-chats-%Y%m%d-%H%M%S")
    try:
        if args.prefix_only:
            with LlamaServer(binary, gguf, log=logs / "prefix.log") as server:
                for name, checkout in checkouts:
                    print_prefix(server.url, name, prefix_of(checkout))
            return
        for name, checkout in checkouts:
            prefix = prefix_of(checkout)
            for label, settings, pinned in SETTINGS:
                say(f"{name}: {label}")
                log = logs / f"{label.replace(' ', '_').replace('/', '')}.log"
                with LlamaServer(binary, gguf, log=log, **settings) as server:
                    tokens = prefix_tokens(server.url, prefix)
                    rows = run_setting(server.url, prefix, pinned=pinned)
                later = rows[2:]
                evaluated = sum(e for _, e, _ in later)
                prompt = sum(e + c for _, e, c in later)
                print(
                    f"{name:28s} | {label:34s} | prefix {tokens:5d} | first two "
                    f"{rows[0][1]:5d} + {rows[1][1]:5d} | then per message "
                    f"{evaluated / len(later):7.1f} (min {min(e for _, e, _ in later)},"
                    f" max {max(e for _, e, _ in later)}) | reuse "
                    f"{1 - evaluated / prompt:6.1%}",
                    flush=True,
                )
    finally:
        if worktree is not None:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force",
                 str(worktree)], check=False,
            )  # fmt: skip


if __name__ == "__main__":
    main()
