"""AI Platform and Vertex AI job specs, run as they are: an AI Platform `config.yaml`
(`trainingInput`) or a Vertex AI CustomJob (`workerPoolSpecs`, also under `jobSpec:`, with an
optional hyperparameter `studySpec`) becomes an experiment with worker pools on a trainctl stack.

Every field is mapped, refused by name with the nearest alternative, or named in a note
(trainctl/jobs/job_fields.py); none is ignored. gcloud's own flags are laid over the file as gcloud
lays them (trainctl/jobs/gcloud_flags.py). The job's code, packages and runtime become the nodes'
environment (trainctl/jobs/job_environment.py). What a mapping changes (e.g. machine types on the
local stack, whose nodes are CPU namespaces) is said in the notes that `trainctl run --plan`
prints. Field names follow the public references:
  AI Platform TrainingInput  https://cloud.google.com/ai-platform/training/docs/reference/rest/v1/projects.jobs#TrainingInput
  Vertex AI CustomJobSpec    https://cloud.google.com/vertex-ai/docs/reference/rest/v1/CustomJobSpec
  Vertex AI StudySpec        https://cloud.google.com/vertex-ai/docs/reference/rest/v1/StudySpec
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.spec import catalog
from infra.errors import ConfigError
from infra.spec.job_runtimes import prebuilt_image
from infra.spec.cluster import POOL_ORDER
from infra.spec.stack_config import load_stack
from trainctl.jobs.gcloud_flags import GcloudFlags, apply
from trainctl.jobs.job_environment import code_and_requirements, sources_of
from trainctl.jobs.job_fields import field_notes
from trainctl.jobs.job_tuning import hyperparameters_sweep, parallel_trials, study_sweep

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
BOOT_DISK_TYPES = ("pd-ssd", "pd-standard", "hyperdisk-balanced")  # DiskSpec.bootDiskType's valid values
REDUCTION_SERVER = "reductionserver"  # us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver


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
        raise _refuse(where, "pythonModule is required (the trainer's module, run as `python -m`): give "
                             "gcloud's --module-name (AI Platform) or python-module= in --worker-pool-spec")
    return ["python", "-m", module, *(str(a) for a in args)]


# --- Vertex AI CustomJob -------------------------------------------------------------------

def refuse_reduction_server(job: dict[str, Any]) -> None:
    """A Reduction Server pool is refused first, by name: its other fields (an image only Vertex
    has, no command) would otherwise be what the user hears about."""
    spec = job.get("trialJobSpec") or job.get("jobSpec") or job
    for i, pool in enumerate(spec.get("workerPoolSpecs") or []):
        image = ((pool or {}).get("containerSpec") or {}).get("imageUri", "")
        if REDUCTION_SERVER in image.replace("-", "").lower():
            raise _refuse(f"workerPoolSpecs[{i}]", "a Reduction Server pool is Vertex-only; leave it out (NCCL "
                                                   "all-reduce runs between the workers) or use parameter servers")


def _container(where: str, container: dict[str, Any], env: dict[str, str],
               notes: list[str]) -> tuple[list[str], str | None]:
    """A containerSpec as the pool's command: in its image (the images trainctl can run, see
    ContainerSection), or, for one of Google's prebuilt training images, in the nodes' uv
    environment with the image's framework (trainctl.jobs.job_environment). The command and args as
    Vertex joins them; without a command, the image's ENTRYPOINT (and CMD unless args are given)."""
    from pydantic import ValidationError

    from trainctl.jobs.experiment_spec import ContainerSection

    image = container.get("imageUri", "")
    args = [str(a) for a in container.get("args", [])]
    for item in container.get("env", []):
        env[item["name"]] = str(item["value"])
    if prebuilt_image(image, ""):
        if not container.get("command"):
            raise _refuse(f"{where}.containerSpec", f"{image} is one of Google's prebuilt training images, run here "
                                                    "as a uv environment with its framework: give command")
        notes.append(f"{where}.containerSpec.imageUri {image}: Google's prebuilt image; its command runs in the "
                     "nodes' uv environment with the image's framework")
        return [*container["command"], *args], None
    try:
        ContainerSection(image=image)
    except ValidationError as exc:
        raise _refuse(f"{where}.containerSpec", exc.errors()[0]["msg"].removeprefix("Value error, ")) from None
    if container.get("command"):
        return [*container["command"], *args], image
    from trainctl.jobs.image import image_command

    entrypoint, cmd = image_command(image, f"{where}.containerSpec")
    if not entrypoint and not cmd:
        raise _refuse(f"{where}.containerSpec", f"{image} has neither ENTRYPOINT nor CMD: give command")
    notes.append(f"{where}.containerSpec: no command: {image}'s ENTRYPOINT {entrypoint} runs with "
                 f"{'args' if args else 'its CMD'} {args or cmd}, as Vertex runs it")
    return [*entrypoint, *(args or cmd)], image


