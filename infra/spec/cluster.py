"""ClusterSpec: the single validated description of a cluster.

Both realizers (infra/providers/local, infra/providers/gcp) take a ClusterSpec and never re-read raw config.
Every invalid combination fails here, naming the field, the bad value and the valid choices,
all checked against infra/spec/catalog.py.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from infra.spec import catalog
from infra.spec.accelerator import Cpu, Gpu, Tpu

# GCE resource names: RFC 1035 labels. Suffixes such as "-node-12" and "-fw-internal" are
# appended, so the cluster name keeps 22 characters of headroom below GCE's 63.
NAME_RE = re.compile(r"^[a-z]([-a-z0-9]{0,39}[a-z0-9])?$")
LABEL_KEY_RE = re.compile(r"^[a-z][-_a-z0-9]{0,62}$")
LABEL_VALUE_RE = re.compile(r"^[-_a-z0-9]{0,63}$")


class SpecModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


M = TypeVar("M", bound=BaseModel)


def resolve(model: M, derived: dict[str, Any]) -> M:
    """Fill in defaults derived from other fields, during validation only. A validator cannot
    return a new model when validation runs through __init__ (pydantic ignores it and warns),
    so the validated instance is completed in place, before anyone else has seen it."""
    for name, value in derived.items():
        object.__setattr__(model, name, value)
    return model


_choices = catalog.choices


def validate_name(value: str, what: str = "name") -> str:
    if not NAME_RE.match(value):
        raise ValueError(
            f"{what} {value!r} must be 1-41 characters of lowercase letters, digits and '-', "
            "start with a letter and not end with '-' (GCE and Kubernetes naming rules)")
    return value


class GpuRequest(SpecModel):
    type: str
    count: int = Field(1, ge=1, le=16)

    @field_validator("type")
    @classmethod
    def known_gpu(cls, v: str) -> str:
        return catalog.known_gpu(catalog.gpu_label_to_name(v))


class TpuRequest(SpecModel):
    type: str
    runtime_version: str | None = None  # defaults to the catalog's first for the type
    queued: bool = False  # refused below; kept as a field so the refusal can explain itself

    @field_validator("type")
    @classmethod
    def known_tpu(cls, v: str) -> str:
        return catalog.known_tpu(v)

    @field_validator("queued")
    @classmethod
    def not_queued(cls, v: bool) -> bool:
        if v:
            raise ValueError(
                "tpu.queued: true is not supported: a queued TPU's node spec takes no metadata, "
                "tags, labels or service account, so it would get no SSH key, no firewall tag and "
                "be invisible to the reaper; remove tpu.queued to create the TPU directly")
        return v

    @model_validator(mode="after")
    def known_runtime(self) -> TpuRequest:
        tpu = catalog.TPUS[self.type]
        if self.runtime_version is None:
            # pydantic cannot return a new model from validation through __init__: defaults
            # that depend on other fields are filled in on the frozen instance (resolve()).
            resolve(self, {"runtime_version": tpu.runtime_versions[0]})
        if self.runtime_version not in tpu.runtime_versions:
            raise ValueError(
                f"runtime_version {self.runtime_version!r} is not offered for {self.type}; "
                f"valid: {_choices(tpu.runtime_versions)}")
        # TensorFlow's TPU runtimes come in two builds: "-pod" ones serve a multi-host slice
        # from worker 0, the others a single host; the wrong one fails only at training time.
        runtime = self.runtime_version or ""
        if _is_tf_runtime(runtime) and _is_pod_runtime(runtime) != tpu.multi_host:
            fits = [r for r in tpu.runtime_versions
                    if not _is_tf_runtime(r) or _is_pod_runtime(r) == tpu.multi_host]
            shape = f"a multi-host slice ({tpu.hosts} hosts)" if tpu.multi_host else "a single host"
            need = "a -pod" if tpu.multi_host else "a non-pod"
            raise ValueError(f"runtime_version {runtime!r} does not fit {self.type}: it is {shape}, "
                             f"which needs {need} TensorFlow runtime; valid: {_choices(fits)}")
        return self


def _is_tf_runtime(runtime: str) -> bool:
    return runtime.startswith("tpu-vm-tf-")


def _is_pod_runtime(runtime: str) -> bool:
    return "-pod" in runtime


def _cidr(value: str, what: str) -> str:
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        raise ValueError(f"{what} {value!r} is not a valid CIDR ({exc})") from None
    return str(net)


class NetworkSpec(SpecModel):
    subnet_cidr: str = "10.128.0.0/20"
    # Nodes get external IPs that only ssh.source_ranges may reach on port 22. Without them,
    # Cloud NAT gives egress and SSH goes through IAP (add 35.235.240.0/20 to source_ranges).
    external_ips: bool = True
    nat: bool = False

    @field_validator("subnet_cidr")
    @classmethod
    def private_subnet(cls, v: str) -> str:
        net = ipaddress.ip_network(_cidr(v, "subnet_cidr"))
        if not net.is_private or net.version != 4:
            raise ValueError(f"subnet_cidr {v!r} must be a private IPv4 range (RFC 1918)")
        if net.prefixlen > 29 or net.prefixlen < 8:
            raise ValueError(f"subnet_cidr {v!r} must have a prefix between /8 and /29")
        return str(net)


class SshSpec(SpecModel):
    user: str = "trainctl"  # the account created on GCP nodes; local nodes are always root
    public_key: str | None = None  # default: the key trainctl generates per stack
    # Who may reach port 22. Required on GCP (no 0.0.0.0/0 default); the local stack only
    # admits its controller, the bridge address.
    source_ranges: tuple[str, ...] = ()

    @field_validator("user")
    @classmethod
    def posix_user(cls, v: str) -> str:
        if not re.match(r"^[a-z_][a-z0-9_-]{0,31}$", v):
            raise ValueError(f"ssh user {v!r} is not a valid POSIX user name")
        return v

    @field_validator("source_ranges")
    @classmethod
    def no_world(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        out = []
        for item in v:
            net = ipaddress.ip_network(_cidr(item, "ssh.source_ranges entry"))
            if net.prefixlen == 0:
                raise ValueError(
                    f"ssh.source_ranges entry {item!r} opens SSH to the whole internet; "
                    "name your own address range (e.g. 203.0.113.7/32)")
            out.append(str(net))
        return tuple(out)


BUCKET_COMPONENT_RE = re.compile(r"^[a-z0-9]([-_a-z0-9]*[a-z0-9])?$")


def bucket_name_problem(name: str) -> str | None:
    """Cloud Storage's bucket naming rules (cloud.google.com/storage/docs/buckets#naming)."""
    if not re.fullmatch(r"[-_.a-z0-9]+", name):
        return "only lowercase letters, digits, '-', '_' and '.' are allowed"
    limit = 222 if "." in name else 63
    if not 3 <= len(name) <= limit:
        return f"must be 3-{limit} characters{' (dotted names)' if '.' in name else ''}"
    parts = name.split(".")
    if any(len(p) > 63 for p in parts):
        return "each dot-separated component must be at most 63 characters"
    if not all(BUCKET_COMPONENT_RE.match(p) for p in parts):
        return "must start and end with a letter or digit (also around each '.')"
    if name.startswith("goog") or "google" in name or "g00gle" in name:
        return "must not start with 'goog' or contain 'google'"
    try:
        ipaddress.ip_address(name)
        return "must not be an IP address"
    except ValueError:
        return None


