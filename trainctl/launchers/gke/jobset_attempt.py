"""One attempt of a GKE run submitted as a JobSet: trainctl creates the JobSet, JobSet's
controller creates its child Jobs (suspended until Kueue admits the set, where it is queued),
and the attempt follows those Jobs and their pods as SliceSetAttempt follows a multislice set's.
The set succeeds when every child Job has, and fails as soon as one has failed: the JobSet
controller then deletes the others (trainctl/launchers/gke/jobset.py)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable

from trainctl.launchers.gke.attempt import INDEX_LABEL, Attempt, job_condition
from trainctl.launchers.gke.jobset import JOBSET_NAME_LABEL, QUEUE_LABEL
from trainctl.launchers.gke.kube import Kube
from trainctl.launchers.gke.slice_jobs import SLICE_LABEL
from trainctl.launchers.gke.slice_set import SliceSetAttempt
from trainctl.launchers.spec import LaunchSpec

JOBSET_UID_LABEL = "jobset.sigs.k8s.io/jobset-uid"  # jobset api/jobset/v1alpha2/jobset_types.go JobSetUIDKey


class JobSetAttempt(SliceSetAttempt):
    def __init__(self, kube: Kube, jobset: dict[str, Any], jobs: list[Any], spec: LaunchSpec, log_dir: Path,
                 echo: Callable[[str], None], poll: float, torchrun: bool,
                 cancel: threading.Event | None = None) -> None:
        super().__init__(kube, jobs, spec, log_dir, echo, poll, cancel=cancel)
        self.torchrun = torchrun
        self.body = jobset
        self.set_name: str = jobset["metadata"]["name"]
        self.name = f"{self.set_name} (jobset, {len(jobs)} job(s))"
        self.set_uid = ""
        self.queue: str | None = None
        self.admitted = False  # said once, where queued

    def create(self) -> str:
        created = self.kube.create_jobset(self.body)
        self.set_uid = created["metadata"]["uid"]
        self.selector = f"trainctl/run={self.spec.run_id}"
        self.queue = (created["metadata"].get("labels") or {}).get(QUEUE_LABEL)
        if self.queue:
            self.echo(f"[trainctl] jobset {self.set_name} queued in Kueue LocalQueue {self.queue}: its pods start "
                      "once the queue admits it")
        return str(created["metadata"]["resourceVersion"])

    def job_selector(self) -> dict[str, str]:
        return {"label_selector": f"{JOBSET_NAME_LABEL}={self.set_name}"}

    def stop_jobs(self) -> None:
        self.stopping = True
        self.kube.delete_jobset(self.set_name, 0, self.poll)

    def read_jobs(self) -> None:
        listed: Any = self.kube.batch.list_namespaced_job(self.kube.ns, **self.job_selector())
        present = {job.metadata.name for job in listed.items}
        for job in listed.items:
            self.on_job("MODIFIED", job)
        for name in [n for n in self.jobs if n not in present]:
            self.on_job("DELETED", self.jobs[name])
        if self.kube.read_jobset(self.set_name) is None and not self.stopping and not self.gone:
            self.echo(f"[trainctl] jobset {self.set_name} was deleted outside trainctl")
            self.gone = True

    def index_of(self, pod: Any) -> int:
        labels = pod.metadata.labels or {}
        return int(labels.get(SLICE_LABEL, 0)) * self.hosts + int(labels[INDEX_LABEL])

    def condition(self) -> str:
        states = [job_condition(job) for job in self.jobs.values()]
        if "Failed" in states:
            return "Failed"
        return "Complete" if len(states) == len(self.names) and all(s == "Complete" for s in states) else ""

    def on_job(self, event: str, job: Any) -> None:
        """A child Job of this attempt's JobSet (by its uid label): the first one seen by a name is
        the one; a Job of an earlier attempt's set is not."""
        if job is None:
            return
        name: str = job.metadata.name
        if name not in self.names or (job.metadata.labels or {}).get(JOBSET_UID_LABEL) != self.set_uid:
            return
        last = self.jobs.get(name)
        if last is not None and job.metadata.uid != last.metadata.uid:
            return
        self.jobs[name] = self.seen_job(event, job, last) if last is not None else job
        self.job = self.job or self.jobs[name]
        if self.queue and not self.admitted and event != "DELETED" and job.spec.suspend is False:
            self.admitted = True
            self.echo(f"[trainctl] jobset {self.set_name} admitted by Kueue from LocalQueue {self.queue}")
        if job_condition(self.jobs[name]) == "Failed":
            self.failed_slice = self.failed_slice or name

    def follow(self, job_version: str) -> None:
        Attempt.follow(self, job_version)
        if self.failed_slice and not self.stopping and not self.gone:
            self.echo(f"[trainctl] job {self.failed_slice} failed: jobset {self.set_name} fails with it, and "
                      "its controller stops the other jobs")
