"""Compute quotas in the simulator: limits from the project, usage from what exists, and the
failed operation GCE gives an insert that exceeds one."""

from __future__ import annotations

import json

import pytest
from google.api_core import exceptions
from google.cloud import compute_v1

from tests.fakes.sim_compute import PROJECT, REGION, ZONE, ComputeSim, instance_body, make_csim  # noqa: F401


def insert(sim: ComputeSim, body: dict) -> dict:
    status, op = sim.http("POST", sim.compute(f"zones/{ZONE}/instances"), body)
    assert status == 200, op
    return op


def test_a_fresh_project_refuses_a_gpu_vm_naming_gpus_all_regions(make_csim):
    sim = make_csim(template="fresh")
    sim.network()
    op = insert(sim, instance_body("gpu-0", gpu=("nvidia-tesla-t4", 1)))
    assert op["status"] == "DONE" and op["httpErrorStatusCode"] == 403 and op["httpErrorMessage"] == "FORBIDDEN"
    error = op["error"]["errors"][0]
    assert error["code"] == "QUOTA_EXCEEDED"
    assert error["message"] == "Quota 'GPUS_ALL_REGIONS' exceeded.  Limit: 0.0 globally."
    assert error["errorDetails"] == [{"quotaInfo": {"metricName": "compute.googleapis.com/gpus_all_regions",
                                                    "limitName": "GPUS-ALL-REGIONS-per-project", "limit": 0.0}}]
    assert sim.http("GET", sim.compute(f"zones/{ZONE}/instances/gpu-0"))[0] == 404  # nothing was created
    assert sim.backend.called("boot") == []


def test_the_real_client_raises_forbidden_with_the_quota_error(make_csim):
    sim = make_csim(template="fresh")
    sim.network()
    client = sim.client(compute_v1.InstancesClient)
    resource = compute_v1.Instance.from_json(json.dumps(instance_body("gpu-0", gpu=("nvidia-tesla-t4", 1))))
    with pytest.raises(exceptions.Forbidden) as caught:
        client.insert(project=PROJECT, zone=ZONE, instance_resource=resource).result(timeout=10)
    assert caught.value.errors[0].code == "QUOTA_EXCEEDED"
    assert "GPUS_ALL_REGIONS" in caught.value.errors[0].message


def test_a_regional_gpu_quota_counts_the_gpus_that_exist(make_csim):
    sim = make_csim(quotas={REGION: {"NVIDIA_T4_GPUS": 3}})
    sim.network()
    assert "error" not in insert(sim, instance_body("a", gpu=("nvidia-tesla-t4", 2)))
    op = insert(sim, instance_body("b", gpu=("nvidia-tesla-t4", 2)))
    assert op["error"]["errors"][0]["message"] == "Quota 'NVIDIA_T4_GPUS' exceeded.  Limit: 3.0 in region us-central1."
    assert op["error"]["errors"][0]["errorDetails"][0]["quotaInfo"]["dimensions"] == {"region": REGION}
    assert "error" not in insert(sim, instance_body("c", gpu=("nvidia-tesla-t4", 1)))


def test_a_stopped_vm_releases_its_quota_and_start_checks_it_again(make_csim):
    sim = make_csim(quotas={REGION: {"CPUS": 8}})
    sim.network()
    insert(sim, instance_body("a"))  # n1-standard-8: 8 vCPUs
    assert insert(sim, instance_body("b"))["error"]["errors"][0]["code"] == "QUOTA_EXCEEDED"
    sim.http("POST", sim.compute(f"zones/{ZONE}/instances/a/stop"))
    sim.advance(1)
    assert "error" not in insert(sim, instance_body("b"))
    status, op = sim.http("POST", sim.compute(f"zones/{ZONE}/instances/a/start"))
    assert status == 200 and op["error"]["errors"][0]["message"].startswith("Quota 'CPUS' exceeded.")
    assert sim.http("GET", sim.compute(f"zones/{ZONE}/instances/a"))[1]["status"] == "TERMINATED"


