"""A queued spot TPU's life in a simulated project (API only: no machines; in the e2e tier for
its cost, two `pulumi up`s and a `destroy` each, not for root): taken back by Google, its queued
resource is SUSPENDED and never granted again, so `repair` deletes the request with its
preempted TPU and queues a new one, whose workers' host keys are pinned anew; a stack made by
`pulumi up` alone gets its queued TPU from the first trainctl command that adopts it."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.cloud import tpu_v2

from infra.providers import realizers
from namespace_nodes import keys
from infra.providers.gcp import realizer
from infra.providers.gcp.program.tpu import tpu_name
from tests.fakes.sim_stacks import Project, gcp, make_gcp, simulated_gcp  # noqa: F401 (fixtures)
from tests.integration.providers.gcp.test_gcp_adoption import pulumi_up_by_hand
from tests.integration.providers.gcp.test_gcp_spot_repair import pinned, published

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
    assert_down_leaves_no_request(gcp, spec)


def assert_down_leaves_no_request(project: Project, spec) -> None:
    assert realizers.for_stack(spec.name).down(spec.name, force=False, progress=project.progress) is True
    project.next_command()
    parent = f"projects/{project.id}/locations/-"
    assert list(project.client(tpu_v2.TpuClient).list_queued_resources(parent=parent)) == []
    assert project.tpu_node(spec.zone or "", tpu_name(spec)) is None


def test_a_queued_tpu_stack_made_by_pulumi_up_gets_its_tpu_from_the_first_trainctl_command(
        gcp: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "user"))  # the program puts ~/.ssh/id_ed25519.pub on the nodes
    private = tmp_path / "user" / ".ssh" / "id_ed25519"
    keys.write_ed25519_keypair(private, "user@laptop")
    spec = gcp.stack(STACK)
    pulumi_up_by_hand(gcp, spec.name)
    assert gcp.tpu_node(spec.zone or "", tpu_name(spec)) is None  # pulumi up made all but the TPU

    inventory = realizers.inventory(spec.name)  # bootstrap, launch, status all start here
    node = gcp.tpu_node(spec.zone or "", tpu_name(spec))
    assert node is not None and queue_state(gcp, spec) == "ACTIVE"
    assert keys.read_public_key(private).split()[1] in node["metadata"]["ssh-keys"]
    assert pinned(inventory) == published(gcp, node) and inventory.ssh_private_key == str(private)
    assert_down_leaves_no_request(gcp, spec)
