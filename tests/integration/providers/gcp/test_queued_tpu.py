"""A queued TPU (tpu.queued) in a simulated project: `up` gives up at the stack's deadline and
deletes its request (the grant itself, with SSH and bootstrap, is tests/e2e/test_queued_tpu_on_the_simulator.py)."""

from __future__ import annotations

from typing import Any

import pytest
from google.cloud import tpu_v2

from infra.errors import CapacityUnavailable
from infra.providers.capacity_wait import CapacityWait
from infra.providers.gcp import queued_tpu, quota_needs, reaper, realizer
from infra.providers.gcp.program.network import region_of
from infra.providers.gcp.program.tpu import queued_request
from infra.providers.stack_home import state_dir
from infra.spec.cluster import ClusterSpec
from tests.fakes.sim_stacks import Project, make_gcp, simulated_gcp  # noqa: F401 (fixtures)

STACK = "tpu-v5e-8-queued"


def queued_resources(project: Project) -> list[str]:
    client = project.client(tpu_v2.TpuClient)
    return [qr.name for qr in client.list_queued_resources(parent=f"projects/{project.id}/locations/-")]


def stocked_out_request(make_gcp, deadline_minutes: float) -> tuple[Project, ClusterSpec, dict[str, Any]]:
    """A project whose TPU zone is stocked out, the stack's network in it, and the request the
    program would output for the queued TPU stack."""
    project = make_gcp(stockouts=[{"zone": "us-west4-a"}], services=["compute.googleapis.com", "tpu.googleapis.com"])
    spec = project.stack(STACK, tpu={"type": "v5litepod-8", "queued": True, "queue_deadline_minutes": deadline_minutes})
    assert spec.zone is not None
    project.network(f"{spec.name}-vpc", region_of(spec.zone))
    body = queued_request(spec, network=f"projects/{project.id}/global/networks/{spec.name}-vpc",
                          subnet=f"projects/{project.id}/regions/{region_of(spec.zone)}/subnetworks/{spec.name}-vpc-subnet",
                          tag="t", metadata={}, labels={"managed-by": "trainctl"},
                          service_account=f"sa@{project.id}.iam.gserviceaccount.com")
    return project, spec, {"queued_tpu": body, "inventory": {"nodes": []}}


def test_a_queued_tpu_not_granted_by_the_deadline_is_refused_and_its_request_deleted(make_gcp) -> None:
    project, spec, outputs = stocked_out_request(make_gcp, 0.02)
    with pytest.raises(CapacityUnavailable) as refused:
        queued_tpu.granted(spec, outputs, project.progress)
    # trainctl's deadline, or Google's (the request's validUntilDuration), whichever comes first
    assert "within tpu.queue_deadline_minutes (0.02)" in str(refused.value)
    assert f"`trainctl down --stack {spec.name}`" in str(refused.value)
    assert any("WAITING_FOR_RESOURCES, waited 0m00s of 0m01s" in line for line in project.said)
    # the time it waited is told as a wait for capacity (the run's ledger keeps it, at no cost)
    (waited,) = [line for line in project.said if isinstance(line, CapacityWait)]
    assert "not granted after waiting" in waited and waited.nodes == ()
    assert waited.seconds > 0.5  # of its 1.2 s deadline
    assert queued_resources(project) == [] and not (state_dir(spec.name) / queued_tpu.RECORD).exists()


def test_plan_shows_the_queued_tpu_with_its_tier_and_deadline_and_reads_no_compute_reservation(make_gcp) -> None:
    """A TPU reservation is the TPU service's: plan does not look for it among Compute's (where
    the project has none by that name, which would refuse the stack)."""
    project = make_gcp()
    spec = project.stack(STACK, spot=False, reservation="v5e-block")
    rows = [r for r in realizer.plan(spec) if r.kind.startswith("tpu/")]
    assert [(r.kind, r.name, r.values["tier"], r.values["deadline"]) for r in rows] == [
        ("tpu/queuedResource", f"{spec.name}-tpu", "reservation v5e-block", "90 min")]
    (pool,) = quota_needs.per_pool(spec)
    assert pool.provisioning == "queued, reservation v5e-block"  # plan's capacity table


def test_an_up_stopped_while_queued_leaves_a_recorded_request_that_the_next_up_waits_on(make_gcp) -> None:
    project, spec, outputs = stocked_out_request(make_gcp, 5)
    client = project.client(tpu_v2.TpuClient)
    name = queued_tpu._create(client, spec, outputs["queued_tpu"], project.progress)  # then Ctrl-C
    assert (state_dir(spec.name) / queued_tpu.RECORD).exists() and queued_resources(project) == [name]
    project.admin("PUT", "stockouts", [])
    granted = queued_tpu.granted(spec, outputs, project.progress)
    assert any("already requested, waiting for it" in line for line in project.said)
    assert any(isinstance(line, CapacityWait) and "granted after waiting" in line for line in project.said)
    assert [n["name"] for n in granted["inventory"]["nodes"]] == [f"{spec.name}-tpu-w0"]
    queued_tpu.release(spec.name, project.progress)
    assert queued_resources(project) == [] and not (state_dir(spec.name) / queued_tpu.RECORD).exists()


def test_the_reaper_deletes_an_expired_queued_tpu_by_the_labels_its_node_carries(make_gcp) -> None:
    project, spec, outputs = stocked_out_request(make_gcp, 5)
    node = outputs["queued_tpu"]["tpu"]["nodeSpec"][0]["node"]
    node["labels"] = {"managed-by": "trainctl", "trainctl-stack": spec.name, "trainctl-expires": "1"}
    name = queued_tpu._create(project.client(tpu_v2.TpuClient), spec, outputs["queued_tpu"], project.progress)
    expired = reaper.find_expired(project.id)
    assert [(item.kind, item.name) for item in expired] == [("queued-tpu", name)]
    reaper.delete(project.id, expired, project.progress)
    assert queued_resources(project) == []