def test_spot_vms_use_preemptible_quota_where_the_project_has_it(make_csim):
    sim = make_csim(quotas={REGION: {"NVIDIA_L4_GPUS": 0, "PREEMPTIBLE_NVIDIA_L4_GPUS": 2}})
    sim.network()
    assert "error" not in insert(sim, instance_body("s0", machine="g2-standard-8", spot=True))
    assert "error" not in insert(sim, instance_body("s1", machine="g2-standard-8", spot=True))
    third = insert(sim, instance_body("s2", machine="g2-standard-8", spot=True))
    assert third["error"]["errors"][0]["message"].startswith("Quota 'PREEMPTIBLE_NVIDIA_L4_GPUS' exceeded.")
    standard = insert(sim, instance_body("d0", machine="g2-standard-8"))
    assert standard["error"]["errors"][0]["message"].startswith("Quota 'NVIDIA_L4_GPUS' exceeded.")


def test_without_preemptible_quota_spot_vms_use_the_standard_quota(make_csim):
    sim = make_csim(quotas={REGION: {"NVIDIA_L4_GPUS": 1, "PREEMPTIBLE_NVIDIA_L4_GPUS": 0}})
    sim.network()
    assert "error" not in insert(sim, instance_body("s0", machine="g2-standard-8", spot=True))
    second = insert(sim, instance_body("s1", machine="g2-standard-8", spot=True))
    assert second["error"]["errors"][0]["message"].startswith("Quota 'NVIDIA_L4_GPUS' exceeded.")


def test_regions_get_and_projects_get_show_limits_and_usage(make_csim):
    sim = make_csim(quotas={"global": {"GPUS_ALL_REGIONS": 4}, REGION: {"NVIDIA_T4_GPUS": 4}})
    sim.network()
    insert(sim, instance_body("a", gpu=("nvidia-tesla-t4", 2)))
    region = sim.client(compute_v1.RegionsClient).get(project=PROJECT, region=REGION)
    rows = {q.metric: (q.limit, q.usage) for q in region.quotas}
    assert rows["NVIDIA_T4_GPUS"] == (4.0, 2.0) and rows["CPUS"][1] == 8.0 and rows["INSTANCES"][1] == 1.0
    assert rows["IN_USE_ADDRESSES"][1] == 1.0
    project = sim.client(compute_v1.ProjectsClient).get(project=PROJECT)
    rows = {q.metric: (q.limit, q.usage) for q in project.quotas}
    assert rows["GPUS_ALL_REGIONS"] == (4.0, 2.0) and rows["NETWORKS"][1] == 1.0
    assert project.default_service_account.endswith("-compute@developer.gserviceaccount.com")


def test_raising_a_quota_lets_the_same_insert_succeed(make_csim):
    sim = make_csim(template="fresh")
    sim.network()
    assert "error" in insert(sim, instance_body("gpu-0", machine="g2-standard-8"))
    sim.admin("PATCH", "quotas", {"global": {"GPUS_ALL_REGIONS": 1}})
    assert "error" not in insert(sim, instance_body("gpu-0", machine="g2-standard-8"))


def test_boot_disks_hold_ssd_quota_until_deleted_even_while_their_vm_is_stopped(make_csim):
    sim = make_csim(quotas={REGION: {"SSD_TOTAL_GB": 150}})  # instance_body: a 100 GB pd-balanced boot disk
    sim.network()
    assert "error" not in insert(sim, instance_body("a"))
    sim.http("POST", sim.compute(f"zones/{ZONE}/instances/a/stop"))
    sim.advance(1)
    second = insert(sim, instance_body("b"))
    assert second["error"]["errors"][0]["message"] == "Quota 'SSD_TOTAL_GB' exceeded.  Limit: 150.0 in region us-central1."
    region = sim.client(compute_v1.RegionsClient).get(project=PROJECT, region=REGION)
    assert {q.metric: (q.limit, q.usage) for q in region.quotas}["SSD_TOTAL_GB"] == (150.0, 100.0)
