"""`trainctl plan --json`: the plan as one JSON document for policies in CI, what
`terraform show -json` is to a Terraform plan. Its shape is documented in docs/plan-json.md and
versioned by `format_version`; fields are only ever added within a version.

Built from the same data the table shows (the realizer's plan rows, the cost estimate) plus the
capacity a quota check needs: machines, vCPUs, GPUs and TPU chips per pool and in total, spot
counted apart (GCP meters preemptible GPUs and TPUs under quotas of their own)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from infra.providers.protocol import Capabilities, PlanRow
from infra.spec import catalog
from infra.spec.cluster import ClusterSpec
from infra.spec.cost import Estimate

FORMAT_VERSION = "1"
COST_BASIS = "catalog list prices in USD, before discounts, sustained use and egress"


class Document(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Stack(Document):
    name: str
    provider: str
    kind: Literal["vm", "tpu", "gke"]
    project: str | None
    zone: str | None
    region: str | None
    ttl_hours: float
    ephemeral: bool


class Gpu(Document):
    type: str
    count_per_node: int


class Tpu(Document):
    type: str
    chips_per_node: int


class Pool(Document):
    role: str | None  # chief / worker / ps / evaluator; None: a cluster without pools
    nodes: int
    machine_type: str | None  # None on the local stack (its nodes are this machine)
    vcpus_per_node: int | None
    memory_gb_per_node: float | None
    gpu: Gpu | None
    tpu: Tpu | None
    spot: bool
    boot_disk_gb: int | None  # VMs only


class Totals(Document):
    nodes: int
    vcpus: int | None  # None when a pool's machines are not in the catalog (local nodes)
    gpus: dict[str, int]  # on-demand GPUs by accelerator type
    spot_gpus: dict[str, int]
    tpu_chips: dict[str, int]  # on-demand TPU chips by TPU type
    spot_tpu_chips: dict[str, int]
    boot_disk_gb: int


class QuotaLine(Document):
    metric: str  # the quota metric: Compute's (NVIDIA_T4_GPUS) or, on TPU VM stacks, the TPU API's quota id
    region: str  # "global" for project-wide metrics; a zone for TPU quota
    needed: float
    free: float | None  # None: not read (see PoolQuota.not_read) or no limit


class PoolQuota(Document):
    pool: str
    provisioning: str  # on-demand, spot, reservation <name>, any reservation
    existing_nodes: int = 0  # the pool's VMs up already: their quota is in use, not needed again
    lines: list[QuotaLine]
    not_read: str | None = None  # why free is unknown (no credentials, Compute API off)


class Capacity(Document):
    pools: list[Pool]
    totals: Totals
    quota: list[PoolQuota] = []  # per pool, where the provider meters quota (GCP)


class Resource(Document):
    kind: str
    name: str
    values: dict[str, Any]


class CostLine(Document):
    item: str
    per_hour: float


class Cost(Document):
    currency: Literal["USD"] = "USD"
    per_hour: float
    ttl_hours: float
    for_ttl: float
    lines: list[CostLine]
    basis: str = COST_BASIS


class Plan(Document):
    format_version: str = FORMAT_VERSION
    stack: Stack
    capacity: Capacity
    resources: list[Resource]
    cost: Cost
    notes: list[str]


def plan_document(spec: ClusterSpec, rows: list[PlanRow], estimate: Estimate, notes: list[str],
                  can: Capabilities) -> Plan:
    pools = [_pool(role, group, can.machine_types) for role, _, group in spec.groups()]
    return Plan(
        stack=Stack(name=spec.name, provider=spec.provider, kind=spec.kind, project=spec.project,
                    zone=spec.zone, region=spec.zone.rsplit("-", 1)[0] if spec.zone else None,
                    ttl_hours=spec.ttl_hours, ephemeral=spec.ephemeral),
        capacity=Capacity(pools=pools, totals=_totals(pools), quota=[_quota(r) for r in rows if r.is_capacity]),
        resources=[Resource(kind=r.kind, name=r.name, values=dict(r.values)) for r in rows if not r.is_capacity],
        cost=Cost(per_hour=estimate.per_hour, ttl_hours=spec.ttl_hours,
                  for_ttl=estimate.for_hours(spec.ttl_hours),
                  lines=[CostLine(item=what, per_hour=value) for what, value in estimate.lines]),
        notes=notes)


def _quota(row: PlanRow) -> PoolQuota:
    return PoolQuota(pool=row.name, provisioning=row.values["provisioning"],
                     existing_nodes=row.values.get("existing", 0),
                     lines=[QuotaLine(**line) for line in row.values.get("quota", [])],
                     not_read=row.values.get("quota_free"))


def _pool(role: str | None, group: ClusterSpec, machine_types: bool) -> Pool:
    tpu = catalog.TPUS[group.tpu.type] if group.tpu else None
    machine_type = group.node_machine_type
    machine = catalog.MACHINES.get(machine_type or "")
    return Pool(role=role, nodes=group.node_count, machine_type=machine_type,
                vcpus_per_node=machine.vcpus if machine else None,
                memory_gb_per_node=machine.memory_gb if machine else None,
                gpu=Gpu(type=group.gpu.type, count_per_node=group.gpu.count) if group.gpu else None,
                tpu=Tpu(type=tpu.name, chips_per_node=tpu.chips_per_host) if tpu else None,
                spot=group.spot,
                boot_disk_gb=group.boot_disk_gb if group.runs_on_vms and machine_types else None)


def _totals(pools: list[Pool]) -> Totals:
    gpus: dict[str, int] = {}
    spot_gpus: dict[str, int] = {}
    chips: dict[str, int] = {}
    spot_chips: dict[str, int] = {}
    for pool in pools:
        if pool.gpu:
            into = spot_gpus if pool.spot else gpus
            into[pool.gpu.type] = into.get(pool.gpu.type, 0) + pool.nodes * pool.gpu.count_per_node
        if pool.tpu:
            into = spot_chips if pool.spot else chips
            into[pool.tpu.type] = into.get(pool.tpu.type, 0) + pool.nodes * pool.tpu.chips_per_node
    vcpus = [p.vcpus_per_node * p.nodes if p.vcpus_per_node is not None else None for p in pools]
    return Totals(nodes=sum(p.nodes for p in pools),
                  vcpus=None if None in vcpus else sum(v for v in vcpus if v is not None),
                  gpus=gpus, spot_gpus=spot_gpus, tpu_chips=chips, spot_tpu_chips=spot_chips,
                  boot_disk_gb=sum(p.boot_disk_gb * p.nodes for p in pools if p.boot_disk_gb))
