"""What differs between the kinds of nodes a GCP stack has: Compute VMs, one Cloud TPU slice, or a
GKE node pool. Each kind is a class behind one interface (as Ray's autoscaler puts GCE and Cloud
TPU behind one resource interface), chosen once from the spec by `node_kind`; the realizer asks
it for the nodes' state, their host keys and what a repair must do, and never names a kind.

The kinds differ because their APIs do: a VM is one Compute instance that stops and starts on
its disk; a TPU slice is one Cloud TPU node whose workers live, stop and go together and which
cannot restart once preempted; a GKE pool's nodes are Google's to replace and Kubernetes' to
reschedule onto, so trainctl neither looks at nor repairs them.
"""

from __future__ import annotations

import shutil
from abc import ABC, abstractmethod
from typing import ClassVar, Literal

from infra.errors import ConfigError
from infra.providers.gcp import private_endpoints
from infra.providers.gcp.reaper import google_client
from infra.providers.host_keys import key_lines
from infra.providers.protocol import Capabilities, Progress
from infra.providers.realizers import Unsupported, unsupported
from infra.spec.cluster import ClusterSpec

# TPU node states as Compute would name an instance's: the slice lives or stops as one.
TPU_AS_INSTANCE = {"READY": "RUNNING", "PREEMPTED": "TERMINATED", "STOPPED": "TERMINATED",
                   "TERMINATED": "TERMINATED"}
# How long a repair waits for a TPU's deletion to finish before `up` recreates it.
TPU_DELETE_TIMEOUT_SECONDS = 600


class NodeKind(ABC):
    """The operations on a stack's nodes that depend on what the nodes are."""

    # How jobs reach the nodes: commands over SSH after bootstrap, or Kubernetes Jobs of images.
    target: ClassVar[Literal["ssh", "gke"]] = "ssh"
    # Whether trainctl reaches the nodes themselves (SSH key, pinned host keys, bootstrap).
    reached_over_ssh: ClassVar[bool] = True

    def __init__(self, spec: ClusterSpec) -> None:
        self.spec = spec

    # What jobs of this kind cannot run yet (Capabilities.refused_frameworks).
    refused_frameworks: ClassVar[dict[str, str]] = {}

    def capabilities(self) -> Capabilities:
        """Recreated nodes get new internal addresses; nodes reach Google. Pods run stand-ins for
        images where the stack's endpoints say its machines pull none; machines on this host (a
        simulated project's) are billed by no one. A run's shared folder is its bucket folder
        mounted with Cloud Storage FUSE on VMs that can install gcsfuse and reach Cloud Storage:
        not where the endpoints record says the machines have no route (a simulated project's)."""
        reach = private_endpoints.of_stack(self.spec.name)
        fuse = self.reached_over_ssh and (reach is None or reach.machines.route_to_internet)
        return Capabilities(target=self.target, needs_bootstrap=self.reached_over_ssh,
                            shared_folder="bucket" if fuse else None,
                            refused_frameworks=self.refused_frameworks,
                            repair_keeps_addresses=False, reaches_google=True, machine_types=True,
                            stands_in_images=not self.reached_over_ssh and reach is not None
                            and not reach.machines.pulls_images,
                            unbilled="simulated project: its machines are namespaces of this machine, nothing "
                                     "is billed" if reach is not None and reach.machines.on_this_host else None)

    def check_tools(self) -> None:
        """Refuse, before anything is created, when a tool this kind needs is not installed."""

    @abstractmethod
    def status(self, nodes: list[str]) -> dict[str, str | None]:
        """Compute's view of each node: RUNNING, TERMINATED, ... or None when it no longer exists."""

    @abstractmethod
    def host_keys(self, missing: list[str]) -> dict[str, list[str]]:
        """The host keys the guest agents of the nodes still `missing` keys have published."""

    def check_repairable(self) -> None:
        """Refuse a repair before it takes the stack's lock or reads its state."""

    def preempt_path(self, node: str) -> str:
        """The API path of what a preemption of `node` reclaims (its VM; a TPU worker's slice)."""
        raise unsupported("gcp", "preempt", "a GKE stack's nodes belong to its node pool, which Google "
                                            "preempts and replaces itself")

    @abstractmethod
    def bring_back(self, status: dict[str, str | None], lost: list[str], progress: Progress) -> list[str]:
        """Make the `lost` nodes (not RUNNING per `status`) recreatable or running again; returns
        those `pulumi up --refresh` must create anew."""


class VmNodes(NodeKind):
    """Compute instances, one per node: a stopped one starts again on its disk."""

    def status(self, nodes: list[str]) -> dict[str, str | None]:
        from google.api_core.exceptions import NotFound
        from google.cloud import compute_v1

        client = google_client(compute_v1.InstancesClient)
        result: dict[str, str | None] = {}
        for node in nodes:
            try:
                result[node] = client.get(project=self.spec.project, zone=self.spec.zone, instance=node).status
            except NotFound:
                result[node] = None
        return result

    def host_keys(self, missing: list[str]) -> dict[str, list[str]]:
        return {name: self.instance_host_keys(name) for name in missing}

    def instance_host_keys(self, instance: str) -> list[str]:
        from google.api_core.exceptions import NotFound
        from google.cloud import compute_v1

        try:
            attrs = google_client(compute_v1.InstancesClient).get_guest_attributes(
                request=compute_v1.GetGuestAttributesInstanceRequest(
                    project=self.spec.project, zone=self.spec.zone, instance=instance, query_path="hostkeys/"))
        except NotFound:
            return []
        return key_lines(attrs.query_value.items)

    def preempt_path(self, node: str) -> str:
        return f"projects/{self.spec.project}/zones/{self.spec.zone}/instances/{node}"

    def bring_back(self, status: dict[str, str | None], lost: list[str], progress: Progress) -> list[str]:
        from google.cloud import compute_v1

        for node in lost:
            if status[node] is not None:
                progress(f"{node}: starting it again on its disk")
                google_client(compute_v1.InstancesClient).start(
                    project=self.spec.project, zone=self.spec.zone, instance=node).result()
        return [n for n in lost if status[n] is None]


