"""The pack's consumption rules over hand-written resources: an A3 Ultra or A4 VM on demand, a
RESERVATION_BOUND VM that names no reservation, a flex-start VM left on GCE's default reservation
affinity (ANY)."""

from __future__ import annotations

from typing import Any

import pytest

from policy.declared import T_INSTANCE, Resource
from policy.rules import RULES_BY_NAME

BOUND = {"provisioningModel": "RESERVATION_BOUND", "automaticRestart": True, "onHostMaintenance": "TERMINATE"}
NAMED = {"type": "SPECIFIC_RESERVATION", "specificReservation": {
    "key": "compute.googleapis.com/reservation-name", "values": ["h200-block"]}}


def fired(rule: str, **props: Any) -> list[str]:
    resource = Resource(T_INSTANCE, "vm", {"name": "vm-0", "machineType": "a3-ultragpu-8g", **props})
    return [str(v) for v in RULES_BY_NAME[rule].run([resource])]


@pytest.mark.parametrize("machine", ["a3-ultragpu-8g", "a4-highgpu-8g"])
def test_an_a3_ultra_or_a4_vm_on_demand_fires(machine):
    (v,) = fired("provisioning-model-offered", machineType=machine,
                 scheduling={"provisioningModel": "STANDARD", "onHostMaintenance": "TERMINATE"})
    assert f"is {machine}, which GCE offers SPOT, FLEX_START, RESERVATION_BOUND only" in v
    assert "provisioningModel is STANDARD" in v
    assert fired("provisioning-model-offered", machineType=machine, scheduling={})  # STANDARD by default


def test_spot_flex_start_and_a_named_reservation_pass_and_other_machines_run_on_demand():
    assert not fired("provisioning-model-offered", scheduling={"provisioningModel": "SPOT", "preemptible": True})
    assert not fired("provisioning-model-offered", scheduling={"provisioningModel": "FLEX_START"})
    assert not fired("provisioning-model-offered", scheduling=BOUND, reservationAffinity=NAMED)
    assert not fired("provisioning-model-offered", machineType="a3-megagpu-8g", scheduling={"provisioningModel": "STANDARD"})


def test_a_reservation_bound_vm_without_its_reservation_fires():
    (v,) = fired("provisioning-model-offered", scheduling=BOUND)
    assert "reservation-bound VM 'vm-0' has reservation affinity unset (ANY_RESERVATION)" in v


def test_a_flex_start_vm_on_the_default_affinity_fires_and_on_no_reservation_passes():
    (v,) = fired("flex-start-no-reservation", scheduling={"provisioningModel": "FLEX_START"})
    assert "flex-start VM 'vm-0' has reservation affinity unset (ANY_RESERVATION)" in v and "NO_RESERVATION" in v
    assert len(fired("flex-start-no-reservation", scheduling={"provisioningModel": "FLEX_START"},
                     reservationAffinity=NAMED)) == 1
    assert not fired("flex-start-no-reservation", scheduling={"provisioningModel": "FLEX_START"},
                     reservationAffinity={"type": "NO_RESERVATION"})
    assert not fired("flex-start-no-reservation", scheduling={"provisioningModel": "SPOT"})
