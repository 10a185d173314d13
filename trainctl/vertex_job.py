"""AI Platform and Vertex AI job specs, run as they are: an AI Platform `config.yaml`
(`trainingInput`) or a Vertex AI CustomJob (`workerPoolSpecs`, also under `jobSpec:`, with an
optional hyperparameter `studySpec`) becomes an experiment with worker pools on a trainctl stack.

Every field is mapped or refused by name with the nearest alternative; none is ignored. A job's
packageUris are fetched and installed (trainctl/packages.py) unless --code gives the source. What a
mapping changes (e.g. machine types on the local stack, whose nodes are CPU namespaces) is said
in the notes that `trainctl run --plan` prints. Field names follow the public references:
  AI Platform TrainingInput  https://cloud.google.com/ai-platform/training/docs/reference/rest/v1/projects.jobs#TrainingInput
  Vertex AI CustomJobSpec    https://cloud.google.com/vertex-ai/docs/reference/rest/v1/CustomJobSpec
  Vertex AI StudySpec        https://cloud.google.com/vertex-ai/docs/reference/rest/v1/StudySpec
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra import catalog
from infra.errors import ConfigError
from infra.spec import POOL_ORDER
from infra.stack_config import load_stack

ROLES = POOL_ORDER  # workerPoolSpecs[0..3]; AI Platform's master, worker, parameterServer, evaluator

# AI Platform's scale tiers with a fixed shape (its machine-types page): counts per role; the
# machine types are the target stack's.
SCALE_TIERS = {"BASIC": {"chief": 1}, "STANDARD_1": {"chief": 1, "worker": 4, "ps": 3},
               "PREMIUM_1": {"chief": 1, "worker": 19, "ps": 11}}
REFUSED_TIERS = {
    "BASIC_GPU": "it means one K80 GPU, which Google retired; use scaleTier CUSTOM with masterType "
                 "n1-standard-8 and masterConfig.acceleratorConfig {type: NVIDIA_TESLA_T4, count: 1}",
    "BASIC_TPU": "it means a Cloud TPU node (TPU v2, retired); run on a TPU VM stack "
                 "(e.g. --stack tpu-v5e-8)",
}
# AI Platform's legacy machine names and the Compute Engine machine types they stand for.
LEGACY_MACHINES = {"standard": "n1-standard-4", "large_model": "n1-highmem-8",
                   "complex_model_s": "n1-highcpu-8", "complex_model_m": "n1-highcpu-16",
                   "complex_model_l": "n1-highcpu-32"}
RETIRED_ACCELERATORS = {"NVIDIA_TESLA_K80": "NVIDIA_TESLA_T4", "NVIDIA_TESLA_P4": "NVIDIA_TESLA_T4",
                        "NVIDIA_TESLA_P100": "NVIDIA_TESLA_T4"}
SCALES = {"UNIT_LINEAR_SCALE": "LINEAR", "UNIT_LOG_SCALE": "LOG", "SCALE_TYPE_UNSPECIFIED": "LINEAR"}
ALGORITHMS = {"ALGORITHM_UNSPECIFIED": "tpe", "RANDOM_SEARCH": "random"}


@dataclass
class Mapping:
    experiment: dict[str, Any]  # an experiment file's content
    notes: list[str] = field(default_factory=list)


def is_job_spec(data: dict[str, Any]) -> bool:
    return bool({"trainingInput", "workerPoolSpecs", "jobSpec", "trialJobSpec"} & set(data))


def _framework(images: list[str], notes: list[str], ai_platform: bool) -> str:
    """Which launcher the job needs, from its prebuilt training image (Vertex) or AI Platform's
    runtime (TensorFlow's)."""
    if any("pytorch" in image for image in images):
        return "torch"
    if any(re.search(r"/tf[-.\d]|tensorflow", image) for image in images) or ai_platform:
        return "tensorflow"
    notes.append("no executorImageUri names a framework: running it as PyTorch (torchrun); "
                 "give --framework tensorflow for a TensorFlow job")
    return "torch"


def _refuse(where: str, why: str) -> ConfigError:
    return ConfigError(f"{where}: {why}")


def _duration_hours(value: str, where: str) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)s", str(value))
    if not match:
        raise _refuse(where, f"{value!r} is not a duration like '7200s'")
    return round(float(match.group(1)) / 3600, 4)


