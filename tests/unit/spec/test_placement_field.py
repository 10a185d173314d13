"""`placement`: the GPUDirect families get a COMPACT placement policy by default, A2/G2 stacks ask
for one, `none` turns it off; it is refused, while the stack is read, where GCP's compact
placement policies cannot hold the nodes (other families, TPUs, the local stack, too many VMs)."""

from __future__ import annotations

import pytest

from infra.spec.cluster import ClusterSpec

GCP = {"name": "p", "provider": "gcp", "project": "my-project", "zone": "us-central1-a",
       "ssh": {"source_ranges": ["203.0.113.7/32"]}}
A3MEGA = {**GCP, "machine_type": "a3-megagpu-8g", "nodes": 2}
A2 = {**GCP, "machine_type": "a2-highgpu-8g", "nodes": 2}


def spec(**fields) -> ClusterSpec:
    return ClusterSpec.model_validate(fields)


def refusal(**fields) -> str:
    with pytest.raises(ValueError) as refused:
        spec(**fields)
    return str(refused.value)


def test_gpudirect_families_are_placed_compactly_unless_told_otherwise():
    assert spec(**A3MEGA).placement == "compact"
    assert spec(**A3MEGA, placement="none").placement == "none"
    assert spec(**{**A3MEGA, "nodes": 1}).placement == "none"  # one VM: nothing to place together
    assert spec(**{**A3MEGA, "kind": "gke"}).placement == "compact"


def test_a2_and_g2_stacks_are_compact_only_when_they_ask():
    assert spec(**A2).placement == "none"
    assert spec(**A2, placement="compact").placement == "compact"
    assert spec(**{**GCP, "machine_type": "g2-standard-8", "nodes": 4}, placement="compact").placement == "compact"


def test_compact_placement_is_refused_for_families_gcp_does_not_place_compactly():
    message = refusal(**{**GCP, "machine_type": "n1-standard-8", "gpu": {"type": "nvidia-tesla-t4"}},
                      placement="compact")
    assert "placement: compact is offered for a2-*" in message and "not n1-standard-8" in message


def test_compact_placement_is_refused_on_tpu_and_local_stacks_and_beyond_its_vm_limit():
    tpu = {**GCP, "kind": "tpu", "zone": "us-central1-a", "tpu": {"type": "v5litepod-16"}}
    assert "not a 'tpu' stack" in refusal(**tpu, placement="compact")
    assert "the local stack's nodes are namespaces" in refusal(name="l", placement="compact")
    assert "at most 150 VMs per policy" in refusal(**{**A2, "nodes": 151}, placement="compact")
    assert spec(**{**A2, "nodes": 150}, placement="compact").placement == "compact"


def test_an_unknown_placement_is_refused_naming_the_choices():
    assert "'compact' or 'none'" in refusal(**A2, placement="spread")


def test_a_gpudirect_stack_whose_subnet_overlaps_its_gpu_networks_is_refused():
    message = refusal(**A3MEGA, network={"subnet_cidr": "192.168.0.0/20"})
    assert "network.subnet_cidr 192.168.0.0/20 overlaps 192.168.0.0/16" in message
    assert spec(**A2, network={"subnet_cidr": "192.168.0.0/20"}).network.subnet_cidr == "192.168.0.0/20"


def test_pools_of_two_gpudirect_families_are_refused():
    pools = [{"role": "chief", "machine_type": "a3-megagpu-8g"}, {"role": "worker", "machine_type": "a4-highgpu-8g"}]
    message = refusal(**{**GCP, "zone": "us-east5-a", "machine_type": "a3-megagpu-8g"}, pools=pools)
    assert "one stack serves one GPUDirect family" in message
