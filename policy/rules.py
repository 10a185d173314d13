"""GCP's documented constraints, one rule each, as plain functions over what the Pulumi engine
declares: a resource's type token and its input properties (camelCase keys, as the engine and
infra/providers/gcp/program/mocks.py give them).

Why plain functions: the same rules run in three places — Pulumi's policy engine (policy/
__main__.py wraps them in pulumi_policy objects), `trainctl plan` (over the program evaluated
under mocks, before anything is created) and the tests — and only the first has an engine.

Every rule is mandatory: each one describes a request GCP refuses, or a stack that `trainctl
down` could not remove, or an exposure we never want; none is a matter of taste.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

ENFORCEMENT = "mandatory"

# Marker label for a bucket that a named stack keeps on purpose. Pulumi's policy engine does not
# show resource options like retainOnDelete to policies (its AnalyzerResourceOptions carry only
# protect, ignoreChanges, deleteBeforeReplace, aliases, timeouts, secret outputs, parent), so a
# bucket created with retain_on_delete=True must also say so in a label the engine can see.
RETAIN_LABEL = "trainctl-retain"


@dataclass(frozen=True)
class Resource:
    """One declared resource. `opts` holds resource options where the caller knows them
    (retainOnDelete, protect); the engine and the mocks may not, so rules never require it."""

    type: str
    name: str
    props: Mapping[str, Any]
    opts: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Violation:
    rule: str
    resource: str
    message: str
    url: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.resource}: {self.message} (see {self.url})"


ResourceCheck = Callable[[Resource], Iterable[str]]
StackCheck = Callable[[Sequence[Resource]], Iterable[tuple[str, str]]]


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    url: str
    # Exactly one of these: a check of one resource (yields messages) or of the whole stack
    # (yields (resource name, message) pairs).
    check: ResourceCheck | None = None
    stack_check: StackCheck | None = None
    enforcement: str = ENFORCEMENT

    def run(self, resources: Sequence[Resource]) -> list[Violation]:
        out: list[Violation] = []
        if self.check is not None:
            for r in resources:
                out += [Violation(self.name, r.name, m, self.url) for m in self.check(r)]
        if self.stack_check is not None:
            out += [Violation(self.name, n, m, self.url) for n, m in self.stack_check(resources)]
        return out


# --- helpers ------------------------------------------------------------------------------

T_INSTANCE = "gcp:compute/instance:Instance"
T_FIREWALL = "gcp:compute/firewall:Firewall"
T_BUCKET = "gcp:storage/bucket:Bucket"
T_CLUSTER = "gcp:container/cluster:Cluster"
T_NODEPOOL = "gcp:container/nodePool:NodePool"
T_TPU_VM = "gcp:tpu/v2Vm:V2Vm"
T_SERVICE = "gcp:projects/service:Service"
FUNCTION_V2_IAM = ("gcp:cloudfunctionsv2/functionIamMember:FunctionIamMember",
                   "gcp:cloudfunctionsv2/functionIamBinding:FunctionIamBinding")


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    # pulumi_policy hands lists to a policy as a read-only Sequence proxy, not a list
    return list(value) if isinstance(value, Sequence) and not isinstance(value, (str, bytes)) else []


def _labels_of(props: Mapping[str, Any]) -> dict[str, Any]:
    """GCE-style labels wherever a resource carries them (Kubernetes node labels excluded:
    they follow Kubernetes' rules, not GCP's)."""
    out: dict[str, Any] = {}
    for key in ("labels", "resourceLabels"):
        out.update(_mapping(props.get(key)))
    out.update(_mapping(_mapping(props.get("nodeConfig")).get("resourceLabels")))
    return out


def _is_trainctl(props: Mapping[str, Any]) -> bool:
    return _labels_of(props).get("managed-by") == "trainctl"


def _number(value: Any) -> int | None:
    # The engine hands numbers over as floats (4.0).
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _is_false_string(value: Any) -> bool:
    return isinstance(value, str) and value.strip().upper() == "FALSE"


# --- GKE ----------------------------------------------------------------------------------

def _stack_release_channel_auto_upgrade(resources: Sequence[Resource]) -> Iterator[tuple[str, str]]:
    channels: dict[str, str] = {}
    for c in resources:
        if c.type != T_CLUSTER:
            continue
        channel = _mapping(c.props.get("releaseChannel")).get("channel")
        if isinstance(channel, str) and channel not in ("", "UNSPECIFIED"):
            # A node pool names its cluster by name or by id; accept both spellings.
            for key in (c.props.get("name"), c.props.get("id"), c.name):
                if isinstance(key, str):
                    channels[key] = channel
    for p in resources:
        if p.type != T_NODEPOOL:
            continue
        cluster = p.props.get("cluster")
        channel = channels.get(cluster) if isinstance(cluster, str) else None
        if channel is None and isinstance(cluster, str):
            channel = next((ch for k, ch in channels.items() if cluster.endswith(f"/{k}")), None)
        if channel and _mapping(p.props.get("management")).get("autoUpgrade") is False:
            yield p.name, (f"node pool {p.props.get('name', p.name)!r} sets management.autoUpgrade "
                           f"false but its cluster {cluster!r} is on the {channel} release channel; "
                           "GKE rejects it (400 'Auto_upgrade cannot be false when release_channel "
                           "is set'): set auto_upgrade=True")


GKE_NAME_MAX = 40


def _gke_name_length(r: Resource) -> Iterator[str]:
    name = r.props.get("name")
    if r.type in (T_CLUSTER, T_NODEPOOL) and isinstance(name, str) and len(name) > GKE_NAME_MAX:
        kind = "cluster" if r.type == T_CLUSTER else "node pool"
        yield (f"GKE {kind} name {name!r} has {len(name)} characters; GKE takes at most "
               f"{GKE_NAME_MAX}")


def _cluster_deletable(r: Resource) -> Iterator[str]:
    if r.type == T_CLUSTER and _is_trainctl(r.props) and r.props.get("deletionProtection") is not False:
        # pulumi-gcp defaults deletionProtection to true, so unset is as bad as true.
        yield (f"GKE cluster {r.props.get('name', r.name)!r} has deletionProtection "
               f"{r.props.get('deletionProtection', 'unset (defaults to true)')}; `trainctl down` "
               "could not delete it: set deletion_protection=False")


def _topology_chips(topology: str) -> int | None:
    dims = topology.lower().split("x")
    if not dims or not all(d.isdigit() for d in dims):
        return None
    chips = 1
    for d in dims:
        chips *= int(d)
    return chips


def tpu_topology_hosts(machine_type: str, topology: str) -> int | None:
    """Hosts of a multi-host TPU slice: from the catalog when it knows the pair, else from the
    topology's chip count over the machine type's chips per host (ct5lp-hightpu-4t → 4)."""
    try:
        from infra.spec import catalog

        for tpu in catalog.TPUS.values():
            if tpu.gke_machine_type == machine_type and tpu.multi_host and tpu.topology == topology:
                return tpu.hosts
    except ImportError:  # the pack may run where the repo's infra package is not importable
        pass
    chips = _topology_chips(topology)
    per_host = re.search(r"-(\d+)t$", machine_type)
    if chips is None or per_host is None or int(per_host.group(1)) == 0:
        return None
    return max(1, chips // int(per_host.group(1)))


def _tpu_pool_node_count(r: Resource) -> Iterator[str]:
    if r.type != T_NODEPOOL:
        return
    topology = _mapping(r.props.get("placementPolicy")).get("tpuTopology")
    machine = _mapping(r.props.get("nodeConfig")).get("machineType")
    if not isinstance(topology, str) or not isinstance(machine, str):
        return
    hosts = tpu_topology_hosts(machine, topology)
    if hosts is None or hosts <= 1:
        return
    count = _number(r.props.get("nodeCount"))
    if count is None:
        count = _number(r.props.get("initialNodeCount"))
    if count is not None and count != hosts:
        yield (f"multi-host TPU node pool {r.props.get('name', r.name)!r} has {count} node(s) but "
               f"topology {topology} on {machine} is {hosts} hosts; a multi-host slice pool holds "
               f"exactly one slice: set node_count={hosts} (one node pool per slice)")


# --- Compute Engine -----------------------------------------------------------------------

_BUNDLED_GPU_FAMILIES = ("a2", "a3", "a4", "g2", "g4")


def _machine_family(props: Mapping[str, Any]) -> str:
    machine = props.get("machineType")
    return machine.split("-", 1)[0].lower() if isinstance(machine, str) else ""


def _has_gpu(props: Mapping[str, Any]) -> bool:
    return bool(_list(props.get("guestAccelerators"))) or _machine_family(props) in _BUNDLED_GPU_FAMILIES


def _gpu_terminate(r: Resource) -> Iterator[str]:
    if r.type == T_INSTANCE and _has_gpu(r.props):
        policy = _mapping(r.props.get("scheduling")).get("onHostMaintenance")
        if policy != "TERMINATE":
            yield (f"VM {r.props.get('name', r.name)!r} has GPUs but scheduling.onHostMaintenance is "
                   f"{policy or 'unset (MIGRATE)'}; GPU VMs cannot live-migrate: set "
                   "on_host_maintenance='TERMINATE'")


def _bundled_gpu_no_accelerators(r: Resource) -> Iterator[str]:
    if r.type == T_INSTANCE and _machine_family(r.props) in _BUNDLED_GPU_FAMILIES \
            and "guestAccelerators" in r.props:
        yield (f"VM {r.props.get('name', r.name)!r} is {r.props.get('machineType')}, whose GPUs come "
               f"with the machine type, yet declares guestAccelerators="
               f"{r.props.get('guestAccelerators')!r}: the API reports the attached GPUs, so the "
               "declaration differs from the VM on every update; leave guest_accelerators out")


def _spot_scheduling(r: Resource) -> Iterator[str]:
    if r.type != T_INSTANCE:
        return
    s = _mapping(r.props.get("scheduling"))
    name = r.props.get("name", r.name)
    if s.get("provisioningModel") == "SPOT":
        if s.get("preemptible") is not True:
            yield f"spot VM {name!r}: set scheduling preemptible=True (SPOT requires it)"
        if s.get("automaticRestart") is not False:
            yield f"spot VM {name!r}: set scheduling automatic_restart=False (Spot VMs cannot restart automatically)"
        if s.get("onHostMaintenance") not in (None, "TERMINATE"):
            yield f"spot VM {name!r}: set on_host_maintenance='TERMINATE' (Spot VMs cannot live-migrate)"
        if s.get("instanceTerminationAction") not in ("STOP", "DELETE"):
            yield (f"spot VM {name!r}: set instance_termination_action to 'STOP' or 'DELETE' "
                   "(what happens when the capacity is reclaimed)")
    elif s.get("instanceTerminationAction") and not (s.get("maxRunDuration") or s.get("terminationTime")):
        yield (f"standard VM {name!r} sets instance_termination_action "
               f"{s.get('instanceTerminationAction')!r} without a max run duration or termination "
               "time: it applies only to Spot VMs or time-limited VMs; remove it")


def _ports_cover(ports: list[Any], port: int) -> bool:
    for p in ports:
        text = str(p).strip()
        low, _, high = text.partition("-")
        if low.isdigit() and int(low) <= port <= int(high if high.isdigit() else low):
            return True
    return False


def _opens_ssh(allow: Mapping[str, Any]) -> bool:
    protocol = str(allow.get("protocol", "")).lower()
    if protocol not in ("tcp", "all", "6"):
        return False
    ports = _list(allow.get("ports"))
    return not ports or _ports_cover(ports, 22)  # no ports = every port


def _is_anywhere(cidr: Any) -> bool:
    try:
        return ipaddress.ip_network(str(cidr), strict=False).prefixlen == 0
    except ValueError:
        return False


def _firewall_no_public_ssh(r: Resource) -> Iterator[str]:
    if r.type != T_FIREWALL or str(r.props.get("direction", "INGRESS")).upper() != "INGRESS":
        return
    if r.props.get("disabled") is True:
        return
    anywhere = [c for c in _list(r.props.get("sourceRanges")) if _is_anywhere(c)]
    if anywhere and any(_opens_ssh(_mapping(a)) for a in _list(r.props.get("allows"))):
        yield (f"firewall {r.props.get('name', r.name)!r} opens SSH (tcp:22) to {', '.join(anywhere)}: "
               "allow only your own ranges (trainctl:ssh.source_ranges) or use IAP (35.235.240.0/20)")


def _oslogin_off_with_ssh_keys(r: Resource) -> Iterator[str]:
    if r.type not in (T_INSTANCE, T_TPU_VM):
        return
    meta = _mapping(r.props.get("metadata"))
    if ("ssh-keys" in meta or "sshKeys" in meta) and not _is_false_string(meta.get("enable-oslogin")):
        yield (f"{r.props.get('name', r.name)!r} puts keys in ssh-keys metadata but does not set "
               f"enable-oslogin to FALSE (it is {meta.get('enable-oslogin', 'unset')!r}); where "
               "OS Login is on (e.g. by project metadata or org policy) ssh-keys are ignored: set "
               "metadata enable-oslogin='FALSE'")


# --- Cloud Storage ------------------------------------------------------------------------

def _bucket_removable(r: Resource) -> Iterator[str]:
    if r.type != T_BUCKET or not _is_trainctl(r.props):
        return
    kept = r.opts.get("retainOnDelete") is True or _labels_of(r.props).get(RETAIN_LABEL) == "true"
    if r.props.get("forceDestroy") is not True and not kept:
        yield (f"bucket {r.props.get('name', r.name)!r} has forceDestroy "
               f"{r.props.get('forceDestroy', 'unset (false)')}: a bucket that holds objects cannot "
               "be deleted, so `trainctl down` would fail; set force_destroy=True, or keep it on "
               f"purpose with retain_on_delete=True and the label {RETAIN_LABEL}=true")


_BUCKET_CHARS = re.compile(r"^[a-z0-9][a-z0-9._-]*[a-z0-9]$")


def bucket_name_problems(name: str) -> list[str]:
    """What is wrong with a bucket name by Cloud Storage's naming rules (empty list: valid)."""
    problems: list[str] = []
    dotted = "." in name
    if not 3 <= len(name) <= (222 if dotted else 63):
        problems.append(f"must be 3-63 characters (222 with dots), not {len(name)}")
    if dotted and any(len(part) > 63 or not part for part in name.split(".")):
        problems.append("each dot-separated part must be 1-63 characters")
    if not _BUCKET_CHARS.match(name):
        problems.append("may hold only lowercase letters, digits, '-', '_' and '.', and must start "
                        "and end with a letter or digit")
    if name.startswith("goog"):
        problems.append("cannot begin with 'goog'")
    if re.search(r"g[o0][o0]g[l1]e", name):
        problems.append("cannot contain 'google' or a close misspelling")
    if re.fullmatch(r"\d{1,3}(\.\d{1,3}){3}", name):
        problems.append("cannot be an IP address")
    return problems