def _accelerator(kind: str, count: int, where: str) -> dict[str, Any] | None:
    if kind in ("", "ACCELERATOR_TYPE_UNSPECIFIED"):
        return None
    if kind in RETIRED_ACCELERATORS:
        raise _refuse(where, f"{kind} is retired on Google Cloud; the nearest offered: "
                             f"{RETIRED_ACCELERATORS[kind]}")
    if kind.startswith("TPU_"):
        raise _refuse(where, f"{kind} in a worker pool: TPUs run as TPU VMs here; use a TPU stack "
                             "(e.g. --stack tpu-v5e-8) with a single pool")
    name = kind.lower().replace("_", "-")
    if name not in catalog.GPUS:
        raise _refuse(where, f"accelerator {kind} is not in trainctl's catalog; offered: "
                             f"{', '.join(sorted(g.upper().replace('-', '_') for g in catalog.GPUS))}")
    return {"type": name, "count": count or 1}


def _machine(name: str | None, where: str) -> str | None:
    if not name:
        return None
    if name in LEGACY_MACHINES:
        return LEGACY_MACHINES[name]
    if name.endswith("_gpu") or name.endswith(("_p100", "_v100")) or name == "cloud_tpu":
        raise _refuse(where, f"legacy machine {name!r} bundles a retired accelerator or a Cloud TPU "
                             "node; name a Compute Engine machine type and an acceleratorConfig")
    return name


def _command(module: str | None, args: list[str], where: str) -> list[str]:
    if not module:
        raise _refuse(where, "pythonModule is required (the trainer's module, run as `python -m`)")
    return ["python", "-m", module, *(str(a) for a in args)]


# --- Vertex AI CustomJob -------------------------------------------------------------------

KNOWN_POOL_FIELDS = {"machineSpec", "replicaCount", "diskSpec", "pythonPackageSpec", "containerSpec", "nfsMounts"}


def _container(where: str, container: dict[str, Any], env: dict[str, str]) -> tuple[list[str], str]:
    """A containerSpec as the pool's command in its image: the images trainctl can run (see
    ContainerSection), the command and args as Vertex joins them, env for the job."""
    from pydantic import ValidationError

    from trainctl.experiment_spec import ContainerSection

    image = container.get("imageUri", "")
    try:
        ContainerSection(image=image)
    except ValidationError as exc:
        raise _refuse(f"{where}.containerSpec", exc.errors()[0]["msg"].removeprefix("Value error, ")) from None
    if not container.get("command"):
        raise _refuse(f"{where}.containerSpec", f"give command (with args): trainctl runs the pool's command "
                                                f"in {image}; it does not read the image's entrypoint")
    for item in container.get("env", []):
        env[item["name"]] = str(item["value"])
    return [*container["command"], *(str(a) for a in container.get("args", []))], image


def _vertex_pool(i: int, pool: dict[str, Any], notes: list[str],
                 env: dict[str, str]) -> tuple[dict[str, Any], list[str] | None, str | None]:
    where = f"workerPoolSpecs[{i}]"
    unknown = set(pool) - KNOWN_POOL_FIELDS
    if unknown:
        raise _refuse(where, f"unknown field(s) {', '.join(sorted(unknown))}")
    if pool.get("nfsMounts"):
        raise _refuse(where, "nfsMounts are not supported: keep data in the job's bucket (gs://)")
    image = None
    if "containerSpec" in pool:
        image = pool["containerSpec"].get("imageUri", "")
        if i == 2 and "reductionserver" in image.replace("-", "").lower():
            raise _refuse(where, "a Reduction Server pool is Vertex-only; leave pool 2 out (NCCL "
                                 "all-reduce runs between the workers) or use parameter servers")
    spec = pool.get("pythonPackageSpec") or {}
    if spec.get("executorImageUri"):
        notes.append(f"{where}: executorImageUri {spec['executorImageUri']} is not used: nodes run "
                     "a uv environment with the experiment's requirements")
    machine = pool.get("machineSpec") or {}
    out: dict[str, Any] = {"role": ROLES[i], "count": int(pool.get("replicaCount", 1))}
    if machine.get("machineType"):
        out["machine_type"] = machine["machineType"]
    gpu = _accelerator(machine.get("acceleratorType", ""), int(machine.get("acceleratorCount", 0)),
                       f"{where}.machineSpec")
    if gpu:
        out["gpu"] = gpu
    disk = pool.get("diskSpec") or {}
    if disk.get("bootDiskType") not in (None, "pd-ssd", "pd-standard", "pd-balanced"):
        raise _refuse(f"{where}.diskSpec", f"bootDiskType {disk['bootDiskType']!r} is not offered")
    command = _command(spec.get("pythonModule"), spec.get("args", []), f"{where}.pythonPackageSpec") if spec else None
    for item in spec.get("env", []):
        env[item["name"]] = str(item["value"])
    if "containerSpec" in pool:
        command, image = _container(where, pool["containerSpec"], env)
    if spec.get("env") or (pool.get("containerSpec") or {}).get("env"):
        notes.append(f"{where}: env is set for every pool (trainctl has one environment per job)")
    return out, command, image


