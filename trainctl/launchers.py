"""The launcher interface (torchx's `schedule(dryrun(...))`): a dry run gives the exact plan —
each node's command line, or the Kubernetes objects — and `run` executes that plan.

The stack's target picks the launcher, never the caller: nodes over SSH (torchrun, or the
program directly for TensorFlow and TPU workers, decided per node in trainctl/launch.py), or a
Job on GKE.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from infra.inventory import Inventory
from infra.spec import ClusterSpec
from trainctl.launch import LaunchResult, LaunchSpec

Echo = Callable[[str], None]


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
    # Whether a sweep can run its trials here (trials split the nodes; on GKE that would be one
    # Job per trial, not built yet).
    supports_sweeps: bool

    def dryrun(self, cluster: ClusterSpec, inventory: Inventory, spec: LaunchSpec) -> LaunchPlan: ...

    def run(self, cluster: ClusterSpec, inventory: Inventory, spec: LaunchSpec, log_dir: Path,
            echo: Echo) -> LaunchResult: ...


class OverSsh:
    needs_bootstrap = True
    supports_sweeps = True

    def dryrun(self, cluster: ClusterSpec, inventory: Inventory, spec: LaunchSpec) -> LaunchPlan:
        from trainctl.launch import plan

        return LaunchPlan(spec.run_id, commands=plan(inventory, spec))

    def run(self, cluster: ClusterSpec, inventory: Inventory, spec: LaunchSpec, log_dir: Path,
            echo: Echo) -> LaunchResult:
        from trainctl.launch import launch

        return launch(inventory, spec, log_dir, echo)


class GkeJob:
    needs_bootstrap = False
    supports_sweeps = False

    def dryrun(self, cluster: ClusterSpec, inventory: Inventory, spec: LaunchSpec) -> LaunchPlan:
        from trainctl.gke import manifests, validate

        objects = manifests(cluster, inventory, spec)
        for obj in objects:
            validate(obj)
        return LaunchPlan(spec.run_id, objects=objects)

    def run(self, cluster: ClusterSpec, inventory: Inventory, spec: LaunchSpec, log_dir: Path,
            echo: Echo) -> LaunchResult:
        from trainctl.gke_run import run_job

        return run_job(cluster, inventory, spec, log_dir, echo)


LAUNCHERS: dict[str, Launcher] = {"ssh": OverSsh(), "gke": GkeJob()}


def launcher_for(inventory: Inventory) -> Launcher:
    return LAUNCHERS[inventory.target]


def launcher_for_cluster(cluster: ClusterSpec) -> Launcher:
    """The launcher a spec's stack will get, known before the stack exists (to refuse early)."""
    return LAUNCHERS["gke" if cluster.kind == "gke" else "ssh"]
