"""A GKE run as a JobSet (jobset.x-k8s.io/v1alpha2), for a Kueue LocalQueue to admit.

The run's Indexed Job(s), made as for a bare run, become the JobSet's replicated jobs: one
replicated job `w` (one replica) for a stack without slices, one replicated job `s<i>` (one
replica) per slice of a multislice TPU stack. XPK writes one replicated job with `replicas:
<slices>` and lets the `alpha.jobset.sigs.k8s.io/exclusive-topology` annotation spread the
replicas over the slices' node pools (xpk src/xpk/commands/workload.py, WORKLOAD_CREATE_YAML;
src/xpk/core/scheduling.py); trainctl pins each slice to its own node pool and gives it its own
MEGASCALE_SLICE_ID and TPU_WORKER_HOSTNAMES, so each slice is its own replicated job.

JobSet's controller (kubernetes-sigs/jobset pkg/controllers/jobset_controller.go) names a child
Job <jobset>-<replicated job>-<job index> (constructJob), copies the template's labels onto it
and its pods beside its own `jobset.sigs.k8s.io/*` labels (labelAndAnnotateObject), and, with
`network.enableDNSHostnames`, gives the pods the subdomain `network.subdomain` and creates that
headless Service only when none of that name exists (createHeadlessSvcIfNecessary): trainctl's
own Service (its ports, publishNotReadyAddresses) is created first and kept. So the pods' names
are the ones the scripts were written with: the child Job's name, `-<completion index>`.

Without `failurePolicy` a JobSet fails as soon as one child Job fails, and the controller then
deletes its other active Jobs (executeFailurePolicy, FailedJobs; reconcile's jobSetFinished
branch): the "stop every slice" of a multislice run. Reruns stay trainctl's (a new JobSet per
attempt), so every attempt keeps its own logs and result, as on the Indexed Job path.

Kueue (kubernetes-sigs/kueue site/content/en/docs/tasks/run/jobsets.md): the LocalQueue is the
`kueue.x-k8s.io/queue-name` label on the JobSet's metadata; the priority is the first non-empty
`priorityClassName` of the replicated jobs' pod templates. Kueue's webhook suspends a queued
JobSet on creation (pkg/controller/jobframework/defaults.go, ApplyDefaultForSuspend) and
unsuspends it once admitted; trainctl creates it suspended itself, so no pod starts before the
queue admits it even where the webhook is not reached.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from infra.errors import ConfigError

JOBSET_GROUP, JOBSET_VERSION = "jobset.x-k8s.io", "v1alpha2"
JOBSET_API = f"{JOBSET_GROUP}/{JOBSET_VERSION}"
KUEUE_GROUP = "kueue.x-k8s.io"
# kueue pkg/controller/constants/constants.go QueueLabel
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# jobset api/jobset/v1alpha2/jobset_types.go JobSetNameKey: on every child Job and pod
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
SINGLE = "w"  # the one replicated job of a stack without slices


def jobset_name(run_id: str, replicated_jobs: list[str], pods_per_job: int) -> str:
    """The run id, cut so that every pod name JobSet's webhook checks fits a DNS-1035 label:
    <jobset>-<replicated job>-<job index>-<pod index> and a 5-character suffix, at most 63
    (jobset pkg/webhooks/jobset_webhook.go, podNameTooLongErrorMsg), starting with a letter."""
    if not run_id[:1].isalpha():
        raise ConfigError(f"run id {run_id!r}: a JobSet's name must start with a letter (its child Jobs' and "
                          "pods' names are DNS-1035 labels)")
    longest = max(len(f"-{r}-0-{pods_per_job - 1}-abcde") for r in replicated_jobs)
    return run_id[:63 - longest].rstrip("-")


def child_job_name(jobset: str, replicated_job: str, index: int = 0) -> str:
    """jobset pkg/util/placement GenJobName, as constructJob names each child Job."""
    return f"{jobset}-{replicated_job}-{index}"


@dataclass(frozen=True)
class ClusterApis:
    """What the cluster serves beyond the built-in APIs (its API discovery, GET /apis): the
    JobSet API at v1alpha2, and Kueue's API (the version it prefers)."""

    jobset: bool = False
    kueue_version: str | None = None


def as_jobset(name: str, labels: dict[str, str], jobs: list[dict[str, Any]], svc: str,
              queue: str | None, priority_class: str | None) -> dict[str, Any]:
    """The run's Job(s), named as the JobSet's children, as one JobSet."""
    replicated = []
    for job in jobs:
        child = job["metadata"]["name"]
        assert child.startswith(f"{name}-") and child.endswith("-0"), child
        spec = copy.deepcopy(job["spec"])
        if priority_class:
            spec["template"]["spec"]["priorityClassName"] = priority_class
        replicated.append({"name": child[len(name) + 1:-2], "replicas": 1,
                           "template": {"metadata": {"labels": dict(job["metadata"]["labels"])}, "spec": spec}})
    meta_labels = {**labels, **({QUEUE_LABEL: queue} if queue else {})}
    body: dict[str, Any] = {
        "apiVersion": JOBSET_API, "kind": "JobSet",
        "metadata": {"name": name, "labels": meta_labels},
        "spec": {"replicatedJobs": replicated,
                 "network": {"enableDNSHostnames": True, "subdomain": svc, "publishNotReadyAddresses": True}}}
    if queue:
        body["spec"]["suspend"] = True
    return body


REPLICATED_JOB_FIELDS = {"name", "replicas", "template", "groupName", "dependsOn"}
SPEC_FIELDS = {"replicatedJobs", "network", "successPolicy", "failurePolicy", "startupPolicy", "suspend",
               "coordinator", "managedBy", "ttlSecondsAfterFinished", "volumeClaimPolicies"}
NETWORK_FIELDS = {"enableDNSHostnames", "subdomain", "publishNotReadyAddresses"}


def jobset_unknown_fields(body: dict[str, Any]) -> list[str]:
    """The JobSet fields (jobset api/jobset/v1alpha2/jobset_types.go: JobSetSpec, ReplicatedJob,
    Network) a body names that the API does not have; a child Job's template is the batch/v1
    JobTemplateSpec, which the caller checks with the client's Job model."""
    spec = body.get("spec", {})
    unknown = [f"spec.{k}" for k in spec if k not in SPEC_FIELDS]
    unknown += [f"spec.network.{k}" for k in spec.get("network", {}) if k not in NETWORK_FIELDS]
    for i, rjob in enumerate(spec.get("replicatedJobs", [])):
        unknown += [f"spec.replicatedJobs[{i}].{k}" for k in rjob if k not in REPLICATED_JOB_FIELDS]
    return unknown


def template_as_job(body: dict[str, Any], index: int) -> dict[str, Any]:
    """Replicated job `index` as the child Job its controller creates (for the client's model)."""
    rjob = body["spec"]["replicatedJobs"][index]
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": child_job_name(body["metadata"]["name"], rjob["name"]),
                         "labels": rjob["template"].get("metadata", {}).get("labels", {})},
            "spec": rjob["template"]["spec"]}
