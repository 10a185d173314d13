"""GKE runs: the launch spec as an Indexed Job that trainctl follows to its end, as it follows
the nodes of a VM stack over SSH.

One attempt is one Job. trainctl creates it, watches it and its pods (watches from the
resourceVersion it was created at; polling when a watch breaks), streams every pod's log to the
console with the VM stacks' prefixes (`[pod1 r3]:` for the program, `[pod1]` for torchrun's own
lines) and into runs/<run>/logs/launch/attempt-NN/pod<index>.log, and maps the restart policy:

  max_restarts          pod restarts inside the Job (backoffLimit); a disrupted pod (preempted,
                        evicted) is replaced without spending it (podFailurePolicy: Ignore)
  permanent_exit_codes  the Job fails at once (podFailurePolicy: FailJob on the program's exit
                        code); under torchrun the pod's exit code is torchrun's, so the worker's
                        exit code is read from torchrun's log and trainctl stops the Job, as on SSH
  job_retries           a failed Job is deleted and created again (a new attempt: the trainers
                        resume from their checkpoints)

The Job and the Service are deleted on every exit path (the Job in the foreground, so its pods
go first); the ServiceAccount stays: every run of the stack uses it.
"""

from __future__ import annotations

import functools
import threading
from pathlib import Path
from typing import Any, Callable

from infra.errors import RemoteError
from infra.providers.inventory import Inventory
from infra.spec import catalog
from infra.spec.cluster import ClusterSpec
from infra.spec.gke_gpudirect import pod_networks
from infra.spec.stack_config import ConfigError
from trainctl.launchers.gke.attempt import Attempt
from trainctl.launchers.gke.jobset import template_as_job
from trainctl.launchers.gke.jobset_attempt import JobSetAttempt
from trainctl.launchers.gke.kube import Kube
from trainctl.launchers.gke.manifests import manifests, names, validate
from trainctl.launchers.gke.slice_set import SliceSetAttempt
from trainctl.launchers.interrupts import uninterruptible
from trainctl.launchers.result import LaunchResult, write_result
from trainctl.launchers.spec import LaunchSpec

POLL_SECONDS = 2.0
DELETE_WAIT_SECONDS = 300.0  # a foreground deletion lasts as long as the pods' grace period


def run_job(cluster: ClusterSpec, inventory: Inventory, spec: LaunchSpec, log_dir: Path,
            echo: Callable[[str], None] = print, *, image: str | None = None, gsa: str | None = None,
            namespace: str = catalog.GKE_KSA_NAMESPACE, poll: float = POLL_SECONDS,
            cancel: threading.Event | None = None, objects: list[dict[str, Any]] | None = None) -> LaunchResult:
    """Run the job on a GKE stack until it succeeds, fails for good, or has no reruns left;
    rerun a failed Job (resuming from its checkpoints) up to job_retries times. Blocks; writes
    RESULT_FILE into log_dir as `launch()` does; deletes the Job and the Service however it ends.
    Setting `cancel` (a sweep's pruned trial) deletes the Job and ends the run without a rerun.
    `objects`: the ServiceAccount, Service and Job as a launch plan has them (default: made here)."""
    if namespace != catalog.GKE_KSA_NAMESPACE:
        raise ConfigError(f"namespace {namespace!r}: the pods' service account is bound to the bucket "
                          f"in namespace {catalog.GKE_KSA_NAMESPACE!r} only (Workload Identity)")
    kube = Kube(inventory, namespace, cluster.node_count)
    planned = objects if objects is not None else manifests(cluster, inventory, spec, image, gsa, apis=kube.apis())
    service_account, service, *workloads = (validate(o) for o in planned)
    jobset: dict[str, Any] | None = workloads[0] if isinstance(workloads[0], dict) else None
    jobs = ([validate(template_as_job(jobset, i)) for i in range(len(jobset["spec"]["replicatedJobs"]))]
            if jobset else workloads)
    job_names, service_name = [j.metadata.name for j in jobs], names(spec)[1]
    refuse_what_cannot_start(kube, cluster, inventory, spec, job_names, jobset)
    kube.keep_or_create(kube.core.create_namespaced_service_account, service_account)
    # A multislice set restarts whole: JobSet's maxRestarts (max_restarts) and then the reruns.
    reruns = spec.job_retries + (spec.max_restarts if len(jobs) > 1 else 0)
    owned = [jobset["metadata"]["name"]] if jobset else job_names
    try:
        kube.keep_or_create(kube.core.create_namespaced_service, service)
        attempt = 0
        while True:
            one = attempt_of(kube, cluster, spec, jobset, jobs, log_dir / f"attempt-{attempt + 1:02d}", echo, poll,
                             cancel)
            result, retryable = one.run()
            if result.ok or result.cancelled or attempt >= reruns or not retryable:
                break
            why = result.why_no_rerun(spec.permanent_exit_codes)
            if why is not None:
                echo(f"[trainctl] {why}")
                break
            attempt += 1
            what = "every slice's job restarted" if len(jobs) > 1 else "job failed"
            echo(f"[trainctl] {what}; rerun {attempt}/{reruns} from the latest checkpoint")
            for name in owned:
                delete_owned(kube, name, bool(jobset), poll)
        result.attempts = attempt + 1
    except BaseException:
        teardown(kube, owned, service_name, echo, poll, bool(jobset))
        raise
    left = teardown(kube, owned, service_name, echo, poll, bool(jobset))
    write_result(log_dir, result)  # the run's outcome is known even if its cleanup failed
    if left:
        raise RemoteError(left)
    return result


