"""How long the CLI takes before it does anything, against a bare interpreter in the same run.

Each command runs as a user types it (a fresh process, the installed entry point), 7 times;
the median is compared with `python -c pass` timed alternately with it, so machine noise hits
both alike. Goal (issue 18): `trainctl --help` and `trainctl ls` under 0.25 s.
Run: .venv/bin/python bench/cli_start.py
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

RUNS = 7
BIN = Path(sys.executable).parent
COMMANDS = {"trainctl --help": [str(BIN / "trainctl"), "--help"],
            "trainctl ls": [str(BIN / "trainctl"), "ls"]}
BASELINE = [sys.executable, "-c", "pass"]


def once(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    # An empty state home: `ls` reports that no stack is up, the same work on every machine.
    # (Not under /tmp: trainctl refuses a home there, local nodes would not see it.)
    home = Path("/var/lib/trainctl-bench") / uuid.uuid4().hex[:8]
    home.mkdir(parents=True)
    try:
        env = {**os.environ, "TRAINCTL_HOME": str(home)}
        print(f"{'command':<18} {'median s':>9} {'baseline s':>11} {'ratio':>7}  goal")
        for name, argv in COMMANDS.items():
            once(argv, env)  # warm the page cache
            samples, baseline = [], []
            for _ in range(RUNS):
                samples.append(once(argv, env))
                baseline.append(once(BASELINE, env))
            took, base = statistics.median(samples), statistics.median(baseline)
            verdict = "met" if took < 0.25 else "MISSED"
            print(f"{name:<18} {took:>9.3f} {base:>11.3f} {took / base:>6.1f}x  < 0.25 s: {verdict}")
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
