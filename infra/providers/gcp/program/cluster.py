"""The Pulumi program: a ClusterSpec becomes GCP resources, and a partial inventory as output.

Run by `pulumi up` (infra/providers/gcp/program/__main__.py) and by trainctl through the Automation API; evaluated
offline under Pulumi's mocks by `trainctl plan` and the tests. The stack output "inventory"
carries node names and addresses; trainctl adds the host keys it reads from guest attributes
and the controller-side key paths.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import pulumi
import pulumi_gcp as gcp

from infra.spec import catalog, gpu_networks
from infra.providers.gcp.program.common import labels as make_labels
from infra.providers.gcp.program.common import expiry_ignore, network_tag, ssh_metadata
from infra.providers.gcp.program.compute import GpuVmGroup, node_name
from infra.providers.gcp.program.endpoints import api_provider
from infra.providers.gcp.program import idle_autostop
from infra.providers.gcp.program.gke import GkeCluster
from infra.providers.gcp.program.gpu_network import ExtraNic, GpuNetworks, compact_placement, stack_gpudirect
from infra.providers.gcp.program.network import Network
from infra.providers.gcp.program.registry import ImageRegistry
from infra.providers.gcp.program.scheduled_reaper import ScheduledReaper
from infra.providers.gcp.program.storage import Storage, grant_data_readers, kept_on_down
from infra.providers.gcp.program.tpu import TpuVm, gcloud_command, queued_request, tpu_name
from infra.spec.cluster import ClusterSpec


def service_account_id(spec: ClusterSpec) -> str:
    # account_id: 6-30 characters, letter first, no trailing '-'.
    return f"{spec.name[:26]}-sa".replace("--", "-").strip("-").rjust(6, "x")


def workdir(spec: ClusterSpec) -> str:
    return "/root/trainctl" if spec.ssh.user == "root" else f"/home/{spec.ssh.user}/trainctl"


def _vm_nodes(spec: ClusterSpec, groups: list[GpuVmGroup]) -> pulumi.Output[list[dict[str, Any]]]:
    tasks = spec.node_tasks
    accelerators = {g.first + k: str(view.accelerator) for g, (_, _, view) in zip(groups, spec.groups())
                    for k in range(view.node_count)}
    machines = {g.first + k: view.machine_type for g, (_, _, view) in zip(groups, spec.groups())
                for k in range(view.node_count)}

    def node(i: int, inst: gcp.compute.Instance) -> pulumi.Output[dict[str, Any]]:
        def shape(nics: Sequence[Any]) -> dict[str, Any]:
            nic = nics[0]
            internal = nic["network_ip"] if isinstance(nic, dict) else nic.network_ip
            configs = (nic.get("access_configs") if isinstance(nic, dict) else nic.access_configs) or []
            external = None
            if configs:
                first = configs[0]
                external = first.get("nat_ip") if isinstance(first, dict) else first.nat_ip
            return {"name": node_name(spec, i), "rank": i, "role": "worker", "internal_ip": internal,
                    "ssh_host": external or internal, "ssh_user": spec.ssh.user,
                    "accelerator": accelerators[i], "workdir": workdir(spec), "interface": None,
                    "task": tasks[i][0], "machine_type": machines[i]}
        return inst.network_interfaces.apply(shape)
    return pulumi.Output.all(*[node(g.first + k, inst) for g in groups for k, inst in enumerate(g.instances)])


def _tpu_nodes(spec: ClusterSpec, tpu: TpuVm) -> pulumi.Output[list[dict[str, Any]]]:
    def shape(endpoints: Sequence[Any]) -> list[dict[str, Any]]:
        nodes = []
        for i, ep in enumerate(endpoints or []):
            ep = ep if isinstance(ep, dict) else ep.__dict__
            configs = ep.get("access_configs") or []
            external = None
            if configs:
                first = configs[0]
                external = first.get("external_ip") if isinstance(first, dict) else first.external_ip
            nodes.append(tpu_worker(spec, i, ep["ip_address"], external))
        return nodes
    return tpu.vm.network_endpoints.apply(shape)


def tpu_worker(spec: ClusterSpec, worker: int, internal: str, external: str | None,
               slice_node: tuple[int, str] | None = None) -> dict[str, Any]:
    """A TPU slice's worker as the inventory lists it, from its network endpoint. `slice_node`:
    (slice index, TPU node id) of a multislice stack's slice; ranks run slice by slice."""
    index, node_id = slice_node or (0, tpu_name(spec))
    assert spec.tpu is not None
    hosts = catalog.TPUS[spec.tpu.type].hosts
    worker_of = {"tpu_slice": index} if slice_node else {}
    return {"name": f"{node_id}-w{worker}", "rank": index * hosts + worker, "role": "tpu-worker",
            "internal_ip": internal, "ssh_host": external or internal, "ssh_user": spec.ssh.user,
            "accelerator": str(spec.accelerator), "workdir": workdir(spec), "interface": None,
            "tpu_name": node_id, **worker_of}


