"""`provisioning: flex-start` (GCE's FLEX_START provisioning model) is refused, while the stack is
read, where GCE would refuse the VMs: spot at once, a TTL (the VMs' max run duration) over 7 days,
machine families without flex-start, TPUs, the local stack; and a wait longer than GCE queues."""

from __future__ import annotations

import pytest

from infra.spec.cluster import ClusterSpec

GCP = {"name": "f", "provider": "gcp", "project": "my-project", "zone": "us-central1-a",
       "machine_type": "g2-standard-8", "provisioning": "flex-start", "ttl_hours": 8,
       "ssh": {"source_ranges": ["203.0.113.7/32"]}}


def refusal(**fields) -> str:
    with pytest.raises(ValueError) as refused:
        ClusterSpec.model_validate({**GCP, **fields})
    return str(refused.value)


def test_a_gpu_vm_stack_takes_flex_start_with_an_hour_to_wait_by_default():
    spec = ClusterSpec.model_validate(GCP)
    assert spec.flex_start and spec.flex_start_deadline_minutes == 60


def test_flex_start_with_spot_is_refused():
    assert "provisioning 'flex-start' with spot: a VM has one provisioning model" in refusal(spot=True)


def test_a_spot_pool_under_flex_start_is_refused():
    pools = [{"role": "chief"}, {"role": "worker", "spot": True}]
    assert "with spot" in refusal(pools=pools)


def test_a_ttl_over_seven_days_is_refused_as_the_max_run_duration():
    message = refusal(ttl_hours=169)
    assert "flex-start VMs run at most 168 hours (7 days)" in message and "set ttl_hours to 168 or less" in message


@pytest.mark.parametrize("machine", ["n1-standard-8", "n2-standard-8", "e2-standard-4"])
def test_machine_families_without_flex_start_are_refused(machine):
    fields = {"machine_type": machine}
    if machine.startswith("n1"):
        fields["gpu"] = {"type": "nvidia-tesla-t4", "count": 1}
    assert f"machine_type {machine} cannot be a flex-start VM" in refusal(**fields)


def test_a_pool_outside_the_flex_start_families_is_named():
    pools = [{"role": "chief", "machine_type": "n2-standard-8"}, {"role": "worker"}]
    assert "pools[chief]: machine_type n2-standard-8 cannot be a flex-start VM" in refusal(pools=pools)


def test_tpu_stacks_are_pointed_at_queued_resources():
    tpu = {k: v for k, v in GCP.items() if k != "machine_type"}
    with pytest.raises(ValueError, match="TPUs wait for capacity as queued resources"):
        ClusterSpec.model_validate({**tpu, "kind": "tpu", "tpu": {"type": "v5litepod-8"}})


@pytest.mark.parametrize("minutes", [0, -1, 121])
def test_a_wait_gce_would_not_queue_is_refused(minutes):
    assert "flex_start_deadline_minutes" in refusal(flex_start_deadline_minutes=minutes)


def test_the_local_stack_refuses_flex_start():
    with pytest.raises(ValueError, match="the local stack has no flex-start capacity"):
        ClusterSpec.model_validate({"name": "l", "provisioning": "flex-start"})