def _vertex(job: dict[str, Any], name: str, notes: list[str]) -> dict[str, Any]:
    # a CustomJob's spec is under jobSpec, a HyperparameterTuningJob's under trialJobSpec;
    # `gcloud ai custom-jobs create --config` takes the spec's fields at the top level
    spec = job.get("trialJobSpec") or job.get("jobSpec") or job
    pools_in = spec.get("workerPoolSpecs") or []
    if not pools_in or not pools_in[0]:
        raise _refuse("workerPoolSpecs", "workerPoolSpecs[0] (the primary replica) is required")
    if len(pools_in) > 4:
        raise _refuse("workerPoolSpecs", f"{len(pools_in)} pools; Vertex AI has at most 4")
    pools: list[dict[str, Any]] = []
    commands: dict[str, list[str]] = {}
    env: dict[str, str] = {}
    boot: set[int] = set()
    containers: dict[str, str] = {}
    for i, pool in enumerate(pools_in):
        if not pool:
            continue  # an empty spec keeps the positions of the pools after it, as on Vertex
        mapped, command, image = _vertex_pool(i, pool, notes, env)
        pools.append(mapped)
        if command:
            commands[ROLES[i]] = command
        if image is not None:
            containers[ROLES[i]] = image
        if (pool.get("diskSpec") or {}).get("bootDiskSizeGb"):
            boot.add(int(pool["diskSpec"]["bootDiskSizeGb"]))
    if "chief" not in commands:
        raise _refuse("workerPoolSpecs[0]", "a pythonPackageSpec with pythonModule, or a containerSpec "
                                            "with command, is required")
    if containers and (len(set(containers.values())) > 1 or len(containers) != len(commands)):
        raise _refuse("workerPoolSpecs", "every pool runs in one image on trainctl (one image per job): "
                                         f"give all pools the same containerSpec.imageUri (got {containers})")
    images = [(p.get("pythonPackageSpec") or {}).get("executorImageUri", "") for p in pools_in if p]
    experiment: dict[str, Any] = {"name": name, "overrides": {"pools": pools},
                                  "run": {"command": commands.pop("chief"),
                                          "framework": _framework(images, notes, ai_platform=False)}}
    if commands:
        experiment["run"]["commands"] = {r: c for r, c in commands.items() if c != experiment["run"]["command"]}
        if not experiment["run"]["commands"]:
            del experiment["run"]["commands"]
    if env:
        experiment["run"]["env"] = env
    if containers:
        experiment["container"] = {"image": next(iter(containers.values()))}
    if boot:
        experiment["overrides"]["boot_disk_gb"] = max(boot)
    scheduling = spec.get("scheduling") or {}
    if scheduling.get("timeout"):
        experiment["ttl_hours"] = _duration_hours(scheduling["timeout"], "scheduling.timeout")
    if scheduling.get("strategy") == "SPOT" or scheduling.get("strategy") == "FLEX_START":
        if scheduling["strategy"] == "FLEX_START":
            raise _refuse("scheduling.strategy", "FLEX_START (Dynamic Workload Scheduler) is "
                                                 "Vertex-only; use SPOT or STANDARD")
        experiment["overrides"]["spot"] = True
    if scheduling.get("restartJobOnWorkerRestart"):
        experiment["restart"] = {"job_retries": 3}
    output = (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    if output:
        notes.append(f"baseOutputDirectory {output}: the job dir is the stack's bucket "
                     "(AIP_MODEL_DIR and friends point there); artifacts are collected to runs/")
    for unsupported in ("network", "reservedIpRanges", "enableWebAccess", "enableDashboardAccess",
                        "tensorboard", "persistentResourceId", "protectedArtifactLocationId"):
        if spec.get(unsupported):
            raise _refuse(unsupported, "is Vertex-only and has no trainctl counterpart; remove it")
    study = job.get("studySpec")
    if study:
        experiment["sweep"] = _study(study, job)
    return experiment


def _scale(param: dict[str, Any], where: str) -> str:
    """A parameter's scale (studySpec and AI Platform's hyperparameters share the names)."""
    scale = SCALES.get(param.get("scaleType", "UNIT_LINEAR_SCALE"))
    if scale is None:
        raise _refuse(where, f"scaleType {param['scaleType']} is not offered; use UNIT_LINEAR_SCALE "
                             "or UNIT_LOG_SCALE")
    return scale


def _algorithm(spec: dict[str, Any], where: str) -> str:
    algorithm = spec.get("algorithm", "ALGORITHM_UNSPECIFIED")
    if algorithm not in ALGORITHMS:
        raise _refuse(where, f"{algorithm} is not offered; use ALGORITHM_UNSPECIFIED (Bayesian, "
                             "here TPE) or RANDOM_SEARCH")
    return ALGORITHMS[algorithm]


def _study(study: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    metrics = study.get("metrics") or []
    if len(metrics) != 1:
        raise _refuse("studySpec.metrics", f"{len(metrics)} metrics; trainctl tunes exactly one")
    params = []
    for p in study.get("parameters") or []:
        pid, where = p.get("parameterId"), f"studySpec.parameters[{p.get('parameterId')}]"
        scale = _scale(p, where)
        if "doubleValueSpec" in p:
            params.append({"name": pid, "type": "DOUBLE", "min": p["doubleValueSpec"]["minValue"],
                           "max": p["doubleValueSpec"]["maxValue"], "scale": scale})
        elif "integerValueSpec" in p:
            params.append({"name": pid, "type": "INTEGER", "min": int(p["integerValueSpec"]["minValue"]),
                           "max": int(p["integerValueSpec"]["maxValue"]), "scale": scale})
        elif "categoricalValueSpec" in p:
            params.append({"name": pid, "type": "CATEGORICAL", "values": p["categoricalValueSpec"]["values"]})
        elif "discreteValueSpec" in p:
            params.append({"name": pid, "type": "CATEGORICAL", "values": p["discreteValueSpec"]["values"]})
        else:
            raise _refuse(where, "needs a doubleValueSpec, integerValueSpec, categoricalValueSpec or "
                                 "discreteValueSpec")
    algorithm = _algorithm(study, "studySpec.algorithm")
    sweep = {"metric": metrics[0]["metricId"], "goal": metrics[0]["goal"], "parameters": params,
             "algorithm": algorithm, "max_trials": int(job.get("maxTrialCount", 6)),
             "max_parallel_trials": int(job.get("parallelTrialCount", 1)), "parallel_mode": "sequential"}
    if "medianAutomatedStoppingSpec" in study or "decayCurveStoppingSpec" in study:
        sweep["pruner"] = "median"
    return sweep


# --- AI Platform trainingInput -------------------------------------------------------------

TRAINING_INPUT_FIELDS = {
    "scaleTier", "masterType", "workerType", "parameterServerType", "evaluatorType", "workerCount",
    "parameterServerCount", "evaluatorCount", "masterConfig", "workerConfig", "parameterServerConfig",
    "evaluatorConfig", "packageUris", "pythonModule", "args", "region", "jobDir", "runtimeVersion",
    "pythonVersion", "scheduling", "hyperparameters", "useChiefInTfConfig", "serviceAccount", "network",
    "enableWebAccess", "encryptionConfig"}


def _ai_platform(job: dict[str, Any], name: str, notes: list[str]) -> dict[str, Any]:
    ti = job["trainingInput"] or {}
    unknown = set(ti) - TRAINING_INPUT_FIELDS
    if unknown:
        raise _refuse("trainingInput", f"unknown field(s) {', '.join(sorted(unknown))}")
    tier = ti.get("scaleTier", "BASIC")
    if tier in REFUSED_TIERS:
        raise _refuse(f"scaleTier {tier}", REFUSED_TIERS[tier])
    roles = [("chief", "master"), ("worker", "worker"), ("ps", "parameterServer"), ("evaluator", "evaluator")]
    pools: list[dict[str, Any]] = []
    if tier == "CUSTOM":
        if not ti.get("masterType"):
            raise _refuse("trainingInput", "scaleTier CUSTOM needs masterType")
        for role, key in roles:
            count = 1 if role == "chief" else int(ti.get(f"{key}Count", 0))
            if not count:
                continue
            pool: dict[str, Any] = {"role": role, "count": count}
            machine = _machine(ti.get(f"{key}Type") or ti.get("masterType"), f"trainingInput.{key}Type")
            pool["machine_type"] = machine
            config = (ti.get(f"{key}Config") or {}).get("acceleratorConfig") or {}
            gpu = _accelerator(config.get("type", ""), int(config.get("count", 0)),
                               f"trainingInput.{key}Config.acceleratorConfig")
            if gpu:
                pool["gpu"] = gpu
            pools.append(pool)
    elif tier in SCALE_TIERS:
        pools = [{"role": r, "count": c} for r, c in SCALE_TIERS[tier].items()]
        notes.append(f"scaleTier {tier}: {', '.join(f'{c} {r}' for r, c in SCALE_TIERS[tier].items())} "
                     "on the target stack's machine type")
    else:
        raise _refuse("trainingInput.scaleTier", f"{tier!r} is not a scale tier; valid: "
                                                 f"{', '.join([*SCALE_TIERS, *REFUSED_TIERS, 'CUSTOM'])}")
    for vertex_only in ("network", "enableWebAccess", "encryptionConfig", "serviceAccount"):
        if ti.get(vertex_only):
            raise _refuse(f"trainingInput.{vertex_only}", "has no trainctl counterpart (the stack "
                                                           "declares network, keys and service account)")
    for ignored in ("region", "runtimeVersion", "pythonVersion"):
        if ti.get(ignored):
            notes.append(f"{ignored} {ti[ignored]!r}: the target stack decides where and with which "
                         "Python the job runs (its requirements file, the environment)")
    command = _command(ti.get("pythonModule"), ti.get("args", []), "trainingInput")
    if ti.get("jobDir"):
        # AI Platform hands jobDir to the trainer as --job-dir; here it is the stack's bucket
        command += ["--job-dir", "{job_dir}"]
        notes.append(f"jobDir {ti['jobDir']}: the trainer gets --job-dir <the stack's bucket>/<run id>")
    experiment: dict[str, Any] = {"name": name, "overrides": {"pools": pools},
                                  "run": {"command": command, "framework": _framework([], notes, ai_platform=True)}}
    if (ti.get("scheduling") or {}).get("maxRunningTime"):
        experiment["ttl_hours"] = _duration_hours(ti["scheduling"]["maxRunningTime"], "scheduling.maxRunningTime")
    hp = ti.get("hyperparameters")
    if hp:
        experiment["sweep"] = _hyperparameters(hp)
    return experiment


def _hyperparameters(hp: dict[str, Any]) -> dict[str, Any]:
    algorithm = _algorithm(hp, "hyperparameters.algorithm")
    params = []
    for p in hp.get("params") or []:
        where = f"hyperparameters.params[{p.get('parameterName')}]"
        scale = _scale(p, where)
        kind = p.get("type")
        if kind in ("DOUBLE", "INTEGER"):
            params.append({"name": p["parameterName"], "type": kind, "min": p["minValue"],
                           "max": p["maxValue"], "scale": scale})
        elif kind == "CATEGORICAL":
            params.append({"name": p["parameterName"], "type": "CATEGORICAL", "values": p["categoricalValues"]})
        elif kind == "DISCRETE":
            params.append({"name": p["parameterName"], "type": "CATEGORICAL", "values": p["discreteValues"]})
        else:
            raise _refuse(where, f"type {kind!r}: DOUBLE, INTEGER, CATEGORICAL or DISCRETE")
    sweep = {"metric": hp.get("hyperparameterMetricTag", "training/hptuning/metric"),
             "goal": hp.get("goal", "MAXIMIZE"), "parameters": params, "algorithm": algorithm,
             "max_trials": int(hp.get("maxTrials", 1)), "max_parallel_trials": int(hp.get("maxParallelTrials", 1)),
             "parallel_mode": "sequential"}
    if hp.get("enableTrialEarlyStopping"):
        sweep["pruner"] = "median"
    if hp.get("resumePreviousJobId"):
        raise _refuse("hyperparameters.resumePreviousJobId", "resume a sweep with `trainctl run "
                                                              "--resume <sweep-id>` instead")
    return sweep


def package_uris(job: dict[str, Any]) -> list[str]:
    """Every pool's packageUris, once each (trainctl has one environment per job)."""
    if "trainingInput" in job:
        return list((job["trainingInput"] or {}).get("packageUris") or [])
    spec = job.get("trialJobSpec") or job.get("jobSpec") or job
    uris = [uri for pool in spec.get("workerPoolSpecs") or [] if pool
            for uri in (pool.get("pythonPackageSpec") or {}).get("packageUris") or []]
    return list(dict.fromkeys(uris))


def _code_and_requirements(job: dict[str, Any], *, path: Path, reaches_google: bool, code: Path | None,
                           requirements: str | None, notes: list[str]) -> tuple[Path, str | None]:
    """The trainer's code: --code when given (the package's source), else the job's packageUris
    fetched and staged as wheels (trainctl.packages), else the spec's folder."""
    uris = package_uris(job)
    if code or not uris:
        if uris:
            notes.append(f"packageUris {uris} are not fetched: the code comes from --code (the "
                         "package's source), synced to every node")
        return (code or path.parent).resolve(), requirements
    from trainctl.packages import REQUIREMENTS, stage

    extra = (path.parent / requirements).resolve() if requirements else None
    if extra and not extra.is_file():
        raise ConfigError(f"--requirements: {extra} does not exist")
    folder = stage(uris, reaches_google=reaches_google, requirements=extra)
    notes.append(f"packageUris {uris}: fetched, built into wheels and installed on every node "
                 f"({folder}); the job runs from there" +
                 ("" if extra else "; the executor image's framework is not installed: give it with "
                                   "--requirements unless the package requires it"))
    return folder, REQUIREMENTS


def to_experiment(job: dict[str, Any], *, path: Path, stack: str, code: Path | None,
                  requirements: str | None, framework: str | None = None) -> Mapping:
    """The job spec as an experiment on `stack`, with notes on what the mapping changed."""
    notes: list[str] = []
    name = re.sub(r"[^a-z0-9-]+", "-", str(job.get("displayName") or path.stem).lower()).strip("-")[:30].rstrip("-")
    if not name or not name[0].isalpha():
        name = f"job-{name}"[:30].rstrip("-")
    experiment = _ai_platform(job, name, notes) if "trainingInput" in job else _vertex(job, name, notes)
    target = load_stack(stack)
    code, requirements = _code_and_requirements(job, path=path, reaches_google=target.nodes_reach_google,
                                                code=code, requirements=requirements, notes=notes)
    experiment.update({"stack": stack, "code": str(code)})
    from trainctl.launchers import launcher_for_cluster

    if "container" not in experiment and not launcher_for_cluster(target).needs_bootstrap:
        # nothing is synced to the stack's pods: the code and packages reach them in an image
        experiment["container"] = {}
        notes.append(f"stack {stack}: its pods run an image, so trainctl builds one from the code and "
                     "requirements and pushes it to the stack's registry")
    if framework:
        experiment["run"]["framework"] = framework
    if requirements:
        experiment["requirements"] = requirements
    if not target.has_machine_types:
        # the stack's nodes have no machine shape to give (namespaces on this machine): said
        for pool in experiment["overrides"]["pools"]:
            if pool.pop("machine_type", None):
                notes.append(f"stack {stack}: the {pool['role']} pool's machine type is not used "
                             "(its nodes are namespaces on this machine)")
        experiment["overrides"].pop("boot_disk_gb", None)
    experiment["run"]["command"] = [*experiment["run"]["command"]]
    return Mapping(experiment, notes)

