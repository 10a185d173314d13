"""Spot recovery on GCP through the real realizer against a simulated project: Google reclaims
spot VMs and TPUs (the simulator's preemption: notice, then STOP or DELETE), `repair` starts a
stopped VM on its disk, deletes a preempted TPU, and lets `pulumi up --refresh` recreate what is
gone; a zone without capacity is an error the launcher waits out, other failures are not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from google.cloud import compute_v1

from infra.errors import CapacityUnavailable, ConfigError
from infra.providers.gcp import realizer
from infra.providers.gcp.program.tpu import tpu_name
from infra.spec.cluster import ClusterSpec
from tests.fakes.sim_stacks import Project, gcp, make_gcp, nat_ip, simulated_gcp  # noqa: F401 (fixtures)


def preempt(project: Project, spec: ClusterSpec, node: str) -> None:
    """Google reclaims a spot VM, no notice left; the stack's VMs are deleted when reclaimed
    (instance_termination_action DELETE, the default)."""
    project.admin("POST", f"zones/{spec.zone}/instances/{node}:preempt", {"grace_seconds": 0})


def test_repair_waits_out_a_stockout_then_restarts_a_stopped_vm_and_recreates_a_preempted_one(
        gcp: Project) -> None:
    # (its scheduled reaper is another test's: tests/integration/providers/gcp/test_gcp_scheduled_reaper.py)
    spec = gcp.stack("gpu-l4-spot", scheduled_reaper=False)
    w0, w1 = (f"{spec.name}-node-{i}" for i in range(2))
    realizer.up(spec, gcp.progress)
    before = {name: gcp.instance(name) for name in (w0, w1)}
    preempt(gcp, spec, w1)
    assert realizer.instance_status(spec.name, [w0, w1]) == {w0: "RUNNING", w1: None}

    # the zone has no capacity for the VM that must be made again: the launcher backs off and retries
    gcp.admin("PUT", "stockouts", [{"zone": spec.zone, "machine_type": spec.machine_type}])
    with pytest.raises(CapacityUnavailable, match="does not have enough resources available") as refused:
        realizer.repair(spec.name, [w1], gcp.progress)
    # a stack of one zone cannot move its cluster elsewhere, and says so
    assert f"may use zone {spec.zone} only (it names no zones: or region:)" in str(refused.value)
    # a quota too small is no reason to wait: only the project's owner can raise it
    gcp.admin("PUT", "stockouts", [])
    gcp.client(compute_v1.InstancesClient).stop(project=gcp.id, zone=spec.zone, instance=w0).result()
    gcp.admin("PATCH", "quotas", {"global": {"GPUS_ALL_REGIONS": 0}})
    with pytest.raises(Exception, match="Quota 'GPUS_ALL_REGIONS' exceeded") as other:
        realizer.repair(spec.name, [w0, w1], gcp.progress)
    assert not isinstance(other.value, CapacityUnavailable)
    assert gcp.instance(w0)["status"] == "TERMINATED" and gcp.instance(w1) is None  # type: ignore[index]

    gcp.admin("PATCH", "quotas", {"global": {"GPUS_ALL_REGIONS": 2}})
    gcp.said.clear()
    repaired = realizer.repair(spec.name, [w0, w1], gcp.progress)
    after = {name: gcp.instance(name) for name in (w0, w1)}
    assert after[w0]["id"] == before[w0]["id"]  # type: ignore[index]  # started again, not recreated
    assert after[w1]["id"] != before[w1]["id"]  # type: ignore[index]  # made again by up --refresh
    assert f"{w0}: starting it again on its disk" in gcp.said
    assert any(line.startswith(f"recreating {w1};") for line in gcp.said)
    assert realizer.instance_status(spec.name, [w0, w1]) == {w0: "RUNNING", w1: "RUNNING"}
    # the recreated VM is the stack's, with the stack's recorded expiry; its address and key pinned anew
    assert after[w1]["labels"] == before[w1]["labels"]  # type: ignore[index]
    assert {n.name: (n.ssh_host, n.host_keys) for n in repaired.nodes} == {
        name: (nat_ip(vm), (gcp.host_key(name),)) for name, vm in after.items() if vm}
    known = Path(repaired.known_hosts).read_text().splitlines()
    assert sorted(known) == sorted(f"{nat_ip(vm)} {gcp.host_key(name)}" for name, vm in after.items() if vm)


def test_a_recreate_refused_in_its_zone_moves_the_whole_cluster_to_the_zone_the_refusal_names(gcp: Project) -> None:
    a, b, c = "us-central1-a", "us-central1-b", "us-central1-c"
    spec = gcp.stack("gpu-l4-spot", scheduled_reaper=False, zones=[a, b, c])
    w0, w1 = (f"{spec.name}-node-{i}" for i in range(2))
    realizer.up(spec, gcp.progress)
    preempt(gcp, spec, w1)
    # the spot capacity is gone from a (and b) once w1 is reclaimed: a's refusal names c
    gcp.admin("PUT", "stockouts", [{"zone": z, "machine_type": spec.machine_type} for z in (a, b)])
    gcp.said.clear()
    repaired = realizer.repair(spec.name, [w1], gcp.progress)

    zones = {name: vm["zone"].rsplit("/", 1)[-1] for name, vm in gcp.instances().items()}
    assert zones == {w0: c, w1: c}  # the whole cluster, the survivor too; nothing left in a
    assert [(p["zone"], p["outcome"], p.get("recovery", False)) for p in repaired.placement] == [
        (a, "up", False), (a, "no capacity", True), (c, "up", True)]  # b not tried
    assert c in repaired.placement[1]["capacity_in"]
    assert any(line.startswith(f"zone {a}: no capacity") and "moving the whole cluster" in line for line in gcp.said)
    moved = realizer.spec(spec.name)
    assert (moved.zone, moved.zones) == (c, (a, b, c))  # down and the next repair find it there
    assert realizer.instance_status(spec.name, [w0, w1]) == {w0: "RUNNING", w1: "RUNNING"}
    assert {n.name: n.host_keys for n in repaired.nodes} == {n: (gcp.host_key(n, c),) for n in (w0, w1)}
    assert realizer.down(spec.name, progress=gcp.progress) is True
    gcp.next_command()
    assert gcp.instances() == {}


def test_a_spot_tpu_slice_comes_up_with_each_workers_key_pinned_and_is_made_again_after_preemption(
        gcp: Project) -> None:
    spec = gcp.stack("tpu-v5e-16", spot=True)
    zone, name = spec.zone or "", tpu_name(spec)
    workers = [f"{name}-w{i}" for i in range(4)]
    inventory = realizer.up(spec, gcp.progress)
    first = gcp.tpu_node(zone, name)
    assert first is not None and pinned(inventory) == published(gcp, first)
    assert len({keys for _, keys in pinned(inventory).values()}) == 4

    gcp.admin("POST", f"locations/{zone}/nodes/{name}:preempt", {"grace_seconds": 0})
    assert realizer.instance_status(spec.name, workers) == dict.fromkeys(workers, "TERMINATED")  # no restart
    repaired = realizer.repair(spec.name, workers, gcp.progress)

    node = gcp.tpu_node(zone, name)
    assert node is not None and node["state"] == "READY"
    assert node["createTime"] > first["createTime"]  # deleted, then made again
    assert any("was reclaimed: deleting it to create it again" in line for line in gcp.said)
    assert pinned(repaired) == published(gcp, node)
    assert realizer.instance_status(spec.name, workers) == dict.fromkeys(workers, "RUNNING")


def pinned(inventory: Any) -> dict[str, tuple[str, tuple[str, ...]]]:
    return {n.name: (n.ssh_host, n.host_keys) for n in inventory.nodes}


def published(project: Project, node: dict[str, Any]) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Each worker's external address and the host keys its guest agent published, in worker order."""
    answer = project.ok("POST", f"/v2/{node['name']}:getGuestAttributes", {"queryPath": "hostkeys/"})
    keys = [tuple(f"{i['key']} {i['value']}" for i in worker["queryValue"]["items"])
            for worker in answer["guestAttributes"]]
    name = node["name"].rsplit("/", 1)[-1]
    return {f"{name}-w{i}": (endpoint["accessConfig"]["externalIp"], keys[i])
            for i, endpoint in enumerate(node["networkEndpoints"])}


def test_gke_stacks_are_repaired_by_their_node_pool(gcp: Project) -> None:
    with pytest.raises(ConfigError, match="node pool replaces preempted nodes"):
        realizer.repair("gke-l4", ["n0"], gcp.progress)
