"""The GKE launcher: the plan is the Kubernetes objects (validated against the client's models);
running it creates them and follows the Job to its end (trainctl/launchers/gke/job.py)."""

from __future__ import annotations

import threading
from pathlib import Path

from infra.errors import ConfigError
from infra.providers.inventory import Inventory
from infra.spec import catalog
from infra.spec.cluster import ClusterSpec
from trainctl.launchers.protocol import Echo, LaunchPlan, Recovery, Slot, share
from trainctl.launchers.result import LaunchResult
from trainctl.launchers.spec import LaunchSpec


class GkeJob:
    def dryrun(self, cluster: ClusterSpec, inventory: Inventory, spec: LaunchSpec) -> LaunchPlan:
        from trainctl.launchers.gke.kube import Kube
        from trainctl.launchers.gke.manifests import manifests, validate

        # A live stack's cluster says whether it serves JobSet (its API discovery); a plan made
        # before `up` has no cluster to ask, and shows a JobSet only where a queue is named.
        apis = Kube(inventory, catalog.GKE_KSA_NAMESPACE, cluster.node_count).apis() if inventory.kubeconfig else None
        objects = manifests(cluster, inventory, spec, apis=apis)
        for obj in objects:
            validate(obj)
        return LaunchPlan(cluster, inventory, spec, objects=objects)

    def run(self, plan: LaunchPlan, log_dir: Path, echo: Echo, cancel: threading.Event | None = None,
            recovery: Recovery | None = None) -> LaunchResult:
        from trainctl.launchers.gke.job import run_job

        return run_job(plan.cluster, plan.inventory, plan.spec, log_dir, echo, cancel=cancel, objects=plan.objects)

    def check_slots(self, cluster: ClusterSpec, parts: int) -> int:
        """A TPU share is whole slices: a multi-host slice cannot be split between Jobs, nor the
        slices of a multislice stack, which train one program."""
        if cluster.tpu and cluster.tpu.slices > 1 and parts > 1:
            raise ConfigError(f"{parts} parallel trials would split the {cluster.tpu.slices} slices of multislice "
                              f"stack {cluster.name}, which train one program together; run the trials one at a "
                              "time (parallel_trials: 1)")
        size = share(cluster, parts)
        if cluster.tpu and size % catalog.TPUS[cluster.tpu.type].hosts:
            raise ConfigError(f"{parts} parallel trials would split a {cluster.tpu.type} slice "
                              f"({catalog.TPUS[cluster.tpu.type].hosts} hosts) of stack {cluster.name}")
        return size

    def slots(self, cluster: ClusterSpec, inventory: Inventory, parts: int) -> list[Slot]:
        """One Job per trial, each asking for its share of the pool's nodes."""
        size = self.check_slots(cluster, parts)
        return [(cluster.model_copy(update={"nodes": size}), inventory) for _ in range(parts)]

    def hypertune_file(self, inventory: Inventory, run_id: str) -> str | None:
        return None  # a pod's file goes with it; trainers.hypertune's job-dir file is read instead