def _bucket_name(r: Resource) -> Iterator[str]:
    if r.type != T_BUCKET:
        return
    name = r.props.get("name")
    if isinstance(name, str):  # unknown during a preview: the engine checks it again at update
        for problem in bucket_name_problems(name):
            yield f"bucket name {name!r} {problem}: set trainctl:bucket.name to a valid name"


# --- labels -------------------------------------------------------------------------------

def _label_chars_ok(text: str) -> bool:
    # GCP allows lowercase letters (international ones too), digits, '-' and '_'.
    return all(c.isdigit() or c in "-_" or (c.isalpha() and c == c.lower()) for c in text)


def label_problems(labels: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    if len(labels) > 64:
        problems.append(f"{len(labels)} labels: at most 64 per resource")
    for key, value in labels.items():
        key_s = str(key)
        if not 1 <= len(key_s) <= 63 or not _label_chars_ok(key_s) or not key_s[0].isalpha():
            problems.append(f"label key {key_s!r}: 1-63 characters, lowercase letters, digits, '-' "
                            "and '_', starting with a lowercase letter")
        if not isinstance(value, str):
            continue  # unknown during a preview
        if len(value) > 63 or not _label_chars_ok(value):
            problems.append(f"label {key_s}={value!r}: values are at most 63 characters of "
                            "lowercase letters, digits, '-' and '_'")
    return problems


def _labels_valid(r: Resource) -> Iterator[str]:
    if not r.type.startswith("gcp:"):
        return
    for key in ("labels", "resourceLabels"):
        labels = _mapping(r.props.get(key))
        if r.type == T_NODEPOOL:
            continue  # a node pool's own `labels` are Kubernetes labels
        for problem in label_problems(labels):
            yield f"{r.props.get('name', r.name)!r} {key}: {problem}"
    node_labels = _mapping(_mapping(r.props.get("nodeConfig")).get("resourceLabels"))
    for problem in label_problems(node_labels):
        yield f"{r.props.get('name', r.name)!r} nodeConfig.resourceLabels: {problem}"


# --- IAM, APIs ----------------------------------------------------------------------------

def _function_invoker_role(r: Resource) -> Iterator[str]:
    if r.type in FUNCTION_V2_IAM and r.props.get("role") == "roles/cloudfunctions.invoker":
        yield (f"{r.name!r} grants roles/cloudfunctions.invoker on a 2nd-gen function, which is "
               "invoked through its Cloud Run service: grant roles/run.invoker on that service "
               "(gcp.cloudrunv2.ServiceIamMember with the function's service_config.service)")


def _service_not_disabled_on_destroy(r: Resource) -> Iterator[str]:
    if r.type == T_SERVICE and r.props.get("disableOnDestroy") is not False:
        yield (f"API {r.props.get('service', r.name)!r} would be disabled when the stack is "
               "destroyed, breaking everything else in the project that uses it: set "
               "disable_on_destroy=False")


T_AR_REPOSITORY = "gcp:artifactregistry/repository:Repository"
AR_IAM = ("gcp:artifactregistry/repositoryIamMember:RepositoryIamMember",
          "gcp:artifactregistry/repositoryIamBinding:RepositoryIamBinding")
AR_REPOSITORY_ID = re.compile(r"^[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$")


def _registry_repository_id(r: Resource) -> Iterator[str]:
    if r.type == T_AR_REPOSITORY:
        rid = str(r.props.get("repositoryId", ""))
        if not AR_REPOSITORY_ID.match(rid):
            yield (f"repository id {rid!r}: lowercase letters, digits and hyphens, a letter first, "
                   "a letter or digit last, at most 63 characters")


def _registry_not_public(r: Resource) -> Iterator[str]:
    if r.type in AR_IAM:
        members = [r.props.get("member")] + list(_list(r.props.get("members")))
        public = [m for m in members if m in ("allUsers", "allAuthenticatedUsers")]
        if public:
            yield (f"{r.name!r} grants {r.props.get('role')} on the image repository to {public[0]}: "
                   "images hold the training code; grant the cluster's service account only")


RULES: tuple[Rule, ...] = (
    Rule("gke-release-channel-auto-upgrade",
         "GKE node pools of a cluster enrolled in a release channel must keep auto-upgrade on.",
         "https://cloud.google.com/kubernetes-engine/docs/how-to/node-auto-upgrades",
         stack_check=_stack_release_channel_auto_upgrade),
    Rule("gke-cluster-deletable",
         "trainctl's GKE clusters must be deletable by `trainctl down` (deletionProtection false).",
         "https://cloud.google.com/kubernetes-engine/docs/how-to/deleting-a-cluster",
         check=_cluster_deletable),
    Rule("gke-name-length",
         "GKE cluster and node pool names have at most 40 characters.",
         "https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters#Cluster",
         check=_gke_name_length),
    Rule("gke-tpu-multihost-node-count",
         "A multi-host TPU slice node pool's node count equals its topology's host count.",
         "https://cloud.google.com/kubernetes-engine/docs/concepts/tpus",
         check=_tpu_pool_node_count),
    Rule("bucket-removable",
         "trainctl's buckets must be removable with their objects (forceDestroy), or kept on "
         "purpose (retainOnDelete + trainctl-retain label).",
         "https://cloud.google.com/storage/docs/deleting-buckets",
         check=_bucket_removable),
    Rule("bucket-name",
         "Bucket names follow Cloud Storage's naming rules.",
         "https://cloud.google.com/storage/docs/buckets#naming",
         check=_bucket_name),
    Rule("gpu-vm-terminate-on-maintenance",
         "VMs with GPUs must stop on host maintenance (onHostMaintenance TERMINATE).",
         "https://cloud.google.com/compute/docs/instances/setting-vm-host-options",
         check=_gpu_terminate),
    Rule("bundled-gpu-machine-no-guest-accelerators",
         "Accelerator-optimized machine types (A2, A3, A4, G2, G4) come with their GPUs: declare no "
         "guestAccelerators.",
         "https://cloud.google.com/compute/docs/accelerator-optimized-machines",
         check=_bundled_gpu_no_accelerators),
    Rule("spot-scheduling-consistent",
         "Spot VMs: preemptible, no automatic restart, TERMINATE on maintenance, a termination "
         "action; standard VMs: no termination action.",
         "https://cloud.google.com/compute/docs/instances/create-use-spot",
         check=_spot_scheduling),
    Rule("firewall-no-public-ssh",
         "No ingress firewall rule opens SSH (tcp:22 or all ports) to 0.0.0.0/0 or ::/0.",
         "https://cloud.google.com/compute/docs/connect/ssh-best-practices/network-access",
         check=_firewall_no_public_ssh),
    Rule("ssh-keys-need-oslogin-off",
         "VMs and TPU VMs that take keys from ssh-keys metadata set enable-oslogin FALSE.",
         "https://cloud.google.com/compute/docs/oslogin/set-up-oslogin",
         check=_oslogin_off_with_ssh_keys),
    Rule("labels-valid",
         "Labels follow GCP's label rules (keys and values, at most 64 labels).",
         "https://cloud.google.com/compute/docs/labeling-resources#requirements",
         check=_labels_valid),
    Rule("function-v2-run-invoker",
         "2nd-gen Cloud Functions are invoked with roles/run.invoker on their Cloud Run service, "
         "not roles/cloudfunctions.invoker.",
         "https://cloud.google.com/functions/docs/securing/authenticating",
         check=_function_invoker_role),
    Rule("artifact-registry-repository-id",
         "Artifact Registry repository ids follow its naming rules.",
         "https://cloud.google.com/artifact-registry/docs/repositories/create-repos",
         check=_registry_repository_id),
    Rule("artifact-registry-not-public",
         "No image repository is readable by allUsers or allAuthenticatedUsers.",
         "https://cloud.google.com/artifact-registry/docs/access-control",
         check=_registry_not_public),
    Rule("api-service-not-disabled-on-destroy",
         "APIs enabled by a stack stay enabled when it is destroyed (disableOnDestroy false).",
         "https://cloud.google.com/service-usage/docs/enable-disable",
         check=_service_not_disabled_on_destroy),
)

RULES_BY_NAME: dict[str, Rule] = {r.name: r for r in RULES}


def check_resources(resources: Sequence[Resource], rules: Sequence[Rule] = RULES) -> list[Violation]:
    """Every violation of every rule over one stack's declared resources."""
    out: list[Violation] = []
    for rule in rules:
        out += rule.run(resources)
    return out
