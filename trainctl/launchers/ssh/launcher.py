"""The SSH launcher: the plan is every node's command line; running it supervises the nodes'
sessions until the job is done (trainctl/launchers/ssh/supervisor.py)."""

from __future__ import annotations

import shlex
import threading
import time
from pathlib import Path

from infra.providers.inventory import Inventory
from infra.spec.cluster import ClusterSpec
from trainctl.launchers.cluster_env import members
from trainctl.launchers.protocol import Echo, LaunchPlan, Recovery, Slot, share
from trainctl.launchers.result import LaunchResult
from trainctl.launchers.spec import LaunchSpec
from trainctl.launchers.ssh.commands import hypertune_file, plan


class OverSsh:
    def dryrun(self, cluster: ClusterSpec, inventory: Inventory, spec: LaunchSpec) -> LaunchPlan:
        return LaunchPlan(cluster, inventory, spec, commands=plan(inventory, spec))

    def run(self, plan: LaunchPlan, log_dir: Path, echo: Echo, cancel: threading.Event | None = None,
            recovery: Recovery | None = None) -> LaunchResult:
        from trainctl.launchers.ssh.supervisor import launch

        return launch(plan.inventory, plan.spec, log_dir, echo, cancel=cancel, recovery=recovery,
                      first=plan.commands)

    def check_slots(self, cluster: ClusterSpec, parts: int) -> int:
        return share(cluster, parts)

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

    def hypertune_file(self, inventory: Inventory, run_id: str) -> str | None:
        from bootstrap.ssh import open_connection

        chief = (members(inventory, "chief") or [inventory.rank0])[0]
        try:
            with open_connection(inventory, chief, deadline=time.monotonic() + 10) as conn:
                answer = conn.run(f"cat {shlex.quote(hypertune_file(chief, run_id))}", hide=True, warn=True,
                                  in_stream=False)
        except Exception:
            return None
        return answer.stdout if answer.ok else None
