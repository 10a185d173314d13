"""Every field of a job spec is honoured or named in a note: the references' field lists against
trainctl's table, and the gaps users hit: parallel trials, the boot disk type, a containerSpec
without command (the image's ENTRYPOINT), a Reduction Server pool, artifacts nobody asked for."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from infra.errors import ConfigError
from tests.unit.jobs.test_gcloud_job_flags import REPO, SAMPLES, plan
from trainctl.jobs.experiment import missing_artifacts
from trainctl.jobs.experiment_spec import build_experiment
from trainctl.jobs.job_fields import AI_PLATFORM, VERTEX

# The fields of each resource, as the discovery documents list them (ml v1 revision 20251213,
# aiplatform v1 revision 20261106, from google-api-python-client 2.202.0's discovery cache).
ML_V1 = {
    "": ["createTime", "endTime", "errorMessage", "etag", "jobId", "jobPosition", "labels", "predictionInput",
         "predictionOutput", "startTime", "state", "trainingInput", "trainingOutput"],
    "trainingInput": ["args", "enableWebAccess", "encryptionConfig", "evaluatorConfig", "evaluatorCount",
                      "evaluatorType", "hyperparameters", "jobDir", "masterConfig", "masterType", "network",
                      "packageUris", "parameterServerConfig", "parameterServerCount", "parameterServerType",
                      "pythonModule", "pythonVersion", "region", "runtimeVersion", "scaleTier", "scheduling",
                      "serviceAccount", "useChiefInTfConfig", "workerConfig", "workerCount", "workerType"],
    **{f"trainingInput.{r}Config": ["acceleratorConfig", "containerArgs", "containerCommand", "diskConfig",
                                    "imageUri", "tpuTfVersion"] for r in ("master", "worker", "parameterServer",
                                                                          "evaluator")},
    "trainingInput.masterConfig.diskConfig": ["bootDiskSizeGb", "bootDiskType"],
    "trainingInput.masterConfig.acceleratorConfig": ["count", "type"],
    "trainingInput.scheduling": ["maxRunningTime", "maxWaitTime", "priority"],
    "trainingInput.hyperparameters": ["algorithm", "enableTrialEarlyStopping", "goal", "hyperparameterMetricTag",
                                      "maxFailedTrials", "maxParallelTrials", "maxTrials", "params",
                                      "resumePreviousJobId"],
    "trainingInput.hyperparameters.params[]": ["categoricalValues", "discreteValues", "maxValue", "minValue",
                                               "parameterName", "scaleType", "type"],
}
AIPLATFORM_V1 = {
    "": ["createTime", "displayName", "encryptionSpec", "endTime", "error", "jobSpec", "labels", "name",
         "satisfiesPzi", "satisfiesPzs", "startTime", "state", "updateTime", "webAccessUris",  # CustomJob
         "maxFailedTrialCount", "maxTrialCount", "parallelTrialCount", "studySpec", "trialJobSpec", "trials"],
    "jobSpec": ["baseOutputDirectory", "enableDashboardAccess", "enableWebAccess", "experiment", "experimentRun",
                "models", "network", "persistentResourceId", "protectedArtifactLocationId", "pscInterfaceConfig",
                "reservedIpRanges", "scheduling", "serviceAccount", "tensorboard", "workerPoolSpecs"],
    "jobSpec.workerPoolSpecs[]": ["containerSpec", "diskSpec", "lustreMounts", "machineSpec", "nfsMounts",
                                  "pythonPackageSpec", "replicaCount"],
    "jobSpec.workerPoolSpecs[].pythonPackageSpec": ["args", "env", "executorImageUri", "packageUris", "pythonModule"],
    "jobSpec.workerPoolSpecs[].containerSpec": ["args", "command", "env", "imageUri"],
    "jobSpec.workerPoolSpecs[].diskSpec": ["bootDiskSizeGb", "bootDiskType"],
    "jobSpec.workerPoolSpecs[].machineSpec": ["acceleratorCount", "acceleratorType", "gpuPartitionSize",
                                              "machineType", "reservationAffinity", "tpuTopology"],
    "jobSpec.scheduling": ["disableRetries", "maxWaitDuration", "restartJobOnWorkerRestart", "strategy", "timeout"],
    "studySpec": ["algorithm", "convexAutomatedStoppingSpec", "decayCurveStoppingSpec", "measurementSelectionType",
                  "medianAutomatedStoppingSpec", "metrics", "observationNoise", "parameters", "studyStoppingConfig"],
    "studySpec.metrics[]": ["goal", "metricId", "safetyConfig"],
    "studySpec.parameters[]": ["categoricalValueSpec", "conditionalParameterSpecs", "discreteValueSpec",
                               "doubleValueSpec", "integerValueSpec", "parameterId", "scaleType"],
}


@pytest.mark.parametrize("reference, table", [(ML_V1, AI_PLATFORM), (AIPLATFORM_V1, VERTEX)], ids=["ml", "vertex"])
def test_every_field_of_the_references_is_honoured_or_noted(reference, table) -> None:
    missing = [f"{parent}.{f}" if parent else f for parent, fields in reference.items() for f in fields
               if (f"{parent}.{f}" if parent else f) not in table]
    assert missing == []


def test_unknown_fields_are_refused_and_ineffective_ones_named(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({"trainingInput": {"scaleTier": "BASIC", "pythonModule": "m",
                                                      "scheduling": {"maxRunningTim": "60s"}}}))
    with pytest.raises(ConfigError, match="unknown field trainingInput.scheduling.maxRunningTim; valid here: "
                                          "maxRunningTime, maxWaitTime, priority"):
        plan(path, code=REPO)
    path.write_text(yaml.safe_dump({"jobId": "census_1", "state": "SUCCEEDED", "trainingInput": {
        "scaleTier": "BASIC", "pythonModule": "m", "scheduling": {"maxWaitTime": "3600s"}}}))
    _, notes = plan(path, code=REPO)
    assert any(n.startswith("state 'SUCCEEDED': output only") for n in notes)
    assert any(n.startswith("trainingInput.scheduling.maxWaitTime '3600s': nodes are created at once") for n in notes)


def test_parallel_trials_get_nodes_of_their_own() -> None:
    """maxParallelTrials 5 of the published PyTorch tuning config: five one-node trials at once."""
    config = SAMPLES / "pytorch" / "containers" / "hp_tuning" / "hptuning_config.yaml"
    exp, notes = plan(config, code=REPO, module_name="trainers.digits_ddp")
    assert exp.sweep and (exp.sweep.max_parallel_trials, exp.sweep.parallel_mode) == (5, "split")
    assert exp.overrides["nodes"] == 5 and "pools" not in exp.overrides
    assert any("5 trials at once, each on a node of its own" in n for n in notes)
    # a trial with worker pools runs alone, and says so
    config = SAMPLES / "sklearn" / "sklearn-template" / "template" / "config" / "hptuning_config.yaml"
    exp, notes = plan(config, stack="gpu-t4x2", code=REPO, module_name="trainers.digits_ddp", runtime_version="2.8",
                      python_version="3.7")
    assert exp.sweep and exp.sweep.max_parallel_trials == 1
    assert any("5 parallel trials asked for; they run one at a time" in n for n in notes)


def test_the_boot_disk_type_is_named_and_one_vertex_never_offered_refused(tmp_path: Path) -> None:
    pool = {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
            "pythonPackageSpec": {"executorImageUri": "x", "pythonModule": "trainers.digits_ddp"}}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({"workerPoolSpecs": [{**pool, "diskSpec": {"bootDiskType": "pd-ssd",
                                                                                "bootDiskSizeGb": 300}}]}))
    exp, notes = plan(path, stack="gpu-t4x2", code=REPO)
    assert exp.overrides["boot_disk_gb"] == 300
    assert any(n.startswith("workerPoolSpecs[0].diskSpec.bootDiskType 'pd-ssd': the boot disk type is the stack's")
               for n in notes)
    path.write_text(yaml.safe_dump({"workerPoolSpecs": [{**pool, "diskSpec": {"bootDiskType": "pd-balanced"}}]}))
    with pytest.raises(ConfigError, match="bootDiskType 'pd-balanced' is not one Vertex offers"):
        plan(path, code=REPO)


@pytest.fixture
def entrypoint_image():
    """An image in trainctl's store with an ENTRYPOINT and a CMD, as `docker build` makes them."""
    from trainctl.jobs.image import build_env

    buildah, ref = shutil.which("buildah"), "localhost/trainctl/entrypoint-test:1"
    if buildah is None:
        pytest.skip("buildah is not installed")
    env = build_env()
    ctr = subprocess.run([buildah, "from", "scratch"], env=env, capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([buildah, "config", "--entrypoint", '["python", "-m", "trainer.task"]', "--cmd",
                    '["--epochs", "2"]', ctr], env=env, check=True)
    subprocess.run([buildah, "commit", "-q", ctr, ref], env=env, check=True, capture_output=True)
    subprocess.run([buildah, "rm", ctr], env=env, check=True, capture_output=True)
    yield ref
    subprocess.run([buildah, "rmi", ref], env=env, capture_output=True)


def test_a_container_without_command_runs_the_images_entrypoint(tmp_path: Path, entrypoint_image: str) -> None:
    path = tmp_path / "job.yaml"
    pool = {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1}
    path.write_text(yaml.safe_dump({"workerPoolSpecs": [{**pool, "containerSpec": {"imageUri": entrypoint_image}}]}))
    exp, notes = plan(path, code=REPO)
    assert exp.container and exp.container.image == entrypoint_image
    assert exp.run.command == ("python", "-m", "trainer.task", "--epochs", "2")  # ENTRYPOINT + CMD
    path.write_text(yaml.safe_dump({"workerPoolSpecs": [{**pool, "containerSpec": {
        "imageUri": entrypoint_image, "args": ["--epochs", "9"]}}]}))
    exp, notes = plan(path, code=REPO)
    assert exp.run.command == ("python", "-m", "trainer.task", "--epochs", "9")  # args replace CMD
    assert any("no command" in n and "ENTRYPOINT ['python', '-m', 'trainer.task']" in n for n in notes)


def test_a_reduction_server_pool_is_refused_by_name_first(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({"workerPoolSpecs": [
        {"machineSpec": {"machineType": "a2-highgpu-8g"}, "replicaCount": 1,
         "containerSpec": {"imageUri": "gcr.io/my-project/trainer:1"}},  # an image trainctl cannot have
        {"machineSpec": {"machineType": "a2-highgpu-8g"}, "replicaCount": 1,
         "containerSpec": {"imageUri": "gcr.io/my-project/trainer:1"}},
        {"machineSpec": {"machineType": "n1-highcpu-16"}, "replicaCount": 4,
         "containerSpec": {"imageUri": "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"}}]}))
    with pytest.raises(ConfigError, match=r"workerPoolSpecs\[2\]: a Reduction Server pool is Vertex-only"):
        plan(path, code=REPO)


def test_only_artifacts_the_experiment_names_are_reported_missing(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({"trainingInput": {"scaleTier": "BASIC", "pythonModule": "m"}}))
    mapped, _ = plan(job, code=REPO)
    assert missing_artifacts(mapped, ["metrics.json", "model/"]) is None  # the spec never asked for them
    named = build_experiment({"name": "x", "code": str(REPO), "run": {"command": "python t.py"},
                              "artifacts": ["metrics.json", "loss.png"]}, tmp_path / "x.yaml")
    assert missing_artifacts(named, ["loss.png"]) == "artifacts not found: loss.png"


def test_labels_and_disable_retries_are_honoured(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({"labels": {"team": "ml"}, "jobSpec": {
        "scheduling": {"disableRetries": True},
        "workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
                             "pythonPackageSpec": {"executorImageUri": "x", "pythonModule": "trainers.digits_ddp"}}]}}))
    exp, _ = plan(path, code=REPO)
    assert exp.overrides["labels"] == {"team": "ml"}  # the stack's resource labels
    assert exp.restart.job_retries == 0
