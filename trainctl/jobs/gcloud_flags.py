"""gcloud's own flags for a job, with the meaning gcloud gives them, laid over the job's config
file as gcloud lays them ("If an option is specified both in the configuration file and via
command line arguments, the command line arguments override the configuration file").

  gcloud ai-platform jobs submit training JOB --config config.yaml --module-name trainer.task
    --package-path trainer/ --job-dir gs://... --runtime-version 2.11 --python-version 3.7 -- ARGS
  gcloud ai custom-jobs create --config job.yaml --worker-pool-spec=machine-type=...,
    replica-count=...,executor-image-uri=...,local-package-path=...,python-module=... --args=...

Flag names and meanings: googlecloudsdk command_lib/ml_engine/flags.py and
command_lib/ai/custom_jobs/flags.py (the SDK's own sources);
https://cloud.google.com/sdk/gcloud/reference/ai-platform/jobs/submit/training and
https://cloud.google.com/sdk/gcloud/reference/ai/custom-jobs/create.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from infra.errors import ConfigError

# gcloud's --scale-tier choices and the TrainingInput values they stand for.
SCALE_TIERS = {"basic": "BASIC", "basic-gpu": "BASIC_GPU", "basic-tpu": "BASIC_TPU", "custom": "CUSTOM",
               "premium-1": "PREMIUM_1", "standard-1": "STANDARD_1"}
# --worker-pool-spec keys (ArgDict spec in gcloud's custom_jobs flags).
POOL_KEYS = {"machine-type", "replica-count", "accelerator-type", "accelerator-count", "container-image-uri",
             "executor-image-uri", "output-image-uri", "python-module", "script", "local-package-path",
             "requirements", "extra-dirs", "extra-packages"}


class GcloudFlags(BaseModel):
    """The flags a gcloud user gives beside --config; None: not given."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # gcloud ai-platform jobs submit training
    module_name: str | None = None
    package_path: Path | None = None
    packages: tuple[str, ...] = ()
    job_dir: str | None = None
    runtime_version: str | None = None
    python_version: str | None = None
    scale_tier: str | None = None
    master_machine_type: str | None = None
    worker_machine_type: str | None = None
    worker_count: int | None = None
    parameter_server_machine_type: str | None = None
    parameter_server_count: int | None = None
    master_image_uri: str | None = None
    region: str | None = None
    # gcloud ai custom-jobs create
    worker_pool_spec: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    python_package_uris: tuple[str, ...] = ()
    display_name: str | None = None
    # after `--`: the trainer's own arguments
    user_args: tuple[str, ...] = ()

    @field_validator("packages", "args", "python_package_uris", mode="before")
    @classmethod
    def comma_lists(cls, v: Any) -> Any:
        # gcloud's ArgList: one flag, comma-separated values (repeating the flag also works)
        if isinstance(v, (list, tuple)):
            return tuple(item for value in v for item in str(value).split(",") if item)
        return v

    @property
    def given(self) -> bool:
        return bool(self.model_dump(exclude_defaults=True))

    @property
    def vertex(self) -> bool:
        return bool(self.worker_pool_spec or self.args or self.python_package_uris or self.display_name)

    @property
    def ai_platform(self) -> list[str]:
        """The AI Platform-only flags given, by their gcloud names."""
        names = ("module_name", "job_dir", "runtime_version", "python_version", "scale_tier", "master_machine_type",
                 "worker_machine_type", "worker_count", "parameter_server_machine_type",
                 "parameter_server_count", "master_image_uri", "packages", "package_path")
        given = self.model_dump(exclude_defaults=True)
        return [f"--{n.replace('_', '-')}" for n in names if n in given]


def apply(job: dict[str, Any], flags: GcloudFlags, path: Path) -> dict[str, Any]:
    """The job as gcloud submits it: the config file with the flags laid over it. Local
    package paths (--package-path, local --packages, local-package-path=) stay in `flags` for
    the environment to build (trainctl.jobs.job_environment)."""
    job = copy.deepcopy(job)
    if not flags.given:
        return job
    vertex_spec = bool({"workerPoolSpecs", "jobSpec", "trialJobSpec", "studySpec"} & set(job))
    if flags.vertex or (vertex_spec and not flags.ai_platform):
        if flags.ai_platform:
            raise ConfigError(f"{', '.join(flags.ai_platform)}: gcloud ai-platform's flags, and {path} is a Vertex AI "
                              "job (gcloud ai custom-jobs create): give the module and package in --worker-pool-spec "
                              "(python-module=, local-package-path=, executor-image-uri=)")
        return _vertex(job, flags)
    if vertex_spec:
        raise ConfigError(f"{', '.join(flags.ai_platform)}: gcloud ai-platform's flags, and {path} is a Vertex AI job; "
                          "give them in --worker-pool-spec (python-module=, local-package-path=)")
    return _ai_platform(job, flags)


