"""Where a GCP stack may be placed: one `zone`, or candidates to fail over between, `zones: [...]`
in the order given, or `region: r`, every zone of r where the catalog offers the stack's
accelerators. The whole cluster always lands in one zone (a job's nodes must be near each other):
`zone` is the one tried first, and once `up` has placed the cluster, the one it is in. Which
candidate wins is decided at `up`, by the provider (infra/providers/gcp/zone_failover.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from infra.spec import catalog

if TYPE_CHECKING:  # ClusterSpec runs this check while it validates itself
    from infra.spec.cluster import ClusterSpec


def accelerators_of(spec: ClusterSpec) -> set[str]:
    """The GPU and TPU types the stack's nodes carry, attached or bundled with a machine type."""
    wanted = {spec.tpu.type} if spec.tpu else set()
    gpus = [spec.gpu] + [p.gpu for p in spec.pools]
    wanted |= {g.type for g in gpus if g is not None}
    machines = [spec.machine_type] + [p.machine_type for p in spec.pools]
    wanted |= {m.bundled_gpu for m in (catalog.MACHINES.get(name or "") for name in machines)
               if m is not None and m.bundled_gpu}
    return wanted


def offers(zone: str, accelerators: set[str]) -> bool:
    """Whether the catalog offers every one of these GPU/TPU types in the zone."""
    for name in accelerators:
        where = catalog.GPUS[name].zones if name in catalog.GPUS else catalog.TPUS[name].zones
        if zone not in where:
            return False
    return True


def candidate_zones(spec: ClusterSpec) -> tuple[str, ...]:
    """The zones `up` may place the cluster in, in the order it tries them when no stockout
    names one: the stack's `zone` first, then the rest of `zones` (or of the region) in order."""
    if not spec.zones:
        return (spec.zone,) if spec.zone else ()
    rest = tuple(z for z in spec.zones if z != spec.zone)
    return ((spec.zone,) if spec.zone else ()) + rest


def check_zone_choice(spec: ClusterSpec) -> dict[str, object]:
    """`zones` or `region` resolved to the candidate zones (`zones`), each checked against the
    catalog, and `zone` set to the first unless the stack names one of them."""
    if not spec.zones and not spec.region:
        return {}
    if spec.zones and spec.region:
        raise ValueError("name zones or region, not both (region means every zone of it that offers "
                         "the stack's machines)")
    wanted = accelerators_of(spec)
    candidates = _region_zones(spec.region, wanted) if spec.region else _listed_zones(spec.zones, wanted)
    reservations = [spec.reservation] + [p.reservation for p in spec.pools]
    named = sorted({r for r in reservations if r not in (None, "any", "none")})
    if named and len(candidates) > 1:
        raise ValueError(f"reservation {named[0]!r} is in one zone, and zones/region let the cluster land in "
                         f"another: name that zone alone, or use reservation: any")
    if spec.zone is not None and spec.zone not in candidates:
        raise ValueError(f"zone {spec.zone!r} is not one of the candidate zones {', '.join(candidates)}: "
                         "remove zone (gcp:zone), or add it to zones")
    return {"zones": candidates, "zone": spec.zone or candidates[0]}


def _region_zones(region: str, wanted: set[str]) -> tuple[str, ...]:
    regions = {catalog.region_of(z) for z in catalog.ZONES}
    if region not in regions:
        raise ValueError(f"unknown region {region!r}; valid: {catalog.choices(regions)}")
    found = tuple(z for z in catalog.ZONES if catalog.region_of(z) == region and offers(z, wanted))
    if not found:
        raise ValueError(f"no zone of region {region!r} offers {', '.join(sorted(wanted))}; "
                         f"zones that do: {catalog.choices(z for z in catalog.ZONES if offers(z, wanted))}")
    return found


def _listed_zones(zones: tuple[str, ...], wanted: set[str]) -> tuple[str, ...]:
    twice = sorted({z for z in zones if zones.count(z) > 1})
    if twice:
        raise ValueError(f"zones: {', '.join(twice)} appears more than once")
    for zone in zones:
        if zone not in catalog.ZONES:
            raise ValueError(f"zones: unknown zone {zone!r}; valid: {catalog.choices(catalog.ZONES)}")
        if not offers(zone, wanted):
            raise ValueError(f"zones: {zone} does not offer {', '.join(sorted(wanted))}; zones that do: "
                             f"{catalog.choices(z for z in catalog.ZONES if offers(z, wanted))}")
    return zones
