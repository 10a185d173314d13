"""The quota a stack takes, per pool and in total, from its spec and the catalog alone.

Each pool's VMs (a GKE pool's nodes are VMs too) hold, while they run: their vCPUs in the family's
regional metric and in CPUS_ALL_REGIONS, their GPUs in the GPU's regional metric (or, for the GPUs
Compute has none for, the GPU-family quota GPUS_PER_GPU_FAMILY:<gpu_family>: infra/spec/gpu_quota.py)
and in GPUS_ALL_REGIONS, one INSTANCES each; VMs trainctl creates itself also hold their boot disk in the
disk type's metric and, with external IPs, one IN_USE_ADDRESSES each. Spot VMs count toward the
PREEMPTIBLE_ metric of CPUs and GPUs, or the standard one where the project has no preemptible
quota (https://cloud.google.com/compute/docs/instances/create-use-spot#quotas); so do flex-start
VMs (GCE's flex-start announcement: they "consume preemptible quota"). TPU VMs are the TPU API's to meter per zone when the TPU is created, in chips or TensorCores under a quota id per
generation (shown by `plan`; the TPU API offers no read of it).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Mapping

from infra.providers.gcp.program.network import region_of
from infra.spec import catalog, gpu_networks, gpu_quota
from infra.spec.accelerator import Gpu
from infra.spec.cluster import ClusterSpec

GLOBAL = "global"
COMPUTE = "compute.googleapis.com"
TPU = "tpu.googleapis.com"


@dataclass(frozen=True)
class Need:
    metric: str
    region: str  # GLOBAL for project-wide metrics
    amount: float
    # Spot VMs count against the standard metric where the project has no preemptible quota
    fallback: str | None = None
    service: str = COMPUTE  # whose quota: Compute's (read before up), or the TPU API's (per zone)


@dataclass(frozen=True)
class PoolNeeds:
    pool: str  # the role, or the stack's name for a cluster without pools
    nodes: int
    provisioning: str  # "on-demand", "spot", "flex-start", or "reservation <name>" / "any reservation"
    needs: tuple[Need, ...]


def _standard_of(metric: str) -> str | None:
    return gpu_quota.standard_quota_metric(metric)


def provisioning(view: ClusterSpec) -> str:
    """How the pool's VMs get their capacity, as GCE names the models."""
    if view.flex_start:
        return "flex-start"
    if view.spot:
        return "spot"
    if view.reservation in (None, "none"):
        return "on-demand"
    return "any reservation" if view.reservation == "any" else f"reservation {view.reservation}"


def _vm_amounts(view: ClusterSpec, region: str, nodes: int) -> dict[tuple[str, str], float]:
    machine = catalog.MACHINES.get(view.node_machine_type or "")
    if machine is None:  # a GKE TPU pool's ct* machines: metered by TPU quotas, see the module doc
        return {}
    cpu = catalog.cpu_quota_metric(machine.name)
    # flex-start VMs consume preemptible quota as spot VMs do (GCE's flex-start VM announcement)
    preemptible = view.spot or view.flex_start
    if cpu == "CPUS" and preemptible:
        cpu = "PREEMPTIBLE_CPUS"
    out: dict[tuple[str, str], float] = defaultdict(float)
    out[(catalog.CPUS_ALL_REGIONS, GLOBAL)] += machine.vcpus * nodes
    out[(cpu, region)] += machine.vcpus * nodes
    out[("INSTANCES", region)] += nodes
    accel = view.accelerator
    if isinstance(accel, Gpu):
        out[(catalog.GPUS_ALL_REGIONS, GLOBAL)] += accel.count * nodes
        out[(catalog.GPUS[accel.type].quota_metric_for(preemptible), region)] += accel.count * nodes
    if view.runs_on_vms:  # the program sets these for its own VMs; GKE decides its nodes' disks
        # Hyperdisk boot disks (A3 Ultra, A4) are not among the Persistent Disk metrics counted here.
        disk = catalog.DISK_QUOTA_METRICS.get(gpu_networks.boot_disk_type(view.machine_type))
        if disk:
            out[(disk, region)] += view.boot_disk_gb * nodes
        if view.network.external_ips:
            out[("IN_USE_ADDRESSES", region)] += nodes
    return out


def _tpu_slice(spec: ClusterSpec, zone: str) -> PoolNeeds:
    """A TPU VM stack's slice (or slices), in the TPU API's zonal quota (chips or TensorCores)."""
    assert spec.tpu is not None
    tpu = catalog.TPUS[spec.tpu.type]
    need = Need(catalog.tpu_quota_id(tpu, spec.spot), zone, catalog.tpu_quota_units(tpu) * spec.tpu.slices,
                service=TPU)
    model = f"queued, {provisioning(spec)}" if spec.tpu.queued else provisioning(spec)
    return PoolNeeds(spec.name, spec.node_count, model, (need,))


def per_pool(spec: ClusterSpec, existing: Mapping[str, int] | None = None) -> list[PoolNeeds]:
    """What each pool takes (TPU VM stacks: nothing of Compute's). `existing`: the pools' VMs that
    exist already (a stack planned or brought up again), whose quota is in the project's usage."""
    if spec.zone is None:
        return []
    if spec.kind == "tpu":
        return [_tpu_slice(spec, spec.zone)]
    region = region_of(spec.zone)
    out = []
    for role, _, view in spec.groups():
        pool = role or spec.name
        amounts = _vm_amounts(view, region, max(view.node_count - (existing or {}).get(pool, 0), 0))
        needs = tuple(Need(metric, where, amount, _standard_of(metric))
                      for (metric, where), amount in sorted(amounts.items()))
        out.append(PoolNeeds(pool, view.node_count, provisioning(view), needs))
    return out


def needs(spec: ClusterSpec, existing: Mapping[str, int] | None = None) -> list[Need]:
    """The stack's total of Compute quota (what is read before `up`), per metric and region."""
    totals: dict[tuple[str, str], float] = defaultdict(float)
    for pool in per_pool(spec, existing):
        for need in pool.needs:
            if need.service == COMPUTE:
                totals[(need.metric, need.region)] += need.amount
    return [Need(metric, where, amount, _standard_of(metric)) for (metric, where), amount in sorted(totals.items())]
