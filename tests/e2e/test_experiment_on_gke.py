"""`trainctl run` of an experiment on GKE stacks in a simulated project: up through the
Automation API and the simulator's `pulumi`, the training as a Job on the simulated cluster
(its pods real processes, here of an image stood in for by a small trainer that writes its
metric to the job dir in the simulated bucket), collect, down, with nothing left: no cluster,
no node, no pod process."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.fakes.sim_stacks import Project, gcp, make_gcp, simulated_gcp  # noqa: F401 (fixtures)

from gcpsim import daemon
from gcpsim.kubernetes import images
from infra.spec.stack_config import REPO_ROOT, ConfigError, load_stack
from infra.providers.stack_home import state_dir
from trainctl.jobs import experiment
from trainctl.jobs.experiment_spec import Experiment

pytestmark = pytest.mark.e2e  # the pods run in mount and UTS namespaces of their own

TRAINER = """
import json, os, re
from trainers import hypertune, storage

job_dir = os.environ["AIP_MODEL_DIR"].rstrip("/").rsplit("/", 1)[0]
index = os.environ["JOB_COMPLETION_INDEX"]
trial = re.search(r"-t(\\d+)$", job_dir)
accuracy = 0.5 + int(trial[1]) / 10 if trial else 0.9
print(f"step 1 on pod {index}", flush=True)
if index == "0":
    hypertune.report("test_accuracy", accuracy, step=1, job_dir=job_dir)
    storage.write_bytes(storage.join(job_dir, "metrics.json"), json.dumps({"test_accuracy": accuracy}).encode())
"""


@pytest.fixture
def trainer_image(gcp: Project, tmp_path: Path) -> str:
    """An Artifact Registry image (used as it is) that the simulated cluster stands in for with
    the trainer above and this interpreter's environment (gcsfs)."""
    code = tmp_path / "code"
    shutil.copytree(REPO_ROOT / "trainers", code / "trainers", ignore=shutil.ignore_patterns("__pycache__"))
    (code / "train.py").write_text(textwrap.dedent(TRAINER))
    image = f"us-central1-docker.pkg.dev/{gcp.id}/trainers/probe:1"
    images.register(gcp.sim.home, image, env=Path(sys.prefix), workdir=code, describe="the test's trainer")
    return image


def nothing_left(gcp: Project, spec_zone: str, run_id: str) -> None:
    """The down left nothing that keeps the simulator up (no cluster's API, no pod), and nothing
    in the project; then the simulator is started again over its world for the next caller."""
    deadline = time.monotonic() + 15
    while daemon.url_of(gcp.sim.home) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert daemon.url_of(gcp.sim.home) is None
    gcp.next_command()
    assert gcp.ok("GET", f"/v1/projects/{gcp.id}/locations/{spec_zone}/clusters") == {}
    assert [n for n in gcp.instances() if run_id in n] == []  # the node pools' VMs
    assert subprocess.run(["pgrep", "-f", "train.py"], capture_output=True).stdout == b""
    assert not state_dir(run_id).exists()


@pytest.mark.parametrize("stack, framework", [("gke-l4", "tensorflow"), ("gke-tpu-v5e", "torch")])
def test_an_experiment_runs_as_a_job_on_each_gke_stack_and_leaves_nothing(
        stack: str, framework: str, gcp: Project, trainer_image: str, tmp_path: Path) -> None:
    lines: list[str] = []
    exp = Experiment(name="gke-exp", stack=stack, run={"framework": framework, "command": "python train.py"},
                     artifacts=("metrics.json",), container={"image": trainer_image})

    report = experiment.run_experiment(exp, runs_dir=tmp_path / "runs", echo=lines.append)

    assert report.result is not None and report.result.ok, lines
    count = load_stack(stack).node_count
    assert [o.exit_code for o in report.result.outcomes] == [0] * count
    assert any(line.startswith("[pod0 ") and line.endswith("step 1 on pod 0") for line in lines)
    assert "bootstrap" not in report.phases  # the image holds the code: nothing to bootstrap
    assert report.metrics == {"test_accuracy": 0.9}  # written by pod 0 into the bucket, collected
    logs = sorted(p.name for p in (report.run_dir / "logs/launch/attempt-01").glob("pod*.log"))
    assert logs == [f"pod{i}.log" for i in range(count)]  # one pod per node of the pool
    nothing_left(gcp, load_stack(stack).zone or "", report.run_id)


def test_a_sweep_on_a_gke_stack_runs_one_job_per_trial_and_keeps_the_best(
        gcp: Project, trainer_image: str, tmp_path: Path) -> None:
    """Two trials at a time, each a Job on half of the pool; each trial's metric is read from
    its job dir in the simulated bucket, where its pod wrote it, and the best trial's artifacts
    are kept."""
    exp = Experiment(name="gke-sweep", stack="gke-l4", run={"framework": "tensorflow", "command": "python train.py"},
                     artifacts=("metrics.json",), container={"image": trainer_image},
                     sweep={"max_trials": 3, "max_parallel_trials": 2,
                            "parameters": [{"name": "lr", "type": "DOUBLE", "min": 0.001, "max": 0.1}]})
    report = experiment.run_experiment(exp, runs_dir=tmp_path / "runs", echo=lambda _: None)

    assert [t.state for t in report.trials] == ["COMPLETE"] * 3
    # each trial's Job asked for its half of the 2-node pool: one pod
    for number in range(3):
        logs = report.run_dir / f"trial-{number}" / "logs" / "attempt-01"
        assert sorted(p.name for p in logs.glob("pod*.log")) == ["pod0.log"], number
    assert json.loads((report.run_dir / "best.json").read_text())["trial"] == 2
    assert json.loads((report.run_dir / "best" / "metrics.json").read_text()) == {"test_accuracy": 0.7}
    nothing_left(gcp, load_stack("gke-l4").zone or "", report.run_id)


def test_parallel_trials_that_would_split_a_tpu_slice_are_refused_before_anything_exists(gcp: Project) -> None:
    exp = Experiment(name="gke-sweep", stack="gke-tpu-v5e", run={"command": "python train.py"},
                     sweep={"max_parallel_trials": 2,
                            "parameters": [{"name": "lr", "type": "DOUBLE", "min": 0.001, "max": 0.1}]})
    before = gcp.operations()
    with pytest.raises(ConfigError, match="would split a v5litepod-16 slice"):
        experiment.run_experiment(exp, runs_dir=Path("/nonexistent-runs"))
    assert gcp.operations() == before