def attempt_of(kube: Kube, cluster: ClusterSpec, spec: LaunchSpec, jobset: dict[str, Any] | None, jobs: list[Any],
               folder: Path, echo: Callable[[str], None], poll: float, cancel: threading.Event | None) -> Attempt:
    torchrun = spec.framework == "torch" and not cluster.tpu
    if jobset:
        return JobSetAttempt(kube, jobset, jobs, spec, folder, echo, poll, torchrun, cancel=cancel)
    if len(jobs) > 1:
        return SliceSetAttempt(kube, jobs, spec, folder, echo, poll, cancel=cancel)
    return Attempt(kube, jobs[0], spec, folder, echo, poll, torchrun=torchrun, cancel=cancel)


def delete_owned(kube: Kube, name: str, jobset: bool, poll: float) -> None:
    if jobset:
        kube.delete_jobset(name, DELETE_WAIT_SECONDS, poll)
    else:
        kube.delete_job(name, DELETE_WAIT_SECONDS, poll)


def refuse_jobset_without_its_apis(kube: Kube, inventory: Inventory, spec: LaunchSpec, jobset: dict[str, Any]) -> None:
    """A JobSet needs JobSet's API on the cluster, and a queued one Kueue's and its LocalQueue
    (else it would never start, and say nothing)."""
    apis = kube.apis()
    if not apis.jobset:
        raise ConfigError(f"stack {inventory.stack}: the cluster does not serve jobset.x-k8s.io/v1alpha2, which "
                          "a run naming a Kueue queue is submitted as: install JobSet "
                          "(https://jobset.sigs.k8s.io/docs/installation/), or remove `queue`")
    queue = spec.queue
    if queue and apis.kueue_version is None:
        raise ConfigError(f"stack {inventory.stack}: queue {queue!r} is a Kueue LocalQueue, and the cluster does not "
                          "serve kueue.x-k8s.io: install Kueue (https://kueue.sigs.k8s.io/docs/installation/), "
                          "or remove `queue`")
    if queue and apis.kueue_version and not kube.local_queue_exists(apis.kueue_version, queue):
        raise ConfigError(f"stack {inventory.stack}: namespace {kube.ns} has no Kueue LocalQueue {queue!r} (`kubectl "
                          f"get localqueues -n {kube.ns}` lists those there); the job would never be admitted")
    if kube.read_jobset(jobset["metadata"]["name"]) is not None:
        raise ConfigError(f"a jobset {jobset['metadata']['name']} is already running in namespace {kube.ns} (run "
                          f"{spec.run_id} launched twice?); pick another run id")


def refuse_what_cannot_start(kube: Kube, cluster: ClusterSpec, inventory: Inventory, spec: LaunchSpec,
                             job_names: list[str], jobset: dict[str, Any] | None = None) -> None:
    """Refuse, before anything is created, a launch whose pods could never start or whose Job
    name is taken (the teardown would then delete someone else's run)."""
    if jobset is not None:
        refuse_jobset_without_its_apis(kube, inventory, spec, jobset)
    # GKE does not create a pod naming a missing Network, and the Job would wait for pods forever.
    networks = [n.name for n in pod_networks(cluster)]
    missing = kube.missing_networks(networks) if networks else []
    if missing:
        raise ConfigError(f"stack {inventory.stack}: the cluster has no Network object {', '.join(missing)} for "
                          "the pool's GPU NICs (trainctl up creates them): run "
                          f"`trainctl up --stack {inventory.stack}` again")
    for job_name in job_names:
        if kube.job_exists(job_name):
            raise ConfigError(f"a job {job_name} is already running in namespace {kube.ns} (run "
                              f"{spec.run_id} launched twice?); pick another run id or `kubectl delete "
                              f"job {job_name} --cascade=foreground` first")


def teardown(kube: Kube, owned: list[str], service: str, echo: Callable[[str], None], poll: float,
             jobset: bool = False) -> str:
    """Delete the Jobs or the JobSet (and wait for their pods) and the Service; never cut short by
    a signal. Returns what could not be deleted, and how to delete it by hand ("" when all went)."""
    failed = []
    kind = "jobset" if jobset else "job"
    deletions = [(f"{kind} {name}", functools.partial(delete_owned, kube, name, jobset, poll)) for name in owned]
    with uninterruptible():
        for what, delete in (*deletions, (f"service {service}", functools.partial(kube.delete_service, service))):
            try:
                delete()
            except Exception as exc:
                failed.append(f"{what}: {type(exc).__name__}: {exc}")
    if failed:
        message = (f"could not delete {'; '.join(failed)}; delete them with `kubectl delete {kind} {' '.join(owned)} "
                   f"--cascade=foreground; kubectl delete service {service}`")
        try:
            echo(f"[trainctl] {message}")
        except BaseException:
            pass  # the caller's error (or the one in flight) says it
        return message
    return ""
