"""A GKE node pool's nodes: Compute Engine instances in the cluster's project.

GKE creates each node pool's nodes as VMs of a managed instance group per zone, and puts on each
the cluster's resource labels (and the pool's) beside its own: `goog-gke-node: ""`,
`goog-k8s-cluster-name`, `goog-k8s-cluster-location`, `goog-k8s-node-pool-name` (a real node's
labels: opencost's docs, "gke-opencost-3-default-pool-123456f4-kbl5";
https://cloud.google.com/kubernetes-engine/docs/how-to/creating-managing-labels). So a sweep by
labels (`trainctl reap`) finds them next to their cluster: issue 30's defect 9.
They are made through Compute's own instance code (compute_managed.py), so their states,
addresses, quota and stockouts are Compute's, and `instances.aggregatedList` shows them.
Chosen: names are `gke-<cluster[:20]>-<pool[:20]>-<8 hex>-<4 chars>` (the observed form; GKE's
exact truncation of long pool names is not documented); a regional cluster's nodes go to the
first three zones of its region unless the pool names its locations.
"""

from __future__ import annotations

import hashlib
import math
import time
from typing import TYPE_CHECKING, Any

from gcpsim.apis.compute_common import fingerprint
from gcpsim.apis.compute_instances import instances
from gcpsim.apis.compute_managed import create_managed_instance, delete_managed_instance
from gcpsim.apis.container_ops import CLUSTERS
from gcpsim.errors import ApiError
from gcpsim.kubernetes import control_planes, scheduling
from gcpsim.state import World

if TYPE_CHECKING:
    from gcpsim.kubernetes.jobs import JobController
    from gcpsim.server import Simulator

DEFAULT_MACHINE = "e2-medium"  # GKE's default node machine type
DEFAULT_SCOPES = ["https://www.googleapis.com/auth/devstorage.read_only",
                  "https://www.googleapis.com/auth/logging.write",
                  "https://www.googleapis.com/auth/monitoring"]


def zones_of(cluster: dict[str, Any], pool: dict[str, Any]) -> list[str]:
    if pool.get("locations"):
        return list(pool["locations"])
    location = cluster["location"]
    if location.count("-") == 2:  # a zone: a zonal cluster
        return [location]
    return [f"{location}-{suffix}" for suffix in ("a", "b", "c")]


def node_labels(cluster: dict[str, Any], pool: dict[str, Any]) -> dict[str, str]:
    return {**cluster.get("resourceLabels", {}), **pool.get("config", {}).get("resourceLabels", {}),
            "goog-gke-node": "", "goog-k8s-cluster-name": cluster["name"],
            "goog-k8s-cluster-location": cluster["location"], "goog-k8s-node-pool-name": pool["name"]}


def group_name(cluster: dict[str, Any], pool: dict[str, Any], zone: str) -> str:
    digest = hashlib.sha256(f"{cluster['location']}/{cluster['name']}/{pool['name']}/{zone}".encode())
    return f"gke-{cluster['name'][:20]}-{pool['name'][:20]}-{digest.hexdigest()[:8]}"


def _suffix(world: World) -> str:
    n, out = world.next_id(), ""
    for _ in range(4):
        n, r = divmod(n, 36)
        out += "0123456789abcdefghijklmnopqrstuvwxyz"[r]
    return out


def _account(world: World, project_id: str, config: dict[str, Any]) -> str:
    given = config.get("serviceAccount") or "default"
    if given != "default":
        return given
    project = world.project(project_id)
    assert project is not None
    return f"{project['number']}-compute@developer.gserviceaccount.com"


def _add_node(world: World, project_id: str, cluster: dict[str, Any], pool: dict[str, Any], zone: str,
              now: float) -> str:
    config = pool.get("config", {})
    group = group_name(cluster, pool, zone)
    number = world.project(project_id)["number"]  # type: ignore[index]
    name = f"{group}-{_suffix(world)}"
    create_managed_instance(
        world, project=project_id, zone=zone, name=name, machine_type=config.get("machineType") or DEFAULT_MACHINE,
        labels=node_labels(cluster, pool), network=cluster["networkConfig"]["network"],
        subnetwork=cluster["networkConfig"]["subnetwork"], service_account=_account(world, project_id, config),
        scopes=config.get("oauthScopes") or DEFAULT_SCOPES,
        tags=[*config.get("tags", []), f"gke-{cluster['name'][:30]}-node"],
        metadata={"cluster-name": cluster["name"], "cluster-location": cluster["location"]},
        spot=bool(config.get("spot") or config.get("preemptible")),
        accelerators=config.get("accelerators") or None, reservation_affinity=config.get("reservationAffinity"),
        extra_nics=_additional_nics(project_id, zone, pool),
        created_by=f"projects/{number}/zones/{zone}/instanceGroupManagers/{group}-grp", now=now)
    return f"{zone}/{name}"


