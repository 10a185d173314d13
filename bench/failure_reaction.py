"""How soon a run reacts to a rank that fails while the others finish, 3 local nodes, 3 attempts
each (2 job reruns): seconds from the failing rank's last line to trainctl's stop of the attempt.

  exit 1        sys.exit(1 if RANK == "1" else 0), torchrun's restarts left (max_restarts 5)
  abort at exit rank 1 finishes after the others, then dies of SIGABRT as its interpreter exits
  baseline      exit 1 with max_restarts 0: torchrun's agent gives up at once by itself

Before this change the first two waited out torchrun's exit barrier on every attempt (300 s,
LocalElasticAgent's exit_barrier_timeout); goal: within 10 s, about the baseline's figure.
Run as root: TRAINCTL_HOME=/var/lib/trainctl-bench .venv/bin/python bench/failure_reaction.py
"""

from __future__ import annotations

import re
import secrets
import statistics
import tempfile
import time
from pathlib import Path

from bootstrap.plan import BootstrapSpec
from bootstrap.runner import bootstrap
from infra.providers.local import realizer
from infra.spec.stack_config import REPO_ROOT, load_stack
from trainctl.launchers.spec import LaunchSpec
from trainctl.launchers.ssh.supervisor import launch

NODES = 3
RERUNS = 2
SCRIPTS = REPO_ROOT / "examples" / "failing-ranks"  # as users write them
CASES = {"exit 1": ("exit_on_rank1.py", 5), "abort at exit": ("abort_at_exit.py", 5),
         "baseline": ("exit_on_rank1.py", 0)}
LEFT = re.compile(r"^\[node\d r1\]:rank 1 leaving")
STOPPED = re.compile(r"^\[trainctl\] .*: stopping run ")


def delays(inventory, script: str, max_restarts: int, logs: Path) -> list[float]:
    """Per attempt: from rank 1's last line to trainctl's stop."""
    measured: list[float] = []
    left_at: list[float] = []

    def echo(line: str) -> None:
        now = time.monotonic()
        if LEFT.search(line):
            left_at.append(now)
        elif STOPPED.search(line) and left_at:
            measured.append(now - left_at.pop())

    spec = LaunchSpec(run_id=f"b-{secrets.token_hex(3)}", command=("python", script),
                      max_restarts=max_restarts, job_retries=RERUNS)
    result = launch(inventory, spec, logs, echo)
    assert not result.ok and result.attempts == RERUNS + 1, result.describe_failures()
    return measured


def main() -> None:
    name = f"bfail{secrets.token_hex(2)}"
    with tempfile.TemporaryDirectory() as tmp:
        inventory = realizer.up(load_stack("local", name=name, overrides={"nodes": NODES}))
        try:
            bootstrap(inventory, BootstrapSpec(code_dir=str(SCRIPTS), requirements="requirements.txt"),
                      Path(tmp) / "boot")
            figures = {case: delays(inventory, script, restarts, Path(tmp) / case.replace(" ", "-"))
                       for case, (script, restarts) in CASES.items()}
        finally:
            realizer.down(name, force=True)
    base = statistics.mean(figures["baseline"])
    for case, seconds in figures.items():
        each = ", ".join(f"{s:.2f}" for s in seconds)
        print(f"{case:>14}: failure -> stop per attempt {each} s; mean {statistics.mean(seconds):.2f} s, "
              f"{statistics.mean(seconds) / base:.2f}x the baseline")
    print(f"before: 300 s per attempt (torchrun's exit barrier); worst now {max(max(s) for s in figures.values()):.2f} s")


if __name__ == "__main__":
    main()
