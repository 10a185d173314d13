"""`trainctl run` of an experiment on GKE stacks: up through the Automation API (stand-in CLI),
the training as a Job followed through the kubernetes client (loopback API fake), down, with
nothing left. No cluster or bucket can exist here: collect is the one part replaced (it reads
gs:// on Google's servers), and its arguments are asserted."""

from __future__ import annotations

from pathlib import Path

import pytest
from k8s_fake import FakeKubernetes, PodRun, k8s  # noqa: F401 (fixture)
from gcp_fake import google  # noqa: F401 (fixture)
from test_gcp_realizer_automation import cli, home, project, set_outputs  # noqa: F401 (fixtures)

from infra import catalog
from infra.stack_config import ConfigError, load_stack
from infra.stack_home import state_dir
from trainctl import experiment
from trainctl.experiment_spec import Experiment

GSA = "runner@p.iam.gserviceaccount.com"


def calls_of(state: Path) -> list[list[str]]:
    import json

    return [[a for a in json.loads(line)["argv"] if a != "--non-interactive"]
            for line in (state / "calls.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("stack, framework", [("gke-l4", "tensorflow"), ("gke-tpu-v5e", "torch")])
def test_an_experiment_runs_as_a_job_on_each_gke_stack_and_leaves_nothing(
        stack, framework, k8s: FakeKubernetes, google, cli: Path, project: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = tmp_path / "bin" / "gke-gcloud-auth-plugin"  # the kubeconfig's credential helper
    plugin.write_text("#!/bin/sh\nexit 0\n")
    plugin.chmod(0o755)
    set_outputs(tmp_path, monkeypatch, {
        "inventory": {"value": {"nodes": [], "bucket_uri": "gs://b", "gke_service_account": GSA}, "secret": False},
        "kubeconfig": {"value": k8s.write_kubeconfig(tmp_path / "kc").read_text(), "secret": True}})
    k8s.script = lambda attempt, index, try_: PodRun(lines=(f"step 1 on pod {index}",))
    collected: list[str] = []


    class RecordingCollector:  # the bucket is Google's here: record what would be fetched
        def __init__(self, inventory) -> None:
            pass

        def collect(self, job_dir, artifacts, dest) -> list[str]:
            collected.append(job_dir)
            return []

    monkeypatch.setattr(experiment, "Collector", RecordingCollector)
    lines: list[str] = []
    exp = Experiment(name="gke-exp", stack=stack, run={"framework": framework, "command": "python train.py"},
                     artifacts=("metrics.json",))

    report = experiment.run_experiment(exp, runs_dir=tmp_path / "runs", echo=lines.append)

    assert report.result is not None and report.result.ok
    assert report.result.outcomes and all(o.exit_code == 0 for o in report.result.outcomes)
    assert any(line.startswith("[pod0 ") and "step 1 on pod 0" in line for line in lines)
    assert "bootstrap" not in report.phases  # the image holds the code: nothing to bootstrap
    assert collected == [f"gs://b/{report.run_id}"]
    (job,) = k8s.calls("POST", r".*/jobs")
    assert job.body["spec"]["completions"] == load_stack(stack).node_count
    assert k8s.names("jobs") == [] and k8s.names("services") == [] and k8s.names("pods") == []
    assert k8s.names("serviceaccounts") == [catalog.GKE_KSA_NAME] and k8s.refused() == []
    argv = calls_of(cli)
    assert ["up", "--yes", "--skip-preview"] == argv[[a[0] for a in argv].index("up")][:3]
    assert any(a[0] == "destroy" for a in argv) and not state_dir(report.run_id).exists()


def test_a_sweep_on_a_gke_stack_runs_one_job_per_trial_and_keeps_the_best(
        k8s: FakeKubernetes, google, cli: Path, project: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two trials at a time, each a Job on half of the pool; each trial's metric is read from
    its job dir in the bucket (an in-memory stand-in, written as the pods would) and the best
    trial's artifacts are kept."""
    import json
    import re

    import fsspec

    from trainctl import collect, sweep

    plugin = tmp_path / "bin" / "gke-gcloud-auth-plugin"
    plugin.write_text("#!/bin/sh\nexit 0\n")
    plugin.chmod(0o755)
    set_outputs(tmp_path, monkeypatch, {
        "inventory": {"value": {"nodes": [], "bucket_uri": "gs://b", "gke_service_account": GSA}, "secret": False},
        "kubeconfig": {"value": k8s.write_kubeconfig(tmp_path / "kc").read_text(), "secret": True}})
    bucket = fsspec.filesystem("memory")
    monkeypatch.setattr(sweep, "bucket_fs", lambda inventory: bucket)
    monkeypatch.setattr(collect, "bucket_fs", lambda inventory: bucket)
    completions: dict[str, int] = {}

    def trial_pod(job: str, attempt: int, index: int, try_: int) -> PodRun:
        number = int(re.search(r"-t(\d+)$", job).group(1))
        accuracy = 0.5 + number / 10
        with bucket.open(f"gs://b/{job}/hypertune/metrics.json", "wb") as fh:
            fh.write(json.dumps([{"tag": "test_accuracy", "value": accuracy, "step": 1}]).encode())
        with bucket.open(f"gs://b/{job}/metrics.json", "wb") as fh:
            fh.write(json.dumps({"test_accuracy": accuracy}).encode())
        return PodRun(lines=(f"trial {number} trained",))

    k8s.job_script = trial_pod
    exp = Experiment(name="gke-sweep", stack="gke-l4", run={"framework": "tensorflow", "command": "python train.py"},
                     artifacts=("metrics.json",),
                     sweep={"max_trials": 3, "max_parallel_trials": 2,
                            "parameters": [{"name": "lr", "type": "DOUBLE", "min": 0.001, "max": 0.1}]})
    try:
        report = experiment.run_experiment(exp, runs_dir=tmp_path / "runs", echo=lambda _: None)
    finally:
        bucket.rm("gs://b", recursive=True)

    assert [t.state for t in report.trials] == ["COMPLETE"] * 3
    jobs = k8s.calls("POST", r".*/jobs")
    assert sorted(j.body["metadata"]["name"] for j in jobs) == [f"{report.run_id}-t{n}" for n in range(3)]
    # each trial's Job asks for its half of the 2-node pool
    assert {j.body["spec"]["completions"] for j in jobs} == {load_stack("gke-l4").node_count // 2}
    assert json.loads((report.run_dir / "best.json").read_text())["trial"] == 2
    assert json.loads((report.run_dir / "best" / "metrics.json").read_text()) == {"test_accuracy": 0.7}
    assert k8s.names("jobs") == [] and k8s.names("services") == [] and k8s.names("pods") == []
    assert k8s.refused() == [] and not state_dir(report.run_id).exists()


def test_parallel_trials_that_would_split_a_tpu_slice_are_refused_before_anything_exists(cli: Path) -> None:
    exp = Experiment(name="gke-sweep", stack="gke-tpu-v5e", run={"command": "python train.py"},
                     sweep={"max_parallel_trials": 2,
                            "parameters": [{"name": "lr", "type": "DOUBLE", "min": 0.001, "max": 0.1}]})
    with pytest.raises(ConfigError, match="would split a v5litepod-16 slice"):
        experiment.run_experiment(exp, runs_dir=Path("/nonexistent-runs"))
    assert not (cli / "calls.jsonl").exists()
