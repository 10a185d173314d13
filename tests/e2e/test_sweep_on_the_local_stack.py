"""Sweeps on the real local stack: parallel trials on split nodes, a crashing trial recorded as
failed, Ctrl-C stopping the trials in flight, the sweep resumed without redoing finished trials
and with the interrupted ones run again, nothing left behind."""

from __future__ import annotations

import csv
import json
import re
import signal

import pytest

from conftest import Streamed, experiment, leftovers, trainctl


def sweep_file(tmp_path):
    return experiment(tmp_path, "--epochs 3", name="sw", extra="""
restart: {max_restarts: 0, job_retries: 0}
sweep:
  metric: test_accuracy
  max_trials: 6
  max_parallel_trials: 2
  algorithm: random
  parameters:
    - {name: lr, type: DOUBLE, min: 0.01, max: 0.2, scale: LOG}
    - {name: hidden, type: INTEGER, min: 32, max: 128}
    - {name: fail-at-epoch, type: CATEGORICAL, values: [2, 99]}
""")


def trials(run_dir):
    with open(run_dir / "trials.csv") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.e2e
def test_sweep_runs_splits_nodes_survives_crashes_and_resumes(tmp_path, trainctl_home):
    exp, runs = sweep_file(tmp_path), tmp_path / "runs"
    first, sweep_id = Streamed.run(exp, runs)
    first.wait_for(r"\[sweep\] trial \d+ (complete|fail)", timeout=300)
    first.wait_for(r"\[sweep\] trial \d+ (complete|fail)", timeout=300)
    first.proc.send_signal(signal.SIGINT)
    out1 = first.finish(timeout=180)
    assert f"stack {sweep_id} removed" in out1
    assert leftovers(sweep_id) == []
    finished_before = re.findall(r"\[sweep\] trial (\d+) (complete|fail)", out1)
    assert len(finished_before) >= 2
    # Ctrl-C stops the trials in flight instead of waiting for them; their settings run again.
    interrupted = re.findall(r"\[sweep\] trial \d+ interrupted: (\{.*\}) → queued", out1)
    assert interrupted, out1[-3000:]

    second = trainctl("run", str(exp), "--runs-dir", str(runs), "--resume", sweep_id, timeout=900)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert f"resuming {sweep_id}: {len(finished_before)} trial(s) already finished" in second.stdout
    rerun = {n for n, _ in re.findall(r"\[sweep\] trial (\d+) (complete|fail|pruned)", second.stdout)}
    assert not rerun & {n for n, _ in finished_before}, "finished trials were not redone"
    run_again = re.findall(r"\[sweep\] trial \d+ (?:complete|fail|pruned): (\{.*\}) →", second.stdout)
    assert set(interrupted) <= set(run_again)
    rows = trials(runs / sweep_id)
    finished = [r for r in rows if r["state"] in ("COMPLETE", "FAIL")]
    assert len(finished) == 6
    assert len([r for r in rows if r["state"] == "INTERRUPTED"]) == len(interrupted)
    # Trials that failed on purpose are recorded as failed; the sweep went on.
    assert {r["state"] for r in rows if r["fail-at-epoch"] == "2"} <= {"FAIL", "INTERRUPTED"}
    assert any(r["state"] == "FAIL" for r in rows) and any(r["state"] == "COMPLETE" for r in rows)
    best = json.loads((runs / sweep_id / "best.json").read_text())
    complete = [float(r["test_accuracy"]) for r in rows if r["state"] == "COMPLETE"]
    assert best["value"] == max(complete) and best["params"]["fail-at-epoch"] == 99
    assert (runs / sweep_id / "sweep.png").read_bytes()[:4] == b"\x89PNG"
    assert (runs / sweep_id / "best" / "metrics.json").exists()
    # Parallel trials ran on split nodes: each trial's logs name one node only.
    for r in rows:
        logs = list((runs / sweep_id / f"trial-{r['trial']}" / "logs").glob("*.log"))
        assert len(logs) == 1
    assert leftovers(sweep_id) == []
    each_trials_cost_is_reported(runs, sweep_id, finished)


def each_trials_cost_is_reported(runs, sweep_id, finished):
    """`trainctl report` on the sweep: every finished trial (of both runs of the sweep) with its
    time and cost, and the picture of cost against the metric."""
    report = trainctl("report", sweep_id, "--runs-dir", str(runs))
    assert report.returncode == 0, report.stderr
    table = report.stdout.split(f"sweep {sweep_id}: cost per trial", 1)[1]
    shown = {cells[0]: cells for cells in ([c.strip() for c in line.split("│")[1:-1]]
                                           for line in table.splitlines() if line.startswith("│"))}
    for r in finished:
        number, state, value, seconds, usd, _ = shown[r["trial"]]
        assert state == r["state"] and float(seconds) > 0 and float(usd) == 0.0  # the local stack is free
    assert (runs / sweep_id / "trial_cost.png").read_bytes()[:4] == b"\x89PNG"
