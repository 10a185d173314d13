"""TPU multislice (tpu.slices) on TPU VMs: one queued resource asks for every slice (the v2 API's
multisliceParams), each granted node carries the stack's key, tags, labels and account, and the
inventory knows each worker's slice."""

from __future__ import annotations

from typing import Any

import pytest
from google.cloud import tpu_v2

from infra.providers.gcp import queued_tpu, quota_needs, realizer
from infra.providers.gcp.program.network import region_of
from infra.providers.gcp.program.tpu import gcloud_command, queued_request
from infra.spec.cluster import ClusterSpec
from infra.spec.cost import estimate
from infra.spec.stack_config import load_stack
from tests.fakes.sim_stacks import Project, make_gcp, simulated_gcp  # noqa: F401 (fixtures)

STACK = "tpu-v5e-2x16"
LABELS = {"managed-by": "trainctl", "trainctl-stack": "tpu-v5e-2x16"}


def request(spec: ClusterSpec, project: str = "my-project") -> dict[str, Any]:
    assert spec.zone is not None
    return queued_request(spec, network=f"projects/{project}/global/networks/{spec.name}-vpc",
                          subnet=f"projects/{project}/regions/{region_of(spec.zone)}/subnetworks/{spec.name}-vpc-subnet",
                          tag="tpu-v5e-2x16-node", metadata={"ssh-keys": "trainctl:ssh-ed25519 AAAA"},
                          labels=LABELS, service_account=f"sa@{project}.iam.gserviceaccount.com")


def test_the_request_asks_for_every_slice_through_multislice_params_with_the_stacks_node():
    spec = load_stack(STACK)
    (asked,) = request(spec)["tpu"]["nodeSpec"]
    assert asked["multisliceParams"] == {"nodeCount": 2, "nodeIdPrefix": f"{spec.name}-tpu"}
    assert "nodeId" not in asked  # one of the two names a nodeSpec (a oneof)
    node = asked["node"]
    assert (node["acceleratorType"], node["tags"], node["labels"]) == ("v5litepod-16", ["tpu-v5e-2x16-node"], LABELS)
    assert node["metadata"]["ssh-keys"].startswith("trainctl:") and node["serviceAccount"]["email"].startswith("sa@")
    # the same TPU message google-cloud-tpu sends (field names as its v2 types spell them)
    parsed = tpu_v2.QueuedResource.Tpu.NodeSpec(multislice_params={"node_count": 2, "node_id_prefix": "p"})
    assert parsed.multislice_params.node_count == 2
    command = gcloud_command(spec, request(spec))
    assert f"--node-count=2 --node-prefix={spec.name}-tpu" in command and "--node-id" not in command


def test_plan_shows_the_request_and_both_slices(make_gcp) -> None:
    make_gcp()
    spec = load_stack(STACK)
    rows = sorted((r.kind, r.name, r.values.get("slice")) for r in realizer.plan(spec) if r.kind.startswith("tpu/"))
    assert rows == sorted([("tpu/queuedResource", f"{spec.name}-tpu", None),
                    ("tpu/node", f"{spec.name}-tpu-0", 0), ("tpu/node", f"{spec.name}-tpu-1", 1)])


def test_the_simulator_grants_both_slices_and_the_inventory_knows_each_workers_slice(make_gcp) -> None:
    project: Project = make_gcp(services=["compute.googleapis.com", "tpu.googleapis.com"])
    spec = project.stack(STACK)
    assert spec.zone is not None
    project.network(f"{spec.name}-vpc", region_of(spec.zone))
    outputs = {"queued_tpu": request(spec, project.id), "inventory": {"nodes": []}}
    try:
        granted = queued_tpu.granted(spec, outputs, project.progress)
        nodes = granted["inventory"]["nodes"]
        assert [(n["name"], n["rank"], n["tpu_slice"], n["tpu_name"]) for n in nodes] == [
            (f"{spec.name}-tpu-{s}-w{w}", 4 * s + w, s, f"{spec.name}-tpu-{s}") for s in range(2) for w in range(4)]
        client = project.client(tpu_v2.TpuClient)
        for s in range(2):
            node = client.get_node(name=f"projects/{project.id}/locations/{spec.zone}/nodes/{spec.name}-tpu-{s}")
            assert node.state.name == "READY" and dict(node.labels) == LABELS and list(node.tags) == [
                "tpu-v5e-2x16-node"]
            assert node.queued_resource.endswith(f"/queuedResources/{spec.name}-tpu")
    finally:
        queued_tpu.release(spec.name, project.progress)
    assert not list(project.client(tpu_v2.TpuClient).list_nodes(
        parent=f"projects/{project.id}/locations/{spec.zone}"))


@pytest.mark.parametrize("count", [1, 0])
def test_the_simulator_refuses_a_multislice_request_of_fewer_than_two_nodes(make_gcp, count: int) -> None:
    from google.api_core.exceptions import BadRequest

    project: Project = make_gcp(services=["compute.googleapis.com", "tpu.googleapis.com"])
    spec = project.stack(STACK)
    body = request(spec, project.id)
    body["tpu"]["nodeSpec"][0]["multisliceParams"]["nodeCount"] = count
    with pytest.raises(BadRequest, match="node_count needs to be > 1"):
        queued_tpu._create(project.client(tpu_v2.TpuClient), spec, body, project.progress)
    queued_tpu.release(spec.name, project.progress)


def test_a_multislice_stack_is_priced_and_quota_checked_for_every_slice():
    one, two = load_stack("tpu-v5e-16"), load_stack(STACK)
    assert estimate(two).lines[0][0].startswith("2 x v5litepod-16")
    assert estimate(two).lines[0][1] == 2 * estimate(one).lines[0][1]
    (need_one,), (need_two,) = quota_needs.per_pool(one)[0].needs, quota_needs.per_pool(two)[0].needs
    assert need_two.amount == 2 * need_one.amount and need_two.metric == need_one.metric
