"""A queued spot TPU taken back by Google, in a simulated project (API only: no machines): its
queued resource is SUSPENDED and never granted again, so `repair` deletes the request with its
preempted TPU and queues a new one, whose granted workers' host keys are pinned anew. In the
e2e tier for its cost (two `pulumi up`s and a `destroy`), not for root."""

from __future__ import annotations

from google.cloud import tpu_v2

from infra.providers.gcp import realizer
from infra.providers.gcp.program.tpu import tpu_name
from tests.fakes.sim_stacks import Project, gcp, make_gcp, simulated_gcp  # noqa: F401 (fixtures)
from tests.unit.providers.gcp.test_gcp_spot_repair import pinned, published

STACK = "tpu-v5e-8-queued"


def queue_state(project: Project, spec) -> str:
    name = f"projects/{project.id}/locations/{spec.zone}/queuedResources/{tpu_name(spec)}"
    return project.client(tpu_v2.TpuClient).get_queued_resource(name=name).state.state.name


def test_a_preempted_queued_tpu_is_queued_again_by_repair_and_down_leaves_no_request(gcp: Project) -> None:
    spec = gcp.stack(STACK)
    zone, name = spec.zone or "", tpu_name(spec)
    workers = [f"{name}-w0"]
    realizer.up(spec, gcp.progress)
    first = gcp.tpu_node(zone, name)
    assert first is not None and queue_state(gcp, spec) == "ACTIVE"

    gcp.admin("POST", f"locations/{zone}/nodes/{name}:preempt", {"grace_seconds": 0})
    assert realizer.instance_status(spec.name, workers) == {workers[0]: "TERMINATED"}
    assert queue_state(gcp, spec) == "SUSPENDED"
    repaired = realizer.repair(spec.name, workers, gcp.progress)

    node = gcp.tpu_node(zone, name)
    assert node is not None and node["state"] == "READY" and node["createTime"] > first["createTime"]
    assert queue_state(gcp, spec) == "ACTIVE"
    assert pinned(repaired) == published(gcp, node)
    assert realizer.down(spec.name, progress=gcp.progress) is True
    gcp.next_command()
    parent = f"projects/{gcp.id}/locations/-"
    assert list(gcp.client(tpu_v2.TpuClient).list_queued_resources(parent=parent)) == []
    assert gcp.tpu_node(zone, name) is None
