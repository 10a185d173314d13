"""Sweeps on the real local stack: parallel trials on split nodes, a crashing trial recorded as
failed, Ctrl-C stopping the trials in flight, the sweep resumed without redoing finished trials
and with the interrupted ones run again, nothing left behind."""

from __future__ import annotations

import csv
import json
import re
import signal

import optuna
import pytest

from conftest import Streamed, experiment, leftovers, trainctl
from trainctl.sweep import RETRY_OF, finished_trials, requeue_orphans


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


def test_a_trial_the_controller_died_under_runs_again_and_is_not_counted_as_finished(tmp_path):
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'optuna.db'}")
    done = study.ask()
    done.suggest_float("lr", 0.01, 0.2)
    study.tell(done, 0.5)
    orphan = study.ask()  # left RUNNING, as by a kill -9 of trainctl
    lr = orphan.suggest_float("lr", 0.01, 0.2)

    requeue_orphans(study)
    assert [t.number for t in finished_trials(study)] == [done.number]
    rerun = study.ask()
    assert rerun.suggest_float("lr", 0.01, 0.2) == lr
    assert rerun.user_attrs[RETRY_OF] == orphan.number
    study.tell(rerun, 0.7)
    requeue_orphans(study)  # a second resume
    assert [t.number for t in finished_trials(study)] == [done.number, rerun.number]
    assert len(study.trials) == 3  # nothing queued twice


def test_reports_written_by_the_real_cloudml_hypertune_are_read(tmp_path, monkeypatch) -> None:
    """The file the published cloudml-hypertune package writes, unchanged: its lines carry
    `checkpoint_path` (empty unless given), `trial`, `timestamp` beside the metric's tag."""
    import hypertune

    from trainctl.sweep import parse_hypertune_file

    path = tmp_path / "hypertune" / "output.metrics"
    monkeypatch.setenv("CLOUD_ML_HP_METRIC_FILE", str(path))
    monkeypatch.setenv("CLOUD_ML_TRIAL_ID", "2")
    hpt = hypertune.HyperTune()
    hpt.report_hyperparameter_tuning_metric(hyperparameter_metric_tag="epoch_acc", metric_value=0.91,
                                            global_step=1)
    hpt.report_hyperparameter_tuning_metric(hyperparameter_metric_tag="epoch_acc", metric_value=0.95,
                                            global_step=2, checkpoint_path="gs://b/ckpt-2")
    hpt.report_hyperparameter_tuning_metric(hyperparameter_metric_tag="", metric_value=3.5)
    reports = parse_hypertune_file(path.read_text() + '{"global_st')  # a line being rewritten
    assert [(r["tag"], r["value"], r["step"]) for r in reports] == [
        ("epoch_acc", 0.91, 1), ("epoch_acc", 0.95, 2), ("training/hptuning/metric", 3.5, 0)]


def test_hypertune_reports_are_told_apart_when_the_library_drops_old_lines(tmp_path, monkeypatch) -> None:
    """cloudml-hypertune keeps its last 100 reports: the file's lines shift once there are more,
    so new reports are recognised by their timestamps, not by their position in the file."""
    import hypertune

    from trainctl.sweep import new_reports, parse_hypertune_file

    path = tmp_path / "output.metrics"
    monkeypatch.setenv("CLOUD_ML_HP_METRIC_FILE", str(path))
    hpt = hypertune.HyperTune()
    for step in range(1, 101):
        hpt.report_hyperparameter_tuning_metric("loss", 1.0 / step, global_step=step)
    seen = parse_hypertune_file(path.read_text())
    for step in (101, 102):
        hpt.report_hyperparameter_tuning_metric("loss", 1.0 / step, global_step=step)
    later = parse_hypertune_file(path.read_text())
    assert len(later) == 100
    assert [r["step"] for r in new_reports(later, seen[-1])] == [101, 102]
    assert new_reports(later, None) == later


def test_every_run_tells_cloudml_hypertune_where_to_write_on_its_node() -> None:
    import shlex

    from test_plans import inventory
    from trainctl.launch import LaunchSpec, hypertune_file, node_command

    inv = inventory(2)
    words = shlex.split(node_command(inv, inv.nodes[0], LaunchSpec(run_id="r-t3", command=("python", "t.py"))))
    assert f"CLOUD_ML_HP_METRIC_FILE={hypertune_file(inv.nodes[0], 'r-t3')}" in words
    assert hypertune_file(inv.nodes[0], "r-t3").endswith("/runs/r-t3/hypertune/output.metrics")
