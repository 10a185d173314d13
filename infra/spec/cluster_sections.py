"""The sections of a ClusterSpec that check themselves: the accelerator requests (gpu, tpu), the
network, SSH access and the bucket. Each refuses a bad value on its own, naming the field and the
valid choices; what depends on the rest of the cluster (zones, machine types, node counts) is
checked where the cluster is resolved (infra/spec/provider_constraints.py)."""

from __future__ import annotations

import ipaddress
import re

from pydantic import Field, field_validator, model_validator

from infra.spec import catalog
from infra.spec.model import SpecModel, resolve


class GpuRequest(SpecModel):
    type: str
    """The GPU model, by catalog name or GCE accelerator label (e.g. `nvidia-tesla-t4`)."""
    count: int = Field(1, ge=1, le=16)
    """GPUs per node."""

    @field_validator("type")
    @classmethod
    def known_gpu(cls, v: str) -> str:
        return catalog.known_gpu(catalog.gpu_label_to_name(v))


# How long `up` waits for a queued TPU unless the stack says (tpu.queue_deadline_minutes): long
# enough for a passing stockout, short enough that a forgotten `up` does not wait all day.
DEFAULT_QUEUE_DEADLINE_MINUTES = 60.0
# A bound against typos (slices: 200 of a 256-chip type), not a documented limit of the API.
MAX_SLICES = 64


class TpuRequest(SpecModel):
    type: str
    """The TPU accelerator type (e.g. `v5litepod-8`), checked against the catalog."""
    runtime_version: str | None = None
    """The TPU VM software version; default: the catalog's first for the type."""
    queued: bool = False
    """Through a queued resource (Cloud TPU's queue for capacity): `up` waits for the grant, and
    gives up after `queue_deadline_minutes` (the request's validUntilDuration too, so Google stops
    waiting even when trainctl is gone)."""
    queue_deadline_minutes: float | None = Field(None, gt=0, le=7 * 24 * 60)
    """How long a queued TPU is waited for (queued only); default: 60."""
    slices: int = Field(1, ge=1, le=MAX_SLICES)
    """Multislice: this many slices of `type`, joined over the data-center network (libtpu's
    MEGASCALE_*): on TPU VMs granted together by one queued resource (its nodeSpec's
    multisliceParams), on GKE a multi-host slice node pool each."""

    @field_validator("type")
    @classmethod
    def known_tpu(cls, v: str) -> str:
        return catalog.known_tpu(v)

    @model_validator(mode="after")
    def deadline_of_a_queue(self) -> TpuRequest:
        if self.queue_deadline_minutes is not None and not self.queued:
            raise ValueError("tpu.queue_deadline_minutes applies to a queued TPU only: set tpu.queued: true, "
                             "or remove tpu.queue_deadline_minutes")
        if self.queued and self.queue_deadline_minutes is None:
            resolve(self, {"queue_deadline_minutes": DEFAULT_QUEUE_DEADLINE_MINUTES})
        return self

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
                f"valid: {catalog.choices(tpu.runtime_versions)}")
        # TensorFlow's TPU runtimes come in two builds: "-pod" ones serve a multi-host slice
        # from worker 0, the others a single host; the wrong one fails only at training time.
        runtime = self.runtime_version or ""
        if _is_tf_runtime(runtime) and _is_pod_runtime(runtime) != tpu.multi_host:
            fits = [r for r in tpu.runtime_versions
                    if not _is_tf_runtime(r) or _is_pod_runtime(r) == tpu.multi_host]
            shape = f"a multi-host slice ({tpu.hosts} hosts)" if tpu.multi_host else "a single host"
            need = "a -pod" if tpu.multi_host else "a non-pod"
            raise ValueError(f"runtime_version {runtime!r} does not fit {self.type}: it is {shape}, "
                             f"which needs {need} TensorFlow runtime; valid: {catalog.choices(fits)}")
        return self

    @model_validator(mode="after")
    def slices_on_a_multislice_runtime(self) -> TpuRequest:
        runtime = self.runtime_version or ""
        if self.slices > 1 and _is_tf_runtime(runtime):
            fits = [r for r in catalog.TPUS[self.type].runtime_versions if not _is_tf_runtime(r)]
            raise ValueError(f"tpu.slices: {self.slices} cannot use runtime_version {runtime!r}: TensorFlow's TPU "
                             "runtimes serve one slice (their TF servers do not join slices over the data-center "
                             f"network); multislice needs a JAX / PyTorch-XLA runtime: {catalog.choices(fits)}")
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
    """The cluster subnet's range: private IPv4 (RFC 1918), /8 to /29."""
    external_ips: bool = True
    """Nodes get external IPs that only `ssh.source_ranges` may reach on port 22. Without them,
    Cloud NAT gives egress and SSH goes through IAP (add 35.235.240.0/20 to source_ranges)."""
    nat: bool = False
    """A Cloud NAT gateway for the subnet's egress."""

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
    user: str = "trainctl"
    """The account created on GCP nodes; local nodes are always root."""
    public_key: str | None = None
    """The public key nodes admit; default: the key trainctl generates per stack."""
    source_ranges: tuple[str, ...] = ()
    """Who may reach port 22. Required on GCP (no 0.0.0.0/0 default); the local stack only
    admits its controller, the bridge address."""

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


