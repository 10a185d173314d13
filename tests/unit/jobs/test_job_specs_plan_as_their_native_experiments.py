"""Golden plans: a Vertex AI job spec is proved to run as written by the plan `trainctl run`
makes of it (prepare_run: the cluster, the bootstrap spec, the launch spec; the launcher's
dryrun on the inventory the local realizer writes: each node's command line, TF_CONFIG,
CLUSTER_SPEC and environment) being the plan of the native experiment that the full runs in
tests/e2e already prove (examples/digits-ps.yaml: parameter servers; a sweep: trials on the
local stack), with the differences the spec itself writes (its trainer arguments, Vertex's
restart defaults) named here. The golden is the native experiment, so nothing is regenerated:
a change to either side's plan fails here and says which node and what."""

from __future__ import annotations

import csv
import json
import os
import shlex
import shutil
from pathlib import Path

import pytest

from infra.spec.cluster import ClusterSpec
from tests.unit.jobs.sweep_launches import PlannedTrials, emulated_inventory, trial_params
from tests.unit.jobs.test_vertex_packages import build_sdist, cache, gcs  # noqa: F401  (fixtures)
from tests.unit.jobs.test_worker_pools import env_of, pooled
from trainctl.jobs.experiment import prepare_run
from trainctl.jobs.experiment_file import load_experiment
from trainctl.jobs.stack_run import StackRun
from trainctl.jobs.sweep import run_sweep
from trainers.digits_data import default_job_dir

REPO = Path(__file__).resolve().parents[3]
VERTEX = REPO / "examples" / "vertex"


def planned(tmp_path: Path, path: Path, **kw) -> tuple[StackRun, dict[str, str], list[str]]:
    """What `trainctl run <path>` validates and would launch: its StackRun and each node's
    command line on the stack's inventory (run id `r`, the same for every plan compared)."""
    notes: list[str] = []
    run = prepare_run(load_experiment(path, notes=notes, **kw), "r", tmp_path / "runs", echo=notes.append)
    inventory = pooled(run.spec)
    return run, run.launcher.dryrun(run.spec, inventory, run.lspec).commands, notes


def test_a_vertex_job_spec_with_parameter_servers_plans_as_the_native_ps_experiment(tmp_path, monkeypatch) -> None:
    """examples/vertex/vertex-tf-ps.yaml (four worker pools) is examples/digits-ps.yaml, whose
    run test_parameter_server_training_with_an_evaluator_reaches_the_bar proves, but for the
    trainer's arguments and Vertex's restart policy."""
    vertex, vertex_commands, notes = planned(tmp_path, VERTEX / "vertex-tf-ps.yaml", stack="local", code=REPO,
                                             requirements="trainers/requirements-tf.txt")
    native, native_commands, _ = planned(tmp_path, REPO / "examples" / "digits-ps.yaml")
    assert vertex.spec.model_dump() == native.spec.model_dump()  # the same pools, nodes, stack
    assert [p.role for p in vertex.spec.pools] == ["chief", "worker", "ps", "evaluator"]
    assert vertex.bspec == native.bspec  # the same code and requirements on every node
    assert vertex.lspec.framework == native.lspec.framework == "tensorflow"
    assert vertex.lspec.model_copy(update={"command": native.lspec.command, "max_restarts": 0,
                                           "job_retries": 1}) == native.lspec
    assert vertex.lspec.command == ("python", "-m", "trainers.digits_ps", "--epochs", "8")  # args as written
    assert (vertex.lspec.max_restarts, vertex.lspec.job_retries) == (5, 3)  # Vertex's defaults
    # Each node: the same TF_CONFIG, CLUSTER_SPEC, environment and program; the native example
    # names its job dir, the spec leaves it to AIP_MODEL_DIR's parent (trainers.digits_data).
    assert list(vertex_commands) == list(native_commands) == [f"node{i}" for i in range(5)]
    for node, command in native_commands.items():
        assert vertex_commands[node] == command.replace("--epochs 12 --job-dir gs://bkt/r", "--epochs 8"), node
        assert env_of(command, "TF_CONFIG")["task"]["type"] in ("chief", "worker", "ps", "evaluator")
        model_dir = next(w for w in shlex.split(vertex_commands[node]) if w.startswith("AIP_MODEL_DIR="))
        monkeypatch.setenv("AIP_MODEL_DIR", model_dir.split("=", 1)[1])
        assert default_job_dir() == "gs://bkt/r", node  # the trainer's job dir: the native --job-dir
    assert "stack local: the ps pool's machine type is not used (its nodes are namespaces on this machine)" in notes


NATIVE_SWEEP = """
name: digits-hptuning
stack: local
overrides:
  pools: [{{role: chief, count: 1}}]
code: {repo}
requirements: trainers/requirements.txt
run:
  framework: torch
  command: python -m trainers.digits_ddp --epochs 3
restart: {{max_restarts: 5, job_retries: 3}}
ttl_hours: 2
sweep:
  metric: test_accuracy
  goal: MAXIMIZE
  max_trials: 3
  max_parallel_trials: 1
  parallel_mode: sequential
  algorithm: random
  parameters:
    - {{name: lr, type: DOUBLE, min: 0.01, max: 0.2, scale: LOG}}
    - {{name: hidden, type: INTEGER, min: 32, max: 128}}
"""


