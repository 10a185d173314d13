"""The GPU-family quota in the simulator (gcpsim/facts/quotas.py): H100, H100 Mega, H200 and B200
have no per-model metric in Compute's Quota.metric enum and count in GPUS_PER_GPU_FAMILY per region
and gpu_family; regions.get does not show it, Cloud Quotas' quotaInfos does."""

from __future__ import annotations

from google.cloud import compute_v1

from tests.fakes.sim_compute import PROJECT, REGION, ZONE, ComputeSim, instance_body, make_csim  # noqa: F401

FAMILY_H100 = "GPUS_PER_GPU_FAMILY:NVIDIA_H100"
QUOTA_INFO = (f"/v1/projects/{PROJECT}/locations/global/services/compute.googleapis.com/"
              "quotaInfos/GPUS-PER-GPU-FAMILY-per-project-region")


def insert(sim: ComputeSim, body: dict) -> dict:
    status, op = sim.http("POST", sim.compute(f"zones/{ZONE}/instances"), body)
    assert status == 200, op
    return op


def test_h100_vms_count_in_the_gpu_family_quota_of_their_region(make_csim):
    sim = make_csim(quotas={REGION: {FAMILY_H100: 8}})
    sim.network()
    assert "error" not in insert(sim, instance_body("a", machine="a3-highgpu-8g"))
    op = insert(sim, instance_body("b", machine="a3-highgpu-8g"))
    error = op["error"]["errors"][0]
    assert op["httpErrorStatusCode"] == 403 and error["code"] == "QUOTA_EXCEEDED"
    assert error["message"] == "Quota 'GPUS_PER_GPU_FAMILY' exceeded.  Limit: 8.0 in region us-central1."
    assert error["errorDetails"] == [{"quotaInfo": {
        "metricName": "compute.googleapis.com/gpus_per_gpu_family", "limitName": "GPUS-PER-GPU-FAMILY-per-project-region",
        "limit": 8.0, "dimensions": {"region": REGION, "gpu_family": "NVIDIA_H100"}}}]


def test_another_family_does_not_use_the_h100_quota(make_csim):
    sim = make_csim(quotas={REGION: {FAMILY_H100: 0, "GPUS_PER_GPU_FAMILY:NVIDIA_H100_MEGA": 8}})
    sim.network()
    assert "error" not in insert(sim, instance_body("mega", machine="a3-megagpu-8g"))
    assert "error" in insert(sim, instance_body("high", machine="a3-highgpu-8g"))


def test_spot_h100_vms_use_preemptible_h100_quota_where_the_project_has_it(make_csim):
    sim = make_csim(quotas={REGION: {FAMILY_H100: 0, "PREEMPTIBLE_NVIDIA_H100_GPUS": 8}})
    sim.network()
    assert "error" not in insert(sim, instance_body("s", machine="a3-highgpu-8g", spot=True))
    second = insert(sim, instance_body("t", machine="a3-highgpu-8g", spot=True))
    assert second["error"]["errors"][0]["message"].startswith("Quota 'PREEMPTIBLE_NVIDIA_H100_GPUS' exceeded.")


def test_regions_get_has_no_per_model_metric_for_family_counted_gpus(make_csim):
    sim = make_csim(quotas={REGION: {FAMILY_H100: 8, "NVIDIA_H100_GPUS": 8}})
    sim.network()
    insert(sim, instance_body("a", machine="a3-highgpu-8g"))
    region = sim.client(compute_v1.RegionsClient).get(project=PROJECT, region=REGION)
    metrics = {q.metric for q in region.quotas}
    assert "NVIDIA_T4_GPUS" in metrics and "PREEMPTIBLE_NVIDIA_H100_GPUS" in metrics
    assert not {m for m in metrics if m.startswith(("NVIDIA_H", "NVIDIA_B", "GPUS_PER"))}


def test_cloud_quotas_shows_the_family_limit_once_its_api_is_enabled(make_csim):
    sim = make_csim(quotas={REGION: {FAMILY_H100: 8}})
    status, refused = sim.http("GET", QUOTA_INFO)
    assert status == 403 and refused["error"]["details"][0]["reason"] == "SERVICE_DISABLED"
    sim.running.enable("cloudquotas.googleapis.com")
    status, info = sim.http("GET", QUOTA_INFO)
    assert status == 200 and info["quotaId"] == "GPUS-PER-GPU-FAMILY-per-project-region"
    assert info["metric"] == "compute.googleapis.com/gpus_per_gpu_family"
    assert info["dimensions"] == ["gpu_family", "region"]
    assert info["dimensionsInfos"][0] == {"dimensions": {"region": REGION, "gpu_family": "NVIDIA_H100"},
                                          "details": {"value": "8"}, "applicableLocations": [REGION]}
    assert info["dimensionsInfos"][-1]["dimensions"] == {}
