"""A sweep's bookkeeping without nodes: trials a dead controller left running are rerun and not
counted as finished; cloudml-hypertune's reports are read where each run told it to write them."""

from __future__ import annotations

import json

import optuna

from trainctl.jobs.sweep import RETRY_OF, finished_trials, requeue_orphans


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

    from trainctl.jobs.sweep import parse_hypertune_file

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

    from trainctl.jobs.sweep import new_reports, parse_hypertune_file

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

    from tests.unit.launchers.ssh.test_plans import inventory
    from trainctl.launchers.spec import LaunchSpec
    from trainctl.launchers.ssh.commands import hypertune_file, node_command

    inv = inventory(2)
    words = shlex.split(node_command(inv, inv.nodes[0], LaunchSpec(run_id="r-t3", command=("python", "t.py"))))
    assert f"CLOUD_ML_HP_METRIC_FILE={hypertune_file(inv.nodes[0], 'r-t3')}" in words
    assert hypertune_file(inv.nodes[0], "r-t3").endswith("/runs/r-t3/hypertune/output.metrics")
