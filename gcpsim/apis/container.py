"""GKE v1 clusters: create, get, list, delete, update, setResourceLabels.

https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters
A cluster is PROVISIONING until its create operation is done, then RUNNING; RECONCILING while
an update runs; STOPPING from its delete until it is gone. Without `nodePools` GKE makes a
`default-pool` of `initialNodeCount` nodes (the provider then deletes it when
remove_default_node_pool is set). Its endpoint and masterAuth.clusterCaCertificate (a real
self-signed CA, base64 PEM, as GKE gives) are set at create.

GKE's checks, with their words: the name (at most 40 characters: "Cluster.name must be less than
40 characters.", https://github.com/cloudnative-pg/cloudnative-pg/issues/8714; else the regex
message, https://github.com/otrack/cloud-computing-infrastructures/pull/17); a second cluster of
the same name ("Already exists: <path>.", https://github.com/cilium/cilium/issues/25918); the
node pools' rules (container_pools.py); one operation at a time (container_ops.py). The
Workload Identity pool is the project's own, `<project>.svc.id.goog` (GKE's docs: "only one fixed
workload identity pool per Google Cloud project ... automatically created for you",
https://cloud.google.com/kubernetes-engine/docs/how-to/workload-identity#limitations); the pool
exists from the first cluster that enables it, and stays (a deleted cluster does not remove it).
Chosen: another pool is refused with GKE's `Invalid value for field "<field>": "<value>".` form
(no source quoted GKE's explanation); the Kubernetes version is a fixed string of GKE's form; the
zonal `projects.zones.clusters` paths are not simulated (the provider and trainctl use
`projects.locations`). The endpoint is a loopback address of the cluster's own where its
Kubernetes API answers (kubernetes/control_planes.py) from its creation to its deletion.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import TYPE_CHECKING, Any

from gcpsim import discovery, operations, routes
from gcpsim.apis import container_nodes, container_ops, container_pools
from gcpsim.apis.compute_common import fingerprint
from gcpsim.errors import ApiError, invalid_argument
from gcpsim.kubernetes import control_planes
from gcpsim.routes import Call, handles
from gcpsim.state import World

if TYPE_CHECKING:
    from gcpsim.server import Simulator

GKE_VERSION = "1.33.5-gke.1308000"
INTERNAL = ("operation", "pools", "_kube")


def _parts(path: str) -> tuple[str, str]:
    """(location, cluster name) of projects/<p>/locations/<l>/clusters/<c>[/...]."""
    parts = path.split("/")
    return parts[3], parts[5]


def _network(project_id: str, given: dict[str, Any], location: str) -> dict[str, str]:
    region = location if location.count("-") == 1 else location.rsplit("-", 1)[0]
    network = given.get("network") or given.get("networkConfig", {}).get("network") or "default"
    subnetwork = given.get("subnetwork") or given.get("networkConfig", {}).get("subnetwork") or network.rsplit("/", 1)[-1]
    if "/" not in network:
        network = f"projects/{project_id}/global/networks/{network}"
    if "/" not in subnetwork:
        subnetwork = f"projects/{project_id}/regions/{region}/subnetworks/{subnetwork}"
    return {"network": network, "subnetwork": subnetwork}


def _check_workload_pool(project_id: str, config: dict[str, Any] | None, field: str) -> None:
    pool = (config or {}).get("workloadPool")
    if pool and pool != f"{project_id}.svc.id.goog":
        raise invalid_argument(f'Invalid value for field "{field}": "{pool}".')


def _new_cluster(call: Call, location: str, given: dict[str, Any]) -> dict[str, Any]:
    project_id, name = call.project_id, given["name"]
    path = container_ops.cluster_path(project_id, location, name)
    kind = "zones" if location.count("-") == 2 else "locations"
    at = operations.rfc3339(call.now)
    network = _network(project_id, given, location)
    labels = given.get("resourceLabels") or {}
    seq = call.world.next_id()
    cluster_id = hashlib.sha256(f"{path}/{seq}".encode()).hexdigest()
    ca, ca_key = control_planes.ca_certificate(str(uuid.uuid4()))
    address, port = control_planes.allocate_endpoint(call.world, call.sim.home, cluster_id)
    kube = {"address": address, "port": port, "ca_key": ca_key}
    skip = ("nodePools", "initialNodeCount", "nodeConfig", "network", "subnetwork", "networkConfig")
    return {**{k: v for k, v in given.items() if k not in skip},
            "name": name, "location": location, "zone": location,
            "selfLink": f"{container_ops.BASE}projects/{project_id}/{kind}/{location}/clusters/{name}",
            "id": cluster_id, "_kube": kube,
            "network": network["network"].rsplit("/", 1)[-1], "subnetwork": network["subnetwork"].rsplit("/", 1)[-1],
            "networkConfig": {**given.get("networkConfig", {}), **network},
            "releaseChannel": given.get("releaseChannel") or {"channel": "REGULAR"},
            "resourceLabels": labels, "labelFingerprint": fingerprint(labels),
            "loggingService": given.get("loggingService") or "logging.googleapis.com/kubernetes",
            "monitoringService": given.get("monitoringService") or "monitoring.googleapis.com/kubernetes",
            "ipAllocationPolicy": given.get("ipAllocationPolicy") or {"useIpAliases": True},
            "masterAuth": {**given.get("masterAuth", {}), "clusterCaCertificate": ca},
            "endpoint": control_planes.endpoint_of(kube), "initialClusterVersion": GKE_VERSION,
            "currentMasterVersion": GKE_VERSION, "currentNodeVersion": GKE_VERSION, "createTime": at,
            "status": "PROVISIONING", "pools": {}}


def render(world: World, cluster: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in cluster.items() if k not in INTERNAL}
    pools = [container_pools.render(cluster, p) for p in cluster["pools"].values()]
    if pools:
        out["nodePools"] = pools
        # the Cluster reference: "For responses, this field will be populated with the node
        # configuration of the first node pool."
        out["nodeConfig"] = pools[0]["config"]
        out["locations"] = sorted({z for p in cluster["pools"].values() for z in container_nodes.zones_of(cluster, p)})
        out["currentNodeCount"] = sum(len(p.get("nodes", [])) for p in cluster["pools"].values())
    return out


@handles("container.projects.locations.clusters.create")
def create(call: Call) -> Any:
    given = dict((call.body or {}).get("cluster") or {})
    location = call.params["parent"].split("/")[3]
    project_id = call.project_id
    container_ops.check_name(given.get("name") or "", "cluster.name", "Cluster")
    _check_workload_pool(project_id, given.get("workloadIdentityConfig"), "cluster.workload_identity_config.workload_pool")
    clusters = call.world.collection(project_id, container_ops.CLUSTERS)
    if f"{location}/{given['name']}" in clusters:
        raise ApiError(409, f"Already exists: {container_ops.cluster_path(project_id, location, given['name'])}.")
    cluster = _new_cluster(call, location, given)
    pools = given.get("nodePools") or [{"name": "default-pool", "config": given.get("nodeConfig") or {},
                                        "initialNodeCount": given.get("initialNodeCount") or 3}]
    made = [container_pools.new_pool(call, cluster, p) for p in pools]  # checked before anything is made
    clusters[f"{location}/{given['name']}"] = cluster
    failure = None
    for pool in made:
        cluster["pools"][pool["name"]] = pool
        failure = failure or container_pools.make_nodes(call.world, project_id, cluster, pool, call.now)
    container_nodes.serve(call.sim, cluster)
    path = container_ops.cluster_path(project_id, location, given["name"])
    return container_ops.start(call, cluster, "CREATE_CLUSTER", path, kind="cluster_create",
                               then="container.cluster.created", args={"key": f"{location}/{given['name']}",
                                                                       "failure": failure})


@operations.completion("container.cluster.created")
def _created(world: World, op: dict[str, Any], _at: float) -> None:
    cluster = world.collection(op["project"], container_ops.CLUSTERS).get(op["args"]["key"])
    if cluster is None:
        return
    failure = op["args"]["failure"]
    cluster["status"] = "ERROR" if failure else "RUNNING"
    for pool in cluster["pools"].values():
        pool["status"] = "ERROR" if failure else "RUNNING"
    if cluster.get("workloadIdentityConfig", {}).get("workloadPool"):
        project = world.project(op["project"])
        assert project is not None
        project["workload_identity_pool"] = True
    if failure:
        raise ApiError(failure["code"], failure["message"], status=failure["status"])


@handles("container.projects.locations.clusters.get")
def get(call: Call) -> Any:
    location, name = _parts(call.params["name"])
    cluster = container_ops.find_cluster(call.world, call.project_id, location, name)
    container_nodes.serve(call.sim, cluster)
    return render(call.world, cluster)


@handles("container.projects.locations.clusters.list")
def list_(call: Call) -> Any:
    location = call.params["parent"].split("/")[3]
    clusters = call.world.collection(call.project_id, container_ops.CLUSTERS)
    found = [render(call.world, c) for key, c in sorted(clusters.items()) if location in ("-", c["location"])]
    return {"clusters": found} if found else {}


@handles("container.projects.locations.clusters.delete")
def delete(call: Call) -> Any:
    location, name = _parts(call.params["name"])
    cluster = container_ops.find_cluster(call.world, call.project_id, location, name)
    cluster["status"] = "STOPPING"
    control_planes.release(call.sim, call.world, cluster)
    for pool in cluster["pools"].values():
        pool["status"] = "STOPPING"
        container_nodes.delete_nodes(call.world, call.project_id, pool, call.now)
    return container_ops.start(call, cluster, "DELETE_CLUSTER", call.params["name"], kind="cluster_delete",
                               then="container.cluster.deleted", args={"key": f"{location}/{name}"})


@operations.completion("container.cluster.deleted")
def _deleted(world: World, op: dict[str, Any], _at: float) -> None:
    world.collection(op["project"], container_ops.CLUSTERS).pop(op["args"]["key"], None)


def _apply_update(project_id: str, cluster: dict[str, Any], update: dict[str, Any]) -> None:
    """Each `desired<Field>` becomes the cluster's <field> where the Cluster schema has it."""
    fields = discovery.api("container.v1").schema("Cluster")["properties"]
    if "desiredWorkloadIdentityConfig" in update:
        _check_workload_pool(project_id, update["desiredWorkloadIdentityConfig"],
                             "update.desired_workload_identity_config.workload_pool")
    for key, value in update.items():
        field = key[len("desired"):][:1].lower() + key[len("desired") + 1:] if key.startswith("desired") else ""
        if field == "masterVersion":
            cluster["currentMasterVersion"] = value
        elif field == "addonsConfig":
            cluster["addonsConfig"] = {**cluster.get("addonsConfig", {}), **value}
        elif field in fields:
            cluster[field] = value


