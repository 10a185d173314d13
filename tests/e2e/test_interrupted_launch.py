"""`trainctl launch` stopped by a signal stops its job on every node and says so: SIGTERM from a
supervisor reaches trainctl alone (no terminal hands it to the nodes' programs), yet nothing of
the run may keep running, and `status --run` must not report it running forever."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from bootstrap.plan import BootstrapSpec
from bootstrap.runner import bootstrap
from conftest import Streamed, trainctl

pytestmark = pytest.mark.e2e

TICKS = "for i in $(seq 600); do echo tick $i; sleep 0.5; done"


def processes_of(run_id: str) -> list[str]:
    """Processes on this machine (every local node's among them) that carry the run's marker."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if f"TRAINCTL_RUN_ID={run_id}".encode() in (proc / "environ").read_bytes().split(b"\0"):
                found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except (OSError, ValueError):
            continue
    return found


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_to_launch_stops_the_job_everywhere_and_marks_it_interrupted(sig, local_stack, tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "requirements.txt").write_text("torch==2.13.0\nnumpy>=1.26\n")
    inventory = local_stack("sigterm", nodes=2)
    bootstrap(inventory, BootstrapSpec(code_dir=str(code), requirements="requirements.txt"), tmp_path / "boot")
    assert trainctl("init", str(tmp_path)).returncode == 0  # the user's project: its runs/ are kept there
    run_id = f"term-{sig.name.lower()}"
    launch = Streamed("launch", "--stack", "sigterm", "--run-id", run_id, "--", "bash", "-c", TICKS, cwd=tmp_path)
    launch.wait_for(r"\[node1 r1\]:tick 2")
    assert processes_of(run_id)  # torchrun agents and their workers on both nodes
    os.kill(launch.proc.pid, sig)  # trainctl alone, as a supervisor sends it
    output = launch.finish(timeout=60)
    assert launch.proc.returncode == 130, output[-2000:]
    assert f"[trainctl] interrupted: stopping run {run_id} on every node" in output
    assert processes_of(run_id) == []
    status = trainctl("status", "--run", run_id, cwd=tmp_path)
    outcome = json.loads(status.stdout)
    assert outcome["ok"] is False and outcome["interrupted"] == f"signal {sig.name}", outcome
