"""A flex-start stack (`provisioning: flex-start`) on the simulated project: its VMs are inserted
with GCE's FLEX_START scheduling, wait in PENDING (the Instance status GCE documents for a
flex-start VM waiting for Dynamic Workload Scheduler capacity) while `up` shows their state and
the time waited, and run once granted; a zone without capacity past the stack's deadline makes
`up` give up and remove everything it made."""

from __future__ import annotations

from typing import Any

import pytest

from infra.providers.capacity_wait import CapacityWait
from infra.providers.gcp import realizer
from infra.providers.gcp.flex_start import FlexStartNotGranted
from infra.providers.stack_home import state_dir
from tests.fakes.sim_stacks import Project, make_gcp, simulated_gcp  # noqa: F401 (fixtures)

FLEX: dict[str, Any] = {"spot": False, "provisioning": "flex-start", "ttl_hours": 6, "nodes": 1}


def test_up_awaits_the_flex_start_grant_showing_the_wait_after_the_provider_failed_at_once_on_pending(
        make_gcp) -> None:  # noqa: F811
    # One lifecycle, asserting what two tests of the same stack and project each brought up.
    gcp: Project = make_gcp(delays={"flex_start_grant": 4.0})
    spec = gcp.stack("gpu-l4-spot", **FLEX)
    inventory = realizer.up(spec, gcp.progress)
    vm = gcp.instance("gpu-l4-spot-node-0")
    assert vm is not None and vm["status"] == "RUNNING"
    assert vm["scheduling"]["provisioningModel"] == "FLEX_START"
    assert vm["scheduling"]["instanceTerminationAction"] == "DELETE"
    assert vm["scheduling"]["automaticRestart"] is False
    assert int(vm["scheduling"]["maxRunDuration"]["seconds"]) == 6 * 3600  # the stack's TTL
    assert vm["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}  # flex-start reserves nothing
    waits = [line for line in gcp.said if line.startswith("flex-start: gpu-l4-spot-node-0 PENDING")]
    assert waits and "waited 0m" in waits[0] and "of 60m" in waits[0]
    (pending,) = [line for line in gcp.said if isinstance(line, CapacityWait)]  # kept by a run for its ledger
    assert "in PENDING for GCE's grant" in pending and 2.0 <= pending.seconds <= 8.0  # the 4 s grant, 2 s polls
    # The insert operation is done while the VM is PENDING: the provider's wait for RUNNING knows
    # no PENDING and fails at once, keeping the VM; trainctl waits itself, then `pulumi up` again.
    assert any("unexpected state 'PENDING', wanted target 'RUNNING'" in line for line in gcp.said)
    assert any("trainctl waits for the grant" in line for line in gcp.said)
    (node,) = inventory.nodes  # read again by the second `up`: the address GCE gave it
    assert node.internal_ip == vm["networkInterfaces"][0]["networkIP"]
    assert realizer.down(spec.name, progress=gcp.progress) is True
    gcp.next_command()
    assert gcp.instances() == {}


def test_no_grant_before_the_deadline_gives_up_and_leaves_nothing(make_gcp) -> None:  # noqa: F811
    gcp: Project = make_gcp(stockouts=[{"zone": "us-central1-a", "machine_type": "g2-standard-8"}])
    spec = gcp.stack("gpu-l4-spot", **FLEX, flex_start_deadline_minutes=0.05)  # 3 s
    with pytest.raises(FlexStartNotGranted, match="granted no flex-start capacity for gpu-l4-spot-node-0 .* within "
                                                  r"flex_start_deadline_minutes 0.05 \(trainctl's wait\)"):
        realizer.up(spec, gcp.progress)
    # the deadline is said as what it is: trainctl's wait (GCE is not told it)
    assert any(line.startswith("flex-start: GCE's Dynamic Workload Scheduler") and "trainctl waits at most 0.05m" in line
               for line in gcp.said)
    gcp.next_command()
    assert gcp.instances() == {}
    assert any("no grant within trainctl's 0.05m wait; removing what the stack made" in line for line in gcp.said)
    assert gcp.names("networks") == set() and gcp.names("firewalls") == set()
    assert not state_dir(spec.name).exists()


def test_a_vm_the_provider_dropped_from_the_state_is_found_by_its_labels_and_deleted(make_gcp) -> None:  # noqa: F811
    # The insert operation outlasts the create timeout (the deadline, 3 s): the provider's wait for
    # it fails and drops the VM from the state (resource_compute_instance.go, d.SetId("")), while
    # GCE holds it PENDING, to be granted (and billed) later. Giving up must still delete it.
    gcp: Project = make_gcp(delays={"instance_insert": 30.0},
                            stockouts=[{"zone": "us-central1-a", "machine_type": "g2-standard-8"}])
    spec = gcp.stack("gpu-l4-spot", **FLEX, flex_start_deadline_minutes=0.05)
    with pytest.raises(FlexStartNotGranted, match="granted no flex-start capacity for gpu-l4-spot-node-0"):
        realizer.up(spec, gcp.progress)
    assert any("timeout while waiting for state to become 'DONE'" in line for line in gcp.said)
    gcp.next_command()
    assert gcp.instances() == {}  # nothing left queued for a grant, nothing billed
    assert gcp.names("networks") == set() and gcp.names("subnetworks", "us-central1") == set()
    assert not state_dir(spec.name).exists()  # `down` has nothing left to find
