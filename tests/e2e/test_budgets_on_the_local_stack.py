"""Budgets on the real local stack, whose node stands in for an n1-standard-1 VM and is priced as
GCP lists it: a run that would spend more than max_usd checkpoints and stops before it does
(exit 4), its checkpoint collected. The budget is tiny (a minute or two of the stack) so that this
happens within seconds. The program is the quick trainer (tests/data/quick_trainer): what is
proved is trainctl's stop, and a program that starts in milliseconds is training as soon as the
bootstrap ends (torch's start had taken most of the 40 s budget on a loaded machine, and the stop
came before the first epoch); that the reference trainers save their exact position on a SIGTERM is
tests/e2e/test_trainer_stop_request.py's. A sweep that stops starting trials it cannot pay
for is tests/unit/jobs/test_a_sweep_stops_at_its_budget.py's (its plans, its clock)."""

from __future__ import annotations

import json
import re

import pytest

from conftest import leftovers, run_id_of, trainctl
from infra.providers import realizers
from infra.spec.stack_config import load_stack
from tests.quick_runs import QUICK_TRAINER
from tests.unit.jobs.test_a_sweep_stops_at_its_budget import STAND_IN, max_usd_for

pytestmark = pytest.mark.e2e


def test_a_run_that_would_exceed_max_usd_checkpoints_and_stops_before_it_does(tmp_path, trainctl_home):
    # Up and bootstrap, then some training, far from its 1000 epochs; an epoch every second.
    max_usd = max_usd_for(seconds=40)
    exp = tmp_path / "budget-run.yaml"
    exp.write_text(f"""
name: budget-run
stack: local
overrides: {json.dumps(STAND_IN)}
code: {QUICK_TRAINER}
run:
  framework: tensorflow
  command: python quick_trainer.py --job-dir {{job_dir}} --epochs 1000 --epoch-sleep 1 --checkpoint-on-stop
restart: {{max_restarts: 0, job_retries: 0}}
ttl_hours: 1
budget: {{max_usd: {max_usd}}}
artifacts: [metrics.json, checkpoints/]
""")
    runs = tmp_path / "runs"
    done = trainctl("run", str(exp), "--runs-dir", str(runs), timeout=600)
    output = done.stdout + done.stderr
    run_id = run_id_of(output)
    assert done.returncode == 4, output[-4000:]
    assert "[trainctl] budget reached:" in output and "checkpointing and stopping the job" in output
    assert re.search(r"the rest pays for the stop \(checkpoint, teardown, collecting \d+ object", output)
    assert "stopped at its budget" in done.stderr and f"max_usd ${max_usd:g}" in done.stderr
    before_stop = output.split("[trainctl] budget reached")[0]
    trained = [int(step) for step in re.findall(r"epoch \d+/1000 loss \S+ step (\d+)", before_stop)]
    assert trained, output[-4000:]  # it trained before the budget ran out
    # The checkpoint was written on the stop's SIGTERM and collected before the stack (and its
    # bucket) went: nothing trained before the stop was lost.
    saved = [json.loads(p.read_text())["step"] for p in (runs / run_id / "checkpoints").glob("step-*.json")]
    assert saved and max(saved) >= trained[-1] > 0, output[-4000:]
    # What the stack was up for, at its price, stayed within max_usd.
    phases = json.loads((runs / run_id / "timings.json").read_text())
    spec = load_stack("local", overrides=STAND_IN)
    assert sum(phases.values()) * realizers.for_spec(spec).estimate(spec).per_hour / 3600 <= max_usd, phases
    assert leftovers(run_id) == []
