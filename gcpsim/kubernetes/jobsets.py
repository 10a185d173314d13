"""JobSet's controller and a minimal Kueue, over the simulated API server, for clusters where an
admin installed them (their CRDs created: crds.py).

JobSet (kubernetes-sigs/jobset, pkg/controllers/jobset_controller.go and failure_policy.go, at
08dfbdf): for each replicated job and replica the controller creates the child Job
<jobset>-<replicated job>-<index> (constructJob, placement.GenJobName) from the template, with
the template's labels and the `jobset.sigs.k8s.io/*` labels and annotations on the Job and its
pod template (labelAndAnnotateObject), the pods' subdomain set to `network.subdomain` (default:
the JobSet's name) and a headless Service of that name created only where none exists
(createHeadlessSvcIfNecessary), and `suspend` copied from the JobSet. Resuming a suspended JobSet
unsuspends its Jobs (resumeJobsIfNecessary). All Jobs Complete: condition Completed,
AllJobsCompleted, "jobset completed successfully" (executeSuccessPolicy, default successPolicy
All). A Job Failed without a failurePolicy: condition Failed, FailedJobs, "jobset failed due to
one or more job failures (first failed job: <job>)" (executeFailurePolicy); a finished JobSet's
active Jobs are deleted in the foreground (reconcile, deleteJobs). Not modelled: failurePolicy
rules and restarts, successPolicy, startupPolicy/dependsOn, coordinator, TTL, volume claims:
a JobSet naming one is refused (422) with what is missing.

Kueue (kubernetes-sigs/kueue at ff69552, site/content/en/docs/tasks/run/jobsets.md,
pkg/controller/jobframework/defaults.go): a JobSet labelled `kueue.x-k8s.io/queue-name` is
suspended on creation (ApplyDefaultForSuspend) and unsuspended once admitted. Admission here:
the LocalQueue names a ClusterQueue whose nominal quota (summed over its flavors) covers the
pods' requests (limits where no request, as the API server defaults them) beside what it
admitted already; otherwise the JobSet waits, and is admitted when quota frees. Not modelled:
cohorts, borrowing, preemption, flavor assignment, topology-aware scheduling, Workload objects.
"""

from __future__ import annotations

import copy
import hashlib
import uuid
from typing import Any

from gcpsim.kubernetes.jobs import JobController
from gcpsim.kubernetes.objects import KubeError, Obj, now

JOBSET_PREFIX = "jobset.sigs.k8s.io/"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
MODELLED = {"replicatedJobs", "network", "suspend", "managedBy"}


