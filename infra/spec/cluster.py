"""ClusterSpec: the single validated description of a cluster.

Both realizers (infra/providers/local, infra/providers/gcp) take a ClusterSpec and never re-read raw config.
Every invalid combination fails while it is built, naming the field, the bad value and the valid
choices, all checked against infra/spec/catalog.py: its sections check themselves
(cluster_sections.py), the provider's constraints settle what depends on the rest
(provider_constraints.py), and this module holds the cluster as a whole and what is derived from it.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from infra.spec import catalog
from infra.spec.accelerator import Cpu, Gpu, Tpu
from infra.spec.budget import Budget
from infra.spec.cluster_sections import (BucketSpec, GpuRequest, NetworkSpec, SshSpec, TpuRequest,
                                         check_data_buckets, check_reservation_value)
from infra.spec.gke_names import kube_name
from infra.spec.model import SpecModel, resolve
from infra.spec.provider_constraints import check_provider

# GCE resource names: RFC 1035 labels. Suffixes such as "-node-12" and "-fw-internal" are
# appended, so the cluster name keeps 22 characters of headroom below GCE's 63.
NAME_RE = re.compile(r"^[a-z]([-a-z0-9]{0,39}[a-z0-9])?$")
LABEL_KEY_RE = re.compile(r"^[a-z][-_a-z0-9]{0,62}$")
LABEL_VALUE_RE = re.compile(r"^[-_a-z0-9]{0,63}$")


def validate_name(value: str, what: str = "name") -> str:
    if not NAME_RE.match(value):
        raise ValueError(
            f"{what} {value!r} must be 1-41 characters of lowercase letters, digits and '-', "
            "start with a letter and not end with '-' (GCE and Kubernetes naming rules)")
    return value


Role = Literal["chief", "worker", "ps", "evaluator"]
# Vertex AI's workerPoolSpecs[0..3]: primary (chief), workers, parameter servers, evaluators.
POOL_ORDER: tuple[Role, ...] = ("chief", "worker", "ps", "evaluator")
SINGLE_REPLICA_ROLES = ("chief", "evaluator")  # Vertex: one primary; TF: at most one evaluator


class PoolSpec(SpecModel):
    """A worker pool: replicas with one role and one machine shape (Vertex's WorkerPoolSpec)."""
    role: Role
    """The pool's role: `chief` (one replica), `worker`, `ps` (TensorFlow parameter servers) or `evaluator` (at most one)."""
    count: int = Field(1, ge=1, le=512)
    """How many replicas (nodes) the pool has."""
    machine_type: str | None = None
    """The pool's machine type; unset: the cluster's `machine_type`."""
    gpu: GpuRequest | None = None
    """GPUs attached to each of the pool's nodes; unset: none, or what the machine type bundles."""
    spot: bool | None = None
    """Spot nodes for this pool; unset: the cluster's `spot`."""
    reservation: str | None = None
    """The pool's reserved capacity (a reservation's name, `any` or `none`); unset: the cluster's `reservation`."""

    @field_validator("reservation")
    @classmethod
    def reservation_value(cls, v: str | None) -> str | None:
        return check_reservation_value(v)


TORCH_HAS_NO_PS = ("PyTorch has no parameter servers: this cluster's ps pool would sit idle; "
                   "remove the ps pool (DDP needs only chief and workers), or run TensorFlow")
JAX_HAS_NO_PS = ("JAX has no parameter servers: its processes are all peers of one jax.distributed "
                 "group, and this cluster's ps pool would sit idle; remove the ps pool, or run TensorFlow")


class ClusterSpec(SpecModel):
    """The cluster a stack file describes: its `trainctl:<field>` keys, plus Pulumi's own
    `gcp:project` / `gcp:zone` as defaults."""

    name: str
    """The cluster's name, a prefix of every resource's name (1-41 characters, RFC 1035); default: the stack's name."""
    provider: Literal["local", "gcp"] = "local"
    """Where the cluster is made: `local` (network namespaces on this machine) or `gcp`."""
    kind: Literal["vm", "tpu", "gke"] = "vm"
    """What the nodes are: Compute Engine VMs (`vm`), TPU VMs (`tpu`) or a GKE cluster's node pools (`gke`)."""
    project: str | None = None
    """The GCP project (gcp stacks; default: the stack file's `gcp:project`)."""
    zone: str | None = None
    """The zone every node is created in (default: the stack file's `gcp:zone`)."""
    zones: tuple[str, ...] = ()
    """Zones to fail over between on a stockout, all nodes in one of them (infra/spec/zone_choice.py)."""
    region: str | None = None
    """A region instead of `zones`: every zone of it that offers the stack's machines, tried in turn."""
    nodes: int | None = Field(None, ge=1, le=512)
    """How many nodes, without `pools` (for a TPU type with several hosts: its host count)."""
    machine_type: str | None = None
    """The nodes' machine type (GCE, or the shape a local node reports), checked against the catalog."""
    gpu: GpuRequest | None = None
    """GPUs attached to each node, for machine types that do not bundle them."""
    tpu: TpuRequest | None = None
    """The TPU slice (`kind: tpu`, or a GKE TPU node pool)."""
    processes_per_node: int | None = Field(None, ge=1, le=64)
    """Training processes per node; default: one per GPU, else one."""
    spot: bool = False
    """Spot VMs: cheaper, reclaimable at any time; runs recover from the latest checkpoint."""
    reservation: str | None = None
    """Reserved capacity for GPU VMs and GKE GPU node pools: a reservation's name, `any` (any
    matching one) or `none` (never reserved capacity); unset sends nothing, GCE's default
    (ANY_RESERVATION)."""
    placement: Literal["compact", "none"] | None = None
    """A COMPACT placement policy for the nodes (infra/spec/placement.py): the GPUDirect families
    get one by default, A2/G2 ask with `compact`; `none` turns it off."""
    provisioning: Literal["standard", "flex-start", "reservation-bound"] = "standard"
    """GCE's provisioning model beyond spot: `flex-start` VMs (Dynamic Workload Scheduler) wait in
    a queue for capacity, then run at most 7 days (their max run duration is the stack's TTL);
    `reservation-bound` VMs run on the reservation they name, for as long as it lasts (how A3 Ultra
    and A4 VMs consume their reservations: infra/spec/consumption.py)."""
    flex_start_deadline_minutes: float = Field(60, gt=0, le=catalog.FLEX_START_MAX_WAIT_MINUTES)
    """How long `up` waits for a flex-start grant (VM stacks) before giving up and removing what it
    made. trainctl's own wait: GCE is not told it (pulumi-gcp has no
    params.requestValidForDuration), so GCE's own window for the request applies there."""
    instance_termination_action: Literal["STOP", "DELETE"] | None = None
    """What GCE does with a reclaimed spot VM: `STOP` keeps its disk (billed), `DELETE` removes it."""
    boot_disk_gb: int = Field(200, ge=10, le=65536)
    """Each node's boot disk, in GB."""
    image: str | None = None
    """The nodes' boot image; default: the catalog's GPU or CPU image."""
    python: str = "python3"
    """The interpreter on the nodes that bootstrap builds the uv environment with."""
    ssh: SshSpec = Field(default_factory=SshSpec)
    """SSH access to the nodes (see `ssh.*`)."""
    network: NetworkSpec = Field(default_factory=NetworkSpec)
    """The cluster's network (see `network.*`)."""
    bucket: BucketSpec = Field(default_factory=BucketSpec)
    """The stack's bucket for checkpoints and artifacts (see `bucket.*`)."""
    data_buckets: tuple[str, ...] = ()
    """Buckets the nodes only read (an experiment's `data:` sources): GCP grants the nodes'
    account roles/storage.objectViewer on each, nothing more."""
    ttl_hours: float = Field(4.0, gt=0, le=24 * 30)
    """How long the stack may live; `reap` (and the scheduled reaper) delete it after that."""
    ephemeral: bool = False
    """A stack made for one run (`trainctl run` sets it): its bucket goes with it, objects and all,
    and no idle watch applies."""
    scheduled_reaper: bool = False
    """GCP: deploy a timer (a Cloud Function on a schedule) that deletes expired resources."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Labels put on every resource, beside trainctl's own."""
    pools: tuple[PoolSpec, ...] = ()
    """Worker pools with roles (chief, worker, ps, evaluator), each with its own machines; without
    them the cluster is one group whose first node is the chief."""
    budget: Budget | None = None
    """What the stack may cost: an hourly cap `plan` checks, a total a run stops before (budget.py)."""
    idle_minutes: float | None = Field(None, gt=0, le=7 * 24 * 60)
    """A stack stood up by `trainctl up` goes down by itself after this long unused and idle
    (fractions allowed: 0.25 is 15 s); `ttl_hours` stays the backstop."""
    queue: str | None = None
    """GKE: the Kueue LocalQueue (in the pods' namespace) that admits the stack's jobs; they are
    submitted as JobSets labelled `kueue.x-k8s.io/queue-name` (docs/how-to/kueue-and-jobset.md).
    An experiment's `queue` overrides it. Unset: the job runs as soon as it is created."""
    priority_class: str | None = None
    """GKE: the PriorityClass of the jobs' pods (Kueue orders and preempts workloads by it). An
    experiment's `priority_class` overrides it."""

    @field_validator("name")
    @classmethod
    def gce_name(cls, v: str) -> str:
        return validate_name(v, "name")

    @field_validator("queue", "priority_class")
    @classmethod
    def kubernetes_name(cls, v: str | None, info: ValidationInfo) -> str | None:
        return kube_name(v, str(info.field_name))

    @field_validator("reservation")
    @classmethod
    def reservation_value(cls, v: str | None) -> str | None:
        return check_reservation_value(v)

    @field_validator("data_buckets")
    @classmethod
    def data_bucket_names(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return check_data_buckets(v)

    @field_validator("pools")
    @classmethod
    def pool_roles(cls, v: tuple[PoolSpec, ...]) -> tuple[PoolSpec, ...]:
        if not v:
            return v
        roles = [p.role for p in v]
        twice = sorted({r for r in roles if roles.count(r) > 1})
        if twice:
            raise ValueError(f"pools: one pool per role; {', '.join(twice)} appears more than once "
                             "(set its count instead)")
        if "chief" not in roles:
            raise ValueError("pools: a chief pool is required (the primary replica, Vertex's "
                             "workerPoolSpecs[0])")
        for pool in v:
            if pool.role in SINGLE_REPLICA_ROLES and pool.count != 1:
                raise ValueError(f"pools: the {pool.role} pool has exactly one replica (count 1), "
                                 f"not {pool.count}")
        return tuple(sorted(v, key=lambda p: POOL_ORDER.index(p.role)))

    @field_validator("labels")
    @classmethod
    def gce_labels(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not LABEL_KEY_RE.match(key):
                raise ValueError(f"label key {key!r} must match {LABEL_KEY_RE.pattern}")
            if not LABEL_VALUE_RE.match(str(value)):
                raise ValueError(f"label {key}={value!r}: values must match {LABEL_VALUE_RE.pattern}")
        return v

    @model_validator(mode="after")
    def resolved(self) -> ClusterSpec:
        """The cluster resolved: the checks return the defaults that depend on other fields
        (node count, processes per node, a machine type's bundled GPU), filled in here, in one
        place. Every later layer reads `nodes` and `processes_per_node` as set."""
        for pool in self.pools:  # a pool without its own spot flag takes the cluster's
            if pool.spot is None:
                resolve(pool, {"spot": self.spot})
            if pool.reservation is None:
                resolve(pool, {"reservation": self.reservation})
        if self.instance_termination_action and not self.has_spot:
            raise ValueError("instance_termination_action applies to spot VMs only (set spot: true, "
                             "or remove it)")
        if (self.queue or self.priority_class) and self.kind != "gke":
            raise ValueError("queue and priority_class name Kubernetes objects: they apply to GKE stacks "
                             "(kind: gke) only")
        if self.pools:
            self._check_pools_shape()
        updates = check_provider(self)
        if self.pools:
            updates["nodes"] = sum(p.count for p in self.pools)
        if self.has_spot and self.instance_termination_action is None:
            updates["instance_termination_action"] = "DELETE"
        return resolve(self, updates)

    def _check_pools_shape(self) -> None:
        if self.kind != "vm":
            raise ValueError(f"pools run on VMs (kind 'vm'); a {self.kind!r} stack is one group of "
                             "nodes: remove pools, or use kind 'vm'")
        total = sum(p.count for p in self.pools)
        if self.nodes is not None and self.nodes != total:
            raise ValueError(f"nodes {self.nodes} does not match the pools' {total} replicas; "
                             "leave nodes out (the pools set it)")

    # -- derived -----------------------------------------------------------------------------
    @property
    def node_count(self) -> int:
        assert self.nodes is not None  # set by validation
        return self.nodes

    @property
    def has_spot(self) -> bool:
        """Whether any node is on spot capacity (the cluster's flag, or a pool's)."""
        return self.spot or any(p.spot for p in self.pools)

    def framework_problem(self, framework: str) -> str | None:
        """Why `framework` cannot run on this cluster's nodes as declared, or None."""
        if framework == "torch" and any(p.role == "ps" for p in self.pools):
            return TORCH_HAS_NO_PS
        if framework == "jax" and any(p.role == "ps" for p in self.pools):
            return JAX_HAS_NO_PS
        if framework != "tensorflow" or self.tpu is None:
            return None
        if self.tpu.slices > 1:
            return (f"stack {self.name}: TensorFlow cannot train on {self.tpu.slices} TPU slices: its TPUStrategy "
                    "drives one slice's TF servers and has no multislice (MEGASCALE) path; use framework torch "
                    "(PyTorch/XLA) or a JAX program, or tpu.slices: 1")
        if self.kind != "tpu":
            return None
        tpu = catalog.TPUS[self.tpu.type]
        runtime = self.tpu.runtime_version or tpu.runtime_versions[0]
        if catalog.tpu_runtime_has_tensorflow(runtime):
            return None
        fits = catalog.tensorflow_runtimes(tpu)
        return (f"stack {self.name}: TensorFlow needs a TPU runtime that has it, and {runtime!r} has none; "
                f"set tpu.runtime_version to {' or '.join(repr(r) for r in fits) or 'a tpu-vm-tf-* runtime'}")

    @property
    def flex_start(self) -> bool:
        return self.provisioning == "flex-start"

    @property
    def reservation_bound(self) -> bool:
        return self.provisioning == "reservation-bound"

    def node_is_spot(self, index: int) -> bool:
        return next(view.spot for _, first, view in self.groups() if first <= index < first + view.node_count)

    def on_demand(self) -> ClusterSpec:
        """The same nodes without spot capacity: what a spot run's saving is measured against."""
        return self.model_copy(update={"spot": False, "pools": tuple(p.model_copy(update={"spot": False})
                                                                    for p in self.pools)})

    @property
    def node_tasks(self) -> list[tuple[Role, int]]:
        """Each node's task (role, index within the role), in node order: the pools in
        Vertex's order, or one group whose first node is the chief and the rest workers."""
        if not self.pools:
            first: list[tuple[Role, int]] = [("chief", 0)]
            return first + [("worker", i) for i in range(self.node_count - 1)]
        return [(p.role, i) for p in self.pools for i in range(p.count)]

    def groups(self) -> list[tuple[Role | None, int, ClusterSpec]]:
        """(role, first node index, the pool as a one-group spec) per pool: what the GCP
        program declares and the estimate prices. A cluster without pools is one group."""
        if not self.pools:
            return [(None, 0, self)]
        out: list[tuple[Role | None, int, ClusterSpec]] = []
        offset = 0
        for pool in self.pools:
            view = self.model_copy(update={"pools": (), "nodes": pool.count, "machine_type": pool.machine_type,
                                           "gpu": pool.gpu, "spot": bool(pool.spot),
                                           "reservation": pool.reservation})
            out.append((pool.role, offset, view))
            offset += pool.count
        return out

    @property
    def procs_per_node(self) -> int:
        assert self.processes_per_node is not None
        return self.processes_per_node

    @property
    def runs_on_vms(self) -> bool:
        """Whether each node is a VM of its own with a boot disk (kind vm: GCE's, or a local
        namespace standing in for one), not a TPU VM or a GKE pod."""
        return self.kind == "vm"

    @property
    def node_machine_type(self) -> str | None:
        """The machine type of each node: the one named, or a GKE TPU pool's (the slice's)."""
        if self.machine_type or not self.tpu or self.kind != "gke":
            return self.machine_type
        return catalog.TPUS[self.tpu.type].gke_machine_type

    @property
    def accelerator(self) -> Cpu | Gpu | Tpu:
        """What each node of the stack computes with."""
        if self.tpu:
            return Tpu(type=self.tpu.type)
        if self.gpu:
            return Gpu(type=self.gpu.type, count=self.gpu.count)
        return Cpu()
