"""Budgets on the real local stack, whose nodes stand in for n1-standard-1 VMs and are priced as
GCP lists them: a run that would spend more than max_usd checkpoints and stops before it does
(exit 4), its checkpoint collected and loadable. The budget is tiny (a minute or two of the
stack) so that this happens within seconds. A sweep that stops starting trials it cannot pay
for is tests/unit/jobs/test_a_sweep_stops_at_its_budget.py's (its plans, its clock)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, leftovers, run_id_of, trainctl
from infra.spec.stack_config import load_stack
from infra.providers import realizers
from tests.unit.jobs.test_a_sweep_stops_at_its_budget import STAND_IN, max_usd_for

pytestmark = pytest.mark.e2e


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
