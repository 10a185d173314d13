"""Zone failover for `up`: the whole cluster is placed in one zone at a time (a job's nodes must
be near each other), and when GCE refuses a zone for capacity or quota, the next zone tried is
one the refusal itself names as having capacity, then the rest in the stack's order.

GCE's stockout (ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS) carries a LocalizedMessage such as
"A n1-standard-8 VM instance with 2 nvidia-tesla-t4 accelerator(s) is currently unavailable in
the us-central1-a zone. Consider trying your request in the us-central1-c, us-central1-f zone(s),
which currently has capacity to accommodate your request." (cloud.google.com/compute/docs/resource-error);
the Pulumi/Terraform provider prints that message under the error (ComputeOperationError), so it
is read from the failed `pulumi up`'s text, as a user reads it. Hinted zones outside the stack's
candidates are not tried: the user chose where the cluster may live.

A failed attempt's leftovers need no separate teardown: the next attempt is the same program with
the new zone, so Pulumi replaces whatever the failed attempt placed in the old zone (zone is an
input every zonal resource is replaced on) and keeps what no zone binds (network, bucket).
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, TypeVar

from infra.errors import CapacityUnavailable, ConfigError, ProvisionError
from infra.providers.capacity_wait import CapacityWait
from infra.providers.protocol import Progress
from infra.spec.catalog import region_of
from infra.spec.cluster import ClusterSpec
from infra.spec.zone_choice import candidate_zones

# What GCE and Cloud TPU answer when a zone has no capacity for the request right now (the
# resource-availability troubleshooting pages): a later try, or another zone, may succeed.
# Cloud TPU also words it "Insufficient reserved capacity. Contact customer support to increase
# your reservation." (code 8), for a create that used no reservation (skypilot-org/skypilot#4579).
CAPACITY_ERRORS = ("ZONE_RESOURCE_POOL_EXHAUSTED", "insufficientCapacity",
                   "does not have enough resources available", "no more capacity in the zone",
                   "Insufficient reserved capacity")
# Compute's QUOTA_EXCEEDED operation error: "Quota 'NVIDIA_T4_GPUS' exceeded.  Limit: 0.0 in region
# us-central1." A regional quota may be free in another region.
QUOTA_ERROR = re.compile(r"Quota '[A-Z0-9_]+' exceeded\.\s+Limit: [0-9.]+ in region [a-z0-9-]+")
HINT = re.compile(r"Consider trying your request in the ([a-z0-9-]+(?:, [a-z0-9-]+)*) zone\(s\)")

T = TypeVar("T")


class QuotaExceeded(ProvisionError):
    """A regional quota the zone's region has no room in (another region's may)."""

    title = "no quota"


@dataclass(frozen=True)
class ZoneAttempt:
    """One zone tried: what happened, the provider's own words for it, and how long it took."""
    zone: str
    outcome: str  # "up", "no capacity", "no quota"
    seconds: float
    reason: str = ""
    capacity_in: tuple[str, ...] = ()  # zones the refusal named as having capacity

    def describe(self, why: bool = False) -> str:
        if self.outcome == "up":
            return f"{self.zone}: up in {self.seconds:.1f} s"
        reason = f" ({self.reason})" if why else ""
        hint = f"; capacity named in {', '.join(self.capacity_in)}" if self.capacity_in else "; no zone named"
        return f"{self.zone}: {self.outcome} after {self.seconds:.1f} s{reason}{hint}"

    def record(self) -> dict[str, Any]:
        return {**asdict(self), "capacity_in": list(self.capacity_in), "seconds": round(self.seconds, 2)}


def capacity_hints(text: str) -> tuple[str, ...]:
    """The zones a stockout names as having capacity, in its order (line breaks undone first:
    providers wrap long messages)."""
    flat = " ".join(text.split())
    found: list[str] = []
    for match in HINT.finditer(flat):
        found += [z for z in match.group(1).split(", ") if z not in found]
    return tuple(found)


def refusal_of(exc: Exception) -> Exception:
    """A capacity or regional quota refusal as CapacityUnavailable / QuotaExceeded (their line of
    the provider's text, with the rest kept for its hints); any other error as it is."""
    text = str(exc)
    for line in text.splitlines():
        if any(marker in line for marker in CAPACITY_ERRORS):
            refused: Exception = CapacityUnavailable(_refused_resource(line)[:300])
            break
        quota = QUOTA_ERROR.search(line)
        if quota:
            refused = QuotaExceeded(quota.group(0))
            break
    else:
        return exc
    refused.provider_text = text  # type: ignore[attr-defined]
    return refused


def _refused_resource(line: str) -> str:
    """"<resource>: <GCE's words>" out of Pulumi's "... creating urn:pulumi:...::<resource>: <words>"."""
    found = re.search(r"::([^:\s]+): (.+)$", line.strip())
    return f"{found.group(1)}: {found.group(2)}" if found else line.strip()


