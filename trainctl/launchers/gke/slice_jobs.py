"""A multislice TPU run on GKE (tpu.slices > 1) as JobSet runs one: an Indexed Job per slice
(completions = parallelism = the slice's hosts), each pinned to its slice's node pool, all under
the run's one headless Service. Every pod gets the MEGASCALE_* variables of its slice, with slice
0's pod 0 as the coordinator, and its slice's TPU_WORKER_ID / TPU_WORKER_HOSTNAMES, computed by
trainctl/launchers/megascale.py as for TPU VMs.

A Job's pod failure fails its Job at once (backoffLimit 0, as in JobSet's multislice recipes):
one slice cannot restart alone while the others wait for it, so the whole set is restarted
(trainctl/launchers/gke/slice_set.py), which is JobSet's failure policy."""

from __future__ import annotations

import copy
from typing import Any

from infra.spec import catalog
from infra.spec.cluster import ClusterSpec
from infra.spec.gke_names import NODE_POOL_LABEL, slice_pool
from trainctl.launchers.megascale import megascale_values, tpu_worker_hostnames

SLICE_LABEL = "trainctl/slice"  # on each slice's Job and pods: which slice they are
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"


def is_multislice(cluster: ClusterSpec) -> bool:
    return bool(cluster.tpu and cluster.tpu.slices > 1)


def slice_job_name(job: str, index: int, suffix: str = "") -> str:
    """Slice `index`'s Job: <run>-s<index>, or in a JobSet, whose controller names its child Jobs
    <jobset>-<replicated job>-<job index> (jobset pkg/controllers/jobset_controller.go,
    constructJob), the one Job of replicated job s<index>: suffix "-0"."""
    return f"{job}-s{index}{suffix}"


def slice_hostnames(job: str, svc: str, index: int, hosts: int, suffix: str = "") -> list[str]:
    """The pods of slice `index` by the names the headless Service publishes, in worker order."""
    return [f"{slice_job_name(job, index, suffix)}-{worker}.{svc}" for worker in range(hosts)]


def slice_env(cluster: ClusterSpec, job: str, svc: str, index: int, suffix: str = "") -> list[dict[str, Any]]:
    """What a pod of slice `index` is told about the slices: its worker id is its completion index."""
    assert cluster.tpu is not None
    hosts = catalog.TPUS[cluster.tpu.type].hosts
    coordinator = slice_hostnames(job, svc, 0, hosts, suffix)[0]
    values = {**megascale_values(cluster.tpu.slices, index, coordinator),
              **tpu_worker_hostnames(slice_hostnames(job, svc, index, hosts, suffix))}
    worker_id = {"name": "TPU_WORKER_ID",
                 "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_ANNOTATION}']"}}}
    return [*({"name": k, "value": v} for k, v in values.items()), worker_id]


def slice_jobs(cluster: ClusterSpec, job: dict[str, Any], svc: str, suffix: str = "") -> list[dict[str, Any]]:
    """The run's Indexed Job (made for the whole stack) as one Job per slice (named with
    `suffix` as slice_job_name says)."""
    assert cluster.tpu is not None
    hosts = catalog.TPUS[cluster.tpu.type].hosts
    base = job["metadata"]["name"]
    out = []
    for index in range(cluster.tpu.slices):
        part = copy.deepcopy(job)
        labels = {**part["metadata"]["labels"], SLICE_LABEL: str(index)}
        part["metadata"].update(name=slice_job_name(base, index, suffix), labels=labels)
        spec = part["spec"]
        spec.update(completions=hosts, parallelism=hosts, backoffLimit=0)
        spec["template"]["metadata"]["labels"] = dict(labels)
        pod = spec["template"]["spec"]
        pod["nodeSelector"] = {**pod.get("nodeSelector", {}), NODE_POOL_LABEL: slice_pool(cluster, index)}
        container = pod["containers"][0]
        container["env"] = [*container["env"], *slice_env(cluster, base, svc, index, suffix)]
        out.append(part)
    return out
