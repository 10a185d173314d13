"""A GPU VM stack can run on a reservation: `up` puts its VMs on the one it names (the
simulated Compute API counts them in the reservation's inUseCount), and `plan` refuses, before
anything exists, a reservation in another zone, one for other machines, or one too small."""

from __future__ import annotations

import pytest

from infra.errors import ConfigError
from infra.providers.gcp import realizer
from tests.fakes.sim_stacks import Project, make_gcp, simulated_gcp  # noqa: F401 (fixtures)

ZONE = "us-central1-a"  # the zone of stacks/Pulumi.gpu-t4x2.yaml


@pytest.fixture
def gcp(make_gcp) -> Project:  # noqa: F811
    """A project whose owner uses Compute already: the API is on, as it is wherever one holds a reservation."""
    return make_gcp(services=["compute.googleapis.com"])


def reserve(project: Project, name: str, *, zone: str = ZONE, count: int = 1,
            machine_type: str = "n1-standard-8", gpus: int = 2) -> None:
    """A specific reservation, made as a user makes one (Compute's reservations.insert)."""
    from google.cloud import compute_v1

    props = compute_v1.AllocationSpecificSKUAllocationReservedInstanceProperties(
        machine_type=machine_type, guest_accelerators=[compute_v1.AcceleratorConfig(
            accelerator_type="nvidia-tesla-t4", accelerator_count=gpus)])
    project.client(compute_v1.ReservationsClient).insert(
        project=project.id, zone=zone, reservation_resource=compute_v1.Reservation(
            name=name, specific_reservation_required=True,
            specific_reservation=compute_v1.AllocationSpecificSKUReservation(
                count=count, instance_properties=props))).result()


def in_use(project: Project, name: str, zone: str = ZONE) -> int:
    body = project.ok("GET", project.compute(f"zones/{zone}/reservations/{name}"))
    return int(body["specificReservation"]["inUseCount"])


def test_up_on_a_named_reservation_runs_the_vm_on_it(gcp: Project) -> None:
    reserve(gcp, "t4-block", count=2)
    spec = gcp.stack("gpu-t4x2", reservation="t4-block")
    realizer.up(spec, gcp.progress)
    vm = gcp.instance("gpu-t4x2-node-0")
    assert vm is not None
    assert vm["reservationAffinity"] == {"consumeReservationType": "SPECIFIC_RESERVATION",
                                         "key": "compute.googleapis.com/reservation-name", "values": ["t4-block"]}
    assert in_use(gcp, "t4-block") == 1
    assert "reservation t4-block: room for the stack's 1 VM(s)" in gcp.said
    assert realizer.down(spec.name, progress=gcp.progress) is True
    gcp.next_command()
    assert in_use(gcp, "t4-block") == 0


def test_plan_shows_the_reservation_of_each_vm(gcp: Project) -> None:
    reserve(gcp, "t4-block")
    rows = realizer.plan(gcp.stack("gpu-t4x2", reservation="t4-block"))
    vms = [r for r in rows if r.kind == "compute/instance"]
    assert [r.values.get("reservation") for r in vms] == ["t4-block"]
    none = [r for r in realizer.plan(gcp.stack("gpu-t4x2", reservation="none")) if r.kind == "compute/instance"]
    assert [r.values.get("reservation") for r in none] == ["none"]


def test_plan_refuses_a_reservation_in_another_zone_naming_its_zone(gcp: Project) -> None:
    reserve(gcp, "t4-block", zone="us-central1-b")
    with pytest.raises(ConfigError) as refused:
        realizer.plan(gcp.stack("gpu-t4x2", reservation="t4-block"))
    message = str(refused.value)
    assert "reservation 't4-block'" in message
    assert "it is in zone us-central1-b, not in the stack's zone us-central1-a" in message
    assert gcp.instances() == {}