@handles("container.projects.locations.clusters.update")
def update(call: Call) -> Any:
    location, name = _parts(call.params["name"])
    cluster = container_ops.find_cluster(call.world, call.project_id, location, name)
    container_ops.busy(call.world, cluster)
    _apply_update(call.project_id, cluster, (call.body or {}).get("update") or {})
    cluster["status"] = "RECONCILING"
    return container_ops.start(call, cluster, "UPDATE_CLUSTER", call.params["name"], kind="cluster_update",
                               then="container.cluster.settled", args={"key": f"{location}/{name}"})


@operations.completion("container.cluster.settled")
def _settled(world: World, op: dict[str, Any], _at: float) -> None:
    cluster = world.collection(op["project"], container_ops.CLUSTERS).get(op["args"]["key"])
    if cluster is not None and cluster["status"] == "RECONCILING":
        cluster["status"] = "RUNNING"
    if cluster is not None and op["args"].get("relabel"):
        container_nodes.relabel(world, op["project"], cluster)


@handles("container.projects.locations.clusters.setResourceLabels")
def set_resource_labels(call: Call) -> Any:
    location, name = _parts(call.params["name"])
    cluster = container_ops.find_cluster(call.world, call.project_id, location, name)
    container_ops.busy(call.world, cluster)
    cluster["resourceLabels"] = dict((call.body or {}).get("resourceLabels") or {})
    cluster["labelFingerprint"] = fingerprint(cluster["resourceLabels"])
    return container_ops.start(call, cluster, "SET_LABELS", call.params["name"], kind="cluster_update",
                               then="container.cluster.settled",
                               args={"key": f"{location}/{name}", "relabel": True})


def serve_all(sim: Simulator) -> None:
    """Every live cluster of the world served, none that is gone (a simulator starting over a
    world that has clusters)."""
    with sim.store.transaction() as world:
        clusters = [(c, container_nodes.node_names(c)) for project in world.data["projects"].values()
                    for c in project.get("collections", {}).get(container_ops.CLUSTERS, {}).values()]
        control_planes.sync(sim, world, clusters)


routes.STARTS.append(serve_all)
