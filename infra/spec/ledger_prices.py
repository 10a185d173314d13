"""Each node's list price for the ledger, from the catalog through cost.py (the estimate's own
lines, so `plan`'s hourly figure and the ledger never disagree).

Reserved VMs are priced on demand: Compute Engine bills a reservation's resources at on-demand
rates (a commitment's discount is not in the catalog). Nodes that are not machines of a named
type (the local stack's namespaces) cost nothing and are marked `local`."""

from __future__ import annotations

from infra.spec import catalog
from infra.spec.cluster import ClusterSpec
from infra.spec.cost import per_node_per_hour
from infra.spec.ledger import Capacity, NodeRate


def _capacity(group: ClusterSpec) -> Capacity:
    if group.spot:
        return "spot"
    return "reservation" if group.reservation not in (None, "none") else "on-demand"


def node_rates(spec: ClusterSpec, names: list[str], priced: bool) -> tuple[NodeRate, ...]:
    """`names` in node order (pool by pool, as `spec.groups()` numbers them); `priced`: whether
    the nodes are machines of a named type (the stack's Capabilities say)."""
    rates: list[NodeRate] = []
    for _, first, group in spec.groups():
        on_demand = group.model_copy(update={"spot": False})
        for index in range(first, min(first + group.node_count, len(names))):
            if not priced:
                rates.append(NodeRate(name=names[index], capacity="local", usd_per_hour=0.0,
                                      on_demand_usd_per_hour=0.0))
                continue
            rates.append(NodeRate(name=names[index], capacity=_capacity(group),
                                  usd_per_hour=round(per_node_per_hour(group), 6),
                                  on_demand_usd_per_hour=round(per_node_per_hour(on_demand), 6)))
    return tuple(rates)


def fixed_per_hour(spec: ClusterSpec, priced: bool) -> float:
    """What the stack costs as a whole, beside its nodes."""
    return catalog.GKE_CLUSTER_FEE_PER_HOUR if priced and spec.kind == "gke" else 0.0
