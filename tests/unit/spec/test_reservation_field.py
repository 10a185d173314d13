"""`reservation` (a reservation's name, `any`, `none`) is refused where GCE could not honour it,
while the stack is read: a name GCE cannot have, Spot VMs (which never consume reservations),
and TPU stacks, which trainctl cannot put on one yet."""

from __future__ import annotations

import pytest

from infra.spec.cluster import ClusterSpec

GCP = {"name": "r", "provider": "gcp", "project": "my-project", "zone": "us-central1-a",
       "machine_type": "n1-standard-8", "gpu": {"type": "nvidia-tesla-t4", "count": 2},
       "ssh": {"source_ranges": ["203.0.113.7/32"]}}


def refusal(**fields) -> str:
    with pytest.raises(ValueError) as refused:
        ClusterSpec.model_validate({**GCP, **fields})
    return str(refused.value)


@pytest.mark.parametrize("value", ["T4-Block", "t4_block", "-t4", "t4-", "4t", "r" * 64, ""])
def test_a_name_gce_cannot_give_a_reservation_is_refused(value):
    assert f"reservation {value!r} is neither 'any', 'none' nor a reservation's name" in refusal(reservation=value)


@pytest.mark.parametrize("value", ["t4-block", "any", "none", "r" * 63])
def test_names_and_keywords_are_taken(value):
    assert ClusterSpec.model_validate({**GCP, "reservation": value}).reservation == value


@pytest.mark.parametrize("value", ["t4-block", "any"])
def test_spot_vms_on_a_reservation_are_refused(value):
    message = refusal(reservation=value, spot=True)
    assert f"reservation {value!r} with spot: GCE cannot run Spot VMs on reserved capacity" in message
    assert "set spot: false, or reservation: none" in message


def test_spot_vms_may_refuse_reserved_capacity_explicitly():
    assert ClusterSpec.model_validate({**GCP, "reservation": "none", "spot": True}).reservation == "none"


def test_a_spot_pool_under_a_stack_wide_reservation_is_refused_naming_the_pool():
    pools = [{"role": "chief"}, {"role": "worker", "count": 2, "spot": True}]
    assert "pools[worker]: reservation 't4-block' with spot" in refusal(reservation="t4-block", pools=pools)


def test_a_pool_takes_the_stacks_reservation_unless_it_names_its_own():
    pools = [{"role": "chief"}, {"role": "worker", "count": 2, "reservation": "none"}]
    spec = ClusterSpec.model_validate({**GCP, "reservation": "t4-block", "pools": pools})
    assert [view.reservation for _, _, view in spec.groups()] == ["t4-block", "none"]


TPU = {**{k: v for k, v in GCP.items() if k not in ("machine_type", "gpu")}, "zone": "us-west4-a"}


def test_a_tpu_vm_names_a_reservation_only_through_a_queued_resource():
    with pytest.raises(ValueError, match="reservation on a TPU VM is requested through a queued resource.*"
                                         "set tpu.queued: true"):
        ClusterSpec.model_validate({**TPU, "kind": "tpu", "tpu": {"type": "v5litepod-8"}, "reservation": "r"})
    queued = ClusterSpec.model_validate({**TPU, "kind": "tpu", "tpu": {"type": "v5litepod-8", "queued": True},
                                         "reservation": "v5e-block"})
    assert queued.reservation == "v5e-block"


def test_a_gke_tpu_pool_cannot_name_a_reservation_yet():
    with pytest.raises(ValueError, match="GKE TPU pools cannot consume one through trainctl yet"):
        ClusterSpec.model_validate({**TPU, "kind": "gke", "tpu": {"type": "v5litepod-8"}, "reservation": "r"})


def test_a_queued_spot_tpu_on_a_reservation_is_refused():
    with pytest.raises(ValueError, match="reservation 'v5e-block' with spot"):
        ClusterSpec.model_validate({**TPU, "kind": "tpu", "tpu": {"type": "v5litepod-8", "queued": True},
                                    "reservation": "v5e-block", "spot": True})


def test_a_gke_gpu_node_pool_may_name_one():
    gke = {**GCP, "kind": "gke", "machine_type": "g2-standard-8", "gpu": None, "nodes": 2}
    assert ClusterSpec.model_validate({**gke, "reservation": "l4-block"}).reservation == "l4-block"


def test_the_local_stack_has_no_reserved_capacity():
    with pytest.raises(ValueError, match="the local stack has no reserved capacity"):
        ClusterSpec.model_validate({"name": "l", "reservation": "any"})
