"""The reaper through the real Compute, TPU and GKE client classes against a simulated project that
holds every kind of resource trainctl makes, expired and not, and some that are not trainctl's."""

from __future__ import annotations

import time
from typing import Any

from google.cloud import compute_v1, container_v1, tpu_v2

from infra.providers.gcp import reaper
from tests.fakes.sim_compute import instance_body
from tests.fakes.sim_stacks import Project, make_gcp, simulated_gcp  # noqa: F401 (fixtures)

NOW = int(time.time())
ZONE, REGION, TPU_ZONE, TPU_REGION = "us-central1-a", "us-central1", "us-west4-a", "us-west4"
SERVICES = ["compute.googleapis.com", "tpu.googleapis.com", "container.googleapis.com", "iam.googleapis.com"]


def labels(expires: int, stack: str = "s1") -> dict[str, str]:
    return {"managed-by": "trainctl", "trainctl-expires": str(expires), "trainctl-stack": stack}


def vm(project: Project, name: str, vm_labels: dict[str, str]) -> None:
    project.ok("POST", project.compute(f"zones/{ZONE}/instances"),
               instance_body(name, subnet="vpc-subnet", labels=vm_labels, project=project.id))


def tpu_node(project: Project, node_labels: dict[str, str] | None) -> tpu_v2.Node:
    return tpu_v2.Node(
        accelerator_type="v5litepod-8", runtime_version="v2-alpha-tpuv5-lite",
        network_config=tpu_v2.NetworkConfig(network=f"projects/{project.id}/global/networks/vpc",
                                            subnetwork=f"projects/{project.id}/regions/{TPU_REGION}/subnetworks/tpu-subnet"),
        labels=node_labels)


def tpu(project: Project, node_id: str, node_labels: dict[str, str]) -> None:
    project.client(tpu_v2.TpuClient).create_node(
        parent=f"projects/{project.id}/locations/{TPU_ZONE}", node_id=node_id,
        node=tpu_node(project, node_labels)).result(timeout=30)


def queued(project: Project, qr_id: str, node_id: str, node_labels: dict[str, str] | None) -> None:
    parent = f"projects/{project.id}/locations/{TPU_ZONE}"
    request = tpu_v2.QueuedResource(tpu=tpu_v2.QueuedResource.Tpu(node_spec=[tpu_v2.QueuedResource.Tpu.NodeSpec(
        parent=parent, node_id=node_id, node=tpu_node(project, node_labels))]))
    project.client(tpu_v2.TpuClient).create_queued_resource(
        parent=parent, queued_resource_id=qr_id, queued_resource=request).result(timeout=30)


def cluster(project: Project, name: str, cluster_labels: dict[str, str]) -> None:
    project.client(container_v1.ClusterManagerClient).create_cluster(
        parent=f"projects/{project.id}/locations/{REGION}", cluster=container_v1.Cluster(
            name=name, network=f"projects/{project.id}/global/networks/vpc",
            subnetwork=f"projects/{project.id}/regions/{REGION}/subnetworks/vpc-subnet",
            resource_labels=cluster_labels, node_pools=[container_v1.NodePool(
                name="pool", initial_node_count=1, config=container_v1.NodeConfig(machine_type="e2-standard-2"))]))


def networked(make_gcp: Any) -> Project:
    """A project with Compute, TPU and GKE on and a network reaching the VM and the TPU region."""
    project = make_gcp(services=SERVICES)
    project.network("vpc", REGION)
    project.client(compute_v1.SubnetworksClient).insert(
        project=project.id, region=TPU_REGION, subnetwork_resource=compute_v1.Subnetwork(
            name="tpu-subnet", network=f"projects/{project.id}/global/networks/vpc",
            ip_cidr_range="10.164.0.0/20")).result()
    return project


def a_project_with_everything(make_gcp: Any) -> Project:
    """VMs, TPU nodes, queued TPUs and GKE clusters: expired, not yet, and someone else's."""
    project = networked(make_gcp)
    vm(project, "old-w0", labels(NOW - 60))
    vm(project, "fresh-w0", labels(NOW + 3600))
    vm(project, "someone-elses", {"team": "x"})
    tpu(project, "old-tpu", labels(NOW - 10))
    tpu(project, "fresh-tpu", labels(NOW + 3600))
    queued(project, "old-qr", "old-q", labels(NOW - 5, "q"))
    queued(project, "unlabelled", "u", None)
    cluster(project, "old-gke", labels(NOW - 1, "g"))
    cluster(project, "fresh-gke", labels(NOW + 3600, "g2"))
    return project


def tpus(project: Project) -> tuple[set[str], set[str]]:
    client = project.client(tpu_v2.TpuClient)
    parent = f"projects/{project.id}/locations/-"
    return ({n.name.rsplit("/", 1)[-1] for n in client.list_nodes(parent=parent)},
            {q.name.rsplit("/", 1)[-1] for q in client.list_queued_resources(parent=parent)})


def clusters(project: Project) -> set[str]:
    listed = project.client(container_v1.ClusterManagerClient).list_clusters(
        parent=f"projects/{project.id}/locations/-")
    return {c.name for c in listed.clusters}


def not_gke_nodes(project: Project) -> set[str]:
    return {name for name, vm_ in project.instances().items() if "goog-gke-node" not in vm_.get("labels", {})}


def test_finds_every_kind_of_expired_resource_and_nothing_else(make_gcp: Any) -> None:
    project = a_project_with_everything(make_gcp)
    p = project.id
    found = sorted((e.kind, e.name, e.zone, e.stack, e.expired_for_s) for e in reaper.find_expired(p, now=NOW))
    assert found == sorted([
        ("instance", "old-w0", ZONE, "s1", 60),
        ("tpu", f"projects/{p}/locations/{TPU_ZONE}/nodes/old-tpu", TPU_ZONE, "s1", 10),
        ("queued-tpu", f"projects/{p}/locations/{TPU_ZONE}/queuedResources/old-qr", TPU_ZONE, "q", 5),
        ("gke", f"projects/{p}/locations/{REGION}/clusters/old-gke", REGION, "g", 1),
    ])  # what an expired queued resource or cluster made carries its labels too: it goes with its
    # maker (the granted TPU node with its queued resource, node VMs with their cluster), not one by one


def test_deletes_what_it_found_and_leaves_the_rest(make_gcp: Any) -> None:
    project = a_project_with_everything(make_gcp)
    reaper.delete(project.id, reaper.find_expired(project.id, now=NOW), project.progress)
    assert not_gke_nodes(project) == {"fresh-w0", "someone-elses"}
    # the granted queued TPU is ACTIVE: deleting it takes force, which deletes its node too
    assert tpus(project) == ({"fresh-tpu", "u"}, {"unlabelled"})
    assert clusters(project) == {"fresh-gke"}
    assert not [vm_ for vm_ in project.instances().values() if vm_["labels"].get("goog-k8s-cluster-name") == "old-gke"]
    assert project.said and all(line.startswith("deleted ") for line in project.said)


def test_nothing_expired_deletes_nothing(make_gcp: Any) -> None:
    project = make_gcp(services=SERVICES)
    project.network("vpc", REGION)
    vm(project, "fresh-w0", labels(NOW + 3600))
    before = project.operations()
    assert reaper.find_expired(project.id, now=NOW) == []
    reaper.delete(project.id, [], project.progress)
    assert project.operations() == before and project.said == []
