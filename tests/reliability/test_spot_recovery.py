"""Spot training a user can walk away from: a 3-node spot run on the local stack, preempted twice
as GCE does it (once STOP, once DELETE), is recovered each time (the lost node back under its
name, bootstrapped, the job resumed from its checkpoint) and ends with the same step count and
test accuracy as an undisturbed run of the same experiment; nothing is left behind."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REPO, Streamed, experiment, leftovers
from infra.local import realizer

pytestmark = pytest.mark.e2e

EPOCHS = "--epochs 6"
SPOT = "restart: {max_restarts: 0}\nartifacts: [metrics.json]\n"


def spot_experiment(tmp_path, name: str, pause: str = ""):
    """The same training either way; `pause` (a sleep between epochs) only leaves room to
    preempt a node at a known point."""
    path = experiment(tmp_path, f"{EPOCHS} {pause}", nodes=3, name=name, extra=SPOT)
    path.write_text(path.read_text().replace("overrides: {nodes: 3}", "overrides: {nodes: 3, spot: true}"))
    return path


def test_a_spot_run_preempted_twice_finishes_as_an_undisturbed_one(trainctl_home, tmp_path):
    calm = subprocess.run([sys.executable, "-m", "trainctl.cli", "run", str(spot_experiment(tmp_path, "calm")),
                           "--runs-dir", str(tmp_path / "runs")], cwd=REPO, capture_output=True, text=True)
    assert calm.returncode == 0, calm.stdout + calm.stderr
    undisturbed = json.loads(next((tmp_path / "runs").glob("calm-*/metrics.json")).read_text())

    run, run_id = Streamed.run(spot_experiment(tmp_path, "spot", "--epoch-sleep 1"), tmp_path / "runs")
    run.wait_for(r"epoch 2/6")
    assert realizer.preempt(run_id, "node1", grace=2, action="STOP") == "STOP"
    run.wait_for(r"recovery 1: recreating node1")
    run.wait_for(r"epoch [45]/6")
    assert realizer.preempt(run_id, "node2", grace=2, action="DELETE") == "DELETE"
    run.wait_for(r"recovery 2: recreating node2")
    output = run.finish(timeout=300)
    assert run.proc.returncode == 0, output
    run_dir = tmp_path / "runs" / run_id
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert (metrics["steps"], metrics["test_accuracy"]) == (undisturbed["steps"], undisturbed["test_accuracy"])
    result = json.loads((run_dir / "logs" / "launch" / "result.json").read_text())
    assert result["ok"] and result["recoveries"] == 2
    assert "preempted: its spot VM is being reclaimed" in output
    assert leftovers(run_id) == []
