"""The command that stops a run on a node (bootstrap/remote_stop.stop_marked), against the scan
it replaced, on this machine's processes.

    .venv/bin/python bench/stop_scan.py [--rounds 3] [--grace 1.0]

Both stop a process that ignores SIGTERM and carries the run's marker, so each polls for the
whole grace, ten looks a second, then kills it:
  baseline  a look runs `tr | grep` on every process's environment (two processes per process)
  grep      a look is one `grep -lxzF` over every environment (stop_marked today)
CPU-s is user+system of the stop command and everything it started (getrusage of the reaped
children); the number of processes on the machine is printed, since a look's cost grows with it.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bootstrap.remote_stop import stop_marked  # noqa: E402
from cpu_wall import compare  # noqa: E402  (bench/, this script's folder)

STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(600)"


def baseline_stop(marker: str, grace: float) -> str:
    """The scan as it was: per process, `tr` its environment into `grep`."""
    quoted = shlex.quote(marker)
    scan = ("for p in /proc/[0-9]*; do "
            f"if tr '\\0' '\\n' < $p/environ 2>/dev/null | grep -qx {quoted}; then "
            "{action}; fi; done")
    left = "left=0; " + scan.format(action="left=1") + '; [ "$left" = 1 ]'
    polls = int(grace / 0.1)
    return (f"{scan.format(action='kill -TERM ${p#/proc/} 2>/dev/null')}; "
            f"i=0; while [ $i -lt {polls} ] && {{ {left}; }}; do sleep 0.1; i=$((i+1)); done; "
            f"{scan.format(action='kill -KILL ${p#/proc/} 2>/dev/null')}; true")


def one_stop(make_command: Callable[[str, float], str], grace: float) -> tuple[float, float]:
    marker = f"BENCH_STOP={uuid.uuid4().hex[:8]}"
    name, value = marker.split("=")
    victim = subprocess.Popen([sys.executable, "-c", STUBBORN], env={**os.environ, name: value},
                              stdout=subprocess.PIPE, text=True)
    assert victim.stdout is not None and victim.stdout.readline() == "up\n"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    subprocess.run(["bash", "-c", make_command(marker, grace)], check=True, timeout=600, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - started
    assert victim.wait(10) == -9
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--grace", type=float, default=1.0)
    args = parser.parse_args()
    processes = len([p for p in os.listdir("/proc") if p.isdigit()])
    print(f"{processes} processes on this machine, grace {args.grace:g} s")
    compare(args.rounds, ("baseline", lambda: one_stop(baseline_stop, args.grace)),
            ("grep", lambda: one_stop(stop_marked, args.grace)))

if __name__ == "__main__":
    main()
