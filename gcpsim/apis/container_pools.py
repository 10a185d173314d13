"""GKE v1 node pools: create, get, list, delete, update, setManagement, setSize.

https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters.nodePools
A pool is PROVISIONING until its operation is done, then RUNNING; its nodes are Compute
instances (container_nodes.py), made when the pool is asked for; a node Compute cannot make
(quota, stockout, a subnetwork that does not exist) fails the pool's operation with Compute's
message after "Google Compute Engine: ", as GKE reports it
(https://github.com/AI-Hypercomputer/xpk/issues/751).

GKE's checks, with their words:
  - names as clusters' (container.check_name), "Node_pool.name must be less than 40 characters."
    (https://github.com/AI-Hypercomputer/xpk/pull/681) or the regex message for node_pool.name
    (https://github.com/pulumi/pulumi-gcp/issues/1510);
  - on a cluster with a release channel, auto-upgrade cannot be off: "Auto_upgrade cannot be false
    when release_channel REGULAR is set." (https://github.com/nkoson/gke-tutorial/issues/8), and
    with auto-repair off too "Auto_upgrade and auto_repair cannot be false when release_channel
    REGULAR is set." (https://github.com/kaiwaehner/hivemq-mqtt-tensorflow-kafka-realtime-iot-
    machine-learning-training-inference/issues/47);
  - TPU slices: a single-host slice pool takes no topology ("TPU topology can't be specified with
    single-host TPU slice pool; ...", https://github.com/AI-Hypercomputer/xpk/pull/825); a
    multi-host slice's node count is its host count (chips of the topology / chips per VM of the
    machine type);
  - flex-start pools' preconditions and additional node networks by name (facts/gke_node_pools.py). Chosen: that refusal reads as GKE's for the maximum node count ("Maximum node
    count 0 is not a valid size of TPU pod slice with topology 2x2x2",
    https://github.com/vllm-project/ci-infra/pull/545) with "Node count" for the field.
"""

from __future__ import annotations

import math
from typing import Any

from gcpsim import operations
from gcpsim.apis import container_nodes, container_ops
from gcpsim.errors import ApiError, invalid_argument
from gcpsim.facts import gke_node_pools
from gcpsim.facts.tpus import TPUS
from gcpsim.routes import Call, handles
from gcpsim.state import World

INTERNAL = ("nodes",)
CHIPS_PER_VM = {t.gke_machine_type: t.chips_per_host for t in TPUS.values()}
SINGLE_HOST_TOPOLOGY = ("TPU topology can't be specified with single-host TPU slice pool; please remove the "
                        "tpu_topology from the node pool creation request if the node pool is intented to run "
                        "with single-host TPU slice nodes.")


def _check_management(cluster: dict[str, Any], management: dict[str, Any]) -> None:
    channel = (cluster.get("releaseChannel") or {}).get("channel", "UNSPECIFIED")
    if channel in ("UNSPECIFIED", "RELEASE_CHANNEL_UNSPECIFIED", None):
        return
    upgrade, repair = management["autoUpgrade"], management["autoRepair"]
    if upgrade is False and repair is False:
        raise invalid_argument(f"Auto_upgrade and auto_repair cannot be false when release_channel {channel} is set.")
    if upgrade is False:
        raise invalid_argument(f"Auto_upgrade cannot be false when release_channel {channel} is set.")


