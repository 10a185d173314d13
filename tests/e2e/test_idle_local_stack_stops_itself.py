"""A local stack stood up by `trainctl up` with idle_minutes goes down by itself once no run has
used it and its nodes' CPUs sat idle for that long; an open session (a run, an exec) or a busy
program keeps it up, and `trainctl ls` shows its idle time and cost so far. idle_minutes takes
fractions: 8 s keeps this within seconds."""

from __future__ import annotations

import textwrap
import time

import pytest

from conftest import leftovers, trainctl
from infra.providers.stack_home import state_dir

pytestmark = pytest.mark.e2e

IDLE_SECONDS = 8
# Busy by the idle rule (above IDLE_CPU_CORES, 0.05) at a fifth of a core: this machine's cores
# stay for the other tests running beside this one.
BUSY_PROGRAM = ("import time\nwhile True:\n    t = time.time()\n    while time.time() - t < 0.02: pass\n"
                "    time.sleep(0.08)\n")


def still_up(stack: str) -> bool:
    return state_dir(stack).is_dir()


def gone_within(stack: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not state_dir(stack).exists() and leftovers(stack) == []:
            return True
        time.sleep(1)
    return False


def test_an_idle_local_stack_goes_down_by_itself_but_not_while_used_or_busy(tmp_path, trainctl_home):
    stack = "idler"
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_text(textwrap.dedent(f"""\
        config:
          trainctl:provider: local
          trainctl:nodes: 1
          trainctl:machine_type: n1-standard-1
          trainctl:idle_minutes: {IDLE_SECONDS / 60}
        """))
    up = trainctl("up", "--stack", str(path))
    assert up.returncode == 0, up.stderr

    # Used for longer than idle_minutes, by a session that costs no CPU: it stays up.
    used = trainctl("exec", "--stack", stack, "--", f"sleep {IDLE_SECONDS + 10}")
    assert used.returncode == 0, used.stdout + used.stderr
    assert still_up(stack)
    listed = trainctl("ls")
    row = next((line for line in listed.stdout.splitlines() if f" {stack} " in line), listed.stdout)
    assert "idle" in listed.stdout and " min" in row and "$0.00" in row, listed.stdout

    # No session, but a program left running keeps its CPU busy: it stays up.
    busy = trainctl("exec", "--stack", stack, "--",
                    f"setsid nohup python3 -c '{BUSY_PROGRAM}' idle-test-spin >/dev/null 2>&1 &")
    assert busy.returncode == 0, busy.stdout + busy.stderr
    time.sleep(IDLE_SECONDS + 10)
    assert still_up(stack)
    stopped = trainctl("exec", "--stack", stack, "--", "pkill -f idle-test-spin")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr

    # Unused and idle: it goes, everything of it, without anyone running `down`.
    assert gone_within(stack, IDLE_SECONDS + 60), leftovers(stack)
