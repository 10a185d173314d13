"""Which node a simulated pod lands on: a node whose labels match the pod's nodeSelector, as the
scheduler's NodeAffinity filter keeps them, pod index i on the i-th of those (one pod a node, as
whole-host accelerator requests place them).

The labels are those GKE puts on a pool's nodes that trainctl's pods select by: the node pool's
name (`cloud.google.com/gke-nodepool`) and, on TPU pools, the TPU's accelerator and topology
(https://cloud.google.com/kubernetes-engine/docs/concepts/tpus: `cloud.google.com/gke-tpu-accelerator`,
`cloud.google.com/gke-tpu-topology`). A cluster whose nodes carry no labels (the scripted API of
the launcher's tests) schedules by index alone.
"""

from __future__ import annotations

from typing import Any

from gcpsim.facts.tpus import TPUS

Labels = dict[str, str]
# GKE's label with a node's pool name: XPK src/xpk/core/system_characteristics.py (the CPU machine_label),
# https://cloud.google.com/kubernetes-engine/docs/how-to/node-pools ("cloud.google.com/gke-nodepool").
NODE_POOL_LABEL = "cloud.google.com/gke-nodepool"
TPU_ACCELERATOR = "cloud.google.com/gke-tpu-accelerator"
TPU_TOPOLOGY = "cloud.google.com/gke-tpu-topology"


def pool_node_labels(pool: dict[str, Any]) -> Labels:
    """The labels of a GKE node pool's nodes (the pool as the simulated GKE API keeps it)."""
    labels = {NODE_POOL_LABEL: pool["name"]}
    machine = (pool.get("config") or {}).get("machineType", "")
    topology = (pool.get("placementPolicy") or {}).get("tpuTopology")
    tpus = [t for t in TPUS.values() if t.gke_machine_type == machine]
    if tpus:
        # a multi-host pool names its topology; a single-host pool's is its machine's chips
        single = [t for t in tpus if not t.multi_host and t.chips_per_host == t.chips]
        labels[TPU_ACCELERATOR] = tpus[0].gke_accelerator
        labels[TPU_TOPOLOGY] = topology or (single[0].topology if single else "")
    return labels


def candidates(pod: dict[str, Any], nodes: tuple[str, ...], labels: dict[str, Labels] | None) -> list[str]:
    """The nodes the pod may run on, in the cluster's order."""
    selector: Labels = pod["spec"].get("nodeSelector") or {}
    if labels is None or not selector:
        return list(nodes)
    return [n for n in nodes if all(labels.get(n, {}).get(k) == v for k, v in selector.items())]


def waiting_for(pods: list[dict[str, Any]], labels: Labels) -> int:
    """How many of the waiting pods a node with these labels would take."""
    return sum(1 for pod in pods if not pod["metadata"].get("deletionTimestamp")
               and all(labels.get(k) == v for k, v in (pod["spec"].get("nodeSelector") or {}).items()))


def unschedulable_message(nodes: tuple[str, ...]) -> str:
    """The scheduler's message for a pod no node takes (its FailedScheduling wording)."""
    if not nodes:
        return "0/0 nodes are available: the cluster has no node pool with nodes"
    return (f"0/{len(nodes)} nodes are available: {len(nodes)} node(s) didn't match Pod's node "
            "affinity/selector.")
