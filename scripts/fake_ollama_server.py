"""Serve the test suite's fake Ollama on 127.0.0.1:11434 for screenshots and demos.

It lists a few models (qwen3:4b with tool support among them) and answers
every chat with a short text, so the config flow and a first message work on
a machine without Ollama.  Run: ``.venv/bin/python scripts/fake_ollama_server.py``
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fake_ollama import FakeOllama

PORT = 11434


async def main() -> None:
    """Serve until interrupted."""
    server = FakeOllama()
    server.default = lambda _request: "Hello from the fake Ollama."
    await server.start(PORT)
    print(f"fake Ollama on {server.url}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()


if __name__ == "__main__":
    asyncio.run(main())