def test_plan_refuses_a_reservation_without_room_for_the_nodes(gcp: Project) -> None:
    reserve(gcp, "t4-block", count=1)
    with pytest.raises(ConfigError) as refused:
        realizer.plan(gcp.stack("gpu-t4x2", reservation="t4-block", nodes=2))
    assert "reservation 't4-block': it has room for 1 more VM(s) (count 1, 0 in use) and the stack needs 2" \
        in str(refused.value)


def test_plan_refuses_a_reservation_for_other_machines(gcp: Project) -> None:
    reserve(gcp, "t4-block", gpus=1)
    with pytest.raises(ConfigError) as refused:
        realizer.plan(gcp.stack("gpu-t4x2", reservation="t4-block"))
    assert ("it reserves n1-standard-8 with 1 x nvidia-tesla-t4, and the stack gpu-t4x2's VMs are n1-standard-8 "
            "with 2 x nvidia-tesla-t4") in str(refused.value)


def test_plan_refuses_a_reservation_the_project_does_not_have(gcp: Project) -> None:
    with pytest.raises(ConfigError) as refused:
        realizer.plan(gcp.stack("gpu-t4x2", reservation="missing"))
    assert f"project {gcp.id} has no reservation 'missing' in any zone" in str(refused.value)


def test_plan_in_a_project_without_compute_says_so_instead_of_a_traceback(make_gcp) -> None:  # noqa: F811
    project = make_gcp(template="fresh")
    with pytest.raises(ConfigError) as refused:
        realizer.plan(project.stack("gpu-t4x2", reservation="t4-block"))
    assert f"project {project.id} has the Compute Engine API off, so it holds no reservation 't4-block'" \
        in str(refused.value)


@pytest.mark.parametrize("keyword, sent, consumed", [("any", "ANY_RESERVATION", 1), ("none", "NO_RESERVATION", 0)])
def test_any_runs_on_a_matching_reservation_the_project_file_declares_and_none_leaves_it(
        make_gcp, keyword: str, sent: str, consumed: int) -> None:  # noqa: F811
    project = make_gcp(services=["compute.googleapis.com"], reservations=[
        {"name": "t4-pool", "zone": ZONE, "machine_type": "n1-standard-8", "count": 1,
         "gpu": {"type": "nvidia-tesla-t4", "count": 2}}])
    realizer.up(project.stack("gpu-t4x2", reservation=keyword), project.progress)
    vm = project.instance("gpu-t4x2-node-0")
    assert vm is not None and vm["reservationAffinity"] == {"consumeReservationType": sent}
    assert in_use(project, "t4-pool") == consumed


def test_a_gke_node_pool_on_a_named_reservation_runs_its_nodes_on_it(gcp: Project) -> None:
    from google.cloud import compute_v1

    gcp.client(compute_v1.ReservationsClient).insert(
        project=gcp.id, zone=ZONE, reservation_resource=compute_v1.Reservation(
            name="l4-block", specific_reservation_required=True,
            specific_reservation=compute_v1.AllocationSpecificSKUReservation(
                count=2, instance_properties=compute_v1.AllocationSpecificSKUAllocationReservedInstanceProperties(
                    machine_type="g2-standard-8")))).result()
    spec = gcp.stack("gke-l4", reservation="l4-block")
    pools = [r for r in realizer.plan(spec) if r.kind == "container/nodePool"]
    assert [r.values.get("reservation") for r in pools] == ["l4-block"]
    realizer.up(spec, gcp.progress)
    nodes = [vm for vm in gcp.instances().values() if "goog-gke-node" in (vm.get("labels") or {})]
    assert len(nodes) == 2
    assert all(vm["reservationAffinity"]["values"] == ["l4-block"] for vm in nodes)
    assert in_use(gcp, "l4-block") == 2


def test_plan_names_the_pool_whose_machines_a_stack_wide_reservation_does_not_hold(gcp: Project) -> None:
    reserve(gcp, "t4-block", machine_type="n1-standard-8", gpus=1, count=8)
    with pytest.raises(ConfigError) as refused:
        realizer.plan(gcp.stack("tf-ps-pools", reservation="t4-block"))
    message = str(refused.value)
    assert "the ps pool's VMs are" in message and "the chief pool's VMs" not in message
