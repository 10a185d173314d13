"""The launcher interface (torchx's `schedule(dryrun(...))`): a dry run gives the LaunchPlan —
each node's command line, or the Kubernetes objects — and `run` executes that very plan.

The stack's target picks the launcher (trainctl/launchers/registry.py), never the caller: nodes
over SSH (torchrun, or the program directly for TensorFlow and TPU workers, decided per node in
trainctl/launchers/ssh/commands.py), or a Job on GKE.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from infra.errors import ConfigError
from infra.providers.inventory import Inventory
from infra.spec.cluster import ClusterSpec
from trainctl.launchers.result import LaunchResult
from trainctl.launchers.spec import LaunchSpec

Echo = Callable[[str], None]
Slot = tuple[ClusterSpec, Inventory]


@dataclass(frozen=True)
class LaunchPlan:
    """What a launcher runs, decided before anything runs: `trainctl launch --plan` prints it,
    and `run` executes this object (its first attempt exactly these command lines or objects;
    a rerun or a recovery makes its own, for the attempt and the nodes it then has)."""

    cluster: ClusterSpec
    inventory: Inventory
    spec: LaunchSpec
    commands: dict[str, str] = field(default_factory=dict)  # SSH: node -> the command line it runs
    objects: list[dict[str, Any]] = field(default_factory=list)  # GKE: the validated objects

    @property
    def run_id(self) -> str:
        return self.spec.run_id

    def render(self) -> str:
        """The commands or objects as run, the rendezvous server's source named, not spelt out."""
        from trainctl.launchers.rendezvous_store import abbreviated

        if self.objects:
            import yaml

            return yaml.safe_dump_all(abbreviated(self.objects), sort_keys=False)
        return "\n".join(f"# {node}\n{abbreviated(command)}" for node, command in self.commands.items())


@dataclass
class Recovery:
    """How a run gets reclaimed nodes back, from whoever owns the stack (`trainctl run`):
    `reclaimed(nodes)` says which of the nodes that stopped answering the provider has stopped or
    deleted (a preemption whose notice never arrived), `recreate(nodes)` brings them back and
    returns the inventory to go on with, `bootstrap(inventory, nodes)` puts code and environment
    on them while the others already start the job. `keeps_addresses`: recreated nodes come back
    at their old addresses (the provider says so), so nothing the others' commands name changes
    and they may start again before the recreation is done."""
    reclaimed: Callable[[list[str]], list[str]]
    recreate: Callable[[list[str]], Inventory]
    bootstrap: Callable[[Inventory, list[str]], None] = lambda _inventory, _nodes: None
    keeps_addresses: bool = False


class Launcher(Protocol):
    def dryrun(self, cluster: ClusterSpec, inventory: Inventory, spec: LaunchSpec) -> LaunchPlan: ...

    def run(self, plan: LaunchPlan, log_dir: Path, echo: Echo, cancel: threading.Event | None = None,
            recovery: Recovery | None = None) -> LaunchResult:
        """Run the plan until done; setting `cancel` stops the job everywhere, without a rerun;
        `recovery` recreates preempted nodes (where the launcher must: a GKE Job reschedules its
        pods itself)."""
        ...

    def check_slots(self, cluster: ClusterSpec, parts: int) -> int:
        """Nodes per slot when `parts` jobs share the cluster; refuses a split that cannot be,
        before anything exists."""
        ...

    def slots(self, cluster: ClusterSpec, inventory: Inventory, parts: int) -> list[Slot]:
        """The cluster split for `parts` jobs at once (a sweep's parallel trials)."""
        ...

    def hypertune_file(self, inventory: Inventory, run_id: str) -> str | None:
        """What an unchanged cloudml-hypertune wrote on the job's chief, where the launcher's
        environment told it to; None where it cannot be read (a pod's files go with the pod)."""
        ...


def share(cluster: ClusterSpec, parts: int) -> int:
    """Nodes per share when `parts` jobs split the cluster evenly (pools are never split)."""
    if cluster.pools and parts > 1:
        raise ConfigError(f"{parts} parallel trials would split stack {cluster.name}'s worker pools; "
                          "a cluster with pools runs one trial at a time (sweep.parallel_mode: "
                          "sequential)")
    size = cluster.node_count // parts
    if size < 1 or cluster.node_count % parts:
        raise ConfigError(f"{parts} parallel trials cannot share the {cluster.node_count} node(s) of "
                          f"stack {cluster.name} evenly")
    return size