def _vertex_pool(i: int, pool: dict[str, Any], notes: list[str],
                 env: dict[str, str]) -> tuple[dict[str, Any], list[str] | None, str | None]:
    where = f"workerPoolSpecs[{i}]"
    for mounts in ("nfsMounts", "lustreMounts"):
        if pool.get(mounts):
            raise _refuse(where, f"{mounts} are not supported: keep data in the job's bucket (gs://)")
    spec = pool.get("pythonPackageSpec") or {}
    machine = pool.get("machineSpec") or {}
    if machine.get("tpuTopology"):
        raise _refuse(f"{where}.machineSpec", "tpuTopology: TPUs run as TPU VMs here; use a TPU stack "
                                              "(e.g. --stack tpu-v5e-8) with a single pool")
    out: dict[str, Any] = {"role": ROLES[i], "count": int(pool.get("replicaCount", 1))}
    if machine.get("machineType"):
        out["machine_type"] = machine["machineType"]
    gpu = _accelerator(machine.get("acceleratorType", ""), int(machine.get("acceleratorCount", 0)),
                       f"{where}.machineSpec")
    if gpu:
        out["gpu"] = gpu
    disk = pool.get("diskSpec") or {}
    if disk.get("bootDiskType") not in (None, *BOOT_DISK_TYPES):
        raise _refuse(f"{where}.diskSpec", f"bootDiskType {disk['bootDiskType']!r} is not one Vertex offers "
                                           f"({', '.join(BOOT_DISK_TYPES)})")
    command = _command(spec.get("pythonModule"), spec.get("args", []), f"{where}.pythonPackageSpec") if spec else None
    for item in spec.get("env", []):
        env[item["name"]] = str(item["value"])
    image = None
    if "containerSpec" in pool:
        command, image = _container(where, pool["containerSpec"], env, notes)
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
    if scheduling.get("disableRetries"):
        experiment["restart"] = {"job_retries": 0}
    output = (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    if output:
        notes.append(f"baseOutputDirectory {output}: the job dir is the stack's bucket "
                     "(AIP_MODEL_DIR and friends point there); artifacts are collected to runs/")
    for unsupported in ("network", "reservedIpRanges", "enableWebAccess", "enableDashboardAccess",
                        "tensorboard", "persistentResourceId", "protectedArtifactLocationId",
                        "pscInterfaceConfig", "serviceAccount"):
        if spec.get(unsupported):
            raise _refuse(unsupported, "is Vertex-only and has no trainctl counterpart; remove it")
    if job.get("encryptionSpec"):
        raise _refuse("encryptionSpec", "customer-managed encryption keys have no trainctl counterpart; remove it")
    study = job.get("studySpec")
    if study:
        experiment["sweep"] = study_sweep(study, job)
    return experiment


# --- AI Platform trainingInput -------------------------------------------------------------

AI_ROLES = [("chief", "master"), ("worker", "worker"), ("ps", "parameterServer"), ("evaluator", "evaluator")]


def _ai_pools(ti: dict[str, Any], notes: list[str]) -> list[dict[str, Any]]:
    tier = ti.get("scaleTier", "BASIC")
    if tier in REFUSED_TIERS:
        raise _refuse(f"scaleTier {tier}", REFUSED_TIERS[tier])
    if tier in SCALE_TIERS:
        notes.append(f"scaleTier {tier}: {', '.join(f'{c} {r}' for r, c in SCALE_TIERS[tier].items())} "
                     "on the target stack's machine type")
        return [{"role": r, "count": c} for r, c in SCALE_TIERS[tier].items()]
    if tier != "CUSTOM":
        raise _refuse("trainingInput.scaleTier", f"{tier!r} is not a scale tier; valid: "
                                                 f"{', '.join([*SCALE_TIERS, *REFUSED_TIERS, 'CUSTOM'])}")
    if not ti.get("masterType"):
        raise _refuse("trainingInput", "scaleTier CUSTOM needs masterType")
    pools = []
    for role, key in AI_ROLES:
        count = 1 if role == "chief" else int(ti.get(f"{key}Count", 0))
        if not count:
            continue
        pool: dict[str, Any] = {"role": role, "count": count,
                                "machine_type": _machine(ti.get(f"{key}Type") or ti.get("masterType"),
                                                         f"trainingInput.{key}Type")}
        config = ti.get(f"{key}Config") or {}
        accelerator = config.get("acceleratorConfig") or {}
        gpu = _accelerator(accelerator.get("type", ""), int(accelerator.get("count", 0)),
                           f"trainingInput.{key}Config.acceleratorConfig")
        if gpu:
            pool["gpu"] = gpu
        pools.append(pool)
    return pools


def _ai_command(ti: dict[str, Any], env: dict[str, str], notes: list[str]) -> tuple[list[str], str | None]:
    """The master's program: pythonModule with args, or a custom container (masterConfig.imageUri,
    its containerCommand or ENTRYPOINT, with args) as AI Platform runs one."""
    for _, key in AI_ROLES:
        config = ti.get(f"{key}Config") or {}
        if config.get("tpuTfVersion"):
            raise _refuse(f"trainingInput.{key}Config.tpuTfVersion", "Cloud TPU nodes are retired; run on a "
                                                                      "TPU VM stack (e.g. --stack tpu-v5e-8)")
        if key != "master" and config.get("imageUri") not in (None, (ti.get("masterConfig") or {}).get("imageUri")):
            raise _refuse(f"trainingInput.{key}Config.imageUri", "every pool runs in one image on trainctl (one "
                                                                 "image per job): give the master's")
    master = ti.get("masterConfig") or {}
    if master.get("imageUri"):
        container = {"imageUri": master["imageUri"], "command": master.get("containerCommand"),
                     "args": master.get("containerArgs") or ti.get("args") or []}
        return _container("trainingInput.masterConfig", container, env, notes)
    return _command(ti.get("pythonModule"), ti.get("args", []), "trainingInput"), None


def _ai_platform(job: dict[str, Any], name: str, notes: list[str]) -> dict[str, Any]:
    ti = job["trainingInput"] or {}
    if job.get("predictionInput"):
        raise _refuse("predictionInput", "a batch prediction job is not a training job; trainctl runs training")
    pools = _ai_pools(ti, notes)
    for vertex_only in ("network", "enableWebAccess", "encryptionConfig", "serviceAccount"):
        if ti.get(vertex_only):
            raise _refuse(f"trainingInput.{vertex_only}", "has no trainctl counterpart (the stack "
                                                           "declares network, keys and service account)")
    env: dict[str, str] = {}
    command, image = _ai_command(ti, env, notes)
    if ti.get("jobDir"):
        # AI Platform hands jobDir to the trainer as --job-dir; here it is the stack's bucket
        command += ["--job-dir", "{job_dir}"]
        notes.append(f"jobDir {ti['jobDir']}: the trainer gets --job-dir <the stack's bucket>/<run id>")
    experiment: dict[str, Any] = {"name": name, "overrides": {"pools": pools},
                                  "run": {"command": command, "framework": _framework([], notes, ai_platform=True)}}
    if image:
        experiment["container"] = {"image": image}
    boot = [int(((ti.get(f"{k}Config") or {}).get("diskConfig") or {}).get("bootDiskSizeGb") or 0) for _, k in AI_ROLES]
    if max(boot):
        experiment["overrides"]["boot_disk_gb"] = max(boot)
    if (ti.get("scheduling") or {}).get("maxRunningTime"):
        experiment["ttl_hours"] = _duration_hours(ti["scheduling"]["maxRunningTime"], "scheduling.maxRunningTime")
    hp = ti.get("hyperparameters")
    if hp:
        experiment["sweep"] = hyperparameters_sweep(hp)
    return experiment


def _job_name(job: dict[str, Any], path: Path) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", str(job.get("displayName") or path.stem).lower()).strip("-")[:30].rstrip("-")
    return name if name and name[0].isalpha() else f"job-{name}"[:30].rstrip("-")


def to_experiment(job: dict[str, Any], *, path: Path, stack: str, code: Path | None,
                  requirements: str | None, framework: str | None = None,
                  flags: GcloudFlags | None = None) -> Mapping:
    """The job spec (with gcloud's flags over it) as an experiment on `stack`, with notes on
    what the mapping changed."""
    flags = flags or GcloudFlags()
    job = apply(job, flags, path)
    sources = sources_of(job, flags, code, requirements)
    refuse_reduction_server(job)
    notes = field_notes(job)
    name = _job_name(job, path)
    experiment = _ai_platform(job, name, notes) if "trainingInput" in job else _vertex(job, name, notes)
    if job.get("labels"):
        experiment["overrides"]["labels"] = dict(job["labels"])
    if "sweep" in experiment:
        parallel_trials(experiment, notes)
    target = load_stack(stack)
    code_dir, requirements = code_and_requirements(job, path=path, target=target, sources=sources, notes=notes)
    experiment.update({"stack": stack, "code": str(code_dir)})
    from infra.providers import realizers

    can = realizers.capabilities(target)
    if "container" not in experiment and not can.needs_bootstrap:
        # nothing is synced to the stack's pods: the code and packages reach them in an image
        experiment["container"] = {}
        notes.append(f"stack {stack}: its pods run an image, so trainctl builds one from the code and "
                     "requirements and pushes it to the stack's registry")
    if framework:
        experiment["run"]["framework"] = framework
    if requirements:
        experiment["requirements"] = requirements
    if not can.machine_types:
        # the stack's nodes have no machine shape to give (namespaces on this machine): said
        for pool in experiment["overrides"].get("pools", [experiment["overrides"]]):
            if pool.pop("machine_type", None):
                whose = f"the {pool['role']} pool's" if "role" in pool else "the trials' nodes'"
                notes.append(f"stack {stack}: {whose} machine type is not used "
                             "(its nodes are namespaces on this machine)")
        experiment["overrides"].pop("boot_disk_gb", None)
    experiment["run"]["command"] = [*experiment["run"]["command"]]
    return Mapping(experiment, notes)
