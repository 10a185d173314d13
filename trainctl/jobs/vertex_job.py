"""A Vertex AI CustomJob (`workerPoolSpecs`, also under `jobSpec:`, or a
HyperparameterTuningJob's `trialJobSpec:` with its `studySpec`) as an experiment with worker
pools: each pool's machines and program, the job's scheduling and its study. Pure: what the
stack changes is applied afterwards (trainctl/jobs/job_on_stack.py). Field names follow
  Vertex AI CustomJobSpec    https://cloud.google.com/vertex-ai/docs/reference/rest/v1/CustomJobSpec
  Vertex AI StudySpec        https://cloud.google.com/vertex-ai/docs/reference/rest/v1/StudySpec
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from infra.spec import catalog
from infra.spec.cluster import POOL_ORDER
from trainctl.jobs.job_spec_values import (ImageReader, accelerator, container_command, duration_hours, framework,
                                           module_command, refuse)
from trainctl.jobs.job_tuning import study_sweep

ROLES = POOL_ORDER  # workerPoolSpecs[0..3]; AI Platform's master, worker, parameterServer, evaluator
BOOT_DISK_TYPES = ("pd-ssd", "pd-standard", "hyperdisk-balanced")  # DiskSpec.bootDiskType's valid values
REDUCTION_SERVER = "reductionserver"  # us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver
VERTEX_ONLY = ("network", "reservedIpRanges", "enableWebAccess", "enableDashboardAccess", "tensorboard",
               "persistentResourceId", "protectedArtifactLocationId", "pscInterfaceConfig", "serviceAccount")


def job_spec_of(job: dict[str, Any]) -> dict[str, Any]:
    """A CustomJob's spec is under jobSpec, a HyperparameterTuningJob's under trialJobSpec;
    `gcloud ai custom-jobs create --config` takes the spec's fields at the top level."""
    return job.get("trialJobSpec") or job.get("jobSpec") or job


def refuse_reduction_server(job: dict[str, Any]) -> None:
    """A Reduction Server pool is refused first, by name: its other fields (an image only Vertex
    has, no command) would otherwise be what the user hears about."""
    for i, pool in enumerate(job_spec_of(job).get("workerPoolSpecs") or []):
        image = ((pool or {}).get("containerSpec") or {}).get("imageUri", "")
        if REDUCTION_SERVER in image.replace("-", "").lower():
            raise refuse(f"workerPoolSpecs[{i}]", "a Reduction Server pool is Vertex-only; leave it out (NCCL "
                                                  "all-reduce runs between the workers) or use parameter servers")


@dataclass
class Pools:
    """What the worker pools give the experiment, gathered pool by pool."""
    pools: list[dict[str, Any]] = field(default_factory=list)
    commands: dict[str, list[str]] = field(default_factory=dict)  # by role
    env: dict[str, str] = field(default_factory=dict)  # one environment per job
    boot_disks_gb: set[int] = field(default_factory=set)
    containers: dict[str, str] = field(default_factory=dict)  # image by role


def _pool(i: int, pool: dict[str, Any], notes: list[str], env: dict[str, str],
          read_image: ImageReader) -> tuple[dict[str, Any], list[str] | None, str | None]:
    where = f"workerPoolSpecs[{i}]"
    for mounts in ("nfsMounts", "lustreMounts"):
        if pool.get(mounts):
            raise refuse(where, f"{mounts} are not supported: keep data in the job's bucket (gs://)")
    spec = pool.get("pythonPackageSpec") or {}
    machine = pool.get("machineSpec") or {}
    if machine.get("tpuTopology"):
        raise refuse(f"{where}.machineSpec", "tpuTopology: TPUs run as TPU VMs here; use a TPU stack "
                                             "(e.g. --stack tpu-v5e-8) with a single pool")
    out: dict[str, Any] = {"role": ROLES[i], "count": int(pool.get("replicaCount", 1))}
    if machine.get("machineType"):
        out["machine_type"] = machine["machineType"]
    gpu = accelerator(machine.get("acceleratorType", ""), int(machine.get("acceleratorCount", 0)),
                      f"{where}.machineSpec")
    if gpu:
        out["gpu"] = gpu
    disk = pool.get("diskSpec") or {}
    if disk.get("bootDiskType") not in (None, *BOOT_DISK_TYPES):
        raise refuse(f"{where}.diskSpec", f"bootDiskType {disk['bootDiskType']!r} is not one Vertex offers "
                                          f"({', '.join(BOOT_DISK_TYPES)})")
    command = module_command(spec.get("pythonModule"), spec.get("args", []), f"{where}.pythonPackageSpec") if spec else None
    for item in spec.get("env", []):
        env[item["name"]] = str(item["value"])
    image = None
    if "containerSpec" in pool:
        command, image = container_command(where, pool["containerSpec"], env, notes, read_image)
    if spec.get("env") or (pool.get("containerSpec") or {}).get("env"):
        notes.append(f"{where}: env is set for every pool (trainctl has one environment per job)")
    return out, command, image