def next_zones(remaining: list[str], hints: tuple[str, ...]) -> list[str]:
    """The zones still to try: those the refusal named as having capacity first, in its order."""
    hinted = [z for z in hints if z in remaining]
    return hinted + [z for z in remaining if z not in hinted]


def stay_where_landed(spec: ClusterSpec, meta: dict[str, Any] | None) -> ClusterSpec:
    """An `up` of a stack that is up already starts in the zone it landed in, not in the stack
    file's first: capacity come back in `zone` must not move a running cluster."""
    landed = ((meta or {}).get("spec") or {}).get("zone")
    if landed and landed != spec.zone and landed in candidate_zones(spec):
        return spec.model_copy(update={"zone": landed})
    return spec


def regions_with_quota(spec: ClusterSpec, preflight: Callable[[ClusterSpec], None],
                       progress: Progress) -> tuple[ClusterSpec, list[ZoneAttempt]]:
    """The candidates whose region's quota holds the stack (`preflight` refuses with ConfigError
    before anything exists), and a "no quota" attempt for each zone dropped. Every region short:
    the first region's refusal, as a one-zone stack gets it."""
    candidates = candidate_zones(spec)
    regions = list(dict.fromkeys(region_of(z) for z in candidates))
    refused: dict[str, ConfigError] = {}
    for region in regions:
        try:
            preflight(spec.model_copy(update={"zone": next(z for z in candidates if region_of(z) == region)}))
        except ConfigError as exc:
            if len(regions) == 1:
                raise
            refused[region] = exc
    if len(refused) == len(regions):
        raise refused[regions[0]]
    skipped = [ZoneAttempt(z, "no quota", 0.0, str(refused[region_of(z)]).splitlines()[-1].strip())
               for z in candidates if region_of(z) in refused]
    for region in refused:
        progress(f"region {region} has too little quota for the stack: its zones are not tried")
    kept = tuple(z for z in candidates if region_of(z) not in refused)
    return spec.model_copy(update={"zone": kept[0], "zones": kept if spec.zones else ()}), skipped


def place(spec: ClusterSpec, attempt: Callable[[ClusterSpec], T],
          progress: Progress, skipped: list[ZoneAttempt] | None = None) -> tuple[T, ClusterSpec, list[ZoneAttempt]]:
    """`attempt` (one `pulumi up` of the whole cluster) in each candidate zone until one is not
    refused: (its result, the spec in the zone it landed in, every attempt, after `skipped`)."""
    remaining = list(candidate_zones(spec))
    attempts: list[ZoneAttempt] = list(skipped or [])
    while remaining:
        zone = remaining.pop(0)
        if len(attempts) or remaining:
            progress(f"zone {zone}: placing all {spec.node_count} node(s) here")
        started, began = time.monotonic(), time.time()
        placed = spec.model_copy(update={"zone": zone})
        try:
            result = attempt(placed)
        except (CapacityUnavailable, QuotaExceeded) as exc:
            hints = capacity_hints(getattr(exc, "provider_text", str(exc)))
            outcome = "no capacity" if isinstance(exc, CapacityUnavailable) else "no quota"
            attempts.append(ZoneAttempt(zone, outcome, time.monotonic() - started, str(exc), hints))
            remaining = next_zones(remaining, hints)
            said = f"zone {attempts[-1].describe(why=True)}" + (f"; next: {remaining[0]}" if remaining else "")
            # A zone out of capacity held the cluster's nodes back: that time is a wait for it.
            progress(CapacityWait(said, began, time.time()) if outcome == "no capacity" else said)
            if not remaining:
                raise _exhausted(attempts, exc) from exc
            continue
        attempts.append(ZoneAttempt(zone, "up", time.monotonic() - started))
        return result, placed, attempts
    raise ProvisionError("no candidate zone")  # unreachable: a gcp spec has a zone


def _exhausted(attempts: list[ZoneAttempt], last: Exception) -> Exception:
    if len(attempts) == 1:
        return last
    tried = "\n  ".join(a.describe(why=True) for a in attempts)
    return type(last)(f"no candidate zone could hold the cluster; tried:\n  {tried}")


def record_placement(placed: ClusterSpec, attempts: list[ZoneAttempt], progress: Progress) -> None:
    """The zone the cluster landed in becomes the stack's (what `repair` and `down` hand the
    program); the attempts are said when there was a choice (the inventory keeps them)."""
    from infra.providers.gcp.pulumi_workspace import record_landed_spec

    record_landed_spec(placed)
    if len(attempts) > 1 or len(candidate_zones(placed)) > 1:
        progress(f"placed in zone {placed.zone} after {len(attempts)} attempt(s): "
                 + "; ".join(a.describe() for a in attempts))