class BucketSpec(SpecModel):
    name: str | None = None  # default: derived from project + cluster name
    location: str = "US"
    retention_days: int = Field(30, ge=1, le=3650)  # lifecycle: delete old run objects

    @field_validator("name")
    @classmethod
    def gcs_name(cls, v: str | None) -> str | None:
        problem = bucket_name_problem(v) if v is not None else None
        if problem:
            raise ValueError(f"bucket.name {v!r}: {problem} (Cloud Storage bucket naming rules)")
        return v


Role = Literal["chief", "worker", "ps", "evaluator"]
# Vertex AI's workerPoolSpecs[0..3]: primary (chief), workers, parameter servers, evaluators.
POOL_ORDER: tuple[Role, ...] = ("chief", "worker", "ps", "evaluator")
SINGLE_REPLICA_ROLES = ("chief", "evaluator")  # Vertex: one primary; TF: at most one evaluator


class PoolSpec(SpecModel):
    """A worker pool: replicas with one role and one machine shape (Vertex's WorkerPoolSpec)."""
    role: Role
    count: int = Field(1, ge=1, le=512)
    machine_type: str | None = None  # default: the cluster's
    gpu: GpuRequest | None = None  # default: none, or what the machine type bundles
    spot: bool | None = None  # default: the cluster's


TORCH_HAS_NO_PS = ("PyTorch has no parameter servers: this cluster's ps pool would sit idle; "
                   "remove the ps pool (DDP needs only chief and workers), or run TensorFlow")