# The provider reads the project through Cloud Resource Manager after enabling any service
# (google_project_service's read: projects.get), so in a fresh project it goes first.
RESOURCE_MANAGER_API = "cloudresourcemanager.googleapis.com"
# Read access to TPU nodes: https://cloud.google.com/tpu/docs/tpu-iam-permissions
TPU_VIEWER_ROLE = "roles/tpu.viewer"


def required_apis(spec: ClusterSpec) -> list[str]:
    """The services a stack's resources need; a fresh project has few of them on."""
    apis = [RESOURCE_MANAGER_API, "compute.googleapis.com", "storage.googleapis.com", "iam.googleapis.com",
            "artifactregistry.googleapis.com"]
    if spec.kind == "tpu":
        apis.append("tpu.googleapis.com")
    if spec.kind == "gke":
        apis.append("container.googleapis.com")
    if spec.scheduled_reaper:
        apis += ["cloudfunctions.googleapis.com", "run.googleapis.com", "cloudbuild.googleapis.com",
                 "cloudscheduler.googleapis.com"]
    return apis


def enable_apis(spec: ClusterSpec, opts: pulumi.ResourceOptions | None = None) -> list[gcp.projects.Service]:
    """One Service per API, Resource Manager's before the others (their reads need it)."""
    def service(api: str, after: list[gcp.projects.Service]) -> gcp.projects.Service:
        # disable_on_destroy=False: other stacks and users of the project still need them.
        return gcp.projects.Service(
            f"{spec.name}-api-{api.split('.')[0]}", project=spec.project, service=api,
            disable_on_destroy=False,
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=after)))

    first, *rest = required_apis(spec)
    manager = service(first, [])
    return [manager, *(service(api, [manager]) for api in rest)]


def workload_identity_member(spec: ClusterSpec) -> str:
    return (f"serviceAccount:{spec.project}.svc.id.goog"
            f"[{catalog.GKE_KSA_NAMESPACE}/{catalog.GKE_KSA_NAME}]")


@dataclass(frozen=True)
class Foundation:
    """What every kind of nodes is declared on: the stack's network, its nodes' account, their
    labels and network tag, and the options that send resources through the stack's provider."""

    spec: ClusterSpec
    public_key: str | None
    labels: dict[str, str]
    tag: str
    net: Network
    account: gcp.serviceaccount.Account
    endpoint: pulumi.ResourceOptions  # Google's endpoints, or TRAINCTL_GCP_API_ENDPOINT's
    after_apis: pulumi.ResourceOptions  # the same, once the APIs the stack needs are on
    gpu_nics: Sequence[ExtraNic] = ()  # a GPUDirect family's NICs beyond nic0 (gpu_network.py)

    @property
    def account_member(self) -> pulumi.Output[str]:
        return self.account.email.apply(lambda e: f"serviceAccount:{e}")


@dataclass(frozen=True)
class DeclaredNodes:
    """A kind's nodes as the inventory output lists them, and what else the kind outputs."""

    nodes: Any
    gke_service_account: Any = None
    kubeconfig: Any = None
    queued_tpu: Any = None  # the queuedResources.create body trainctl sends after `up`


def _declare_vms(base: Foundation) -> DeclaredNodes:
    """One VM group per worker pool (one in all without pools), nodes numbered across them."""
    spec = base.spec
    policy = compact_placement(spec, base.after_apis)
    placement = policy.self_link if policy else None
    groups = [GpuVmGroup(f"{spec.name}-{role}" if role else spec.name, view, subnet=base.net.subnet.id,
                         tag=base.tag, metadata=ssh_metadata(spec, base.public_key or ""), labels=base.labels,
                         service_account=base.account.email, first=first, role=role,
                         extra_nics=base.gpu_nics if gpu_networks.gpudirect(view.machine_type) else (),
                         placement=placement, node_metadata=idle_autostop.node_metadata(spec),
                         opts=base.after_apis)
              for role, first, view in spec.groups()]
    idle_autostop.grant_idle_watch(spec, base.account_member, base.after_apis)
    return DeclaredNodes(_vm_nodes(spec, groups))


def _declare_tpu(base: Foundation) -> DeclaredNodes:
    spec = base.spec
    tpu_viewer(base)
    metadata = ssh_metadata(spec, base.public_key or "")
    if spec.tpu and spec.tpu.queued:
        # Created by trainctl through the TPU API once the rest exists (queued_tpu.py): its
        # workers join the inventory when the queue grants them.
        request = pulumi.Output.all(base.net.network.id, base.net.subnet.id, base.account.email).apply(
            lambda a: queued_request(spec, network=a[0], subnet=a[1], tag=base.tag, metadata=metadata,
                                     labels=base.labels, service_account=a[2]))
        return DeclaredNodes([], queued_tpu=request)
    tpu = TpuVm(spec.name, spec, network=base.net.network.id, subnet=base.net.subnet.id, tag=base.tag,
                metadata=metadata, labels=base.labels, service_account=base.account.email, opts=base.after_apis)
    return DeclaredNodes(_tpu_nodes(spec, tpu))


