"""One attempt of a multislice run on GKE: every slice's Job at once, followed as one, with
JobSet's failure policy where the cluster has no JobSet: the set succeeds when every slice's Job
has, and fails as soon as one slice's Job fails, whose failure stops the other slices' Jobs (a
multislice program cannot go on without a slice). run_job then restarts the whole set.

Pods are numbered across the set as the stack's nodes are: slice s's worker w is pod<s*hosts+w>."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable

from trainctl.launchers.gke.attempt import INDEX_LABEL, Attempt, job_condition
from trainctl.launchers.gke.kube import Kube
from trainctl.launchers.gke.slice_jobs import SLICE_LABEL
from trainctl.launchers.result import NodeOutcome
from trainctl.launchers.spec import LaunchSpec


class SliceSetAttempt(Attempt):
    def __init__(self, kube: Kube, jobs: list[Any], spec: LaunchSpec, log_dir: Path,
                 echo: Callable[[str], None], poll: float, cancel: threading.Event | None = None) -> None:
        super().__init__(kube, jobs[0], spec, log_dir, echo, poll, torchrun=False, cancel=cancel)
        self.models = jobs
        self.hosts = int(jobs[0].spec.completions)
        self.name = f"{spec.run_id[:52]} ({len(jobs)} slice jobs)"
        self.names = [j.metadata.name for j in jobs]
        self.outcomes = {i: NodeOutcome(f"pod{i}", i) for i in range(self.hosts * len(jobs))}
        self.jobs: dict[str, Any] = {}  # by name, as last seen
        self.failed_slice: str | None = None

    def create(self) -> str:
        versions = []
        for model in self.models:
            created: Any = self.kube.batch.create_namespaced_job(self.kube.ns, model, field_validation="Strict")
            self.jobs[created.metadata.name] = created
            versions.append(str(created.metadata.resource_version))
        self.job = self.jobs[self.names[0]]
        self.selector = f"trainctl/run={self.spec.run_id}"
        return versions[0]

    def job_selector(self) -> dict[str, str]:
        return {"label_selector": self.selector}

    def stop_jobs(self) -> None:
        self.stopping = True
        for name in self.names:
            self.kube.delete_job(name, 0, self.poll)

    def read_jobs(self) -> None:
        from kubernetes.client.exceptions import ApiException

        for name in self.names:
            try:
                self.on_job("MODIFIED", self.kube.batch.read_namespaced_job_status(name, self.kube.ns))
            except ApiException as exc:
                if exc.status != 404:
                    raise
                self.on_job("DELETED", self.jobs[name])

    def index_of(self, pod: Any) -> int:
        labels = pod.metadata.labels or {}
        return int(labels[SLICE_LABEL]) * self.hosts + int(labels[INDEX_LABEL])

    def condition(self) -> str:
        states = [job_condition(job) for job in self.jobs.values()]
        if "Failed" in states:
            return "Failed"
        return "Complete" if states and all(s == "Complete" for s in states) else ""

    def on_job(self, event: str, job: Any) -> None:
        name = job.metadata.name if job is not None else None
        if name not in self.jobs or job.metadata.uid != self.jobs[name].metadata.uid:
            return
        self.jobs[name] = self.seen_job(event, job, self.jobs[name])
        if job_condition(self.jobs[name]) == "Failed":
            self.failed_slice = self.failed_slice or name

    def follow(self, job_version: str) -> None:
        super().follow(job_version)
        if self.failed_slice and not self.stopping and not self.gone:
            self.echo(f"[trainctl] slice job {self.failed_slice} failed: stopping every slice (a multislice "
                      "program needs them all)")
            # Not `stopping`, and the failed Job kept until the rerun: its failed pod stays the
            # cause, the other slices' pods, deleted, are collateral.
            for name in self.names:
                if job_condition(self.jobs[name]) != "Failed":
                    self.kube.delete_job(name, 0, self.poll)