def _check_tpu(pool: dict[str, Any]) -> None:
    chips_per_vm = CHIPS_PER_VM.get(pool["config"].get("machineType", ""))
    topology = (pool.get("placementPolicy") or {}).get("tpuTopology")
    if chips_per_vm is None or not topology:
        return
    chips = math.prod(int(d) for d in topology.split("x"))
    hosts = max(1, chips // chips_per_vm)
    if hosts == 1:
        raise invalid_argument(SINGLE_HOST_TOPOLOGY)
    count = pool.get("initialNodeCount", 0)
    if count != hosts:
        raise invalid_argument(f"Node count {count} is not a valid size of TPU pod slice with topology {topology}")


def new_pool(call: Call, cluster: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """A checked pool record, PROVISIONING, without nodes yet."""
    container_ops.check_name(given.get("name") or "", "node_pool.name", "Node_pool")
    # proto3: a management message that is sent holds false for the booleans it leaves out
    # (JSON clients drop false values); one that is not sent gets GKE's defaults
    sent = given.get("management")
    management = ({"autoUpgrade": bool(sent.get("autoUpgrade")), "autoRepair": bool(sent.get("autoRepair")),
                   **{k: v for k, v in sent.items() if k not in ("autoUpgrade", "autoRepair")}}
                  if sent is not None else {"autoUpgrade": True, "autoRepair": True})
    _check_management(cluster, management)
    path = f"{container_ops.cluster_path(call.project_id, cluster['location'], cluster['name'])}/nodePools/{given['name']}"
    pool = {**given, "config": dict(given.get("config") or {}), "management": management,
            # an autoscaled pool left unsized starts empty (proto3's 0), as the autoscaler sizes it
            "initialNodeCount": given.get("initialNodeCount", 0 if (given.get("autoscaling") or {}).get("enabled") else 3), "version": cluster["currentNodeVersion"],
            "selfLink": cluster["selfLink"] + f"/nodePools/{given['name']}", "status": "PROVISIONING",
            "podIpv4CidrSize": given.get("podIpv4CidrSize", 24), "etag": str(call.world.next_id()), "nodes": []}
    pool["config"].setdefault("machineType", container_nodes.DEFAULT_MACHINE)
    pool["config"].setdefault("diskSizeGb", 100)
    _check_tpu(pool)
    for refusal in (gke_node_pools.flex_start_refusal(pool), gke_node_pools.network_name_refusal(pool)):
        if refusal:
            raise invalid_argument(refusal)
    pool["_path"] = path
    return pool


def make_nodes(world: World, project_id: str, cluster: dict[str, Any], pool: dict[str, Any],
               now: float) -> dict[str, Any] | None:
    """The pool's nodes; Compute's refusal as the failure GKE's operation will carry."""
    try:
        container_nodes.resize(world, project_id, cluster, pool, pool["initialNodeCount"], now)
    except ApiError as exc:
        return {"code": exc.code, "status": exc.status, "message": f"Google Compute Engine: {exc.message}"}
    return None


def render(cluster: dict[str, Any], pool: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in pool.items() if k not in INTERNAL and not k.startswith("_")}
    project_id = pool["_path"].split("/")[1]
    out["locations"] = container_nodes.zones_of(cluster, pool)
    # one managed instance group per zone, as GKE lists them
    out["instanceGroupUrls"] = [f"https://www.googleapis.com/compute/v1/projects/{project_id}/zones/{zone}/"
                                f"instanceGroupManagers/{container_nodes.group_name(cluster, pool, zone)}-grp"
                                for zone in out["locations"]]
    return out


def _find(call: Call, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    parts = name.split("/")
    cluster = container_ops.find_cluster(call.world, call.project_id, parts[3], parts[5])
    pool = cluster["pools"].get(parts[7]) if len(parts) > 7 else None
    if pool is None:
        raise container_ops.not_found(name)
    return cluster, pool


def _cluster(call: Call, parent: str) -> dict[str, Any]:
    parts = parent.split("/")
    return container_ops.find_cluster(call.world, call.project_id, parts[3], parts[5])


def _op(call: Call, cluster: dict[str, Any], op_type: str, target: str, pool: str, kind: str,
        then: str = "container.pool.settled", failure: dict[str, Any] | None = None) -> Any:
    return container_ops.start(call, cluster, op_type, target, kind=kind, then=then,
                               args={"key": f"{cluster['location']}/{cluster['name']}", "pool": pool,
                                     "failure": failure})


@handles("container.projects.locations.clusters.nodePools.create")
def create(call: Call) -> Any:
    cluster = _cluster(call, call.params["parent"])
    container_ops.busy(call.world, cluster)
    given = (call.body or {}).get("nodePool") or {}
    pool = new_pool(call, cluster, given)
    if pool["name"] in cluster["pools"]:
        raise ApiError(409, f"Already exists: {pool['_path']}.")
    cluster["pools"][pool["name"]] = pool
    failure = make_nodes(call.world, call.project_id, cluster, pool, call.now)
    container_nodes.serve(call.sim, cluster)
    return _op(call, cluster, "CREATE_NODE_POOL", pool["_path"], pool["name"], "pool_create", failure=failure)


@operations.completion("container.pool.settled")
def _settled(world: World, op: dict[str, Any], _at: float) -> None:
    cluster = world.collection(op["project"], container_ops.CLUSTERS).get(op["args"]["key"])
    pool = cluster["pools"].get(op["args"]["pool"]) if cluster else None
    if pool is None:
        return
    failure = op["args"].get("failure")
    pool["status"] = "ERROR" if failure else "RUNNING"
    if failure:
        raise ApiError(failure["code"], failure["message"], status=failure["status"])


@operations.completion("container.pool.deleted")
def _deleted(world: World, op: dict[str, Any], _at: float) -> None:
    cluster = world.collection(op["project"], container_ops.CLUSTERS).get(op["args"]["key"])
    if cluster is not None:
        cluster["pools"].pop(op["args"]["pool"], None)


@handles("container.projects.locations.clusters.nodePools.get")
def get(call: Call) -> Any:
    cluster, pool = _find(call, call.params["name"])
    return render(cluster, pool)


@handles("container.projects.locations.clusters.nodePools.list")
def list_(call: Call) -> Any:
    cluster = _cluster(call, call.params["parent"])
    return {"nodePools": [render(cluster, p) for p in cluster["pools"].values()]} if cluster["pools"] else {}


@handles("container.projects.locations.clusters.nodePools.delete")
def delete(call: Call) -> Any:
    cluster, pool = _find(call, call.params["name"])
    container_ops.busy(call.world, cluster)
    pool["status"] = "STOPPING"
    container_nodes.delete_nodes(call.world, call.project_id, pool, call.now)
    container_nodes.serve(call.sim, cluster)
    return _op(call, cluster, "DELETE_NODE_POOL", pool["_path"], pool["name"], "pool_delete",
               then="container.pool.deleted")


@handles("container.projects.locations.clusters.nodePools.update")
def update(call: Call) -> Any:
    """UpdateNodePoolRequest: the fields it names replace the pool's node config's."""
    cluster, pool = _find(call, call.params["name"])
    container_ops.busy(call.world, cluster)
    body = call.body or {}
    for key, value in body.items():
        if key in ("nodeVersion", "name", "projectId", "zone", "clusterId", "nodePoolId", "etag"):
            continue
        if key == "locations":
            pool["locations"] = value
        else:
            pool["config"][key] = value
    if body.get("nodeVersion"):
        pool["version"] = body["nodeVersion"]
    if "resourceLabels" in body:
        container_nodes.relabel(call.world, call.project_id, cluster)
    return _op(call, cluster, "UPDATE_NODE_POOL", pool["_path"], pool["name"], "pool_update")


@handles("container.projects.locations.clusters.nodePools.setManagement")
def set_management(call: Call) -> Any:
    cluster, pool = _find(call, call.params["name"])
    container_ops.busy(call.world, cluster)
    sent = (call.body or {}).get("management") or {}
    management = {**sent, "autoUpgrade": bool(sent.get("autoUpgrade")), "autoRepair": bool(sent.get("autoRepair"))}
    _check_management(cluster, management)
    pool["management"] = management
    return _op(call, cluster, "SET_NODE_POOL_MANAGEMENT", pool["_path"], pool["name"], "pool_update")


@handles("container.projects.locations.clusters.nodePools.setSize")
def set_size(call: Call) -> Any:
    cluster, pool = _find(call, call.params["name"])
    container_ops.busy(call.world, cluster)
    count = int((call.body or {}).get("nodeCount", 0))
    failure = None
    try:
        container_nodes.resize(call.world, call.project_id, cluster, pool, count, call.now)
    except ApiError as exc:
        failure = {"code": exc.code, "status": exc.status, "message": f"Google Compute Engine: {exc.message}"}
    pool["initialNodeCount"] = count
    container_nodes.serve(call.sim, cluster)
    return _op(call, cluster, "SET_NODE_POOL_SIZE", pool["_path"], pool["name"], "pool_update", failure=failure)