def tpu_viewer(base: Foundation) -> None:
    """TensorFlow on a multi-host slice finds its workers through TPUClusterResolver, which reads
    the node (tpu.nodes.get) with the VMs' own account: it may read TPUs, no more."""
    gcp.projects.IAMMember(f"{base.spec.name}-sa-tpu-viewer", project=base.spec.project, role=TPU_VIEWER_ROLE,
                           member=base.account_member, opts=base.after_apis)


def _declare_gke(base: Foundation) -> DeclaredNodes:
    spec = base.spec
    gke = GkeCluster(spec.name, spec, network=base.net.network.id, subnet=base.net.subnet.id, tag=base.tag,
                     labels=base.labels, service_account=base.account.email, extra_nics=base.gpu_nics,
                     opts=base.after_apis)
    # Pods run as the trainctl KSA; Workload Identity lets it act as the nodes' GSA,
    # which alone holds the bucket grant.
    gcp.serviceaccount.IAMMember(
        f"{spec.name}-sa-workload-identity", service_account_id=base.account.name,
        role="roles/iam.workloadIdentityUser", member=workload_identity_member(spec),
        opts=pulumi.ResourceOptions(provider=base.endpoint.provider, depends_on=[gke.cluster]))
    return DeclaredNodes([], gke_service_account=base.account.email, kubeconfig=gke.kubeconfig)


NODE_KINDS: dict[str, Callable[[Foundation], DeclaredNodes]] = {
    "vm": _declare_vms, "tpu": _declare_tpu, "gke": _declare_gke}


def _check_inputs(spec: ClusterSpec, public_key: str | None) -> None:
    if spec.provider != "gcp":
        raise ValueError(f"stack {spec.name!r} has provider {spec.provider!r}; the Pulumi program "
                         "only declares gcp stacks (local stacks are realized by trainctl)")
    if spec.kind != "gke" and not public_key:
        raise ValueError(f"stack {spec.name!r} (kind {spec.kind}) needs an SSH public key for its nodes")


def build(spec: ClusterSpec, public_key: str | None, expires_at: int | None = None) -> dict[str, Any]:
    """Declare the stack's resources; returns the stack outputs. GKE stacks need no SSH key."""
    _check_inputs(spec, public_key)
    labels = make_labels(spec, expires_at)
    # Every resource goes through one provider: Google's endpoints, or TRAINCTL_GCP_API_ENDPOINT's.
    endpoint = pulumi.ResourceOptions(provider=api_provider())
    after_apis = pulumi.ResourceOptions(provider=endpoint.provider, depends_on=enable_apis(spec, endpoint),
                                        ignore_changes=expiry_ignore(expires_at))
    net = Network(spec.name, spec, opts=after_apis)
    profile = stack_gpudirect(spec)
    gpu_nets = GpuNetworks(f"{spec.name}-gpu", spec, profile, opts=after_apis) if profile else None
    storage = Storage(spec.name, spec, labels, opts=after_apis)
    account = gcp.serviceaccount.Account(
        f"{spec.name}-sa", account_id=service_account_id(spec), project=spec.project,
        display_name=f"trainctl nodes of {spec.name}", opts=after_apis)
    base = Foundation(spec, public_key, labels, network_tag(spec), net, account, endpoint, after_apis,
                      gpu_nics=gpu_nets.nics if gpu_nets else ())
    # Least privilege: the nodes' identity may read and write objects in this bucket only.
    gcp.storage.BucketIAMMember(
        f"{spec.name}-sa-bucket", bucket=storage.bucket.name, role="roles/storage.objectAdmin",
        member=base.account_member, opts=endpoint)
    grant_data_readers(spec, base.account_member, endpoint)
    images = ImageRegistry(spec.name, spec, labels, base.account_member, opts=after_apis)
    if spec.scheduled_reaper:
        ScheduledReaper(spec.name, spec, storage.bucket.name, labels, opts=after_apis)
    outputs: dict[str, Any] = {"bucket": storage.uri, "bucket_kept_on_down": kept_on_down(spec)}
    if public_key:
        # Which key the nodes admit: trainctl adopting a stack made by `pulumi up` alone finds
        # the private half by it (a public key is no secret).
        outputs["ssh_public_key"] = public_key
    declared = NODE_KINDS[spec.kind](base)
    if declared.kubeconfig is not None:
        outputs["kubeconfig"] = declared.kubeconfig
    if declared.queued_tpu is not None:
        outputs["queued_tpu"] = declared.queued_tpu
        # What a `pulumi up` user runs for the same TPU (docs/how-to/capacity.md, "Queued TPUs").
        outputs["queued_tpu_gcloud"] = declared.queued_tpu.apply(lambda body: gcloud_command(spec, body))
    outputs["inventory"] = pulumi.Output.all(storage.uri, declared.nodes, declared.gke_service_account).apply(
        lambda a: {"stack": spec.name, "provider": "gcp", "bucket_uri": a[0], "nodes": a[1],
                   "kind": spec.kind, "registry": {"repository": images.path, "metadata_token": True},
                   **({"gke_service_account": a[2]} if a[2] else {})})
    return outputs
