"""A sweep with a budget, as `trainctl run` runs it (prepare_run's Spending, priced as the
n1-standard-1 the local node stands in for; sweep_trials over run_sweep), its trials planned by
the SSH launcher and finished as trainers leave them (tests/unit/jobs/sweep_launches.py), its
clock the stack's time each trial held: it stops starting trials it cannot pay for, says which,
writes its results and ends as BudgetReached (exit 4), naming what it did not start. The arithmetic
itself is test_sweep_stops_starting_trials_at_its_budget.py's; a live run stopped at its budget
with its checkpoint collected is tests/e2e/test_budgets_on_the_local_stack.py's."""

from __future__ import annotations

import csv
import json
import os
import re
import types
from pathlib import Path

import pytest

from infra.errors import BudgetReached
from infra.providers import realizers
from infra.spec.budget import STOP_RESERVE_SECONDS
from infra.spec.stack_config import load_stack
from tests.unit.cli.test_error_model import exit_of
from tests.unit.jobs.sweep_launches import PlannedTrials, emulated_inventory
from tests.unit.jobs.test_vertex_packages import cache, gcs  # noqa: F401  (fixtures)
from trainctl.jobs import spending as spending_module
from trainctl.jobs.experiment import prepare_run, sweep_trials
from trainctl.jobs.experiment_file import load_experiment

REPO = Path(__file__).resolve().parents[3]
STAND_IN = {"nodes": 1, "machine_type": "n1-standard-1"}
TRIAL_SECONDS = 20.0


def max_usd_for(seconds: float) -> float:
    """The max_usd that lets the one-node stack run `seconds` before it must stop."""
    spec = load_stack("local", overrides=STAND_IN)
    per_hour = realizers.for_spec(spec).estimate(spec).per_hour
    assert per_hour > 0  # priced as the GCE machine it stands in for
    return round((seconds + STOP_RESERVE_SECONDS) * per_hour / 3600, 6)


SWEEP = """
name: budget-sweep
stack: local
overrides: {stand_in}
code: {repo}
requirements: trainers/requirements.txt
run:
  command: python -m trainers.digits_ddp --job-dir {{job_dir}} --epochs 2
restart: {{max_restarts: 0, job_retries: 0}}
ttl_hours: 1
budget: {{max_usd: {max_usd}}}
sweep:
  metric: test_accuracy
  max_trials: 30
  algorithm: random
  parameters:
    - {{name: lr, type: DOUBLE, min: 0.02, max: 0.2, scale: LOG}}
"""


@pytest.fixture
def stack_clock(monkeypatch):
    """The spending clock, moved on by each trial as the stack's time it held."""
    now = [1000.0]
    monkeypatch.setattr(spending_module, "time", types.SimpleNamespace(monotonic=lambda: now[0]))
    return now


def test_a_sweep_stops_starting_trials_it_cannot_afford(tmp_path, gcs, stack_clock, trainctl_home,  # noqa: F811
                                                       monkeypatch, capsys) -> None:
    # 50 s of stack before the stop must begin, trials of 20 s: the first starts (nothing known
    # yet), the second too (20 + 20 <= 50), the third would end past it (40 + 20): none of the 28 left starts.
    max_usd = max_usd_for(seconds=50)
    path = tmp_path / "budget-sweep.yaml"
    path.write_text(SWEEP.format(stand_in=json.dumps(STAND_IN), repo=REPO, max_usd=max_usd))
    said: list[str] = []
    run = prepare_run(load_experiment(path), "budget-sweep-r", tmp_path / "runs", said.append)

    def advance(seconds: float) -> None:
        stack_clock[0] += seconds

    launcher = PlannedTrials("test_accuracy", metric=lambda p: 1 - float(p["lr"]), advance=advance,
                             trial_seconds=TRIAL_SECONDS)
    run.launcher = launcher
    inventory = emulated_inventory(run.spec.node_tasks, os.environ["STORAGE_EMULATOR_HOST"])
    assert run.exp.sweep is not None
    with pytest.raises(BudgetReached) as stopped:
        sweep_trials(run, inventory, run.exp.sweep)
    declined = [re.search(r"not starting trial (\d+) of the 30 to go: another (\d+) s", line) for line in said
                if "[trainctl] budget: not starting" in line]
    assert [m.group(2) for m in declined if m] == ["20"] * 28  # judged by the trials' own time
    assert len(launcher.plans) == 2  # no trial started after the first it could not pay for
    code, printed = exit_of(stopped.value, monkeypatch, capsys)  # what `trainctl run` ends with
    assert code == 4 and "stopped at its budget" in printed
    assert f"max_usd ${max_usd:g}" in printed and "not started: trial" in printed
    with open(run.report.run_dir / "trials.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["state"] for r in rows] == ["COMPLETE"] * 2 and len(rows) + len(declined) == 30
    best = json.loads((run.report.run_dir / "best.json").read_text())
    assert best["value"] == max(float(r["test_accuracy"]) for r in rows)
    assert (run.report.run_dir / "best" / "metrics.json").exists()
