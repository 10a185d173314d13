"""Spot recovery that fails over: when a reclaimed node cannot be started or made again in the
cluster's zone (a stockout, or no regional quota), the WHOLE cluster moves to another of the
stack's candidate zones (a job's nodes must stay near each other), chosen as `up` chooses
(zone_failover.py: the zones the refusal names first, then the stack's order). The move is the
same program with the new zone: Pulumi makes every zonal resource in the new zone and removes it
from the old one, and keeps what no zone binds (network, the bucket with the run's checkpoints).

A stack with one zone, or one `pulumi up` made by hand (its program reads the zone from its own
stack file), cannot move: its refusal says why, and the launcher waits for capacity to return.
"""

from __future__ import annotations

import time
from typing import Any, Callable, TypeVar

from infra.errors import CapacityUnavailable
from infra.providers.gcp.zone_failover import (QuotaExceeded, ZoneAttempt, capacity_hints, next_zones, place,
                                               refusal_of)
from infra.providers.protocol import Progress
from infra.spec.cluster import ClusterSpec
from infra.spec.zone_choice import candidate_zones

T = TypeVar("T")
Placement = tuple[dict[str, Any], ...]


def repaired_or_moved(cluster: ClusterSpec, adopted: bool, repair_here: Callable[[], T],
                      up_in: Callable[[ClusterSpec], T], placement: Placement,
                      progress: Progress) -> tuple[T, ClusterSpec, Placement]:
    """`repair_here()` in the cluster's zone; refused there for capacity or quota, `up_in(spec)`
    of the whole cluster in the other candidate zones until one holds it. Returns the result, the
    spec of the zone the cluster is in, and the placement record (the move's attempts appended,
    marked as a recovery's)."""
    started = time.monotonic()
    try:
        return repair_here(), cluster, placement
    except (CapacityUnavailable, QuotaExceeded) as exc:
        refused: Exception = exc
    others = [z for z in candidate_zones(cluster) if z != cluster.zone]
    if adopted or not others:
        raise type(refused)(f"{refused}; {why_it_cannot_move(cluster, adopted)}") from refused
    hints = capacity_hints(getattr(refused, "provider_text", str(refused)))
    outcome = "no capacity" if isinstance(refused, CapacityUnavailable) else "no quota"
    here = ZoneAttempt(cluster.zone or "", outcome, time.monotonic() - started, str(refused), hints)
    order = next_zones(others, hints)
    progress(f"zone {here.describe(why=True)}: moving the whole cluster ({cluster.node_count} node(s)) to "
             f"another zone, next {order[0]}; the run resumes from its checkpoint in the bucket")
    result, placed, attempts = place(cluster.model_copy(update={"zone": order[0], "zones": tuple(order)}),
                                     up_in, progress, skipped=[here])
    moved = cluster.model_copy(update={"zone": placed.zone})  # the stack's candidates stay all its zones
    progress(f"cluster moved from zone {cluster.zone} to {moved.zone} after {len(attempts)} attempt(s): "
             + "; ".join(a.describe() for a in attempts))
    return result, moved, placement + tuple({**a.record(), "recovery": True} for a in attempts)


def google_refusal(exc: Exception) -> Exception:
    """A Compute call's refusal (instances.start of a stopped VM) as refusal_of reads it, with the
    operation's error details kept for their hints: GCE names the zones with capacity in its
    LocalizedMessage, which the client's exception keeps in `errors`, not in its text."""
    details = [str(e) for e in getattr(exc, "errors", None) or []]
    detailed = Exception("\n".join([str(exc), *details]))
    refused = refusal_of(detailed)
    return exc if refused is detailed else refused


def why_it_cannot_move(cluster: ClusterSpec, adopted: bool) -> str:
    if adopted:
        return (f"stack {cluster.name} was made by `pulumi up`, whose program takes its zone from the stack "
                "file, so spot recovery cannot move its cluster to another zone: waiting for capacity here")
    return (f"stack {cluster.name} may use zone {cluster.zone} only (it names no zones: or region:), so spot "
            "recovery cannot move its cluster to another zone: waiting for capacity here; name zones: [...] "
            "or region: in the stack to let it fail over")
