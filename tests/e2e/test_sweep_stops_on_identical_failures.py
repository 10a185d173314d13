"""A sweep whose trials cannot succeed says so after its first trials instead of running them
all, each as often as the restart policy allows: a trial that fails in a way no retry can fix runs
once, and when the first trials all failed the same way no further trial starts.

The sweep's decisions are trainctl's: the trials run a program started directly on each node, no
torchrun (the quick trainer's launch, see tests/data/quick_trainer). That torchrun restarts no
rank after such a failure is tests/e2e/test_failing_ranks.py's
test_a_missing_module_is_neither_restarted_nor_rerun_and_is_named."""

from __future__ import annotations

import csv
import re

import pytest

from conftest import leftovers, run_id_of, trainctl
from quick_runs import QUICK_TRAINER
from trainctl.jobs.sweep import FIRST_TRIALS


@pytest.mark.e2e
def test_a_sweep_of_a_trainer_missing_a_module_stops_after_its_first_trials(tmp_path, trainctl_home):
    exp = tmp_path / "sw.yaml"
    exp.write_text(f"""
name: swfail
stack: local
overrides: {{nodes: 2}}
code: {QUICK_TRAINER}
run:
  framework: tensorflow
  command: python -c "import wandb"
ttl_hours: 1
sweep:
  metric: accuracy
  max_trials: 8
  parameters:
    - {{name: lr, type: DOUBLE, min: 0.001, max: 0.1, scale: LOG}}
""")  # the restart policy's defaults: 3 job reruns
    result = trainctl("run", str(exp), "--runs-dir", str(tmp_path / "runs"), timeout=600)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    sweep_id = run_id_of(result.stdout)
    assert "job failed; rerun" not in result.stdout  # neither a job rerun...
    # ...nor a rerun inside a trial: each node's program ran at most once per trial. Not exactly
    # once: the first rank's unfixable failure stops the attempt, and the other rank may be
    # stopped before it has printed its own traceback.
    failing = re.findall(r"^\[(node\d) r\d\]:ModuleNotFoundError: No module named 'wandb'$", result.stdout, re.M)
    assert FIRST_TRIALS <= len(failing), result.stdout[-3000:]
    assert all(failing.count(node) <= FIRST_TRIALS for node in ("node0", "node1")), failing
    assert f"[sweep] its first {FIRST_TRIALS} trials failed the same way: starting no more" in result.stdout
    assert "sweep stopped" in result.stderr and "module wandb is not installed on the nodes" in result.stderr
    with open(tmp_path / "runs" / sweep_id / "trials.csv") as fh:
        assert [row["state"] for row in csv.DictReader(fh)] == ["FAIL"] * FIRST_TRIALS
    assert leftovers(sweep_id) == []
