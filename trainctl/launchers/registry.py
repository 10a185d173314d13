"""Which launcher runs a stack's jobs: its target (SSH nodes or a GKE cluster), as the inventory
of a realized stack records it, or as the provider's Capabilities tell before the stack exists."""

from __future__ import annotations

from infra.providers import realizers
from infra.providers.inventory import Inventory
from infra.spec.cluster import ClusterSpec
from trainctl.launchers.gke.launcher import GkeJob
from trainctl.launchers.protocol import Launcher
from trainctl.launchers.ssh.launcher import OverSsh

LAUNCHERS: dict[str, Launcher] = {"ssh": OverSsh(), "gke": GkeJob()}


def launcher_for(inventory: Inventory) -> Launcher:
    return LAUNCHERS[inventory.target]


def launcher_for_cluster(cluster: ClusterSpec) -> Launcher:
    """The launcher a spec's stack will get, known before the stack exists (to refuse early)."""
    return LAUNCHERS[realizers.capabilities(cluster).target]
