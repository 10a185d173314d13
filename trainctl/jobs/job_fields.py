"""Every field of an AI Platform training job and of a Vertex AI CustomJob / HyperparameterTuningJob,
as the APIs' references define them, and how trainctl takes it: honoured by the mapping
(trainctl/jobs/vertex_job.py, None here; a value it cannot honour is refused there by name) or named
in a note saying what it does on Google Cloud and why it changes nothing here. A field that is
in neither reference is refused as unknown (a typo must not pass as ignored).

Field lists: the ml v1 and aiplatform v1 discovery documents (GoogleCloudMlV1__Job,
__TrainingInput, __ReplicaConfig, __Scheduling, __HyperparameterSpec, __ParameterSpec;
GoogleCloudAiplatformV1CustomJob, CustomJobSpec, WorkerPoolSpec, PythonPackageSpec, ContainerSpec,
MachineSpec, DiskSpec, Scheduling, HyperparameterTuningJob, StudySpec and its parts).
"""

from __future__ import annotations

from typing import Any

from infra.errors import ConfigError

HONOURED = None
OUTPUT = "output only (what `describe` prints of a submitted job): not an input, ignored"
BOOT_DISK_TYPE = ("the boot disk type is the stack's (GCP stacks: pd-balanced, hyperdisk-balanced on A3 Ultra "
                  "and A4); the size is honoured")

_REPLICA = {  # AI Platform's ReplicaConfig, for masterConfig, workerConfig, ...
    "acceleratorConfig": HONOURED, "acceleratorConfig.type": HONOURED, "acceleratorConfig.count": HONOURED,
    "imageUri": HONOURED, "containerCommand": HONOURED, "containerArgs": HONOURED,
    "tpuTfVersion": HONOURED,  # refused: TPUs run as TPU VM stacks
    "diskConfig": HONOURED, "diskConfig.bootDiskSizeGb": HONOURED, "diskConfig.bootDiskType": BOOT_DISK_TYPE,
}

AI_PLATFORM: dict[str, str | None] = {
    "jobId": "the run id is trainctl's (<name>-<random>); the job's name comes from the file name",
    "labels": HONOURED,  # the stack's resource labels
    **{f: OUTPUT for f in ("createTime", "startTime", "endTime", "state", "errorMessage", "etag", "jobPosition",
                           "trainingOutput", "predictionOutput")},
    "predictionInput": HONOURED,  # refused: batch prediction is not a training job
    "trainingInput": HONOURED,
    **{f"trainingInput.{f}": HONOURED for f in (
        "scaleTier", "masterType", "workerType", "parameterServerType", "evaluatorType", "workerCount",
        "parameterServerCount", "evaluatorCount", "packageUris", "pythonModule", "args", "jobDir",
        "runtimeVersion", "pythonVersion", "hyperparameters", "scheduling", "network", "serviceAccount",
        "enableWebAccess", "encryptionConfig")},
    "trainingInput.region": "the stack decides where the job runs (its zone), not the job spec",
    "trainingInput.useChiefInTfConfig": "TF_CONFIG names the first replica `chief` here in every case",
    **{f"trainingInput.{role}Config{'.' + k if k else ''}": v for role in ("master", "worker", "parameterServer", "evaluator")
       for k, v in {"": HONOURED, **_REPLICA}.items()},
    "trainingInput.scheduling.maxRunningTime": HONOURED,
    "trainingInput.scheduling.maxWaitTime": "nodes are created at once or the run fails; there is no queue to wait in",
    "trainingInput.scheduling.priority": "there is no queue of jobs to order",
    **{f"trainingInput.hyperparameters.{f}": HONOURED for f in (
        "goal", "hyperparameterMetricTag", "maxTrials", "maxParallelTrials", "enableTrialEarlyStopping",
        "algorithm", "params", "resumePreviousJobId")},
    "trainingInput.hyperparameters.maxFailedTrials": "every trial runs; failed ones are recorded as failed",
    **{f"trainingInput.hyperparameters.params[].{f}": HONOURED for f in (
        "parameterName", "type", "minValue", "maxValue", "scaleType", "categoricalValues", "discreteValues")},
}

_SPEC: dict[str, str | None] = {  # CustomJobSpec (a CustomJob's jobSpec, a tuning job's trialJobSpec)
    "workerPoolSpecs": HONOURED,
    **{f"workerPoolSpecs[].{f}": HONOURED for f in (
        "replicaCount", "machineSpec", "machineSpec.machineType", "machineSpec.acceleratorType",
        "machineSpec.acceleratorCount", "machineSpec.tpuTopology", "diskSpec", "diskSpec.bootDiskSizeGb",
        "pythonPackageSpec", "pythonPackageSpec.executorImageUri", "pythonPackageSpec.packageUris",
        "pythonPackageSpec.pythonModule", "pythonPackageSpec.args", "pythonPackageSpec.env",
        "containerSpec", "containerSpec.imageUri", "containerSpec.command", "containerSpec.args",
        "containerSpec.env", "nfsMounts", "lustreMounts")},
    "workerPoolSpecs[].diskSpec.bootDiskType": BOOT_DISK_TYPE,
    "workerPoolSpecs[].machineSpec.gpuPartitionSize": "GPUs are given whole here; the partition size is not applied",
    "workerPoolSpecs[].machineSpec.reservationAffinity": "nodes are not placed on reservations",
    **{f: HONOURED for f in ("scheduling", "scheduling.timeout", "scheduling.strategy", "scheduling.disableRetries",
                             "scheduling.restartJobOnWorkerRestart", "baseOutputDirectory",
                             "baseOutputDirectory.outputUriPrefix", "network", "reservedIpRanges", "serviceAccount",
                             "enableWebAccess", "enableDashboardAccess", "tensorboard", "persistentResourceId",
                             "protectedArtifactLocationId", "pscInterfaceConfig")},
    "scheduling.maxWaitDuration": "nodes are created at once or the run fails; there is no queue to wait in",
    "experiment": "runs are not recorded in Vertex AI Experiments; trainctl keeps runs/<run-id>/",
    "experimentRun": "runs are not recorded in Vertex AI Experiments; trainctl keeps runs/<run-id>/",
    "models": "no Vertex AI Model is registered; the model is collected to runs/<run-id>/model/",
}