def _ai_platform(job: dict[str, Any], flags: GcloudFlags) -> dict[str, Any]:
    ti = job["trainingInput"] = job.get("trainingInput") or {}
    simple = {"module_name": "pythonModule", "job_dir": "jobDir", "runtime_version": "runtimeVersion",
              "python_version": "pythonVersion", "region": "region", "master_machine_type": "masterType",
              "worker_machine_type": "workerType", "worker_count": "workerCount",
              "parameter_server_machine_type": "parameterServerType", "parameter_server_count": "parameterServerCount"}
    for flag, field in simple.items():
        value = getattr(flags, flag)
        if value is not None:
            ti[field] = value
    if flags.scale_tier is not None:
        tier = flags.scale_tier.lower().replace("_", "-")  # gcloud takes the enum's name too (STANDARD_1)
        if tier not in SCALE_TIERS:
            raise ConfigError(f"--scale-tier {flags.scale_tier!r}: valid: {', '.join(SCALE_TIERS)}")
        ti["scaleTier"] = SCALE_TIERS[tier]
    if flags.master_image_uri:
        ti.setdefault("masterConfig", {})["imageUri"] = flags.master_image_uri
    if flags.user_args:
        ti["args"] = list(flags.user_args)
    remote = [p for p in flags.packages if p.startswith("gs://")]
    if remote:
        ti["packageUris"] = [*(ti.get("packageUris") or []), *remote]
    return job


def _vertex(job: dict[str, Any], flags: GcloudFlags) -> dict[str, Any]:
    if flags.user_args:
        raise ConfigError(f"arguments after --: {' '.join(flags.user_args)}; gcloud ai custom-jobs create takes "
                          "the trainer's arguments as --args=ARG,ARG")
    spec = job.get("trialJobSpec") or job.get("jobSpec") or job
    if flags.worker_pool_spec:
        spec["workerPoolSpecs"] = [parse_pool_spec(s, i) for i, s in enumerate(flags.worker_pool_spec)]
    pools = [p for p in spec.get("workerPoolSpecs") or [] if p]
    for pool in pools:
        # gcloud puts --args and --python-package-uris into every pool's spec
        target = pool.get("containerSpec") or pool.get("pythonPackageSpec")
        if target is None:
            continue
        if flags.args:
            target["args"] = list(flags.args)
        if flags.python_package_uris and "pythonPackageSpec" in pool:
            target["packageUris"] = list(flags.python_package_uris)
    if flags.display_name:
        job["displayName"] = flags.display_name
    return job


def parse_pool_spec(value: str, index: int) -> dict[str, Any]:
    """One --worker-pool-spec as the WorkerPoolSpec gcloud sends; the local keys (local-package-path,
    script, requirements, extra-packages) stay under `local` for the environment to build."""
    where = f"--worker-pool-spec #{index + 1}"
    fields: dict[str, str] = {}
    for item in value.split(","):
        key, sep, val = item.partition("=")
        if not sep:
            raise ConfigError(f"{where}: {item!r} is not KEY=VALUE")
        if key not in POOL_KEYS:
            raise ConfigError(f"{where}: unknown key {key!r}; valid: {', '.join(sorted(POOL_KEYS))}")
        fields[key] = val
    if ("executor-image-uri" in fields) == ("container-image-uri" in fields):
        raise ConfigError(f"{where}: exactly one of executor-image-uri and container-image-uri is required "
                          "(as gcloud requires)")
    if "machine-type" not in fields:
        raise ConfigError(f"{where}: machine-type is required (as gcloud requires)")
    pool: dict[str, Any] = {"machineSpec": {"machineType": fields["machine-type"]},
                            "replicaCount": int(fields.get("replica-count", 1))}
    if "accelerator-type" in fields:
        pool["machineSpec"]["acceleratorType"] = fields["accelerator-type"]
        pool["machineSpec"]["acceleratorCount"] = int(fields.get("accelerator-count", 1))
    if "container-image-uri" in fields:
        pool["containerSpec"] = {"imageUri": fields["container-image-uri"]}
        return pool
    if "python-module" not in fields and "script" not in fields:
        raise ConfigError(f"{where}: executor-image-uri needs python-module= (or script= with local-package-path=)")
    package = {"executorImageUri": fields["executor-image-uri"]}
    if "python-module" in fields:
        package["pythonModule"] = fields["python-module"]
    pool["pythonPackageSpec"] = package
    local = {k: fields[k] for k in ("local-package-path", "script", "requirements", "extra-packages", "extra-dirs",
                                    "output-image-uri") if k in fields}
    if local:
        pool["local"] = local
    return pool