def _quantity(value: Any) -> float:
    text = str(value)
    units = {"m": 1e-3, "k": 1e3, "Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3, "M": 1e6, "G": 1e9}
    for unit in sorted(units, key=len, reverse=True):
        if text.endswith(unit):
            return float(text[:-len(unit)]) * units[unit]
    return float(text)


def check_jobset(body: Obj) -> None:
    spec, name = body.get("spec") or {}, (body.get("metadata") or {}).get("name", "")
    errors = [f"spec.{k}: the simulated JobSet controller does not model it" for k in spec if k not in MODELLED]
    for i, rjob in enumerate(spec.get("replicatedJobs") or []):
        if set(rjob) - {"name", "replicas", "template"}:
            errors.append(f"spec.replicatedJobs[{i}]: only name, replicas and template are modelled")
        longest = f"{name}-{rjob.get('name')}-{int(rjob.get('replicas', 1)) - 1}"
        completions = rjob.get("template", {}).get("spec", {}).get("completions") or 1
        if len(f"{longest}-{completions - 1}-abcde") > 63:  # jobset pkg/webhooks/jobset_webhook.go
            errors.append("metadata.name: JobSet name is too long, pod names generated for this JobSet "
                          "will exceed 63 characters")
    if not spec.get("replicatedJobs"):
        errors.append("spec.replicatedJobs: Required value")
    if errors:
        raise KubeError(422, "Invalid", f'JobSet.jobset.x-k8s.io "{name}" is invalid: ' + "; ".join(errors),
                        name=name, group="jobset.x-k8s.io", kind="JobSet")


class JobSetController(JobController):
    """The Job controller, with JobSet's controller and Kueue's admission beside it."""

    installed: set[str]  # the CRDs an admin created (crds.py)

    def start_job(self, job: Obj) -> None:
        """A suspended Job starts no pods until it is resumed (batch/v1 JobSpec.suspend)."""
        if job["spec"].get("suspend"):
            job["status"].setdefault("conditions", []).append(
                {"type": "Suspended", "status": "True", "reason": "JobSuspended", "message": "Job suspended",
                 "lastProbeTime": now(), "lastTransitionTime": now()})
            self.record("jobs", "MODIFIED", job)
            return
        job["status"]["conditions"] = [c for c in job["status"].get("conditions", []) if c["type"] != "Suspended"]
        super().start_job(job)

    def create_jobset(self, ns: str, body: Obj) -> Obj:
        """Hold self.cond. The JobSet stored, then reconciled as its controller would at once."""
        check_jobset(body)
        js = copy.deepcopy(body)
        js["metadata"].update(namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=now(), generation=1)
        network = js["spec"].setdefault("network", {})
        network.setdefault("enableDNSHostnames", True)  # the webhook's defaults
        network.setdefault("publishNotReadyAddresses", True)
        if QUEUE_LABEL in (js["metadata"].get("labels") or {}) and "localqueues.kueue.x-k8s.io" in self.installed:
            self.check_queue(ns, js["metadata"]["labels"][QUEUE_LABEL])
            js["spec"]["suspend"] = True
        js["status"] = {"restarts": 0}
        self.record("jobsets", "ADDED", js)
        self.reconcile_jobset(js, create=True)
        self.admit_waiting()
        return copy.deepcopy(js)

    def check_queue(self, ns: str, queue: str) -> None:
        if ("localqueues", ns, queue) not in self.objects:
            # Kueue's webhook lets it in and it never starts; the simulator says why at once.
            raise KubeError(422, "Invalid", f'the simulated Kueue has no LocalQueue "{queue}" in namespace '
                                            f'"{ns}": a JobSet labelled {QUEUE_LABEL}={queue} would never be admitted')

    def reconcile_jobset(self, js: Obj, create: bool = False) -> None:
        meta, spec = js["metadata"], js["spec"]
        children = self.children(js)
        if create:
            self.headless_service(js)
            globals_ = 0
            for rjob in spec["replicatedJobs"]:
                for index in range(int(rjob.get("replicas", 1))):
                    self.create("jobs", meta["namespace"], self.child_job(js, rjob, index, globals_), {})
                    globals_ += 1
            return
        if self.finished(js) or not children:
            return
        failed = [j for j in children if _condition(j, "Failed")]
        if failed:
            message = ("jobset failed due to one or more job failures (first failed job: "
                       f"{failed[0]['metadata']['name']})")
            self.finish_jobset(js, "Failed", "FailedJobs", message)
        elif all(_condition(j, "Complete") for j in children) and len(children) == _replicas(js):
            self.finish_jobset(js, "Completed", "AllJobsCompleted", "jobset completed successfully")

    def finish_jobset(self, js: Obj, kind: str, reason: str, message: str) -> None:
        js["status"].setdefault("conditions", []).append(
            {"type": kind, "status": "True", "reason": reason, "message": message, "lastTransitionTime": now()})
        js["status"]["terminalState"] = kind
        self.record("jobsets", "MODIFIED", js)
        for job in self.children(js):
            if not (_condition(job, "Complete") or _condition(job, "Failed")) and \
                    not job["metadata"].get("deletionTimestamp"):
                self.delete("jobs", job["metadata"]["namespace"], job["metadata"]["name"], "Foreground")
        self.admit_waiting()

    def child_job(self, js: Obj, rjob: Obj, index: int, global_index: int) -> Obj:
        meta = js["metadata"]
        name = f"{meta['name']}-{rjob['name']}-{index}"
        ids = {"jobset-name": meta["name"], "jobset-uid": meta["uid"], "replicatedjob-name": rjob["name"],
               "restart-attempt": str(js["status"]["restarts"]), "replicatedjob-replicas": str(rjob.get("replicas", 1)),
               "global-replicas": str(_replicas(js)), "job-index": str(index),
               "job-key": hashlib.sha1(f"{meta['namespace']}/{name}".encode()).hexdigest(),
               "job-global-index": str(global_index)}
        ids = {JOBSET_PREFIX + k: v for k, v in ids.items()}
        template = copy.deepcopy(rjob["template"])
        job_meta = template.get("metadata") or {}
        spec = template["spec"]
        pod_meta = spec["template"].setdefault("metadata", {})
        for where in (job_meta, pod_meta):
            where["labels"] = {**(where.get("labels") or {}), **ids}
            where["annotations"] = {**(where.get("annotations") or {}), **ids}
        if js["spec"]["network"].get("enableDNSHostnames"):
            spec["template"]["spec"]["subdomain"] = js["spec"]["network"].get("subdomain") or meta["name"]
        spec["suspend"] = bool(js["spec"].get("suspend"))
        return {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {**job_meta, "name": name, "ownerReferences": [
                    {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": meta["name"],
                     "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]},
                "spec": spec}

    def headless_service(self, js: Obj) -> None:
        network, ns = js["spec"]["network"], js["metadata"]["namespace"]
        name = network.get("subdomain") or js["metadata"]["name"]
        if not network.get("enableDNSHostnames") or ("services", ns, name) in self.objects:
            return
        self.create("services", ns, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": {
            "clusterIP": "None", "selector": {JOBSET_PREFIX + "jobset-name": js["metadata"]["name"]},
            "publishNotReadyAddresses": network.get("publishNotReadyAddresses", True)}}, {})

    def children(self, js: Obj) -> list[Obj]:
        uid = js["metadata"]["uid"]
        return [o for (res, _, _), o in self.objects.items() if res == "jobs"
                and any(r["uid"] == uid for r in o["metadata"].get("ownerReferences", []))]

    @staticmethod
    def finished(js: Obj) -> bool:
        return any(_condition(js, kind) for kind in ("Completed", "Failed"))

    def record(self, resource: str, event: str, obj: Obj) -> None:
        super().record(resource, event, obj)
        if resource != "jobs" or event == "DELETED":
            return
        # The JobSet controller watches its Jobs.
        for owner in (r for r in obj["metadata"].get("ownerReferences", []) if r["kind"] == "JobSet"):
            js = self.objects.get(("jobsets", obj["metadata"]["namespace"], owner["name"]))
            if js is not None and js["metadata"]["uid"] == owner["uid"]:
                self.reconcile_jobset(js)

    # -- Kueue ----------------------------------------------------------------------------

    def admit_waiting(self) -> None:
        """Admit, oldest first, every queued suspended JobSet whose ClusterQueue has room."""
        waiting = sorted((o for (res, _, _), o in self.objects.items() if res == "jobsets" and o["spec"].get("suspend")
                          and QUEUE_LABEL in (o["metadata"].get("labels") or {})),
                         key=lambda o: int(o["metadata"]["resourceVersion"]))
        for js in waiting:
            queue = self.objects.get(("localqueues", js["metadata"]["namespace"], js["metadata"]["labels"][QUEUE_LABEL]))
            cluster_queue = queue and self.objects.get(("clusterqueues", "", queue["spec"].get("clusterQueue", "")))
            if cluster_queue and self.fits(cluster_queue, js):
                js["spec"]["suspend"] = False
                js["metadata"].setdefault("annotations", {})["gcpsim/admitted-by"] = cluster_queue["metadata"]["name"]
                self.record("jobsets", "MODIFIED", js)
                for job in self.children(js):  # resumeJobsIfNecessary
                    job["spec"]["suspend"] = False
                    self.start_job(job)

    def fits(self, cluster_queue: Obj, js: Obj) -> bool:
        quota: dict[str, float] = {}
        for group in cluster_queue["spec"].get("resourceGroups", []):
            for flavor in group.get("flavors", []):
                for resource in flavor.get("resources", []):
                    quota[resource["name"]] = quota.get(resource["name"], 0.0) + _quantity(resource["nominalQuota"])
        used: dict[str, float] = {}
        for (res, _, _), other in self.objects.items():
            if res == "jobsets" and other is not js and not other["spec"].get("suspend") and not self.finished(other) \
                    and other["metadata"].get("annotations", {}).get("gcpsim/admitted-by") == cluster_queue["metadata"]["name"]:
                for name, amount in _requests(other).items():
                    used[name] = used.get(name, 0.0) + amount
        return all(quota.get(name, 0.0) - used.get(name, 0.0) >= amount for name, amount in _requests(js).items())


def _requests(js: Obj) -> dict[str, float]:
    total: dict[str, float] = {}
    for rjob in js["spec"]["replicatedJobs"]:
        job = rjob["template"]["spec"]
        pods = int(rjob.get("replicas", 1)) * int(job.get("parallelism") or 1)
        for container in job["template"]["spec"]["containers"]:
            resources = container.get("resources") or {}
            for name, value in {**(resources.get("limits") or {}), **(resources.get("requests") or {})}.items():
                total[name] = total.get(name, 0.0) + pods * _quantity(value)
    return total


def _replicas(js: Obj) -> int:
    return sum(int(r.get("replicas", 1)) for r in js["spec"]["replicatedJobs"])


def _condition(obj: Obj, kind: str) -> bool:
    return any(c["type"] == kind and c["status"] == "True" for c in (obj.get("status") or {}).get("conditions", []))