def test_a_vertex_hyperparameter_tuning_job_plans_as_the_native_sweep(tmp_path, gcs) -> None:  # noqa: F811
    """examples/vertex/vertex-hptuning.yaml is this native sweep (the study, its trial job),
    whose kind of run tests/e2e/test_sweep_on_the_local_stack.py proves; its trials, as the
    sweep plans them, are maxTrialCount launches of the trial job with their parameters."""
    native_file = tmp_path / "native.yaml"
    native_file.write_text(NATIVE_SWEEP.format(repo=REPO))
    vertex, _, _ = planned(tmp_path, VERTEX / "vertex-hptuning.yaml", stack="local", code=REPO,
                           requirements="trainers/requirements.txt")
    native, _, _ = planned(tmp_path, native_file)
    assert vertex.exp.model_dump() == native.exp.model_dump(), "the translation is not the native sweep"
    assert (vertex.spec.model_dump(), vertex.bspec, vertex.lspec) == (native.spec.model_dump(), native.bspec,
                                                                      native.lspec)
    sweep = vertex.exp.sweep
    assert sweep is not None
    launcher = PlannedTrials("test_accuracy", metric=lambda p: 1 - float(p["lr"]))
    inventory = emulated_inventory(vertex.spec.node_tasks, os.environ["STORAGE_EMULATOR_HOST"])
    run_dir = vertex.report.run_dir
    results = run_sweep(vertex.spec, inventory, launcher, sweep, vertex.lspec, vertex.run_id, run_dir, print)
    assert len(launcher.plans) == len(results) == 3  # maxTrialCount, one at a time (parallelTrialCount)
    for number, plan in enumerate(launcher.plans):
        params = trial_params(plan)
        assert set(params) == {"lr", "hidden"}
        assert 0.01 <= float(params["lr"]) <= 0.2 and 32 <= int(params["hidden"]) <= 128
        words = shlex.split(plan.commands["node0"])
        assert words[-6:] == ["--module", "trainers.digits_ddp", "--epochs", "3", f"--lr={params['lr']}",
                              f"--hidden={params['hidden']}"]  # the trial job's args, then the trial's
        assert f"CLOUD_ML_TRIAL_ID={number}" in words  # as AI Platform sets it
        # the trainer's job dir (no --job-dir: AIP_MODEL_DIR's parent): where the sweep reads its reports
        assert f"AIP_MODEL_DIR=gs://my-bucket/r-t{number}/model" in words
    with open(run_dir / "trials.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["state"] for r in rows] == ["COMPLETE"] * 3
    best = json.loads((run_dir / "best.json").read_text())
    assert set(best["params"]) == {"lr", "hidden"} and best["value"] == max(1 - r.params["lr"] for r in results)


def trainer_sdist(tmp_path: Path) -> Path:
    """The reference trainers as one package, their requirements as its dependencies (AI
    Platform's docs package trainers so)."""
    src = tmp_path / "trainer"
    shutil.copytree(REPO / "trainers", src / "trainers", ignore=shutil.ignore_patterns("__pycache__", "*.txt"))
    requirements = [line for line in (REPO / "trainers" / "requirements.txt").read_text().splitlines()
                    if line and not line.startswith("#")]
    return build_sdist(src, "trainer", ["trainers"], requirements)


def test_a_vertex_job_from_its_package_uris_plans_the_package_alone_on_every_node(tmp_path, gcs) -> None:  # noqa: F811
    """examples/vertex/vertex-pytorch-ddp.yaml with no --code: the nodes get the package's wheel
    and the requirements that name it, nothing else; the job is the one its source would run
    (a primary replica and two workers joined by torchrun, the spec's args)."""
    gcs.put(str(trainer_sdist(tmp_path)), "my-bucket/trainer-0.1.tar.gz")  # the spec's packageUris
    packaged, commands, notes = planned(tmp_path, VERTEX / "vertex-pytorch-ddp.yaml", stack="local")
    source, source_commands, _ = planned(tmp_path, VERTEX / "vertex-pytorch-ddp.yaml", stack="local", code=REPO,
                                         requirements="trainers/requirements.txt")
    staged = packaged.bspec.code_dir
    assert sorted(p.name for p in staged.rglob("*") if p.is_file()) == [
        "requirements.txt", "trainer-0.1-py3-none-any.whl"]
    assert packaged.bspec.requirements == "requirements.txt"
    assert any("fetched, built into wheels and installed on every node" in n for n in notes)
    assert packaged.spec.model_dump() == source.spec.model_dump() and packaged.lspec == source.lspec
    assert commands == source_commands
    assert isinstance(packaged.spec, ClusterSpec) and packaged.spec.node_count == 3
    for node in ("node0", "node1", "node2"):
        words = shlex.split(commands[node])
        assert "--nnodes=3" in words  # primary replica + 2 workers
        assert words[-4:] == ["--module", "trainers.digits_ddp", "--epochs", "4"]  # args as written


@pytest.fixture(autouse=True)
def _state_home(trainctl_home):
    """prepare_run and collect keep their state in a private home."""
    yield trainctl_home
