"""An AI Platform `config.yaml` (`trainingInput`) as an experiment with worker pools: its scale
tier or custom machines, the master's program (a Python module or a custom container), its job
dir, time limit and hyperparameters. Pure: what the stack changes is applied afterwards
(trainctl/jobs/job_on_stack.py). Field names follow
  https://cloud.google.com/ai-platform/training/docs/reference/rest/v1/projects.jobs#TrainingInput
"""

from __future__ import annotations

from typing import Any

from trainctl.jobs.job_spec_values import (ImageReader, accelerator, container_command, duration_hours, framework,
                                           machine, module_command, refuse)
from trainctl.jobs.job_tuning import hyperparameters_sweep

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
AI_ROLES = [("chief", "master"), ("worker", "worker"), ("ps", "parameterServer"), ("evaluator", "evaluator")]


def _pools(ti: dict[str, Any], notes: list[str]) -> list[dict[str, Any]]:
    tier = ti.get("scaleTier", "BASIC")
    if tier in REFUSED_TIERS:
        raise refuse(f"scaleTier {tier}", REFUSED_TIERS[tier])
    if tier in SCALE_TIERS:
        notes.append(f"scaleTier {tier}: {', '.join(f'{c} {r}' for r, c in SCALE_TIERS[tier].items())} "
                     "on the target stack's machine type")
        return [{"role": r, "count": c} for r, c in SCALE_TIERS[tier].items()]
    if tier != "CUSTOM":
        raise refuse("trainingInput.scaleTier", f"{tier!r} is not a scale tier; valid: "
                                                f"{', '.join([*SCALE_TIERS, *REFUSED_TIERS, 'CUSTOM'])}")
    if not ti.get("masterType"):
        raise refuse("trainingInput", "scaleTier CUSTOM needs masterType")
    pools = []
    for role, key in AI_ROLES:
        count = 1 if role == "chief" else int(ti.get(f"{key}Count", 0))
        if not count:
            continue
        pool: dict[str, Any] = {"role": role, "count": count,
                                "machine_type": machine(ti.get(f"{key}Type") or ti.get("masterType"),
                                                        f"trainingInput.{key}Type")}
        config = ti.get(f"{key}Config") or {}
        given = config.get("acceleratorConfig") or {}
        gpu = accelerator(given.get("type", ""), int(given.get("count", 0)),
                          f"trainingInput.{key}Config.acceleratorConfig")
        if gpu:
            pool["gpu"] = gpu
        pools.append(pool)
    return pools


def _command(ti: dict[str, Any], env: dict[str, str], notes: list[str],
             read_image: ImageReader) -> tuple[list[str], str | None]:
    """The master's program: pythonModule with args, or a custom container (masterConfig.imageUri,
    its containerCommand or ENTRYPOINT, with args) as AI Platform runs one."""
    for _, key in AI_ROLES:
        config = ti.get(f"{key}Config") or {}
        if config.get("tpuTfVersion"):
            raise refuse(f"trainingInput.{key}Config.tpuTfVersion", "Cloud TPU nodes are retired; run on a "
                                                                     "TPU VM stack (e.g. --stack tpu-v5e-8)")
        if key != "master" and config.get("imageUri") not in (None, (ti.get("masterConfig") or {}).get("imageUri")):
            raise refuse(f"trainingInput.{key}Config.imageUri", "every pool runs in one image on trainctl (one "
                                                                "image per job): give the master's")
    master = ti.get("masterConfig") or {}
    if master.get("imageUri"):
        container = {"imageUri": master["imageUri"], "command": master.get("containerCommand"),
                     "args": master.get("containerArgs") or ti.get("args") or []}
        return container_command("trainingInput.masterConfig", container, env, notes, read_image)
    return module_command(ti.get("pythonModule"), ti.get("args", []), "trainingInput"), None


def ai_platform_experiment(job: dict[str, Any], name: str, notes: list[str],
                           read_image: ImageReader) -> dict[str, Any]:
    ti = job["trainingInput"] or {}
    if job.get("predictionInput"):
        raise refuse("predictionInput", "a batch prediction job is not a training job; trainctl runs training")
    pools = _pools(ti, notes)
    for vertex_only in ("network", "enableWebAccess", "encryptionConfig", "serviceAccount"):
        if ti.get(vertex_only):
            raise refuse(f"trainingInput.{vertex_only}", "has no trainctl counterpart (the stack "
                                                          "declares network, keys and service account)")
    env: dict[str, str] = {}
    command, image = _command(ti, env, notes, read_image)
    if ti.get("jobDir"):
        # AI Platform hands jobDir to the trainer as --job-dir; here it is the stack's bucket
        command += ["--job-dir", "{job_dir}"]
        notes.append(f"jobDir {ti['jobDir']}: the trainer gets --job-dir <the stack's bucket>/<run id>")
    experiment: dict[str, Any] = {"name": name, "overrides": {"pools": pools},
                                  "run": {"command": command, "framework": framework([], notes, ai_platform=True)}}
    if image:
        experiment["container"] = {"image": image}
    boot = [int(((ti.get(f"{k}Config") or {}).get("diskConfig") or {}).get("bootDiskSizeGb") or 0) for _, k in AI_ROLES]
    if max(boot):
        experiment["overrides"]["boot_disk_gb"] = max(boot)
    if (ti.get("scheduling") or {}).get("maxRunningTime"):
        experiment["ttl_hours"] = duration_hours(ti["scheduling"]["maxRunningTime"], "scheduling.maxRunningTime")
    hp = ti.get("hyperparameters")
    if hp:
        experiment["sweep"] = hyperparameters_sweep(hp)
    return experiment