def bucket_name_problems(name: str) -> list[str]:
    """What breaks Cloud Storage's bucket naming rules (cloud.google.com/storage/docs/buckets#naming);
    empty when none. Stack files are refused with it here, hand-written programs by the policy pack."""
    problems = []
    if not re.fullmatch(r"[-_.a-z0-9]+", name):
        problems.append("may hold only lowercase letters, digits, '-', '_' and '.'")
    limit = 222 if "." in name else 63
    if not 3 <= len(name) <= limit:
        problems.append(f"must be 3-{limit} characters{' (dotted names)' if '.' in name else ''}, not {len(name)}")
    parts = name.split(".")
    if any(len(p) > 63 for p in parts):
        problems.append("each dot-separated component must be at most 63 characters")
    if not all(BUCKET_COMPONENT_RE.match(p) for p in parts):
        problems.append("must start and end with a letter or digit (also around each '.')")
    if name.startswith("goog"):
        problems.append("must not start with 'goog'")
    if re.search(r"g[o0][o0]g[l1]e", name):
        problems.append("must not contain 'google' or a close misspelling of it")
    if re.fullmatch(r"\d{1,3}(\.\d{1,3}){3}", name):
        problems.append("must not be an IP address in dotted-decimal notation")
    return problems


class BucketSpec(SpecModel):
    name: str | None = None
    """The bucket's name (Cloud Storage naming rules); default: derived from project + cluster name."""
    location: str = "US"
    """The bucket's Cloud Storage location."""
    retention_days: int = Field(30, ge=1, le=3650)
    """Lifecycle: run objects older than this are deleted."""

    @field_validator("name")
    @classmethod
    def gcs_name(cls, v: str | None) -> str | None:
        problems = bucket_name_problems(v) if v is not None else []
        if problems:
            raise ValueError(f"bucket.name {v!r}: {'; '.join(problems)} (Cloud Storage bucket naming rules)")
        return v


def check_data_buckets(names: tuple[str, ...]) -> tuple[str, ...]:
    """`data_buckets`: Cloud Storage bucket names (no gs://), each once, in a stable order."""
    for name in names:
        problems = bucket_name_problems(name)
        if problems:
            raise ValueError(f"data_buckets: {name!r} {'; '.join(problems)} (a bucket's name, without "
                             "gs:// or a prefix)")
    return tuple(sorted(set(names)))


# GCE resource names (RFC 1035, at most 63 characters): what a reservation is called.
RESERVATION_NAME_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
RESERVATION_KEYWORDS = ("any", "none")


def check_reservation_value(value: str | None) -> str | None:
    """`reservation`: a reservation's name, `any` or `none` (a reservation cannot be named
    either: both are read as the keyword)."""
    if value is None or value in RESERVATION_KEYWORDS or RESERVATION_NAME_RE.match(value):
        return value
    raise ValueError(f"reservation {value!r} is neither 'any', 'none' nor a reservation's name (1-63 "
                     "lowercase letters, digits and '-', starting with a letter, not ending with '-')")


def named_reservation(value: str | None) -> str | None:
    """The reservation a `reservation` value names, or None for unset, `any` and `none`."""
    return None if value is None or value in RESERVATION_KEYWORDS else value
