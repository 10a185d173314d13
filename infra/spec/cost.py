"""Hourly and TTL cost estimates from the catalog's list prices."""

from __future__ import annotations

from dataclasses import dataclass

from infra.spec import catalog
from infra.spec.cluster import ClusterSpec

PD_BALANCED_PER_GB_MONTH = 0.10
HOURS_PER_MONTH = 730
# Where every figure here (and the ledger's) is priced from: what a saving or a cost is said to be at.
PRICE_SOURCE = "trainctl's catalog list prices (us-central1, infra/spec/catalog.py; an estimate, not a bill)"


@dataclass(frozen=True)
class Estimate:
    lines: list[tuple[str, float]]  # (what, USD per hour)

    @property
    def per_hour(self) -> float:
        return round(sum(v for _, v in self.lines), 2)

    def for_hours(self, hours: float) -> float:
        return round(self.per_hour * hours, 2)


def estimate(spec: ClusterSpec) -> Estimate:
    """List prices of what a GCP stack declares, from the catalog: each worker pool's machines."""
    lines: list[tuple[str, float]] = []
    for role, _, group in spec.groups():
        lines += [(f"{role}: {what}" if role else what, value) for what, value in _group_lines(group)]
    if spec.kind == "gke":
        lines.append(("GKE cluster fee", catalog.GKE_CLUSTER_FEE_PER_HOUR))
    return Estimate([(what, round(v, 4)) for what, v in lines])


def _group_lines(spec: ClusterSpec) -> list[tuple[str, float]]:
    lines: list[tuple[str, float]] = []
    n = spec.node_count
    if spec.tpu:
        tpu = catalog.TPUS[spec.tpu.type]
        price = tpu.spot_price_per_chip if spec.spot else tpu.price_per_chip
        slices = n // tpu.hosts  # a GKE pool's slices, or a TPU VM stack's tpu.slices
        lines.append((f"{slices} x {tpu.name} ({tpu.chips} chips)", slices * tpu.chips * price))
    else:
        machine = catalog.MACHINES[spec.machine_type or ""]
        price = machine.spot_price if spec.spot else machine.price
        lines.append((f"{n} x {machine.name}", n * price))
        if spec.gpu and not machine.bundled_gpu:
            gpu = catalog.GPUS[spec.gpu.type]
            per_gpu = gpu.spot_price_per_gpu if spec.spot else gpu.price_per_gpu
            lines.append((f"{n * spec.gpu.count} x {gpu.label}", n * spec.gpu.count * per_gpu))
        if spec.kind == "vm":
            disk = n * spec.boot_disk_gb * PD_BALANCED_PER_GB_MONTH / HOURS_PER_MONTH
            lines.append((f"{n} x {spec.boot_disk_gb} GB boot disk", disk))
    return lines


def per_node_per_hour(group: ClusterSpec) -> float:
    """One node's share of a pool's list price (a one-group spec, as `spec.groups()` yields it):
    machine, attached GPUs, boot disk; a TPU slice's price shared by its hosts."""
    return sum(v for _, v in _group_lines(group)) / max(1, group.node_count)
