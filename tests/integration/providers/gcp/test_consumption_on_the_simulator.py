"""How the stack's VMs get capacity, driven through `up` on the simulated project (whose Compute API
holds its own facts: simulator/facts/provisioning_models.py, reservation_policies.py): an A3 Ultra
stack on its reservation runs RESERVATION_BOUND on it; flex-start VMs ask for NO_RESERVATION; VMs on
a plain reservation come up without the compact placement policy such a reservation refuses."""

from __future__ import annotations

from typing import Any

import pytest

from infra.errors import ConfigError
from infra.providers.gcp import realizer
from infra.providers.gcp.program.mocks import evaluate
from tests.fakes.sim_stacks import Project, make_gcp, simulated_gcp  # noqa: F401 (fixtures)


def reserve(project: Project, zone: str, name: str, machine: str, **extra: Any) -> None:
    """A specific reservation of `machine`, as a user makes one (reservations.insert)."""
    project.ok("POST", project.compute(f"zones/{zone}/reservations"), {
        "name": name, "specificReservationRequired": True,
        "specificReservation": {"count": 2, "instanceProperties": {"machineType": machine}}, **extra})


def in_use(project: Project, zone: str, name: str) -> int:
    return int(project.ok("GET", project.compute(f"zones/{zone}/reservations/{name}"))["specificReservation"]["inUseCount"])


def test_an_a3_ultra_stack_on_its_reservation_runs_reservation_bound_on_it(make_gcp) -> None:  # noqa: F811
    gcp: Project = make_gcp(services=["compute.googleapis.com"])
    zone = "us-central1-b"
    reserve(gcp, zone, "h200-block", "a3-ultragpu-8g", deploymentType="DENSE")  # AI Hypercomputer's are dense
    spec = gcp.stack("gpu-a3ultra-x2", spot=False, provisioning="reservation-bound", reservation="h200-block")
    assert spec.placement == "compact"  # a dense reservation takes the stack's placement policy
    realizer.up(spec, gcp.progress)
    for i in range(2):
        vm = gcp.instance(f"gpu-a3ultra-x2-node-{i}", zone=zone)
        assert vm is not None and vm["scheduling"]["provisioningModel"] == "RESERVATION_BOUND"
        assert vm["reservationAffinity"]["values"] == ["h200-block"]
        assert [p.rsplit("/", 1)[-1] for p in vm["resourcePolicies"]] == ["gpu-a3ultra-x2-placement"]
    assert in_use(gcp, zone, "h200-block") == 2
    assert realizer.down(spec.name, progress=gcp.progress) is True


def test_a_compactly_placed_stack_on_a_plain_reservation_is_refused_before_anything_is_made(make_gcp) -> None:  # noqa: F811
    gcp: Project = make_gcp(services=["compute.googleapis.com"])
    reserve(gcp, "us-central1-b", "h200-plain", "a3-ultragpu-8g")
    spec = gcp.stack("gpu-a3ultra-x2", spot=False, provisioning="reservation-bound", reservation="h200-plain")
    with pytest.raises(ConfigError) as refused:
        realizer.up(spec, gcp.progress)
    assert "reservation 'h200-plain': it is a plain reservation (not deploymentType DENSE" in str(refused.value)
    assert "set placement: none" in str(refused.value)
    assert gcp.instances() == {} and gcp.names("networks") == set()


def test_vms_on_a_plain_reservation_come_up_without_a_placement_policy(make_gcp) -> None:  # noqa: F811
    gcp: Project = make_gcp(services=["compute.googleapis.com"])
    zone = "us-central1-a"
    reserve(gcp, zone, "h100-block", "a3-megagpu-8g")
    spec = gcp.stack("gpu-a3mega-x2", reservation="h100-block")
    realizer.up(spec, gcp.progress)
    for i in range(2):
        vm = gcp.instance(f"gpu-a3mega-x2-node-{i}", zone=zone)
        assert vm is not None and vm["resourcePolicies"] == []
    assert in_use(gcp, zone, "h100-block") == 2
    assert gcp.names("resourcePolicies", region="us-central1") == set()
    assert realizer.down(spec.name, progress=gcp.progress) is True


def test_flex_start_vms_ask_for_no_reservation(make_gcp) -> None:  # noqa: F811
    # The VM this stack runs asks GCE for NO_RESERVATION too: asserted on the flex-start lifecycle
    # of the same stack (test_flex_start_on_the_simulator.py), which brings it up anyway.
    gcp: Project = make_gcp()
    spec = gcp.stack("gpu-l4-spot", spot=False, provisioning="flex-start", ttl_hours=6, nodes=1)
    (vm,) = evaluate(spec).of_type("compute/instance:Instance")
    assert vm.inputs["reservationAffinity"] == {"type": "NO_RESERVATION"}
