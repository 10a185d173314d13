"""A Vertex job asking for Dynamic Workload Scheduler capacity (`scheduling.strategy: FLEX_START`,
with `maxWaitDuration`) runs on flex-start VMs of the stack, waiting as long as the job says, and a
wait GCE does not queue (indefinite, or over two hours) is refused naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from infra.errors import ConfigError
from infra.spec.stack_config import load_stack
from trainctl.jobs.experiment_file import load_experiment

REPO = Path(__file__).resolve().parents[3]
L4_POOL = {"machineSpec": {"machineType": "g2-standard-8", "acceleratorType": "NVIDIA_L4", "acceleratorCount": 1},
           "replicaCount": 1, "pythonPackageSpec": {"pythonModule": "trainers.digits_ddp"}}


def experiment_of(tmp_path: Path, scheduling: dict, stack: str = "gpu-t4x2", pool: dict = L4_POOL):
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({"workerPoolSpecs": [pool], "scheduling": scheduling}))
    return load_experiment(path, stack=stack, code=REPO, notes=[])


def cluster_of(exp):
    """The stack as `trainctl run` reads it for the experiment (trainctl/jobs/experiment.py prepare_run)."""
    return load_stack(exp.stack, name="flex-job", overrides_from=exp.overrides_from,
                      overrides={**exp.overrides, "ttl_hours": exp.ttl_hours})


def test_a_flex_start_job_runs_on_flex_start_vms_waiting_as_long_as_it_says(tmp_path: Path) -> None:
    exp = experiment_of(tmp_path, {"strategy": "FLEX_START", "maxWaitDuration": "1800s"})
    assert exp.overrides["provisioning"] == "flex-start" and exp.overrides["spot"] is False
    assert exp.overrides["flex_start_deadline_minutes"] == 30
    cluster = cluster_of(exp)
    assert cluster.flex_start and cluster.flex_start_deadline_minutes == 30 and cluster.machine_type == "g2-standard-8"


def test_a_flex_start_job_without_a_wait_takes_the_stacks_default(tmp_path: Path) -> None:
    exp = experiment_of(tmp_path, {"strategy": "FLEX_START"})
    assert exp.overrides["provisioning"] == "flex-start" and "flex_start_deadline_minutes" not in exp.overrides


@pytest.mark.parametrize("wait", ["0s", "7201s"])
def test_a_wait_gce_does_not_queue_is_refused_naming_the_field(tmp_path: Path, wait: str) -> None:
    with pytest.raises(ConfigError, match=r"scheduling\.maxWaitDuration.*up to 120 minutes"):
        experiment_of(tmp_path, {"strategy": "FLEX_START", "maxWaitDuration": wait})


def test_a_flex_start_job_on_the_local_stack_is_refused_there(tmp_path: Path) -> None:
    cpu = {**L4_POOL, "machineSpec": {"machineType": "n1-standard-4"}}
    exp = experiment_of(tmp_path, {"strategy": "FLEX_START"}, stack="local", pool=cpu)
    with pytest.raises(ConfigError, match="the local stack has no flex-start capacity"):
        cluster_of(exp)
