"""AI Platform config.yaml and Vertex AI CustomJob / HyperparameterTuningJob specs, taken as
written: each example in examples/vertex/ maps onto an experiment with worker pools and a valid
cluster; what cannot be honoured is refused by name with the nearest alternative."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from infra.errors import ConfigError
from infra.spec.stack_config import load_stack
from trainctl.jobs.experiment_file import load_experiment
from trainctl.jobs.experiment_spec import Experiment

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((REPO / "examples" / "vertex").glob("*.yaml"))


def target_stack(path: Path) -> str:
    """The stack each example's own comment plans or runs it on."""
    match = re.search(r"--stack (\S+)", path.read_text())
    return match.group(1) if match else "local"


def example_requirements(path: Path) -> str | None:
    """The requirements file each example's own comment runs it with."""
    match = re.search(r"--requirements (\S+)", path.read_text())
    return match.group(1) if match else None


def mapped(path: Path, stack: str = "local", **kw) -> tuple[Experiment, list[str]]:
    notes: list[str] = []
    return load_experiment(path, stack=stack, code=REPO, notes=notes, **kw), notes


def spec_file(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_maps_onto_a_valid_experiment_and_cluster(path: Path) -> None:
    exp, _ = mapped(path, target_stack(path), requirements=example_requirements(path))
    spec = load_stack(exp.stack, name=exp.name, overrides={**exp.overrides, "ephemeral": True})
    assert spec.pools and spec.pools[0].role == "chief"
    assert exp.run.command[:2] == ("python", "-m")


def test_at_least_eight_examples_cover_tiers_pools_frameworks_and_tuning() -> None:
    assert len(EXAMPLES) >= 8
    texts = " ".join(p.read_text() for p in EXAMPLES)
    for needle in ("scaleTier: BASIC", "STANDARD_1", "scaleTier: CUSTOM", "parameterServerType",
                   "workerPoolSpecs", "studySpec", "hyperparameters", "pytorch", "tf-cpu", "SPOT"):
        assert needle in texts, needle


def test_ai_platform_custom_tier_becomes_pools_with_its_machine_types_on_gcp(tmp_path: Path) -> None:
    exp, notes = mapped(REPO / "examples" / "vertex" / "ai-platform-custom-gpu.yaml", "gpu-t4x2")
    assert exp.run.framework == "tensorflow"  # AI Platform's runtimes are TensorFlow's
    assert exp.overrides["pools"] == [
        {"role": "chief", "count": 1, "machine_type": "n1-standard-8", "gpu": {"type": "nvidia-tesla-t4", "count": 1}},
        {"role": "worker", "count": 2, "machine_type": "n1-standard-8", "gpu": {"type": "nvidia-tesla-t4", "count": 1}}]
    assert any("region 'us-central1'" in n for n in notes)


def test_ai_platform_parameter_servers_evaluator_job_dir_and_time_limit() -> None:
    exp, notes = mapped(REPO / "examples" / "vertex" / "ai-platform-custom-ps.yaml")
    assert [(p["role"], p["count"]) for p in exp.overrides["pools"]] == [
        ("chief", 1), ("worker", 2), ("ps", 1), ("evaluator", 1)]
    assert exp.run.command[-2:] == ("--job-dir", "{job_dir}")  # AI Platform passes jobDir so
    assert exp.ttl_hours == 1.0
    assert sum("machine type is not used" in n for n in notes) == 4  # said, not silently dropped


def test_scale_tiers_set_the_pool_shapes() -> None:
    exp, _ = mapped(REPO / "examples" / "vertex" / "ai-platform-standard-1.yaml")
    assert [(p["role"], p["count"]) for p in exp.overrides["pools"]] == [("chief", 1), ("worker", 4), ("ps", 3)]


def test_vertex_pools_framework_spot_timeout_and_disk(tmp_path: Path) -> None:
    exp, _ = mapped(REPO / "examples" / "vertex" / "vertex-gpu-spot.yaml", "gpu-l4-spot")
    assert exp.run.framework == "torch" and exp.overrides["spot"] is True and exp.ttl_hours == 4.0
    assert exp.overrides["pools"][0]["gpu"] == {"type": "nvidia-l4", "count": 1}
    tf, _ = mapped(REPO / "examples" / "vertex" / "vertex-tf-ps.yaml")
    assert tf.name == "digits-tf-ps" and tf.run.framework == "tensorflow"
    assert [p["role"] for p in tf.overrides["pools"]] == ["chief", "worker", "ps", "evaluator"]
    ddp, notes = mapped(REPO / "examples" / "vertex" / "vertex-pytorch-ddp.yaml", "gpu-t4x2")
    assert ddp.overrides["boot_disk_gb"] == 100
    assert any("packageUris" in n and "--code" in n for n in notes)


def test_hyperparameter_jobs_become_sweeps() -> None:
    vertex, _ = mapped(REPO / "examples" / "vertex" / "vertex-hptuning.yaml")
    sweep = vertex.sweep
    assert sweep and (sweep.metric, sweep.goal, sweep.algorithm, sweep.max_trials) == (
        "test_accuracy", "MAXIMIZE", "random", 3)
    assert [(p.name, p.type, p.scale) for p in sweep.parameters] == [("lr", "DOUBLE", "LOG"),
                                                                     ("hidden", "INTEGER", "LINEAR")]
    ai, _ = mapped(REPO / "examples" / "vertex" / "ai-platform-hptuning.yaml")
    assert ai.sweep and ai.sweep.pruner == "median" and ai.sweep.max_trials == 4


POOL = {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
        "pythonPackageSpec": {"pythonModule": "trainers.digits_ddp"}}


def test_container_pools_run_their_command_in_the_image(tmp_path: Path) -> None:
    image = "us-central1-docker.pkg.dev/p/repo/trainer@sha256:" + "c" * 64
    ctr = {"imageUri": image, "command": ["python", "-m", "trainers.digits_ddp"], "args": ["--epochs", "3"],
           "env": [{"name": "MODE", "value": "fast"}]}
    exp, notes = mapped(spec_file(tmp_path, {"workerPoolSpecs": [
        {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1, "containerSpec": ctr},
        {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 2, "containerSpec": ctr}]}),
        stack="gpu-t4x2")
    assert exp.container is not None and exp.container.image == image
    assert exp.run.command == ("python", "-m", "trainers.digits_ddp", "--epochs", "3")
    assert exp.run.env == {"MODE": "fast"} and not exp.run.commands


@pytest.mark.parametrize("job, message", [
    ({"trainingInput": {"scaleTier": "BASIC_GPU", "pythonModule": "m"}}, "K80 GPU, which Google retired"),
    ({"trainingInput": {"scaleTier": "BASIC_TPU", "pythonModule": "m"}}, "TPU VM stack"),
    ({"trainingInput": {"scaleTier": "CUSTOM", "masterType": "standard_gpu", "pythonModule": "m"}},
     "legacy machine 'standard_gpu'"),
    ({"trainingInput": {"scaleTier": "BASIC", "pythonModule": "m", "masterTyp": "x"}}, "unknown field.*masterTyp"),
    ({"trainingInput": {"scaleTier": "BASIC", "pythonModule": "m", "hyperparameters": {"algorithm": "GRID_SEARCH", "params": []}}},
     "GRID_SEARCH is not offered"),
    ({"workerPoolSpecs": [{**POOL, "machineSpec": {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_K80",
                                                   "acceleratorCount": 1}}]}, "NVIDIA_TESLA_K80 is retired.*NVIDIA_TESLA_T4"),
    ({"workerPoolSpecs": [{**POOL, "machineSpec": {"machineType": "cloud-tpu", "acceleratorType": "TPU_V3",
                                                   "acceleratorCount": 8}}]}, "TPUs run as TPU VMs"),
    ({"workerPoolSpecs": [POOL, {}, {"containerSpec": {"imageUri": "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"},
                                     "replicaCount": 2, "machineSpec": {"machineType": "n1-highcpu-16"}}]},
     "Reduction Server pool is Vertex-only"),
    ({"workerPoolSpecs": [{"containerSpec": {"imageUri": "gcr.io/p/trainer:1", "command": ["t"]}, "replicaCount": 1}]},
     "containerSpec: image 'gcr.io/p/trainer:1' cannot be had"),
    ({"workerPoolSpecs": [{"containerSpec": {"imageUri": "localhost/trainctl/t:1"}, "replicaCount": 1}]},
     "image 'localhost/trainctl/t:1' is not in trainctl's image store"),  # its ENTRYPOINT cannot be read
    ({"workerPoolSpecs": [{"containerSpec": {"imageUri": "localhost/trainctl/t:1", "command": ["t"]}},
                          {"containerSpec": {"imageUri": "localhost/trainctl/u:1", "command": ["t"]}, "replicaCount": 1}]},
     "one image per job"),
    ({"workerPoolSpecs": [{**POOL, "nfsMounts": [{"server": "10.0.0.2"}]}]}, "nfsMounts are not supported"),
    ({"workerPoolSpecs": [POOL], "tensorboard": "projects/p/locations/l/tensorboards/1"}, "tensorboard: is Vertex-only"),
    ({"studySpec": {"metrics": [{"metricId": "a", "goal": "MAXIMIZE"}, {"metricId": "b", "goal": "MINIMIZE"}],
                    "parameters": []}, "trialJobSpec": {"workerPoolSpecs": [POOL]}}, "trainctl tunes exactly one"),
    ({"studySpec": {"metrics": [{"metricId": "a", "goal": "MAXIMIZE"}],
                    "parameters": [{"parameterId": "lr", "doubleValueSpec": {"minValue": 0.1, "maxValue": 1},
                                    "scaleType": "UNIT_REVERSE_LOG_SCALE"}]},
      "trialJobSpec": {"workerPoolSpecs": [POOL]}}, "UNIT_REVERSE_LOG_SCALE is not offered"),
    ({"workerPoolSpecs": [{**POOL, "machineSpec": {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4",
                                                   "acceleratorCount": 1}}]}, "local stack has no accelerators"),
])
def test_what_cannot_be_honoured_is_refused_by_name(tmp_path: Path, job: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        exp, _ = mapped(spec_file(tmp_path, job))
        load_stack(exp.stack, name=exp.name, overrides=exp.overrides)  # as `run` does before anything


def test_job_spec_options_do_not_apply_to_experiment_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="apply to AI Platform / Vertex job specs"):
        load_experiment(REPO / "examples" / "digits-ddp.yaml", requirements="other.txt")


def test_stack_runs_an_experiment_file_on_another_stack_as_that_stack_declares_it() -> None:
    notes: list[str] = []
    exp = load_experiment(REPO / "examples" / "digits-ddp.yaml", stack="tpu-v5e-8", notes=notes)
    assert exp.stack == "tpu-v5e-8"
    assert exp.overrides == {}  # nodes: 2 was for the local stack; a v5litepod-8 has one host
    assert notes == ["--stack tpu-v5e-8: the experiment's overrides for its own stack (nodes=2) are not applied"]


def _pools_spec(tmp_path: Path, machine: dict) -> Path:
    return spec_file(tmp_path, {"workerPoolSpecs": [{
        "machineSpec": machine, "replicaCount": 1,
        "containerSpec": {"imageUri": "us-docker.pkg.dev/my-project/t/trainer:1", "command": ["python", "t.py"]}}]})


def test_a_cpu_only_job_on_a_gpu_stack_says_the_stacks_gpus_are_not_used(tmp_path: Path):
    """Issue 48: a GCP plan of a CPU job spec dropped the stack's GPUs without a note."""
    _, notes = mapped(_pools_spec(tmp_path, {"machineType": "n1-standard-4"}), stack="gpu-t4x2")
    said = [n for n in notes if "GPUs" in n]
    assert said and "stack gpu-t4x2's GPUs (2 x nvidia-tesla-t4) are not used" in said[0], notes
    _, notes = mapped(_pools_spec(tmp_path, {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4",
                                             "acceleratorCount": 1}), stack="gpu-t4x2")
    assert not [n for n in notes if "are not used" in n and "GPUs" in n], notes
    _, notes = mapped(_pools_spec(tmp_path, {"machineType": "n1-standard-4"}), stack="local")
    assert not [n for n in notes if "GPUs" in n], notes  # nothing to drop


def test_a_plan_reads_no_images_entrypoint_from_a_registry(tmp_path: Path, monkeypatch):
    """`run --plan` reaches no network: an image without command is named, not inspected."""
    import shutil
    import subprocess

    def no_process(*args, **kwargs):
        raise AssertionError(f"a plan ran {args[0]}")

    monkeypatch.setattr(subprocess, "run", no_process)
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: f"/usr/bin/{name}")
    spec = spec_file(tmp_path, {"workerPoolSpecs": [{
        "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
        "containerSpec": {"imageUri": "us-central1-docker.pkg.dev/my-project/t/trainer:1"}}]})
    exp = load_experiment(spec, stack="gpu-t4x2", code=tmp_path, plan=True)
    assert "not read in a plan" in exp.run.command[0] and "trainer:1" in exp.run.command[0]
