"""AI Platform and Vertex AI job specs, run as they are: an AI Platform `config.yaml`
(`trainingInput`, trainctl/jobs/ai_platform_job.py) or a Vertex AI CustomJob (`workerPoolSpecs`,
trainctl/jobs/vertex_job.py) becomes an experiment with worker pools on a trainctl stack.

Every field is mapped, refused by name with the nearest alternative, or named in a note
(trainctl/jobs/job_fields.py); none is ignored. What a mapping changes (e.g. machine types on the
local stack, whose nodes are CPU namespaces) is said in the notes that `trainctl run --plan`
prints. The translation here is pure: the stack it runs on is read, and the job's code and
packages staged, by the run step (trainctl/jobs/job_on_stack.py), which hands in what they gave.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.providers.protocol import Capabilities
from trainctl.jobs.ai_platform_job import ai_platform_experiment
from trainctl.jobs.job_fields import field_notes
from trainctl.jobs.job_spec_values import ImageReader
from trainctl.jobs.job_tuning import parallel_trials
from trainctl.jobs.vertex_job import refuse_reduction_server, vertex_experiment


@dataclass
class Mapping:
    experiment: dict[str, Any]  # an experiment file's content
    notes: list[str] = field(default_factory=list)


def is_job_spec(data: dict[str, Any]) -> bool:
    return bool({"trainingInput", "workerPoolSpecs", "jobSpec", "trialJobSpec"} & set(data))


def job_name(job: dict[str, Any], path: Path) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", str(job.get("displayName") or path.stem).lower()).strip("-")[:30].rstrip("-")
    return name if name and name[0].isalpha() else f"job-{name}"[:30].rstrip("-")


def translate(job: dict[str, Any], *, path: Path, read_image: ImageReader) -> Mapping:
    """The job spec (gcloud's flags already laid over it) as an experiment on no stack yet, with
    notes on what the mapping changed."""
    refuse_reduction_server(job)
    notes = field_notes(job)
    name = job_name(job, path)
    if "trainingInput" in job:
        experiment = ai_platform_experiment(job, name, notes, read_image)
    else:
        experiment = vertex_experiment(job, name, notes, read_image)
    if job.get("labels"):
        experiment["overrides"]["labels"] = dict(job["labels"])
    if "sweep" in experiment:
        parallel_trials(experiment, notes)
    return Mapping(experiment, notes)


def fit_to_stack(mapping: Mapping, *, stack: str, can: Capabilities, code: Path, requirements: str | None,
                 framework: str | None) -> None:
    """The translated job placed on `stack`, whose capabilities are `can`: its code folder and
    requirements file (as the run step staged them), an image where the stack's pods run one,
    and no machine shapes where its nodes have none."""
    experiment, notes = mapping.experiment, mapping.notes
    experiment.update({"stack": stack, "code": str(code)})
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