class ClusterSpec(SpecModel):
    name: str
    provider: Literal["local", "gcp"] = "local"
    kind: Literal["vm", "tpu", "gke"] = "vm"
    project: str | None = None
    zone: str | None = None
    nodes: int | None = Field(None, ge=1, le=512)
    machine_type: str | None = None
    gpu: GpuRequest | None = None
    tpu: TpuRequest | None = None
    processes_per_node: int | None = Field(None, ge=1, le=64)
    spot: bool = False
    # What GCE does with a reclaimed spot VM: STOP keeps its disk (billed), DELETE removes it.
    instance_termination_action: Literal["STOP", "DELETE"] | None = None
    boot_disk_gb: int = Field(200, ge=10, le=65536)
    image: str | None = None
    python: str = "python3"
    ssh: SshSpec = Field(default_factory=SshSpec)
    network: NetworkSpec = Field(default_factory=NetworkSpec)
    bucket: BucketSpec = Field(default_factory=BucketSpec)
    ttl_hours: float = Field(4.0, gt=0, le=24 * 30)
    ephemeral: bool = False
    scheduled_reaper: bool = False  # GCP: deploy a timer that deletes expired resources
    labels: dict[str, str] = Field(default_factory=dict)
    # Worker pools with roles (chief, worker, ps, evaluator), each with its own machines; without
    # them the cluster is one group whose first node is the chief.
    pools: tuple[PoolSpec, ...] = ()

    @field_validator("name")
    @classmethod
    def gce_name(cls, v: str) -> str:
        return validate_name(v, "name")

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
        if self.instance_termination_action and not self.has_spot:
            raise ValueError("instance_termination_action applies to spot VMs only (set spot: true, "
                             "or remove it)")
        if self.pools:
            self._check_pools_shape()
        # each provider's own constraints, by the provider field's value (its checks are named so)
        updates: dict[str, Any] = getattr(self, f"_check_{self.provider}")()
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

    # -- local -------------------------------------------------------------------------------
    def _check_local(self) -> dict[str, Any]:
        if any(p.gpu for p in self.pools):
            raise ValueError("the local stack has no accelerators: remove gpu from the pools")
        if self.gpu or self.tpu:
            raise ValueError("the local stack has no accelerators: remove gpu/tpu "
                             "(or use a gcp stack)")
        if self.kind != "vm":
            raise ValueError(f"kind {self.kind!r} needs provider gcp; the local stack has kind 'vm'")
        nodes = sum(p.count for p in self.pools) if self.pools else self.nodes or 2
        if nodes > catalog.LOCAL_MAX_NODES:
            raise ValueError(f"nodes {nodes} is more than the local stack supports "
                             f"(1-{catalog.LOCAL_MAX_NODES})")
        return {"nodes": nodes, "processes_per_node": self.processes_per_node or 1}

    # -- gcp ---------------------------------------------------------------------------------
    def _check_gcp(self) -> dict[str, Any]:
        if not self.project:
            raise ValueError("project is required for provider gcp (trainctl:project or gcp:project)")
        if not self.zone:
            raise ValueError("zone is required for provider gcp (trainctl:zone or gcp:zone)")
        if self.kind != "gke" and not self.ssh.source_ranges:
            raise ValueError("ssh.source_ranges is required for provider gcp: the CIDRs allowed to "
                             "reach port 22 (there is no 0.0.0.0/0 default)")
        if self.kind == "tpu" or (self.kind == "gke" and self.tpu):
            updates = self._check_tpu()
        elif self.pools:
            updates = self._check_pool_machines()
        else:
            updates = self._check_gpu_machine()
        if self.processes_per_node is None:
            gpu = updates.get("gpu", self.gpu)
            # one process per GPU; one per TPU host, which drives all its chips
            updates["processes_per_node"] = gpu.count if gpu and not self.tpu else 1
        return updates

    def _check_tpu(self) -> dict[str, Any]:
        if not self.tpu:
            raise ValueError("kind 'tpu' needs a tpu section (type, runtime_version)")
        if self.gpu:
            raise ValueError("a cluster has either gpu or tpu, not both")
        tpu = catalog.TPUS[self.tpu.type]
        if self.zone not in tpu.zones:
            raise ValueError(f"TPU type {tpu.name} is not offered in zone {self.zone!r}; "
                             f"valid zones: {_choices(tpu.zones)}")
        if self.kind == "tpu":
            if self.nodes not in (None, tpu.hosts):
                raise ValueError(f"nodes {self.nodes} does not match TPU type {tpu.name}, which "
                                 f"has {tpu.hosts} host(s); leave nodes out or set {tpu.hosts}")
            nodes = tpu.hosts
        else:  # GKE: nodes = number of slices' hosts in the pool
            hosts = tpu.hosts
            nodes = self.nodes or hosts
            if nodes % hosts:
                raise ValueError(f"nodes {nodes} must be a multiple of {hosts} (hosts per "
                                 f"{tpu.name} slice)")
        if self.machine_type is not None and self.kind == "tpu":
            raise ValueError("machine_type does not apply to TPU VMs; the TPU type sets it")
        return {"nodes": nodes}

    def _check_pool_machines(self) -> dict[str, Any]:
        """Each pool's machines, checked as a one-group cluster's are; the cluster's own
        machine_type and gpu are the pools' defaults."""
        if self.tpu:
            raise ValueError(f"tpu needs kind 'tpu' or 'gke' (got kind {self.kind!r})")
        for pool in self.pools:
            machine_type = pool.machine_type or self.machine_type
            gpu = pool.gpu if pool.machine_type else pool.gpu or self.gpu
            where = f"pools[{pool.role}]: "
            try:
                derived = self._check_gpu_machine(machine_type, gpu)
            except ValueError as exc:
                raise ValueError(where + str(exc)) from None
            resolve(pool, {"machine_type": machine_type, "gpu": derived.get("gpu", gpu)})
        chief = self.pools[0]
        return {"machine_type": chief.machine_type, "gpu": chief.gpu}

    def _check_gpu_machine(self, machine_type: str | None = None,
                           gpu_request: GpuRequest | None = None) -> dict[str, Any]:
        if machine_type is None:
            machine_type, gpu_request = self.machine_type, self.gpu
        if self.tpu:
            raise ValueError(f"tpu needs kind 'tpu' or 'gke' (got kind {self.kind!r})")
        if not machine_type:
            raise ValueError(f"machine_type is required for kind {self.kind!r}")
        machine = catalog.MACHINES.get(machine_type)
        if machine is None:
            raise ValueError(f"unknown machine_type {machine_type!r}; "
                             f"valid: {_choices(catalog.MACHINES, limit=20)}")
        updates: dict[str, Any] = {"nodes": self.nodes or 1}
        requested = gpu_request
        if machine.bundled_gpu:
            if requested and (requested.type != machine.bundled_gpu
                             or requested.count != machine.bundled_gpu_count):
                raise ValueError(
                    f"machine_type {machine.name} comes with {machine.bundled_gpu_count} x "
                    f"{machine.bundled_gpu}; gpu {requested.count} x {requested.type} does not fit "
                    "(leave gpu out for bundled machine types)")
            gpu_request = updates["gpu"] = GpuRequest(type=machine.bundled_gpu,
                                                      count=machine.bundled_gpu_count)
        elif requested:
            gpu = catalog.GPUS[requested.type]
            if machine.family not in catalog.ATTACHABLE_GPU_FAMILIES or not gpu.attachable_counts:
                bundles = sorted(m.name for m in catalog.MACHINES.values()
                                 if m.bundled_gpu == gpu.name)
                hint = (f"{gpu.name} comes only bundled: use {_choices(bundles)}" if bundles
                        else "attach it to an n1 machine type")
                raise ValueError(f"GPU {gpu.name} cannot be attached to {machine.name}; {hint}")
            if requested.count not in gpu.attachable_counts:
                raise ValueError(f"gpu.count {requested.count} is not attachable for {gpu.name}; "
                                 f"valid: {', '.join(map(str, gpu.attachable_counts))}")
            limit = catalog.N1_MAX_VCPUS_PER_GPU_COUNT.get(gpu.name, {}).get(requested.count)
            if limit is not None and machine.vcpus > limit:
                raise ValueError(f"{machine.name} has {machine.vcpus} vCPUs, more than "
                                 f"{requested.count} x {gpu.name} allows ({limit})")
        if gpu_request:
            gpu = catalog.GPUS[gpu_request.type]
            if self.zone not in gpu.zones:
                raise ValueError(f"GPU {gpu.name} is not offered in zone {self.zone!r}; "
                                 f"valid zones: {_choices(gpu.zones)}")
        return updates

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
        if framework != "tensorflow" or self.tpu is None or self.kind != "tpu":
            return None
        tpu = catalog.TPUS[self.tpu.type]
        runtime = self.tpu.runtime_version or tpu.runtime_versions[0]
        if catalog.tpu_runtime_has_tensorflow(runtime):
            return None
        fits = catalog.tensorflow_runtimes(tpu)
        return (f"stack {self.name}: TensorFlow needs a TPU runtime that has it, and {runtime!r} has none; "
                f"set tpu.runtime_version to {' or '.join(repr(r) for r in fits) or 'a tpu-vm-tf-* runtime'}")

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
                                           "gpu": pool.gpu, "spot": bool(pool.spot)})
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
