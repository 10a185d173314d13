"""GKE's constraints: node pools of a cluster on a release channel keep auto-upgrade, names fit
GKE's limit, trainctl's clusters stay deletable, a multi-host TPU pool holds exactly one slice,
a flex-start pool is autoscaled, unrepaired and on no reservation."""

from __future__ import annotations

import re
from typing import Iterator, Sequence

from infra.spec import catalog
from policy.declared import T_CLUSTER, T_NODEPOOL, Resource, is_trainctl, mapping, number


def stack_release_channel_auto_upgrade(resources: Sequence[Resource]) -> Iterator[tuple[str, str]]:
    channels: dict[str, str] = {}
    for c in resources:
        if c.type != T_CLUSTER:
            continue
        channel = mapping(c.props.get("releaseChannel")).get("channel")
        if isinstance(channel, str) and channel not in ("", "UNSPECIFIED"):
            # A node pool names its cluster by name or by id; accept both spellings.
            for key in (c.props.get("name"), c.props.get("id"), c.name):
                if isinstance(key, str):
                    channels[key] = channel
    for p in resources:
        if p.type != T_NODEPOOL:
            continue
        cluster = p.props.get("cluster")
        channel = channels.get(cluster) if isinstance(cluster, str) else None
        if channel is None and isinstance(cluster, str):
            channel = next((ch for k, ch in channels.items() if cluster.endswith(f"/{k}")), None)
        if channel and mapping(p.props.get("management")).get("autoUpgrade") is False:
            yield p.name, (f"node pool {p.props.get('name', p.name)!r} sets management.autoUpgrade "
                           f"false but its cluster {cluster!r} is on the {channel} release channel; "
                           "GKE rejects it (400 'Auto_upgrade cannot be false when release_channel "
                           "is set'): set auto_upgrade=True")


GKE_NAME_MAX = 40


def gke_name_length(r: Resource) -> Iterator[str]:
    name = r.props.get("name")
    if r.type in (T_CLUSTER, T_NODEPOOL) and isinstance(name, str) and len(name) > GKE_NAME_MAX:
        kind = "cluster" if r.type == T_CLUSTER else "node pool"
        yield (f"GKE {kind} name {name!r} has {len(name)} characters; GKE takes at most "
               f"{GKE_NAME_MAX}")


def cluster_deletable(r: Resource) -> Iterator[str]:
    if r.type == T_CLUSTER and is_trainctl(r.props) and r.props.get("deletionProtection") is not False:
        # pulumi-gcp defaults deletionProtection to true, so unset is as bad as true.
        yield (f"GKE cluster {r.props.get('name', r.name)!r} has deletionProtection "
               f"{r.props.get('deletionProtection', 'unset (defaults to true)')}; `trainctl down` "
               "could not delete it: set deletion_protection=False")


def _topology_chips(topology: str) -> int | None:
    dims = topology.lower().split("x")
    if not dims or not all(d.isdigit() for d in dims):
        return None
    chips = 1
    for d in dims:
        chips *= int(d)
    return chips


def tpu_topology_hosts(machine_type: str, topology: str) -> int | None:
    """Hosts of a multi-host TPU slice: from the catalog when it knows the pair, else from the
    topology's chip count over the machine type's chips per host (ct5lp-hightpu-4t → 4)."""
    for tpu in catalog.TPUS.values():
        if tpu.gke_machine_type == machine_type and tpu.multi_host and tpu.topology == topology:
            return tpu.hosts
    chips = _topology_chips(topology)
    per_host = re.search(r"-(\d+)t$", machine_type)
    if chips is None or per_host is None or int(per_host.group(1)) == 0:
        return None
    return max(1, chips // int(per_host.group(1)))


def tpu_pool_node_count(r: Resource) -> Iterator[str]:
    if r.type != T_NODEPOOL:
        return
    topology = mapping(r.props.get("placementPolicy")).get("tpuTopology")
    machine = mapping(r.props.get("nodeConfig")).get("machineType")
    if not isinstance(topology, str) or not isinstance(machine, str):
        return
    hosts = tpu_topology_hosts(machine, topology)
    if hosts is None or hosts <= 1:
        return
    count = number(r.props.get("nodeCount"))
    if count is None:
        count = number(r.props.get("initialNodeCount"))
    if count is not None and count != hosts:
        yield (f"multi-host TPU node pool {r.props.get('name', r.name)!r} has {count} node(s) but "
               f"topology {topology} on {machine} is {hosts} hosts; a multi-host slice pool holds "
               f"exactly one slice: set node_count={hosts} (one node pool per slice)")


def flex_start_pool(r: Resource) -> Iterator[str]:
    """Google's preconditions for a flex-start node pool (Cluster Toolkit modules/compute/
    gke-node-pool/main.tf, the enable_flex_start preconditions): autoscaled, not a static size;
    auto-repair off; reservation affinity NO_RESERVATION (not spot: flex-start-time-limited)."""
    config = mapping(r.props.get("nodeConfig"))
    if r.type != T_NODEPOOL or config.get("flexStart") is not True:
        return
    what = f"flex-start GKE node pool {r.props.get('name', r.name)!r}"
    if not r.props.get("autoscaling") or r.props.get("nodeCount") is not None:
        yield (f"{what} has a static size (node_count {r.props.get('nodeCount')}); flex-start does not work "
               "with static nodes: set autoscaling (total_min_node_count=0, total_max_node_count=N, "
               "location_policy='ANY') and no node_count")
    if mapping(r.props.get("management")).get("autoRepair") is not False:
        yield f"{what}: set management.auto_repair=False (flex-start nodes are not auto-repaired)"
    affinity = mapping(config.get("reservationAffinity")).get("consumeReservationType")
    if affinity != "NO_RESERVATION":
        yield (f"{what} has reservation affinity {affinity or 'unset'}; a flex-start pool consumes no "
               "reservation: set consume_reservation_type='NO_RESERVATION'")