def _additional_nics(project_id: str, zone: str, pool: dict[str, Any]) -> list[dict[str, Any]]:
    """One more NIC per additional node network (multi-networking), gVNIC where the pool asks for it;
    the pool names them (facts/gke_node_pools.py), the VM's NIC takes them in the node's project
    and region."""
    nic_type = {"nicType": "GVNIC"} if (pool.get("config", {}).get("gvnic") or {}).get("enabled") else {}
    region = zone.rsplit("-", 1)[0]
    return [{"network": f"projects/{project_id}/global/networks/{n.get('network')}",
             "subnetwork": f"projects/{project_id}/regions/{region}/subnetworks/{n.get('subnetwork')}", **nic_type}
            for n in (pool.get("networkConfig") or {}).get("additionalNodeNetworkConfigs") or []]


def resize(world: World, project_id: str, cluster: dict[str, Any], pool: dict[str, Any], per_zone: int,
           now: float) -> None:
    """Make or remove nodes until each of the pool's zones has `per_zone`; raises Compute's
    ApiError (quota, stockout) when a node cannot be made."""
    nodes: list[str] = pool.setdefault("nodes", [])
    for zone in zones_of(cluster, pool):
        in_zone = [key for key in nodes if key.startswith(zone + "/")]
        for key in in_zone[per_zone:]:
            delete_managed_instance(world, project=project_id, zone=zone, name=key.split("/", 1)[1], now=now)
            nodes.remove(key)
        for _ in range(per_zone - len(in_zone)):
            nodes.append(_add_node(world, project_id, cluster, pool, zone, now))


def delete_nodes(world: World, project_id: str, pool: dict[str, Any], now: float) -> None:
    for key in pool.get("nodes", []):
        zone, name = key.split("/", 1)
        delete_managed_instance(world, project=project_id, zone=zone, name=name, now=now)
    pool["nodes"] = []


def relabel(world: World, project_id: str, cluster: dict[str, Any]) -> None:
    """The cluster's new resource labels onto its nodes (GKE propagates them to the VMs)."""
    vms = instances(world, project_id)
    for pool in cluster.get("pools", {}).values():
        for key in pool.get("nodes", []):
            vm = vms.get(key)
            if vm is not None:
                vm["labels"] = node_labels(cluster, pool)
                vm["labelFingerprint"] = fingerprint(vm["labels"])


def node_names(cluster: dict[str, Any]) -> tuple[str, ...]:
    """The names of the nodes pods may be scheduled on: those of pools not being deleted."""
    return tuple(key.split("/", 1)[1] for pool in cluster.get("pools", {}).values()
                 if pool.get("status") != "STOPPING" for key in pool.get("nodes", []))


def serve(sim: Simulator, cluster: dict[str, Any]) -> None:
    """The cluster's Kubernetes API runs in this process, knowing its nodes and with the cluster
    autoscaler of its autoscaled pools."""
    project_id, key = cluster["selfLink"].split("/projects/", 1)[1].split("/")[0], f"{cluster['location']}/{cluster['name']}"
    control_planes.ensure(sim, cluster, node_names(cluster), autoscaler=lambda api: scale_up(sim, project_id, key, api))


def scale_up(sim: Simulator, project_id: str, key: str, api: JobController) -> None:
    """GKE's cluster autoscaler, for pods that wait: an autoscaled pool whose nodes would take them
    grows by as many nodes, up to its maximum (NodePoolAutoscaling: total_max_node_count, or
    max_node_count per zone), a flex-start pool from zero as Google's flex-start pools are made
    (facts/gke_node_pools.py). Chosen: nodes are added at once, no scale-down of idle nodes, and a
    node Compute cannot make (quota, stockout) leaves the pods waiting until the next try."""
    with sim.store.transaction() as world:
        cluster = world.collection(project_id, CLUSTERS).get(key)
        if cluster is None or cluster.get("status") not in ("RUNNING", "RECONCILING"):
            return
        with api.cond:
            waiting = [pod for _, pod, _, _ in api.unscheduled.values()]
        grown = [_grow(world, project_id, cluster, pool, scheduling.waiting_for(waiting, scheduling.pool_node_labels(pool)))
                 for pool in cluster["pools"].values()]
        if any(grown):
            serve(sim, cluster)


def _grow(world: World, project_id: str, cluster: dict[str, Any], pool: dict[str, Any], waiting: int) -> bool:
    autoscaling = pool.get("autoscaling") or {}
    if not autoscaling.get("enabled") or pool.get("status") != "RUNNING" or not waiting:
        return False
    zones = zones_of(cluster, pool)
    most = autoscaling.get("totalMaxNodeCount") or (autoscaling.get("maxNodeCount") or 0) * len(zones)
    target = min(int(most), len(pool.get("nodes", [])) + waiting)
    if target <= len(pool.get("nodes", [])):
        return False
    try:
        resize(world, project_id, cluster, pool, math.ceil(target / len(zones)), time.time())
    except ApiError:
        return False
    return True