class TpuSlice(NodeKind):
    """One Cloud TPU node per slice (several with tpu.slices) whose workers are the stack's nodes:
    they run, stop and go as one, and a preempted slice cannot restart, so a repair deletes it for
    `up` to create again."""

    @property
    def node_path(self) -> str:
        return self.slice_paths()[0]

    def slice_paths(self) -> list[str]:
        from infra.providers.gcp.program.tpu import slice_node_ids

        return [f"projects/{self.spec.project}/locations/{self.spec.zone}/nodes/{node_id}"
                for node_id in slice_node_ids(self.spec)]

    def status(self, nodes: list[str]) -> dict[str, str | None]:
        from google.api_core.exceptions import NotFound
        from google.cloud import tpu_v2

        out: dict[str, str | None] = dict.fromkeys(nodes)
        for path in self.slice_paths():
            try:
                node = google_client(tpu_v2.TpuClient).get_node(name=path)
            except NotFound:
                continue
            state = TPU_AS_INSTANCE.get(node.state.name, node.state.name)
            out.update({n: state for n in nodes if n.startswith(f"{path.rsplit('/', 1)[-1]}-w")})
        return out

    def preempt_path(self, node: str) -> str:
        """The slice `node` is a worker of (`<node id>-w<i>`): the whole slice is preempted."""
        for path in self.slice_paths():
            if node.startswith(f"{path.rsplit('/', 1)[-1]}-w"):
                return path
        raise ConfigError(f"stack {self.spec.name} has no TPU worker {node!r}")

    def host_keys(self, missing: list[str]) -> dict[str, list[str]]:
        """Every worker's, whichever are missing: the API answers for a whole slice at once."""
        from google.api_core.exceptions import NotFound
        from google.cloud import tpu_v2

        keys: dict[str, list[str]] = {}
        for path in self.slice_paths():
            try:
                resp = google_client(tpu_v2.TpuClient).get_guest_attributes(
                    request=tpu_v2.GetGuestAttributesRequest(name=path, query_path="hostkeys/"))
            except NotFound:
                continue
            # GuestAttributes carries no worker id: the API answers one entry per worker, in worker
            # order (worker 0 first), which is also the order of the node's networkEndpoints.
            keys.update({f"{path.rsplit('/', 1)[-1]}-w{worker}": key_lines(attr.query_value.items)
                         for worker, attr in enumerate(resp.guest_attributes)})
        return keys

    def bring_back(self, status: dict[str, str | None], lost: list[str], progress: Progress) -> list[str]:
        from google.cloud import tpu_v2

        if lost and status[lost[0]] is not None:
            progress(f"TPU {self.node_path} was reclaimed: deleting it to create it again")
            google_client(tpu_v2.TpuClient).delete_node(name=self.node_path).result(
                timeout=TPU_DELETE_TIMEOUT_SECONDS)
        return lost


class QueuedTpuSlice(TpuSlice):
    """A TPU slice a queued resource granted: a reclaimed one goes with its request (force), and
    the realizer queues a new request, as `up` did, after `pulumi up --refresh`."""

    def bring_back(self, status: dict[str, str | None], lost: list[str], progress: Progress) -> list[str]:
        from infra.providers.gcp import queued_tpu

        if lost:
            queued_tpu.release(self.spec.name, progress)
        return lost


class GkeNodePool(NodeKind):
    """A GKE cluster's node pool: Google replaces preempted nodes and the Job reschedules its
    pods itself; pods are reached through Kubernetes, so no node has host keys to pin."""

    target = "gke"
    reached_over_ssh = False
    refused_frameworks = {
        "jax": "a GKE Job's pods get no jax.distributed coordinator, process count or id from trainctl "
               "yet (only torchrun's rendezvous and TF_CONFIG); run JAX on a TPU VM or GPU VM stack "
               "(kind: tpu or vm), or framework torch here"}

    def check_tools(self) -> None:
        if shutil.which("gke-gcloud-auth-plugin") is None:
            raise ConfigError(
                "GKE stacks need gke-gcloud-auth-plugin on PATH (the kubeconfig trainctl writes uses it): "
                "`gcloud components install gke-gcloud-auth-plugin`, or the "
                "google-cloud-cli-gke-gcloud-auth-plugin package")

    def status(self, nodes: list[str]) -> dict[str, str | None]:
        raise unsupported("gcp", "instance status", "a GKE stack's nodes belong to its node pool; "
                                 "the Job reschedules a preempted pod itself")

    def host_keys(self, missing: list[str]) -> dict[str, list[str]]:
        return {}

    def check_repairable(self) -> None:
        raise self._repair_refused()

    def bring_back(self, status: dict[str, str | None], lost: list[str], progress: Progress) -> list[str]:
        raise self._repair_refused()

    @staticmethod
    def _repair_refused() -> Unsupported:
        return unsupported("gcp", "repair", "a GKE stack's node pool replaces preempted nodes and "
                                            "the Job reschedules its pods itself")


KINDS: dict[str, type[NodeKind]] = {"vm": VmNodes, "tpu": TpuSlice, "gke": GkeNodePool}


def node_kind(spec: ClusterSpec) -> NodeKind:
    if spec.tpu and spec.tpu.queued and spec.kind == "tpu":
        return QueuedTpuSlice(spec)
    return KINDS[spec.kind](spec)
