"""The full multi-turn taint fuzz: 10,000 sequences or more, run by hand.

The suite runs a sample of tests/test_taint_fuzz.py (500 sequences within
30 s, a new seed every run). This runs the same test with every sequence and
no time bound, and prints its figures: sequences, turns, turns that read
outside text, service calls and memory writes attempted in them, and the
unconfirmed changes and memory writes that got through (both must be 0).
The baseline of the same run is the control: turns after the outside text
left the prompt (/new, or the end of the window), where the same kind of
calls did run.

    .venv/bin/python bench/taint_fuzz.py             # 10,000, seed 20261126
    .venv/bin/python bench/taint_fuzz.py 20000 --seed 7
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    """Run the fuzz and print its figures; exit non-zero when it failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sequences", nargs="?", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=20261126)
    args = parser.parse_args()
    env = {
        **os.environ,
        "TAINT_FUZZ_SEQUENCES": str(args.sequences),
        "TAINT_FUZZ_SECONDS": "0",
        "TAINT_FUZZ_SEED": str(args.seed),
    }
    started = time.monotonic()
    result = subprocess.run(  # noqa: S603 - our own test runner, fixed arguments
        [
            str(ROOT / ".venv/bin/pytest"),
            "tests/test_taint_fuzz.py",
            "--no-cov",
            "-q",
            # Show the test's printed figures although it passed; keep only
            # warnings in the log HA's test harness captures.
            "-rP",
            "--log-level=WARNING",
            # The full run takes many minutes: no per-test time limit.
            "--timeout=0",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.monotonic() - started
    figures = [line for line in result.stdout.splitlines() if line.startswith("seed ")]
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} cores")
    for line in figures:
        print(line)
    print(f"wall time {elapsed:.0f} s; pytest exit {result.returncode}")
    if result.returncode != 0:
        print(result.stdout[-4000:])
        print(result.stderr[-2000:])
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
