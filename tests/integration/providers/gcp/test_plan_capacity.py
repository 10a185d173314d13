"""`plan` reads the quota a stack needs from the project (the simulated Compute API) and shows, per
pool, how its VMs get capacity and each metric needed against what is free; a stack the free quota
cannot hold is refused by `plan`, before anything exists, naming metric, region, needed and free.
What each pool needs, from the stack file alone: tests/unit/providers/gcp/test_quota_needs_per_pool.py."""

from __future__ import annotations

from typing import Any

import pytest

from infra.errors import ConfigError
from infra.providers.gcp import realizer
from tests.fakes.sim_stacks import Project, make_gcp, simulated_gcp  # noqa: F401 (fixtures)

COMPUTE_ON = ["compute.googleapis.com"]


def capacity(rows) -> dict[str, dict[str, Any]]:
    return {r.name: {**r.values, "quota": {line["metric"]: (line["needed"], line["free"])
                                           for line in r.values["quota"]}}
            for r in rows if r.is_capacity}


def test_plan_refuses_a_stack_short_of_gpu_quota_naming_metric_region_needed_and_free(make_gcp) -> None:  # noqa: F811
    project = make_gcp(services=COMPUTE_ON, quotas={"us-central1": {"NVIDIA_T4_GPUS": 1}})
    with pytest.raises(ConfigError) as refused:
        realizer.plan(project.stack("gpu-t4x2"))  # one n1-standard-8 with 2 T4s
    message = str(refused.value)
    assert "quota NVIDIA_T4_GPUS in us-central1: limit 1, 0 in use, 1 free, this stack needs 2" in message
    assert (f"--quota-id=NVIDIA-T4-GPUS-per-project-region --preferred-value=2 --dimensions=region=us-central1"
            in message) and "nothing was created" in message
    assert project.instances() == {}


def test_plan_refuses_a_stack_whose_boot_disks_the_ssd_quota_cannot_hold(make_gcp) -> None:  # noqa: F811
    project = make_gcp(services=COMPUTE_ON, quotas={"us-central1": {"SSD_TOTAL_GB": 300}})
    with pytest.raises(ConfigError) as refused:
        realizer.plan(project.stack("tf-ps-pools"))  # 6 VMs x 200 GB pd-balanced
    assert "quota SSD_TOTAL_GB in us-central1: limit 300, 0 in use, 300 free, this stack needs 1200" \
        in str(refused.value)


def test_plan_shows_each_pools_provisioning_and_quota_needed_against_free(make_gcp) -> None:  # noqa: F811
    project = make_gcp(services=COMPUTE_ON, quotas={
        "global": {"GPUS_ALL_REGIONS": 8}, "us-central1": {"NVIDIA_T4_GPUS": 4, "CPUS": 64, "N2_CPUS": 24}})
    rows = realizer.plan(project.stack("tf-ps-pools"))
    pools = capacity(rows)
    assert list(pools) == ["chief", "worker", "ps", "evaluator"]  # the pools' order, after the resources
    assert all(not r.is_capacity for r in rows[:-4])
    assert (pools["worker"]["nodes"], pools["worker"]["provisioning"]) == (2, "on-demand")
    assert pools["worker"]["quota"]["NVIDIA_T4_GPUS"] == (2, 4) and pools["worker"]["quota"]["CPUS"] == (16, 64)
    assert pools["ps"]["quota"]["N2_CPUS"] == (16, 24) and "NVIDIA_T4_GPUS" not in pools["ps"]["quota"]
    assert pools["chief"]["quota"]["GPUS_ALL_REGIONS"] == (1, 8)
    assert pools["evaluator"]["quota"]["SSD_TOTAL_GB"] == (200, None)  # a limit the project does not set


def test_plan_of_spot_vms_shows_the_metric_they_are_charged_to(make_gcp) -> None:  # noqa: F811
    # no preemptible quota: spot GPUs count toward the standard metric
    project = make_gcp(services=COMPUTE_ON, quotas={"us-central1": {
        "PREEMPTIBLE_NVIDIA_L4_GPUS": 0, "NVIDIA_L4_GPUS": 4, "PREEMPTIBLE_CPUS": 32}})
    (pool,) = capacity(realizer.plan(project.stack("gpu-l4-spot"))).values()
    assert pool["provisioning"] == "spot"
    assert pool["quota"]["NVIDIA_L4_GPUS"] == (2, 4) and pool["quota"]["PREEMPTIBLE_CPUS"] == (16, 32)


def test_plan_in_a_project_with_compute_off_shows_the_needs_and_why_free_is_not_read(make_gcp) -> None:  # noqa: F811
    project = make_gcp(template="fresh")
    (pool,) = [r for r in realizer.plan(project.stack("gpu-t4x2")) if r.is_capacity]
    assert pool.values["quota_free"] == (f"not read: the Compute Engine API is off in project {project.id} "
                                         "(`up` enables it)")
    assert {line["metric"]: line["free"] for line in pool.values["quota"]}["GPUS_ALL_REGIONS"] is None
    assert project.http("GET", f"/compute/v1/projects/{project.id}")[0] == 403  # plan enabled nothing


def test_a_stack_that_is_up_already_is_planned_and_brought_up_again_without_counting_its_vms_twice(
        make_gcp) -> None:  # noqa: F811
    from google.cloud import compute_v1

    from infra.providers.gcp import quota

    project = make_gcp(services=COMPUTE_ON, quotas={"global": {"GPUS_ALL_REGIONS": 2},
                                                    "us-central1": {"NVIDIA_T4_GPUS": 2}})
    spec = project.stack("gpu-t4x2")
    project.network("net", "us-central1")
    # the stack's node as its program made it: 2 T4s, the stack's labels
    project.client(compute_v1.InstancesClient).insert(
        project=project.id, zone=spec.zone, instance_resource=compute_v1.Instance(
            name="gpu-t4x2-node-0", machine_type=f"zones/{spec.zone}/machineTypes/n1-standard-8",
            labels={"managed-by": "trainctl", "trainctl-stack": spec.name},
            scheduling=compute_v1.Scheduling(on_host_maintenance="TERMINATE"),
            guest_accelerators=[compute_v1.AcceleratorConfig(accelerator_type="nvidia-tesla-t4", accelerator_count=2)],
            disks=[compute_v1.AttachedDisk(boot=True, auto_delete=True, initialize_params=compute_v1.AttachedDiskInitializeParams(
                source_image="projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts"))],
            network_interfaces=[compute_v1.NetworkInterface(
                subnetwork=f"projects/{project.id}/regions/us-central1/subnetworks/net-subnet")])).result()
    (pool,) = capacity(realizer.plan(spec)).values()  # all of the quota is in use, by this stack
    assert pool["existing"] == 1 and pool["quota"]["NVIDIA_T4_GPUS"] == (0, 0)
    quota.preflight(spec, project.progress)  # `up` again: nothing more to hold
    with pytest.raises(ConfigError, match="NVIDIA_T4_GPUS in us-central1: limit 2, 2 in use, 0 free"):
        quota.preflight(project.stack("gpu-t4x2", nodes=2), project.progress)  # one more node is
