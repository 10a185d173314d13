"""Spot training a user can walk away from: a 3-node spot run on the local stack, preempted twice
as GCE does it (once STOP, once DELETE and then no capacity until the zone gets it back), is
recovered each time (the lost node back under its name, bootstrapped, the job resumed from the checkpoint the
trainer wrote during the shutdown's grace period, so no step is redone) and ends with the same step
count and test accuracy as an undisturbed run of the same experiment; nothing is left behind."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml

from conftest import Streamed, experiment, leftovers, undisturbed_training
from infra.providers.local import realizer
from infra.providers.local.state import load_state
from infra.providers.stack_home import stack_lock

pytestmark = pytest.mark.e2e

EPOCHS = "--epochs 6"
SPOT = "restart: {max_restarts: 0}\nartifacts: [metrics.json]\n"


def spot_experiment(tmp_path, name: str, pause: str = ""):
    """The same training either way; `pause` (a sleep between epochs) only leaves room to
    preempt a node at a known point."""
    path = experiment(tmp_path, f"{EPOCHS} {pause}", nodes=3, name=name, extra=SPOT)
    path.write_text(path.read_text().replace("overrides: {nodes: 3}", "overrides: {nodes: 3, spot: true}"))
    return path


def undisturbed_metrics(experiment_file: Path) -> dict:
    """metrics.json of the experiment's training with nothing in its way: its trainer, arguments
    and world size (nodes x processes per node) on this host (see `undisturbed_training`)."""
    spec = yaml.safe_load(experiment_file.read_text())
    world = spec["overrides"]["nodes"] * spec["run"].get("processes_per_node", 1)
    args = shlex.split(spec["run"]["command"])
    assert args[:3] == ["python", "-m", "trainers.digits_ddp"], args
    trainer_args = args[3:]
    at = trainer_args.index("--job-dir")
    return undisturbed_training(world, trainer_args[:at] + trainer_args[at + 2:])


def finished_as_undisturbed(run: Streamed, run_dir, undisturbed: dict) -> tuple[str, dict]:
    """The disturbed run's output and result.json, once it has ended as the undisturbed one did:
    successfully, with the same step count and test accuracy."""
    output = run.finish(timeout=300)
    assert run.proc.returncode == 0, output
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert (metrics["steps"], metrics["test_accuracy"]) == (undisturbed["steps"], undisturbed["test_accuracy"])
    return output, json.loads((run_dir / "logs" / "launch" / "result.json").read_text())


def capacity_back(stack: str, node: str) -> None:
    """The zone has spot capacity for the node again: the stockout a DELETE preemption left ends
    on the test's cue (after the launcher was refused once), not after a wall-clock span."""
    with stack_lock(stack, "capacity"):
        state = load_state(stack)
        assert state is not None, f"stack {stack} is not up"
        state.data.get("capacity_back_at", {}).pop(node, None)
        state.save()


def test_a_spot_run_preempted_twice_finishes_as_an_undisturbed_one(trainctl_home, tmp_path):
    undisturbed = undisturbed_metrics(spot_experiment(tmp_path, "calm"))

    run, run_id = Streamed.run(spot_experiment(tmp_path, "spot", "--epoch-sleep 1"), tmp_path / "runs")
    run.wait_for(r"epoch 2/6")
    assert realizer.preempt(run_id, "node1", grace=2, action="STOP") == "STOP"
    run.wait_for(r"recovery 1: recreating node1")
    run.wait_for(r"epoch [45]/6")
    # no capacity after the deletion until it is given back, once the first try was refused
    assert realizer.preempt(run_id, "node2", grace=2, action="DELETE", unavailable_for=3600) == "DELETE"
    run.wait_for(r"recovery 2: recreating node2")
    run.wait_for(r"no capacity for node2 .*: trying again in 5 s")
    capacity_back(run_id, "node2")
    output, result = finished_as_undisturbed(run, tmp_path / "runs" / run_id, undisturbed)
    assert result["ok"] and [r["nodes"] for r in result["recoveries"]] == [["node1"], ["node2"]]
    tries = [r["tries"] for r in result["recoveries"]]
    assert tries == [1, 2], output  # the stockout was waited out: refused once, then recreated
    # the trainer saved its position when its peer went away: nothing was trained twice
    assert [r["steps_redone"] for r in result["recoveries"]] == [0, 0], output
    assert result["spot_saving_usd"] == 0  # a local stack bills nothing
    assert "preempted: its spot VM is being reclaimed" in output
    assert "recovered from 2 preemption(s):" in output
    assert leftovers(run_id) == []
