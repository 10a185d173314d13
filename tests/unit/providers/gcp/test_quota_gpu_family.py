"""H100, H100 Mega, H200 and B200 have no per-model metric in Compute's Quota.metric enum: they count
in the GPU-family quota GPUS-PER-GPU-FAMILY-per-project-region, which only Cloud Quotas shows. The
preflight reads it there (the simulator's Compute and Cloud Quotas), counts the GPUs that exist, and
prints a request for a quota id that exists."""

from __future__ import annotations

import pytest

from gcpsim.facts import quotas as google
from infra.errors import ConfigError
from infra.providers.gcp import quota
from infra.providers.gcp.reaper import API_ENDPOINT_ENV
from infra.spec.stack_config import load_stack
from tests.fakes.sim_compute import PROJECT, REGION, ZONE, instance_body, make_csim  # noqa: F401

MEGA = "GPUS_PER_GPU_FAMILY:NVIDIA_H100_MEGA"  # the simulator's project-file key of that limit


def _spec(stack: str):
    return load_stack(stack, overrides={"project": PROJECT})


def test_an_h100_mega_stack_is_refused_on_the_gpu_family_quota_with_a_request_for_a_quota_id_that_exists(
        make_csim, monkeypatch):
    sim = make_csim(quotas={"global": {"GPUS_ALL_REGIONS": 64}, REGION: {MEGA: 8}})
    monkeypatch.setenv(API_ENDPOINT_ENV, sim.running.url)
    said: list[str] = []
    with pytest.raises(ConfigError) as refused:
        quota.preflight(_spec("gpu-a3mega-x2"), said.append)  # 2 x a3-megagpu-8g: 16 GPUs
    message = str(refused.value)
    assert ("quota GPUS-PER-GPU-FAMILY-per-project-region (gpu_family NVIDIA_H100_MEGA) in us-central1: "
            "limit 8, 0 in use, 8 free, this stack needs 16") in message
    assert ("--quota-id=GPUS-PER-GPU-FAMILY-per-project-region --preferred-value=16 "
            "--dimensions=region=us-central1,gpu_family=NVIDIA_H100_MEGA --email=YOUR_EMAIL`") in message
    assert "metric=compute.googleapis.com%2Fgpus_per_gpu_family" in message
    assert google.FAMILY_QUOTA_ID in message and google.GPU_QUOTAS["nvidia-h100-mega-80gb"].family in message
    assert any("enabling cloudquotas.googleapis.com" in line for line in said)  # Cloud Quotas was off


def test_the_family_quota_counts_the_gpus_of_the_regions_vms(make_csim, monkeypatch):
    sim = make_csim(quotas={"global": {"GPUS_ALL_REGIONS": 64}, REGION: {MEGA: 16}})
    sim.running.enable("cloudquotas.googleapis.com")
    monkeypatch.setenv(API_ENDPOINT_ENV, sim.running.url)
    said: list[str] = []
    quota.preflight(_spec("gpu-a3mega-x2"), said.append)
    assert f"{MEGA} (us-central1) 16" in said[-1] and said[-1].endswith("available")
    sim.network()
    status, op = sim.http("POST", sim.compute(f"zones/{ZONE}/instances"),
                          instance_body("other", machine="a3-megagpu-8g", labels={"owner": "someone-else"}))
    assert status == 200 and "error" not in op
    with pytest.raises(ConfigError) as refused:
        quota.preflight(_spec("gpu-a3mega-x2"), said.append)
    assert "(gpu_family NVIDIA_H100_MEGA) in us-central1: limit 16, 8 in use, 8 free" in str(refused.value)


def test_spot_h100_needs_fall_back_to_the_family_quota_not_an_invented_metric():
    spec = load_stack("gpu-a3mega-x2", overrides={"project": PROJECT, "machine_type": "a3-highgpu-8g", "spot": True})
    (gpus,) = [n for n in quota.needs(spec) if n.metric.endswith(("H100_GPUS", "NVIDIA_H100"))]
    assert (gpus.metric, gpus.fallback) == ("PREEMPTIBLE_NVIDIA_H100_GPUS", "GPUS_PER_GPU_FAMILY:NVIDIA_H100")
    assert quota.families_of(quota.needs(spec)) == {"NVIDIA_H100"}


def test_plan_says_the_family_quota_was_not_read_while_cloud_quotas_is_off_and_shows_it_once_on(make_csim, monkeypatch):
    from infra.providers.gcp import capacity

    sim = make_csim(quotas={"global": {"GPUS_ALL_REGIONS": 64}, REGION: {MEGA: 32}})
    monkeypatch.setenv(API_ENDPOINT_ENV, sim.running.url)
    (pool,) = capacity.plan_rows(_spec("gpu-a3mega-x2"))
    assert pool.values["quota_free"].startswith("not read: the Cloud Quotas API")  # plan enables nothing
    sim.running.enable("cloudquotas.googleapis.com")
    (pool,) = capacity.plan_rows(_spec("gpu-a3mega-x2"))
    assert {"metric": MEGA, "region": REGION, "needed": 16, "free": 32.0} in pool.values["quota"]
