"""How a stack's VMs get capacity, checked while the stack is read against the provisioning models
GCE offers their machine series (infra/spec/consumption.py): A3 Ultra and A4 VMs only
reservation-bound, flex-start or spot; flex-start VMs on no reservation; and no compact placement
policy for VMs consuming a plain reservation."""

from __future__ import annotations

import pytest

from infra.spec.cluster import ClusterSpec

GCP = {"name": "c", "provider": "gcp", "project": "my-project", "zone": "us-central1-b", "nodes": 2,
       "machine_type": "a3-ultragpu-8g", "ssh": {"source_ranges": ["203.0.113.7/32"]}}


MEGA = {"machine_type": "a3-megagpu-8g", "zone": "us-central1-a"}


def spec(**fields) -> ClusterSpec:
    return ClusterSpec.model_validate({**GCP, **fields})


def refusal(**fields) -> str:
    with pytest.raises(ValueError) as refused:
        spec(**fields)
    return str(refused.value)


@pytest.mark.parametrize("machine", ["a3-ultragpu-8g", "a4-highgpu-8g"])
def test_an_a3_ultra_or_a4_stack_on_demand_is_refused_naming_the_three_ways_to_get_them(machine):
    message = refusal(machine_type=machine)
    assert f"machine_type {machine} is not offered on demand" in message
    assert "reservation-bound, flex-start, spot only" in message
    for way in ("provisioning: reservation-bound with reservation: <its name>", "provisioning: flex-start",
                "spot: true"):
        assert way in message


def test_a_pool_of_a4_on_demand_is_refused_by_its_role():
    message = refusal(nodes=None, machine_type="a4-highgpu-8g",
                      pools=[{"role": "chief", "spot": True}, {"role": "worker", "count": 2, "spot": False}])
    assert message.startswith("1 validation error") and "pools[worker]: machine_type a4-highgpu-8g" in message


@pytest.mark.parametrize("fields", [{"spot": True}, {"provisioning": "flex-start"},
                                    {"provisioning": "reservation-bound", "reservation": "h200-block"}])
def test_a3_ultra_is_taken_spot_flex_start_or_reservation_bound(fields):
    assert spec(**fields).machine_type == "a3-ultragpu-8g"


def test_other_machines_still_run_on_demand_and_are_not_reservation_bound():
    assert spec(**MEGA).provisioning == "standard"
    message = refusal(**MEGA, provisioning="reservation-bound", reservation="h100-block")
    assert "machine_type a3-megagpu-8g is not offered reservation-bound" in message


def test_reservation_bound_needs_a_named_reservation_and_no_spot():
    assert "binds each VM to the reservation it names, and reservation is unset" in refusal(
        provisioning="reservation-bound")
    assert "reservation is any" in refusal(provisioning="reservation-bound", reservation="any")
    assert "provisioning 'reservation-bound' with spot" in refusal(provisioning="reservation-bound", spot=True)
    assert "applies to GPU VMs (kind vm)" in refusal(kind="gke", provisioning="reservation-bound", reservation="r")


@pytest.mark.parametrize("reservation", ["h200-block", "any"])
def test_flex_start_with_a_reservation_is_refused(reservation):
    message = refusal(provisioning="flex-start", reservation=reservation)
    assert f"provisioning 'flex-start' with reservation {reservation!r}" in message
    assert "consume no reservation" in message and "remove reservation" in message


def test_flex_start_with_reservation_none_is_taken():
    assert spec(provisioning="flex-start", reservation="none").flex_start


def test_vms_on_a_plain_reservation_get_no_compact_placement_by_default():
    assert spec(**MEGA).placement == "compact"
    assert spec(**MEGA, reservation="h100-block").placement == "none"


def test_compact_placement_on_a_plain_reservation_is_refused():
    message = refusal(**MEGA, reservation="h100-block", placement="compact")
    assert "placement: compact with reservation 'h100-block'" in message and "set placement: none" in message


def test_reservation_bound_vms_keep_their_compact_placement():
    assert spec(provisioning="reservation-bound", reservation="h200-block").placement == "compact"
