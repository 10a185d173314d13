"""Before anything billable exists, `up` checks the GPU quota the stack needs, in the project's
own numbers (the simulator's Compute API), and refuses naming each metric and how to raise it."""

from __future__ import annotations

import pytest

from infra.errors import ConfigError
from infra.providers.gcp import quota
from infra.providers.gcp.reaper import API_ENDPOINT_ENV
from infra.spec.stack_config import load_stack
from tests.fakes.sim_fixtures import PROJECT, make_sim, sim  # noqa: F401


def _spec(stack: str, **overrides):
    return load_stack(stack, overrides={"project": PROJECT, **overrides})


def _instances(s) -> list:
    status, body = s.http("GET", f"/compute/v1/projects/{PROJECT}/aggregated/instances")
    return [i for scope in (body or {}).get("items", {}).values() for i in scope.get("instances", [])]


def test_a_fresh_project_is_refused_naming_the_gpu_quota_and_the_command_that_raises_it(make_sim, monkeypatch):
    s = make_sim(template="fresh", delays={"service_enable": 0.0})
    monkeypatch.setenv(API_ENDPOINT_ENV, s.url)
    said: list[str] = []
    with pytest.raises(ConfigError) as refused:
        quota.preflight(_spec("gpu-t4x2"), said.append)
    message = str(refused.value)
    assert "GPUS_ALL_REGIONS" in message and "limit 0" in message and "needs 2" in message
    assert "--quota-id=GPUS-ALL-REGIONS-per-project --preferred-value=2 --email=YOUR_EMAIL`" in message
    assert "nothing was created" in message
    # Compute had to be enabled to read the quota (free), and nothing billable exists
    assert any("enabling compute.googleapis.com" in line for line in said)
    assert _instances(s) == []


def test_with_the_quota_raised_the_preflight_passes(make_sim, monkeypatch):
    s = make_sim(template="fresh", delays={"service_enable": 0.0},
                 quotas={"global": {"GPUS_ALL_REGIONS": 4}, "us-central1": {"NVIDIA_T4_GPUS": 4}})
    monkeypatch.setenv(API_ENDPOINT_ENV, s.url)
    said: list[str] = []
    quota.preflight(_spec("gpu-t4x2"), said.append)
    assert said[-1].startswith("quota: ") and "NVIDIA_T4_GPUS" in said[-1] and "available" in said[-1]


def test_a_regional_shortfall_names_the_region_and_the_gpus_metric(make_sim, monkeypatch):
    s = make_sim(quotas={"us-central1": {"NVIDIA_T4_GPUS": 1}})
    monkeypatch.setenv(API_ENDPOINT_ENV, s.url)
    with pytest.raises(ConfigError) as refused:
        quota.preflight(_spec("gpu-t4x2"), lambda _: None)
    assert "NVIDIA_T4_GPUS in us-central1: limit 1" in str(refused.value)


def test_spot_gpus_count_against_the_standard_metric_without_preemptible_quota(make_sim, monkeypatch):
    s = make_sim(quotas={"us-central1": {"PREEMPTIBLE_NVIDIA_L4_GPUS": 0, "NVIDIA_L4_GPUS": 1}})
    monkeypatch.setenv(API_ENDPOINT_ENV, s.url)
    with pytest.raises(ConfigError) as refused:
        quota.preflight(_spec("gpu-l4-spot"), lambda _: None)
    assert "NVIDIA_L4_GPUS in us-central1: limit 1" in str(refused.value)


def test_needs_count_every_pools_gpus_and_spot_separately():
    spec = load_stack("tf-ps-pools", overrides={"project": PROJECT})
    wanted = {(n.metric, n.region): n.amount for n in quota.needs(spec)}
    # chief + 2 workers carry one T4 each; ps and evaluator are CPU pools
    assert {k: v for k, v in wanted.items() if "GPUS" in k[0]} == {
        ("GPUS_ALL_REGIONS", "global"): 3, ("NVIDIA_T4_GPUS", "us-central1"): 3}
    # n1 vCPUs (chief, workers: n1-standard-8; evaluator: n1-standard-4) count toward CPUS, the
    # ps pool's n2 ones toward N2_CPUS; every VM holds a 200 GB pd-balanced boot disk and an address
    assert wanted[("CPUS", "us-central1")] == 3 * 8 + 4 and wanted[("N2_CPUS", "us-central1")] == 2 * 8
    assert wanted[("CPUS_ALL_REGIONS", "global")] == 3 * 8 + 4 + 2 * 8
    assert wanted[("SSD_TOTAL_GB", "us-central1")] == 6 * 200
    assert wanted[("IN_USE_ADDRESSES", "us-central1")] == wanted[("INSTANCES", "us-central1")] == 6


def test_a_quota_of_a_million_or_more_is_printed_as_the_number_the_command_takes():
    short = quota.Shortfall(quota.Need("SSD_TOTAL_GB", "us-central1", 600_000.0), limit=2_000_000.0,
                            usage=1_500_000.0)
    command = quota.how_to_raise(PROJECT, short)
    assert "--preferred-value=2100000 --dimensions=region=us-central1 --email=YOUR_EMAIL`" in command
    assert "limit 2000000, 1500000 in use, 500000 free, this stack needs 600000" in short.describe(PROJECT)
    assert "e+" not in command + short.describe(PROJECT)