_JOB: dict[str, str | None] = {  # CustomJob and HyperparameterTuningJob, around the spec
    "displayName": HONOURED, "labels": HONOURED, "jobSpec": HONOURED, "trialJobSpec": HONOURED,
    "encryptionSpec": HONOURED,  # refused: no customer-managed keys
    **{f: OUTPUT for f in ("name", "createTime", "startTime", "endTime", "updateTime", "state", "error",
                           "webAccessUris", "satisfiesPzs", "satisfiesPzi", "trials")},
    "maxTrialCount": HONOURED, "parallelTrialCount": HONOURED,
    "maxFailedTrialCount": "every trial runs; failed ones are recorded as failed",
    "studySpec": HONOURED,
    **{f"studySpec.{f}": HONOURED for f in (
        "metrics", "metrics[].metricId", "metrics[].goal", "parameters", "parameters[].parameterId",
        "parameters[].scaleType", "parameters[].doubleValueSpec", "parameters[].integerValueSpec",
        "parameters[].categoricalValueSpec", "parameters[].discreteValueSpec",
        "parameters[].conditionalParameterSpecs", "algorithm", "medianAutomatedStoppingSpec",
        "decayCurveStoppingSpec", "convexAutomatedStoppingSpec")},
    **{f"studySpec.parameters[].{kind}.{f}": HONOURED for kind, fields in (
        ("doubleValueSpec", ("minValue", "maxValue")), ("integerValueSpec", ("minValue", "maxValue")),
        ("categoricalValueSpec", ("values",)), ("discreteValueSpec", ("values",))) for f in fields},
    **{f"studySpec.parameters[].{kind}.defaultValue": "the sampler picks the first trials itself; the default "
       "value is not tried first" for kind in ("doubleValueSpec", "integerValueSpec", "categoricalValueSpec",
                                               "discreteValueSpec")},
    "studySpec.metrics[].safetyConfig": "safety thresholds are not checked",
    "studySpec.measurementSelectionType": "a trial's value is its last report",
    "studySpec.observationNoise": "the sampler (optuna TPE or random) does not take a noise level",
    "studySpec.studyStoppingConfig": "the study stops after maxTrialCount trials",
}

# Fields whose content is free-form: keys and values the user chooses.
_FREE = ("labels", "env", "args", "command", "packageUris", "containerCommand", "containerArgs", "values",
         "categoricalValues", "discreteValues", "medianAutomatedStoppingSpec", "decayCurveStoppingSpec",
         "convexAutomatedStoppingSpec", "conditionalParameterSpecs", "trainingOutput", "predictionOutput",
         "predictionInput", "error", "trials", "nfsMounts", "lustreMounts", "encryptionConfig", "encryptionSpec",
         "pscInterfaceConfig", "reservedIpRanges", "webAccessUris", "reservationAffinity", "safetyConfig",
         "studyStoppingConfig", "models", "defaultValue", "observationNoise")

VERTEX: dict[str, str | None] = {**_JOB, **_SPEC, **{f"{p}.{k}": v for p in ("jobSpec", "trialJobSpec")
                                                     for k, v in _SPEC.items()}}


def field_notes(job: dict[str, Any]) -> list[str]:
    """Notes for the fields that change nothing here; unknown fields refused by name."""
    table = AI_PLATFORM if "trainingInput" in job else VERTEX
    notes: list[str] = []
    _walk(job, "", "", table, notes)
    return notes


def _walk(node: Any, shown: str, key: str, table: dict[str, str | None], notes: list[str]) -> None:
    if key:
        if key not in table:
            parent = key.rsplit(".", 1)[0] if "." in key else ""
            siblings = sorted(k.rsplit(".", 1)[-1] for k in table if (k.rsplit(".", 1)[0] if "." in k else "") == parent)
            raise ConfigError(f"unknown field {shown}; valid here: {', '.join(siblings)}")
        if table[key] is not None and node not in (None, "", [], {}, False):
            value = f" {node!r}" if isinstance(node, (str, int, float)) else ""
            notes.append(f"{shown}{value}: {table[key]}")
        if key.rsplit(".", 1)[-1].split("[")[0] in _FREE:
            return
    if isinstance(node, dict):
        for name, value in node.items():
            _walk(value, f"{shown}.{name}" if shown else name, f"{key}.{name}" if key else name, table, notes)
    elif isinstance(node, list) and any(k.startswith(f"{key}[].") for k in table):
        for i, item in enumerate(node):
            if isinstance(item, dict):
                for name, value in item.items():
                    _walk(value, f"{shown}[{i}].{name}", f"{key}[].{name}", table, notes)
