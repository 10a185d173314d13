"""Cloud TPU queued resources in the simulator: a request that waits for capacity, then grants
its node; deleted only with force while the node exists."""

from __future__ import annotations

import pytest
from google.api_core import exceptions
from google.cloud import tpu_v2

from tests.fakes.sim_compute import PROJECT, TPU_REGION, TPU_ZONE, ComputeSim, make_csim  # noqa: F401
from tests.unit.providers.simulator.test_sim_tpu_nodes import PARENT, node_spec

QR = f"{PARENT}/queuedResources/qr"


def request(sim: ComputeSim, **policy) -> tpu_v2.QueuedResource:
    queued = tpu_v2.QueuedResource(
        tpu=tpu_v2.QueuedResource.Tpu(node_spec=[tpu_v2.QueuedResource.Tpu.NodeSpec(
            parent=PARENT, node_id="granted", node=node_spec(spot=True))]),
        spot=tpu_v2.QueuedResource.Spot(),
        queueing_policy=tpu_v2.QueuedResource.QueueingPolicy(**policy) if policy else None)
    return sim.client(tpu_v2.TpuClient).create_queued_resource(
        parent=PARENT, queued_resource_id="qr", queued_resource=queued).result(timeout=10)


def state(sim: ComputeSim) -> str:
    return sim.client(tpu_v2.TpuClient).get_queued_resource(name=QR).state.state.name


def test_a_queued_resource_goes_accepted_waiting_provisioning_active_and_grants_its_node(make_csim):
    sim = make_csim(delays={"tpu_qr_accept": 10, "tpu_qr_provision": 10})
    sim.network(region=TPU_REGION)
    assert request(sim).state.state == tpu_v2.QueuedResourceState.State.ACCEPTED
    sim.advance(11)
    assert state(sim) == "PROVISIONING"  # WAITING_FOR_RESOURCES, and capacity was there
    with pytest.raises(exceptions.NotFound):
        sim.client(tpu_v2.TpuClient).get_node(name=f"{PARENT}/nodes/granted")
    sim.advance(22)
    assert state(sim) == "ACTIVE"
    node = sim.client(tpu_v2.TpuClient).get_node(name=f"{PARENT}/nodes/granted")
    assert node.state == tpu_v2.Node.State.READY and node.queued_resource == QR
    assert len(sim.backend.called("boot")) == 4


def test_a_queued_resource_waits_while_the_zone_is_stocked_out(make_csim):
    sim = make_csim(stockouts=[{"zone": TPU_ZONE, "accelerator": "v5litepod-16"}])
    sim.network(region=TPU_REGION)
    request(sim)
    sim.advance(60)
    assert state(sim) == "WAITING_FOR_RESOURCES"
    assert sim.backend.called("boot") == []
    sim.admin("PUT", "stockouts", [])
    sim.advance(61)
    assert state(sim) == "ACTIVE"


def test_a_queued_resource_past_its_valid_until_fails(make_csim):
    sim = make_csim(stockouts=[{"zone": TPU_ZONE}])
    sim.network(region=TPU_REGION)
    from google.protobuf import duration_pb2

    request(sim, valid_until_duration=duration_pb2.Duration(seconds=30))
    sim.advance(31)
    assert state(sim) == "FAILED"
    failed = sim.client(tpu_v2.TpuClient).get_queued_resource(name=QR).state.failed_data
    assert "validUntil" in failed.error.message


def test_deleting_an_active_queued_resource_needs_force_which_deletes_its_node(make_csim):
    sim = make_csim()
    sim.network(region=TPU_REGION)
    request(sim)
    sim.advance(1)
    assert state(sim) == "ACTIVE"
    client = sim.client(tpu_v2.TpuClient)
    with pytest.raises(exceptions.BadRequest) as caught:
        client.delete_queued_resource(name=QR).result(timeout=10)
    assert "force" in caught.value.message
    client.delete_queued_resource(request=tpu_v2.DeleteQueuedResourceRequest(name=QR, force=True)).result(timeout=10)
    assert list(client.list_queued_resources(parent=f"projects/{PROJECT}/locations/-")) == []
    assert list(client.list_nodes(parent=f"projects/{PROJECT}/locations/-")) == []
    assert len(sim.backend.called("delete")) == 4


