"""Budgets on the real local stack, whose nodes stand in for n1-standard-1 VMs and are priced as
GCP lists them: a run that would spend more than max_usd checkpoints and stops before it does
(exit 4), its checkpoint collected and loadable; a sweep stops starting trials it cannot pay for.
The budgets are tiny (a couple of minutes of the stack) so that this happens within seconds."""

from __future__ import annotations

import csv
import json
import re
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, leftovers, run_id_of, trainctl
from infra.spec.budget import STOP_RESERVE_SECONDS
from infra.spec.stack_config import load_stack
from infra.providers import realizers

pytestmark = pytest.mark.e2e

STAND_IN = {"nodes": 1, "machine_type": "n1-standard-1"}


def max_usd_for(seconds: float) -> float:
    """The max_usd that lets the one-node stack run `seconds` before it must stop."""
    spec = load_stack("local", overrides=STAND_IN)
    per_hour = realizers.for_spec(spec).estimate(spec).per_hour
    assert per_hour > 0  # priced as the GCE machine it stands in for
    return round((seconds + STOP_RESERVE_SECONDS) * per_hour / 3600, 6)


def experiment_file(tmp_path: Path, name: str, args: str, max_usd: float, extra: str = "") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"""
name: {name}
stack: local
overrides: {json.dumps(STAND_IN)}
code: {REPO}
requirements: trainers/requirements.txt
run:
  command: python -m trainers.digits_ddp --job-dir {{job_dir}} {args}
restart: {{max_restarts: 0, job_retries: 0}}
ttl_hours: 1
budget: {{max_usd: {max_usd}}}
""" + extra)
    return path


LOAD = ("import json, sys; from trainers import checkpoint; state = checkpoint.load_latest(sys.argv[1]); "
        "print(json.dumps(None if state is None else {'step': state['step'], 'keys': sorted(state)}))")


def test_a_run_that_would_exceed_max_usd_checkpoints_and_stops_before_it_does(tmp_path, trainctl_home,
                                                                               trainer_python):
    # Up and bootstrap, then some training, far from its 1000 epochs; an epoch's checkpoint every
    # few seconds, so that collecting them fits in what the budget keeps back for the stop.
    max_usd = max_usd_for(seconds=40)
    exp = experiment_file(tmp_path, "budget-run", "--epochs 1000 --epoch-sleep 3", max_usd,
                          extra="artifacts: [metrics.json, checkpoints/]\n")
    runs = tmp_path / "runs"
    done = trainctl("run", str(exp), "--runs-dir", str(runs), timeout=600)
    output = done.stdout + done.stderr
    run_id = run_id_of(output)
    assert done.returncode == 4, output[-4000:]
    assert "[trainctl] budget reached:" in output and "checkpointing and stopping the job" in output
    assert re.search(r"the rest pays for the stop \(checkpoint, teardown, collecting \d+ object", output)
    assert "stopped at its budget" in done.stderr and f"max_usd ${max_usd:g}" in done.stderr
    phases = json.loads((runs / run_id / "timings.json").read_text())
    trained = [int(step) for step in re.findall(r"\[node0 r0\]:epoch \d+/1000 .* step (\d+)",
                                                 output.split("[trainctl] budget reached")[0])]
    assert trained, output[-4000:]  # it trained before the budget ran out
    # The checkpoint was collected before the stack (and its bucket) went, and it loads.
    loaded = subprocess.run([str(trainer_python), "-c", LOAD, str(runs / run_id / "checkpoints")], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    state = json.loads(loaded.stdout or "null")
    assert state is not None, loaded.stderr
    assert state["step"] >= trained[-1] > 0  # nothing trained before the stop was lost
    assert {"model", "optimizer", "epoch", "batch"} <= set(state["keys"])
    # What the stack was up for, at its price, stayed within max_usd.
    spec = load_stack("local", overrides=STAND_IN)
    assert sum(phases.values()) * realizers.for_spec(spec).estimate(spec).per_hour / 3600 <= max_usd, phases
    assert leftovers(run_id) == []


def test_a_sweep_stops_starting_trials_it_cannot_afford(tmp_path, trainctl_home):
    max_usd = max_usd_for(seconds=50)  # up and bootstrap, then a few trials of the 30
    exp = experiment_file(tmp_path, "budget-sweep", "--epochs 2", max_usd, extra="""
sweep:
  metric: test_accuracy
  max_trials: 30
  algorithm: random
  parameters:
    - {name: lr, type: DOUBLE, min: 0.02, max: 0.2, scale: LOG}
""")
    runs = tmp_path / "runs"
    done = trainctl("run", str(exp), "--runs-dir", str(runs), timeout=600)
    output = done.stdout + done.stderr
    sweep_id = run_id_of(output)
    assert done.returncode == 4, output[-4000:]
    # It stops starting trials: one it cannot pay for is not started (said), or, where a trial
    # took longer than any before it, the budget ends that one; either way no trial starts after.
    declined = re.findall(r"\[trainctl\] budget: not starting trial \d+ of the 30 to go: another (\d+) s", output)
    assert all(int(s) > 0 for s in declined)  # judged by the trials' own time
    stop = min((output.find(mark) for mark in ("[trainctl] budget: not starting", "[trainctl] budget reached")
                if mark in output), default=-1)
    assert stop > 0 and "job dir gs://" not in output[stop:].split("[trainctl] down")[0], output[-4000:]
    assert "stopped at its budget" in done.stderr and f"max_usd ${max_usd:g}" in done.stderr
    assert not declined or "not started: trial" in done.stderr
    with open(runs / sweep_id / "trials.csv") as fh:
        rows = list(csv.DictReader(fh))
    complete = [r for r in rows if r["state"] == "COMPLETE"]
    assert 1 <= len(complete) and len(rows) + len(declined) <= 30 and len(rows) < 30
    best = json.loads((runs / sweep_id / "best.json").read_text())
    assert best["value"] == max(float(r["test_accuracy"]) for r in complete)
    assert (runs / sweep_id / "best" / "metrics.json").exists()
    assert leftovers(sweep_id) == []
