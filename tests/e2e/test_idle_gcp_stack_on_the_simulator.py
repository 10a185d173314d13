"""A GCP VM stack stood up with idle_minutes in a simulated project stops itself without the
user's laptop: the watch on its node 0 (started by the node's startup script) sees no session
and an idle CPU for that long, marks the stack's VMs expired through Compute with node 0's own
token (its account may do nothing else), and the reaper deletes them; while a session runs it
marks nothing; `ls` shows its idle time and cost so far; `down` afterwards removes the rest
without an error; nothing is left. idle_minutes takes fractions: 8 s here."""

from __future__ import annotations

import textwrap
import time

import pytest

from tests.conftest import trainctl
from tests.e2e.test_gcp_stack_on_the_simulator import _leftovers, simulated_home  # noqa: F401 (a fixture)

pytestmark = pytest.mark.e2e

IDLE_SECONDS = 8
PROJECT = "idle-project"


def expired_vms() -> list[str]:
    listed = trainctl("reap", "--project", PROJECT, "--dry-run", "--simulate")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    return [line.split()[0] for line in listed.stdout.splitlines() if "expired" in line]


def marked_within(seconds: float) -> list[str]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = expired_vms()
        if found:
            return found
        time.sleep(2)
    return []


def test_an_idle_gcp_vm_stack_marks_itself_for_the_reaper_but_not_while_used(simulated_home, tmp_path):  # noqa: F811
    stack = "idlegcp"
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_text(textwrap.dedent(f"""\
        config:
          gcp:project: {PROJECT}
          gcp:zone: us-central1-a
          trainctl:provider: gcp
          trainctl:kind: vm
          trainctl:nodes: 1
          trainctl:machine_type: n1-standard-2
          trainctl:ssh:
            source_ranges: ["203.0.113.0/24"]
          trainctl:idle_minutes: {IDLE_SECONDS / 60}
        """))
    try:
        up = trainctl("up", "--stack", str(path), "--simulate", timeout=600)
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]

        # Used for longer than idle_minutes by a session that costs no CPU: nothing is marked.
        used = trainctl("exec", "--stack", stack, "--", f"sleep {IDLE_SECONDS + 10}")
        assert used.returncode == 0, used.stdout + used.stderr
        assert expired_vms() == []
        listed = trainctl("ls")
        row = next((line for line in listed.stdout.splitlines() if f" {stack} " in line), listed.stdout)
        assert " min" in row and "$" in row, listed.stdout

        # Unused and idle: node 0 marks the stack's VM expired, and the reaper takes it.
        assert marked_within(IDLE_SECONDS + 90) == [f"{stack}-node-0"]
        reaped = trainctl("reap", "--project", PROJECT, "--simulate")
        assert reaped.returncode == 0 and f"{stack}-node-0 removed" in reaped.stdout, reaped.stdout + reaped.stderr
    finally:
        down = trainctl("down", "--stack", stack, timeout=600)
    assert down.returncode == 0, down.stdout[-3000:] + down.stderr[-3000:]
    assert "Traceback" not in down.stderr
    assert _leftovers(simulated_home) == []