def test_the_reaper_finds_a_queued_resource_by_its_nodes_labels(make_csim):
    """reaper.py reads qr.tpu.node_spec[].node.labels: they must come back as sent."""
    sim = make_csim()
    sim.network(region=TPU_REGION)
    request(sim)
    listed = list(sim.client(tpu_v2.TpuClient).list_queued_resources(parent=f"projects/{PROJECT}/locations/-"))
    assert [dict(s.node.labels) for s in listed[0].tpu.node_spec] == [{"managed-by": "trainctl"}]


def test_a_queued_resource_waits_for_resources_as_long_as_the_project_file_says(make_csim):
    sim = make_csim(delays={"tpu_qr_accept": 1, "tpu_qr_grant": 30, "tpu_qr_provision": 1})
    sim.network(region=TPU_REGION)
    request(sim)
    sim.advance(29)
    assert state(sim) == "WAITING_FOR_RESOURCES"
    sim.advance(40)  # from now, not from the last advance
    assert state(sim) == "PROVISIONING"
    sim.advance(42)
    assert state(sim) == "ACTIVE"


def reserved_request(sim: ComputeSim, **tier) -> None:
    queued = tpu_v2.QueuedResource(
        tpu=tpu_v2.QueuedResource.Tpu(node_spec=[tpu_v2.QueuedResource.Tpu.NodeSpec(
            parent=PARENT, node_id="granted", node=node_spec())]), **tier)
    sim.client(tpu_v2.TpuClient).create_queued_resource(
        parent=PARENT, queued_resource_id="qr", queued_resource=queued).result(timeout=10)


def test_a_queued_resource_on_a_reservation_is_granted_through_a_stockout(make_csim):
    sim = make_csim(stockouts=[{"zone": TPU_ZONE}])
    sim.network(region=TPU_REGION)
    reserved_request(sim, reservation_name=f"projects/{PROJECT}/locations/{TPU_ZONE}/reservations/v5e-block")
    sim.advance(1)
    assert state(sim) == "ACTIVE"


def test_a_granted_spot_node_that_is_preempted_suspends_its_queued_resource_which_deletes_without_force(make_csim):
    csim = make_csim()
    csim.network(region=TPU_REGION)
    request(csim)
    csim.advance(1)
    status, _ = csim.http("POST", f"/trainctl-sim/v1/{PARENT}/nodes/granted:preempt", {"grace_seconds": 0})
    assert status == 200
    csim.advance(1)
    assert state(csim) == "SUSPENDED"
    client = csim.client(tpu_v2.TpuClient)
    client.delete_queued_resource(name=QR).result(timeout=10)
    assert list(client.list_queued_resources(parent=f"projects/{PROJECT}/locations/-")) == []
    assert list(client.list_nodes(parent=f"projects/{PROJECT}/locations/-")) == []


def test_a_request_whose_node_alone_asks_for_spot_waits_out_a_spot_stockout(make_csim):
    sim = make_csim(stockouts=[{"zone": TPU_ZONE, "spot": True}])
    sim.network(region=TPU_REGION)
    queued = tpu_v2.QueuedResource(tpu=tpu_v2.QueuedResource.Tpu(node_spec=[tpu_v2.QueuedResource.Tpu.NodeSpec(
        parent=PARENT, node_id="granted", node=node_spec(spot=True))]))
    sim.client(tpu_v2.TpuClient).create_queued_resource(
        parent=PARENT, queued_resource_id="qr", queued_resource=queued).result(timeout=10)
    sim.advance(60)
    assert state(sim) == "WAITING_FOR_RESOURCES"