def _pools(pools_in: list[dict[str, Any]], notes: list[str], read_image: ImageReader) -> Pools:
    if not pools_in or not pools_in[0]:
        raise refuse("workerPoolSpecs", "workerPoolSpecs[0] (the primary replica) is required")
    if len(pools_in) > 4:
        raise refuse("workerPoolSpecs", f"{len(pools_in)} pools; Vertex AI has at most 4")
    found = Pools()
    for i, pool in enumerate(pools_in):
        if not pool:
            continue  # an empty spec keeps the positions of the pools after it, as on Vertex
        mapped, command, image = _pool(i, pool, notes, found.env, read_image)
        found.pools.append(mapped)
        if command:
            found.commands[ROLES[i]] = command
        if image is not None:
            found.containers[ROLES[i]] = image
        if (pool.get("diskSpec") or {}).get("bootDiskSizeGb"):
            found.boot_disks_gb.add(int(pool["diskSpec"]["bootDiskSizeGb"]))
    if "chief" not in found.commands:
        raise refuse("workerPoolSpecs[0]", "a pythonPackageSpec with pythonModule, or a containerSpec "
                                           "with command, is required")
    containers = found.containers
    if containers and (len(set(containers.values())) > 1 or len(containers) != len(found.commands)):
        raise refuse("workerPoolSpecs", "every pool runs in one image on trainctl (one image per job): "
                                        f"give all pools the same containerSpec.imageUri (got {containers})")
    return found


def _experiment(name: str, found: Pools, images: list[str], notes: list[str]) -> dict[str, Any]:
    """The pools, the chief's command (and the other roles' where they differ), env, image and
    boot disk."""
    commands = dict(found.commands)
    experiment: dict[str, Any] = {"name": name, "overrides": {"pools": found.pools},
                                  "run": {"command": commands.pop("chief"),
                                          "framework": framework(images, notes, ai_platform=False)}}
    others = {r: c for r, c in commands.items() if c != experiment["run"]["command"]}
    if others:
        experiment["run"]["commands"] = others
    if found.env:
        experiment["run"]["env"] = found.env
    if found.containers:
        experiment["container"] = {"image": next(iter(found.containers.values()))}
    if found.boot_disks_gb:
        experiment["overrides"]["boot_disk_gb"] = max(found.boot_disks_gb)
    return experiment


def _scheduling(scheduling: dict[str, Any], experiment: dict[str, Any]) -> None:
    if scheduling.get("timeout"):
        experiment["ttl_hours"] = duration_hours(scheduling["timeout"], "scheduling.timeout")
    if scheduling.get("strategy") == "FLEX_START":  # Dynamic Workload Scheduler: GCE's flex-start VMs
        experiment["overrides"].update(spot=False, provisioning="flex-start")
        if scheduling.get("maxWaitDuration"):
            experiment["overrides"]["flex_start_deadline_minutes"] = _flex_start_wait(scheduling["maxWaitDuration"])
    if scheduling.get("strategy") == "SPOT":
        experiment["overrides"]["spot"] = True
    if scheduling.get("restartJobOnWorkerRestart"):
        experiment["restart"] = {"job_retries": 3}
    if scheduling.get("disableRetries"):
        experiment["restart"] = {"job_retries": 0}


def _flex_start_wait(value: str) -> float:
    """Vertex's maxWaitDuration as trainctl's own wait for the grant (GCE is not told it), within
    the two hours GCE queues a request."""
    minutes = duration_hours(value, "scheduling.maxWaitDuration") * 60
    if not 0 < minutes <= catalog.FLEX_START_MAX_WAIT_MINUTES:
        raise refuse("scheduling.maxWaitDuration", f"{value!r}: trainctl waits for flex-start capacity up to "
                     f"{catalog.FLEX_START_MAX_WAIT_MINUTES} minutes (GCE queues a request that long), and "
                     "never indefinitely (0); set it to at most '7200s'")
    return round(minutes, 4)


def vertex_experiment(job: dict[str, Any], name: str, notes: list[str], read_image: ImageReader) -> dict[str, Any]:
    spec = job_spec_of(job)
    pools_in = spec.get("workerPoolSpecs") or []
    found = _pools(pools_in, notes, read_image)
    images = [(p.get("pythonPackageSpec") or {}).get("executorImageUri", "") for p in pools_in if p]
    experiment = _experiment(name, found, images, notes)
    _scheduling(spec.get("scheduling") or {}, experiment)
    output = (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    if output:
        notes.append(f"baseOutputDirectory {output}: the job dir is the stack's bucket "
                     "(AIP_MODEL_DIR and friends point there); artifacts are collected to runs/")
    for unsupported in VERTEX_ONLY:
        if spec.get(unsupported):
            raise refuse(unsupported, "is Vertex-only and has no trainctl counterpart; remove it")
    if job.get("encryptionSpec"):
        raise refuse("encryptionSpec", "customer-managed encryption keys have no trainctl counterpart; remove it")
    study = job.get("studySpec")
    if study:
        experiment["sweep"] = study_sweep(study, job)
    return experiment
