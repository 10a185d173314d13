"""What `trainctl run FILE` reads: an experiment file as it is, or an AI Platform / Vertex AI job
spec (with gcloud's flags over it) translated into one (trainctl/jobs/vertex_job.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infra.spec.stack_config import ConfigError, read_yaml_mapping
from trainctl.jobs.experiment_spec import Experiment, build_experiment
from trainctl.jobs.gcloud_flags import GcloudFlags
from trainctl.jobs.job_on_stack import to_experiment
from trainctl.jobs.job_spec import is_job_spec


def load_experiment(path: Path, *, stack: str | None = None, code: Path | None = None,
                    requirements: str | None = None, framework: str | None = None,
                    notes: list[str] | None = None, flags: GcloudFlags | None = None,
                    plan: bool = False) -> Experiment:
    """An experiment file, or an AI Platform / Vertex AI job spec mapped onto `stack` (its
    code from `code`, default the job's packages, else the spec's folder; gcloud's `flags`
    over it); what the mapping changed goes to `notes`. A `plan` fetches nothing."""
    if flags is not None and flags.given and not path.exists() and path.suffix not in (".yaml", ".yml", ".json"):
        # `gcloud ai-platform jobs submit training JOB --module-name ...` with no --config: a
        # job named JOB, all of it in the flags, its code found from here
        data: dict[str, Any] = {}
        path = Path.cwd() / path.name
    else:
        data = read_yaml_mapping(path, "experiment file")

    if is_job_spec(data) or (flags is not None and flags.given):  # gcloud's flags make a job of any config
        mapping = to_experiment(data, path=path, stack=stack or "local",
                                code=code, requirements=requirements,
                                framework=framework, flags=flags, plan=plan)
        data = mapping.experiment
        if notes is not None:
            notes.extend(mapping.notes)
        overrides_from = f"{path} (a job spec; --stack picks the stack it runs on)"
    elif code or requirements or framework or (flags and flags.given):
        raise ConfigError(f"{path}: --code, --requirements, --framework and gcloud's flags apply to AI "
                          "Platform / Vertex job specs; an experiment file names its own code and requirements")
    else:
        if stack:  # the same experiment on another stack, as that stack declares it
            dropped = data.get("overrides")
            data = {**{k: v for k, v in data.items() if k != "overrides"}, "stack": stack}
            if dropped and notes is not None:
                notes.append(f"--stack {stack}: the experiment's overrides for its own stack "
                             f"({', '.join(f'{k}={v}' for k, v in dropped.items())}) are not applied")
        overrides_from = f"{path}: overrides"
    exp = build_experiment(data, path)
    exp._overrides_from = overrides_from
    exp._budget_from = f"{path}: budget"
    return exp
