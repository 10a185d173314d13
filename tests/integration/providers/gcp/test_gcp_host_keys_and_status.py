"""What the GCP realizer reads from Compute and Cloud TPU through the real client classes, against
a simulated project: the host keys guest agents publish (pinned before anyone connects), and each
node's state when the launcher asks whether a spot node was stopped, is running, or is gone."""

from __future__ import annotations

from typing import Any

from cryptography.hazmat.primitives.serialization import load_ssh_public_key
from google.cloud import compute_v1, tpu_v2

from infra.providers.gcp import realizer
from infra.providers.gcp.node_kinds import TpuSlice, VmNodes
from infra.providers.gcp.program.network import region_of
from infra.providers.gcp.program.tpu import tpu_name
from infra.spec.cluster import ClusterSpec
from tests.fakes.sim_compute import instance_body
from tests.fakes.sim_stacks import Project, make_gcp, simulated_gcp  # noqa: F401 (fixtures)

COMPUTE_AND_TPU = ["compute.googleapis.com", "tpu.googleapis.com"]


def vms(project: Project, spec: ClusterSpec, *names: str, spot: bool = False) -> None:
    """VMs as the stack's program makes them, in the stack's own network."""
    assert spec.zone
    project.network(f"{spec.name}-vpc", region_of(spec.zone))
    for name in names:
        project.ok("POST", project.compute(f"zones/{spec.zone}/instances"), instance_body(
            name, zone=spec.zone, subnet=f"{spec.name}-vpc-subnet", spot=spot, project=project.id,
            machine=spec.machine_type or "n1-standard-8"))


def tpu(project: Project, spec: ClusterSpec, *, spot: bool = False) -> str:
    """The stack's TPU node as its program declares it; its full name."""
    assert spec.zone and spec.tpu
    project.network(f"{spec.name}-vpc", region_of(spec.zone))
    network = f"projects/{project.id}/global/networks/{spec.name}-vpc"
    node = tpu_v2.Node(
        accelerator_type=spec.tpu.type, runtime_version=spec.tpu.runtime_version,
        network_config=tpu_v2.NetworkConfig(
            network=network, subnetwork=f"projects/{project.id}/regions/{region_of(spec.zone)}"
                                        f"/subnetworks/{spec.name}-vpc-subnet", enable_external_ips=True),
        scheduling_config=tpu_v2.SchedulingConfig(spot=spot),
        metadata={"enable-guest-attributes": "TRUE"}, labels={"managed-by": "trainctl"})
    parent = f"projects/{project.id}/locations/{spec.zone}"
    project.client(tpu_v2.TpuClient).create_node(parent=parent, node_id=tpu_name(spec), node=node).result(timeout=30)
    return f"{parent}/nodes/{tpu_name(spec)}"


def worker_key(project: Project, node: str, worker: int) -> str:
    """What the TPU API answers for one worker alone (workerIds)."""
    answer = project.ok("POST", f"/v2/{node}:getGuestAttributes", {"queryPath": "hostkeys/",
                                                                   "workerIds": [str(worker)]})
    item = answer["guestAttributes"][0]["queryValue"]["items"][0]
    return f"{item['key']} {item['value']}"


def is_ssh_key(line: str) -> bool:
    load_ssh_public_key(line.encode())
    return line.startswith("ssh-ed25519 ")


def test_each_tpu_workers_host_key_comes_back_under_its_own_name(make_gcp: Any) -> None:
    project = make_gcp(services=COMPUTE_AND_TPU)
    spec = project.stack("tpu-v5e-16", name="keys")
    node = tpu(project, spec)
    found = TpuSlice(spec).host_keys([f"keys-tpu-w{i}" for i in range(4)])
    assert found == {f"keys-tpu-w{i}": [worker_key(project, node, i)] for i in range(4)}
    assert len({keys[0] for keys in found.values()}) == 4 and all(is_ssh_key(k[0]) for k in found.values())


def test_a_tpu_not_created_yet_has_no_host_keys(make_gcp: Any) -> None:
    project = make_gcp(services=COMPUTE_AND_TPU)
    spec = project.stack("tpu-v5e-16")
    assert TpuSlice(spec).host_keys([f"{tpu_name(spec)}-w{i}" for i in range(4)]) == {}


def test_a_vms_host_keys_are_what_its_guest_agent_published(make_gcp: Any) -> None:
    project = make_gcp(services=COMPUTE_AND_TPU)
    spec = project.stack("gpu-t4x2", name="keys")
    vms(project, spec, "keys-node-0")
    keys = VmNodes(spec).instance_host_keys("keys-node-0")
    assert keys == [project.host_key("keys-node-0")] and is_ssh_key(keys[0])


def test_a_vm_still_booting_has_published_no_host_keys_yet(make_gcp: Any) -> None:
    project = make_gcp(services=COMPUTE_AND_TPU, delays={"instance_insert": 60})
    spec = project.stack("gpu-t4x2", name="keys")
    vms(project, spec, "keys-node-0")
    assert project.instance("keys-node-0")["status"] == "PROVISIONING"  # type: ignore[index]
    assert VmNodes(spec).instance_host_keys("keys-node-0") == []


def test_host_keys_are_fetched_for_every_vm_of_the_stack(make_gcp: Any) -> None:
    project = make_gcp(services=COMPUTE_AND_TPU)
    spec = project.stack("gpu-t4x2", name="keys", nodes=2)
    vms(project, spec, "keys-node-0", "keys-node-1")
    found = realizer.fetch_host_keys(spec, [{"name": "keys-node-0"}, {"name": "keys-node-1"}], project.progress)
    assert found == {name: [project.host_key(name)] for name in ("keys-node-0", "keys-node-1")}
    assert found["keys-node-0"] != found["keys-node-1"]


def test_instance_status_tells_a_stopped_vm_from_a_running_and_a_deleted_one(make_gcp: Any) -> None:
    """What the launcher asks when a spot node stops answering: stopped, running or gone."""
    project = make_gcp(services=COMPUTE_AND_TPU)
    spec = project.stack("gpu-l4-spot")
    nodes = [f"{spec.name}-node-{i}" for i in range(3)]
    vms(project, spec, *nodes, spot=True)
    instances = project.client(compute_v1.InstancesClient)
    instances.stop(project=project.id, zone=spec.zone, instance=nodes[0]).result()
    instances.delete(project=project.id, zone=spec.zone, instance=nodes[2]).result()
    assert realizer.instance_status(spec.name, nodes) == {nodes[0]: "TERMINATED", nodes[1]: "RUNNING",
                                                          nodes[2]: None}


def test_a_preempted_tpu_slice_reads_as_terminated_on_every_worker_and_a_deleted_one_as_gone(
        make_gcp: Any) -> None:
    project = make_gcp(services=COMPUTE_AND_TPU)
    spec = project.stack("tpu-v5e-16", spot=True)
    node = tpu(project, spec, spot=True)
    workers = [f"{tpu_name(spec)}-w{i}" for i in range(4)]
    assert realizer.instance_status(spec.name, workers) == dict.fromkeys(workers, "RUNNING")
    project.admin("POST", f"locations/{spec.zone}/nodes/{tpu_name(spec)}:preempt", {"grace_seconds": 0})
    assert project.tpu_node(spec.zone, tpu_name(spec))["state"] == "PREEMPTED"  # type: ignore[index]
    assert realizer.instance_status(spec.name, workers) == dict.fromkeys(workers, "TERMINATED")
    project.client(tpu_v2.TpuClient).delete_node(name=node).result(timeout=30)
    assert realizer.instance_status(spec.name, workers) == dict.fromkeys(workers, None)
