"""Inventory: what a realized cluster looks like to bootstrap, launch, ssh, status and down.

A GCP stack exports it as the stack output "inventory"; the local realizer writes the same
model to its state directory. It holds no private key material: paths and public host keys only.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any, Iterator, Literal

from pydantic import BaseModel, ConfigDict, Field

from infra.spec.accelerator import Accelerator, Cpu
from infra.errors import ConfigError
from infra.spec.cluster import Role


class Node(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    rank: int = Field(ge=0)
    role: Literal["worker", "tpu-worker", "gke-node"] = "worker"
    internal_ip: str  # what other nodes use (rendezvous, TF_CONFIG)
    ssh_host: str  # what the controller dials
    ssh_port: int = 22
    ssh_user: str = "root"
    host_keys: tuple[str, ...]  # "ssh-ed25519 AAAA…" lines, pinned
    accelerator: Accelerator = Cpu()
    workdir: str  # absolute path on the node that trainctl owns
    interface: str | None = None  # NIC that collective traffic should bind to
    # The TPU node (slice) this VM is a worker of: TensorFlow's TPUClusterResolver takes it.
    tpu_name: str | None = None
    # Its slice's index in a multislice stack (tpu.slices > 1): MEGASCALE_SLICE_ID; None otherwise.
    tpu_slice: int | None = None
    # Its worker pool's role (chief, worker, ps, evaluator); None in inventories written before
    # pools existed, where the first node is the chief and the others workers.
    task: Role | None = None
    # The VM's machine type where it has one (GCP VMs): what its GPU network needs
    # (infra/spec/gpu_networks.py) follows from it.
    machine_type: str | None = None
    # What the node declares but does not have (a simulated GCP node: `accelerator` is then
    # what it really computes with, the CPU).
    simulates: Accelerator | None = None


class Registry(BaseModel):
    """Where the stack's container images live, as the controller and the nodes reach it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Images are named <repository>/<name>: "10.210.5.3:5000/trainctl" on the local stack,
    # "us-central1-docker.pkg.dev/<project>/<repo>" for Artifact Registry.
    repository: str
    # CA certificates to trust for it (the local stack's own); None: the system's.
    cert_dir: str | None = None
    # Artifact Registry: nodes log in with their service account's token from the metadata
    # server (what `gcloud auth configure-docker` arranges), read access granted to that account.
    metadata_token: bool = False
    # Made for this stack alone (the local stack's): pushes go through the controller's stable
    # alias for it, so layers that earlier stacks' registries had are not sent again.
    per_stack: bool = False

    @property
    def host(self) -> str:
        return self.repository.split("/", 1)[0]

    @contextlib.contextmanager
    def push_target(self) -> Iterator[str]:
        """The repository to push to while the block runs: a registry made for this stack alone
        through the controller's stable alias for it (infra/providers/registry_alias.py), so
        layers that earlier stacks' registries had are not sent again; any other as it is."""
        if not self.per_stack:
            yield self.repository
            return
        from infra.providers.registry_alias import loopback_alias

        _, _, path = self.repository.partition("/")
        with loopback_alias(self.host) as alias:
            yield f"{alias}/{path}" if alias else self.repository


class Inventory(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    stack: str
    provider: Literal["local", "gcp"]
    nodes: tuple[Node, ...]
    bucket_uri: str  # gs://name
    storage_emulator_host: str | None = None  # http://ip:port on the local stack
    ssh_private_key: str  # path on the controller, never its content
    known_hosts: str  # path on the controller: one line per node, written from host_keys
    rendezvous_port: int = 29400
    node_env: dict[str, str] = Field(default_factory=dict)  # exported on every node
    # Nodes without a route to package registries (the local stack): the controller fills the
    # nodes' shared uv cache, and nodes install from it offline.
    offline_nodes: bool = False
    # The nodes are namespaces of the controller's own machine (the local stack, a simulated
    # project's VMs and pods): they share its cores and see its filesystem.
    on_controller: bool = False
    # A folder of the controller's machine that every node sees at this same path (the local
    # stack's state, which its namespaces share): runs' shared_dir folders live under it. None:
    # nodes share no machine's files (GCP: the bucket is mounted instead).
    shared_root: str | None = None
    kubeconfig: str | None = None  # path, GKE only
    # The Google service account the cluster's Kubernetes service account acts as (Workload
    # Identity): pods write checkpoints to the bucket with its grant. GKE only.
    gke_service_account: str | None = None
    registry: Registry | None = None
    # How the provider chose where the nodes are, when it had a choice (GCP zone failover): each
    # zone tried, in order, with its outcome, the provider's reason and seconds taken.
    placement: tuple[dict[str, Any], ...] = ()

    @property
    def target(self) -> Literal["ssh", "gke"]:
        """How work reaches the cluster: over SSH to its nodes, or as Jobs through Kubernetes."""
        return "gke" if self.kubeconfig else "ssh"

    @property
    def rank0(self) -> Node:
        return min(self.nodes, key=lambda n: n.rank)

    def node(self, name_or_rank: str) -> Node:
        for n in self.nodes:
            if name_or_rank in (n.name, str(n.rank)):
                return n
        raise ConfigError(f"no node {name_or_rank!r}; nodes: {', '.join(n.name for n in self.nodes)}")

    def select(self, names_or_ranks: list[str] | None) -> list[Node]:
        if not names_or_ranks:
            return list(self.nodes)
        return [self.node(x) for x in names_or_ranks]

    def known_hosts_lines(self) -> list[str]:
        lines: list[str] = []
        for n in self.nodes:
            host = n.ssh_host if n.ssh_port == 22 else f"[{n.ssh_host}]:{n.ssh_port}"
            lines.extend(f"{host} {key}" for key in n.host_keys)
        return lines

    def write(self, path: Path) -> None:
        path.write_text(self.model_dump_json(indent=2))

    @classmethod
    def read(cls, path: Path) -> Inventory:
        return cls.model_validate(json.loads(path.read_text()))
