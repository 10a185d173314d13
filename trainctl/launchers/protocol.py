"""The launcher interface (torchx's `schedule(dryrun(...))`): a dry run gives the exact plan —
each node's command line, or the Kubernetes objects — and `run` executes that plan.

The stack's target picks the launcher, never the caller: nodes over SSH (torchrun, or the
program directly for TensorFlow and TPU workers, decided per node in trainctl/launchers/ssh/launch.py), or a
Job on GKE.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from infra.spec import catalog
from infra.errors import ConfigError
from infra.providers.inventory import Inventory
from infra.spec.cluster import ClusterSpec
from trainctl.launchers.ssh.launch import LaunchResult, LaunchSpec, Recovery

Echo = Callable[[str], None]
Slot = tuple[ClusterSpec, Inventory]


@dataclass(frozen=True)
class LaunchPlan:
    run_id: str
    commands: dict[str, str] = field(default_factory=dict)  # SSH: node -> the command line it runs
    objects: list[dict[str, Any]] = field(default_factory=list)  # GKE: the validated objects

    def render(self) -> str:
        if self.objects:
            import yaml

            return yaml.safe_dump_all(self.objects, sort_keys=False)
        return "\n".join(f"# {node}\n{command}" for node, command in self.commands.items())


class Launcher(Protocol):
    # Whether the nodes need `bootstrap` (code, environment) before a launch; a GKE Job runs an
    # image that already holds them.
    needs_bootstrap: bool

    def dryrun(self, cluster: ClusterSpec, inventory: Inventory, spec: LaunchSpec) -> LaunchPlan: ...

    def run(self, cluster: ClusterSpec, inventory: Inventory, spec: LaunchSpec, log_dir: Path,
            echo: Echo, cancel: threading.Event | None = None,
            recovery: Recovery | None = None) -> LaunchResult:
        """Run until done; setting `cancel` stops the job everywhere, without a rerun;
        `recovery` recreates preempted nodes (where the launcher must: a GKE Job
        reschedules its pods itself)."""
        ...

    def check_slots(self, cluster: ClusterSpec, parts: int) -> int:
        """Nodes per slot when `parts` jobs share the cluster; refuses a split that cannot be,
        before anything exists."""
        ...

    def slots(self, cluster: ClusterSpec, inventory: Inventory, parts: int) -> list[Slot]:
        """The cluster split for `parts` jobs at once (a sweep's parallel trials)."""
        ...


def _share(cluster: ClusterSpec, parts: int) -> int:
    if cluster.pools and parts > 1:
        raise ConfigError(f"{parts} parallel trials would split stack {cluster.name}'s worker pools; "
                          "a cluster with pools runs one trial at a time (sweep.parallel_mode: "
                          "sequential)")
    size = cluster.node_count // parts
    if size < 1 or cluster.node_count % parts:
        raise ConfigError(f"{parts} parallel trials cannot share the {cluster.node_count} node(s) of "
                          f"stack {cluster.name} evenly")
    return size


class OverSsh:
    needs_bootstrap = True

    def dryrun(self, cluster: ClusterSpec, inventory: Inventory, spec: LaunchSpec) -> LaunchPlan:
        from trainctl.launchers.ssh.launch import plan

        return LaunchPlan(spec.run_id, commands=plan(inventory, spec))

    def run(self, cluster: ClusterSpec, inventory: Inventory, spec: LaunchSpec, log_dir: Path,
            echo: Echo, cancel: threading.Event | None = None,
            recovery: Recovery | None = None) -> LaunchResult:
        from trainctl.launchers.ssh.launch import launch

        return launch(inventory, spec, log_dir, echo, cancel=cancel, recovery=recovery)

    def check_slots(self, cluster: ClusterSpec, parts: int) -> int:
        return _share(cluster, parts)

    def slots(self, cluster: ClusterSpec, inventory: Inventory, parts: int) -> list[Slot]:
        """Disjoint groups of nodes, each ranked from 0 as a cluster of its own."""
        size = self.check_slots(cluster, parts)
        ordered = sorted(inventory.nodes, key=lambda n: n.rank)
        part = cluster.model_copy(update={"nodes": size})
        return [(part, inventory.model_copy(update={"nodes": tuple(
                    # each share is a cluster of its own: its first node is its chief
                    n.model_copy(update={"rank": i, "task": None})
                    for i, n in enumerate(ordered[g * size:(g + 1) * size]))}))
                for g in range(parts)]


class GkeJob:
    needs_bootstrap = False

    def dryrun(self, cluster: ClusterSpec, inventory: Inventory, spec: LaunchSpec) -> LaunchPlan:
        from trainctl.launchers.gke.manifests import manifests, validate

        objects = manifests(cluster, inventory, spec)
        for obj in objects:
            validate(obj)
        return LaunchPlan(spec.run_id, objects=objects)

    def run(self, cluster: ClusterSpec, inventory: Inventory, spec: LaunchSpec, log_dir: Path,
            echo: Echo, cancel: threading.Event | None = None,
            recovery: Recovery | None = None) -> LaunchResult:
        from trainctl.launchers.gke.job import run_job

        return run_job(cluster, inventory, spec, log_dir, echo, cancel=cancel)

    def check_slots(self, cluster: ClusterSpec, parts: int) -> int:
        """A TPU share is whole slices: a multi-host slice cannot be split between Jobs."""
        size = _share(cluster, parts)
        if cluster.tpu and size % catalog.TPUS[cluster.tpu.type].hosts:
            raise ConfigError(f"{parts} parallel trials would split a {cluster.tpu.type} slice "
                              f"({catalog.TPUS[cluster.tpu.type].hosts} hosts) of stack {cluster.name}")
        return size

    def slots(self, cluster: ClusterSpec, inventory: Inventory, parts: int) -> list[Slot]:
        """One Job per trial, each asking for its share of the pool's nodes."""
        size = self.check_slots(cluster, parts)
        return [(cluster.model_copy(update={"nodes": size}), inventory) for _ in range(parts)]


LAUNCHERS: dict[str, Launcher] = {"ssh": OverSsh(), "gke": GkeJob()}


def launcher_for(inventory: Inventory) -> Launcher:
    return LAUNCHERS[inventory.target]


def launcher_for_cluster(cluster: ClusterSpec) -> Launcher:
    """The launcher a spec's stack will get, known before the stack exists (to refuse early)."""
    return LAUNCHERS["gke" if cluster.kind == "gke" else "ssh"]
