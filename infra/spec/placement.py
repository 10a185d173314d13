"""Where a stack's VMs sit relative to each other: a COMPACT placement policy groups them close in
one zone. The GPUDirect families get one by default (their GPU networks are built for it); A2/G2
stacks ask for it with `placement: compact`; `placement: none` turns it off. Checked while the
cluster is resolved, against infra/spec/gpu_networks.py's families and limits."""

from __future__ import annotations

from typing import TYPE_CHECKING

from infra.spec import gpu_networks
from infra.spec.cluster_sections import named_reservation

if TYPE_CHECKING:
    from infra.spec.cluster import ClusterSpec

COMPACT = "compact"
NONE = "none"


def machine_types(spec: ClusterSpec) -> list[str]:
    """Every node's machine type (each pool's, or the cluster's)."""
    if spec.pools:
        return [p.machine_type or spec.machine_type or "" for p in spec.pools]
    return [spec.machine_type or ""]


def plain_reservations(spec: ClusterSpec) -> list[str]:
    """The reservations the stack's VMs consume by name as plain (non-dense) reservations: every
    named one but those consumed reservation-bound, whose reservations are densely deployed
    (infra/spec/consumption.py)."""
    if spec.kind != "vm" or spec.reservation_bound:
        return []
    named = (named_reservation(p.reservation) for p in spec.pools) if spec.pools else (named_reservation(spec.reservation),)
    return sorted({n for n in named if n})


def resolve_placement(spec: ClusterSpec) -> str:
    """The placement the stack gets: what it asked for, checked, or the family's default. VMs on a
    plain reservation get no compact placement policy: such reservations take no external resource
    policies (Cluster Toolkit, schedmd-slurm-gcp-v6-controller/modules/slurm_files/scripts/resume.py,
    update_reservation_props: "vanilla reservations don't support external policies", only dense ones
    take a placement policy; a reservation's own policies are set on the reservation, Compute's
    Reservation.resourcePolicies: "This is to define placement policy with reservation")."""
    types = machine_types(spec)
    plain = plain_reservations(spec)
    if spec.placement is None:
        gpudirect = spec.kind in ("vm", "gke") and all(gpu_networks.gpudirect(t) for t in types)
        return COMPACT if gpudirect and spec.node_count > 1 and not plain else NONE
    if spec.placement == COMPACT:
        _check_compact(spec, types)
        if plain:
            raise ValueError(f"placement: compact with reservation {plain[0]!r}: a VM consuming a plain (non-dense) "
                             "reservation takes no external resource policy, so GCE cannot place it compactly; "
                             "set placement: none, or make the reservation with a compact placement policy of its "
                             "own (its resourcePolicies)")
    return spec.placement


def _check_compact(spec: ClusterSpec, types: list[str]) -> None:
    if spec.kind not in ("vm", "gke") or spec.tpu:
        raise ValueError(f"placement: compact applies to GPU VMs and GKE GPU node pools, not a {spec.kind!r} "
                         "stack (a multi-host TPU slice is placed compactly already); remove placement")
    others = sorted({t for t in types if not gpu_networks.takes_compact_placement(t)})
    if others:
        families = ", ".join(f"{f}-*" for f in gpu_networks.COMPACT_PLACEMENT_FAMILIES)
        raise ValueError(f"placement: compact is offered for {families} machine types only, not "
                         f"{', '.join(others)} (GCP's compact placement policies); remove placement or "
                         "pick one of those machine types")
    limit = gpu_networks.COMPACT_PLACEMENT_MAX_VMS
    if spec.kind == "vm" and spec.node_count > limit:
        raise ValueError(f"placement: compact holds at most {limit} VMs per policy and this stack has "
                         f"{spec.node_count}; lower nodes, or set placement: none")
