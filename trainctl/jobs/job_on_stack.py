"""`trainctl run JOB_SPEC`'s step from a job spec to an experiment on a stack: the I/O that the
pure translation (trainctl/jobs/job_spec.py) leaves out. It checks gcloud's local package paths,
reads the ENTRYPOINT of an image named without a command, loads the target stack, stages the
job's code and packages for it (trainctl/jobs/job_environment.py), and asks the stack's
capabilities."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infra.providers import realizers
from infra.spec import catalog
from infra.spec.cluster import ClusterSpec
from infra.spec.stack_config import load_stack
from trainctl.jobs.gcloud_flags import GcloudFlags, apply
from trainctl.jobs.image import LOCAL_PREFIX, image_command
from trainctl.jobs.job_environment import code_and_requirements, sources_of
from trainctl.jobs.job_spec import Mapping, fit_to_stack, translate


def to_experiment(job: dict[str, Any], *, path: Path, stack: str, code: Path | None,
                  requirements: str | None, framework: str | None = None,
                  flags: GcloudFlags | None = None, plan: bool = False) -> Mapping:
    """The job spec (with gcloud's flags over it) as an experiment on `stack`, with notes on
    what the mapping changed; a `plan` fetches and builds none of its packages."""
    flags = flags or GcloudFlags()
    job = apply(job, flags, path)
    sources = sources_of(job, flags, code, requirements, plan=plan)
    mapping = translate(job, path=path, read_image=planned_image_command if plan else image_command)
    target = load_stack(stack)
    code_dir, staged = code_and_requirements(job, path=path, target=target, sources=sources, notes=mapping.notes)
    fit_to_stack(mapping, stack=stack, can=realizers.capabilities(target), code=code_dir, requirements=staged,
                 framework=framework)
    dropped = unused_gpus(target, mapping.experiment["overrides"])
    if dropped:
        mapping.notes.append(f"stack {stack}'s GPUs ({dropped}) are not used: the job's pools name no "
                             "accelerator (machineSpec.acceleratorType and acceleratorCount), so its nodes "
                             "are CPU-only machines of the job's machine types")
    return mapping


def planned_image_command(ref: str, where: str) -> tuple[list[str], list[str]]:
    """A plan's reading of an image's ENTRYPOINT and CMD: from trainctl's own store (this
    machine), never from a registry (a plan reaches no network); a registry's are named."""
    if ref.startswith(LOCAL_PREFIX):
        return image_command(ref, where)
    return [f"<{ref}'s ENTRYPOINT: not read in a plan, read from its registry when the job runs>"], ["<its CMD>"]


def _gpus(machine_type: str | None, gpu: Any) -> str | None:
    """A pool's GPUs as the stack or the job gives them (attached, or bundled with the machine)."""
    if gpu:
        kind, count = (gpu["type"], gpu.get("count", 1)) if isinstance(gpu, dict) else (gpu.type, gpu.count)
        return f"{count} x {kind}"
    machine = catalog.MACHINES.get(machine_type or "")
    return f"{machine.bundled_gpu_count} x {machine.bundled_gpu}" if machine and machine.bundled_gpu else None


def unused_gpus(target: ClusterSpec, overrides: dict[str, Any]) -> str | None:
    """The stack's GPUs where the job's pools, which replace the stack's, have none."""
    if "pools" not in overrides:  # no pools: the stack's own machines and GPUs stay
        return None
    if any(_gpus(p.get("machine_type"), p.get("gpu")) for p in overrides["pools"]):
        return None
    theirs = [f"{group.node_count} node(s) x {found}" if group.node_count > 1 else found
              for _, _, group in target.groups() if (found := _gpus(group.machine_type, group.gpu))]
    return ", ".join(theirs) or None
