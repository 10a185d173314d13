"""The Job controller and the garbage collector, over the API's storage.

Creating an Indexed Job starts one pod per completion index, named <job>-<index>-<suffix>,
labelled and annotated as the Job controller does, with JOB_COMPLETION_INDEX in its containers'
environment; a pod runner (scripted, or real processes) runs them and reports back. The
controller's rules decide the rest: replacement pods within backoffLimit, the
podFailurePolicy's Ignore / FailJob / Count, FailureTarget first and Failed once the Job's pods
have terminated, SuccessCriteriaMet then Complete, and the deletion propagation policies (the
batch/v1 API's default for a Job is to orphan its pods; Foreground keeps the Job, marked, until
its pods are gone). Deleting a pod is graceful: it is marked, its container is stopped, and
only then is it gone.
"""

from __future__ import annotations

import copy
import secrets
import threading
import uuid
from collections import Counter
from typing import Any, Callable, Protocol

from gcpsim.kubernetes.gke_networks import CUSTOM, admitted, check_custom
from gcpsim.kubernetes.objects import GROUP, INDEX_LABEL, KubeError, Obj, now, status_obj
from gcpsim.kubernetes import scheduling
from gcpsim.kubernetes.store import ApiStore

DEFAULT_GRACE_SECONDS = 30  # terminationGracePeriodSeconds when the pod does not say


class PodRunner(Protocol):
    """What stands behind the pods: the kubelets of the cluster's nodes."""

    def start(self, api: JobController, job: Obj, pod: Obj, attempt: int, tries: int) -> None:
        """Run the pod (called holding api.cond: must not block)."""

    def stop(self, pod: Obj, grace: float) -> int | None:
        """Stop its container (SIGTERM, SIGKILL after `grace` seconds) and wait for it; its exit
        code, or None where nothing ran."""

    def forget(self, job: Obj) -> None:
        """The Job is gone: what its pods held (addresses) may be given to others."""

    def close(self) -> None: ...


class JobController(ApiStore):
    def __init__(self, pods: PodRunner, node_names: tuple[str, ...] = ("gke-simulated-node",)) -> None:
        super().__init__()
        self.pods = pods
        self.node_names = node_names
        self.node_labels: dict[str, scheduling.Labels] | None = None  # None: selectors are not checked
        self.job_attempts: Counter[str] = Counter()
        self.unscheduled: dict[str, tuple[Obj, Obj, int, int]] = {}  # pod uid -> (job, pod, attempt, try)
        self.pod_tries: Counter[tuple[str, int]] = Counter()
        self.threads: list[threading.Thread] = []
        self.autoscaler: Callable[[JobController], None] | None = None  # the cluster's (container_nodes.py)

    def spawn(self, target: Callable[..., Any], *args: Any) -> threading.Thread:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self.threads.append(thread)
        thread.start()
        return thread

    # -- the API's writes ----------------------------------------------------------------------

    def create(self, resource: str, ns: str, body: Any, query: dict[str, str]) -> Obj:
        from gcpsim.kubernetes.objects import check_body, check_job

        if resource in CUSTOM:  # no client model: the CRD's schema
            check_custom(resource, body)
        elif query.get("fieldValidation", "Strict") == "Strict":
            check_body(resource, body)
        meta = body.get("metadata") or {}
        name = meta.get("name")
        if not name:
            raise KubeError(422, "Invalid", "metadata.name: Required value: name or generateName is required")
        if meta.get("namespace", ns) != ns:
            raise KubeError(400, "BadRequest", "the namespace of the provided object does not match "
                                               "the namespace sent on the request")
        if resource == "jobs":
            check_job(body)
        with self.cond:
            if (resource, ns, name) in self.objects:
                raise KubeError(409, "AlreadyExists", f'{GROUP.get(resource, resource)} "{name}" already exists',
                                name=name, kind=resource)
            obj = copy.deepcopy(body)
            obj["metadata"].update(namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=now())
            if resource == "jobs":
                self.default_job(obj)
            self.record(resource, "ADDED", obj)
            created = copy.deepcopy(obj)
            if resource == "jobs":  # the Job controller creates the pods after the Job exists
                self.start_job(obj)
            return created

    def delete(self, resource: str, ns: str, name: str, policy: str | None) -> Obj:
        with self.cond:
            obj = self.get(resource, ns, name)
            # Services, ServiceAccounts and pods answer with the deleted object (their storage
            # sets ReturnDeletedObject); a Job deleted at once with a Status, else with itself.
            if resource == "pods":
                self.kill(obj)
                return copy.deepcopy(obj)
            if resource != "jobs":
                self.record(resource, "DELETED", obj)
                return copy.deepcopy(obj)
            if obj["metadata"].get("deletionTimestamp"):  # already going
                return copy.deepcopy(obj)
            return self._delete_job(obj, policy or "Orphan")  # Orphan: the batch/v1 API's default

    def _delete_job(self, job: Obj, policy: str) -> Obj:
        meta = job["metadata"]
        if policy == "Foreground":
            # The Job stays, marked, until the garbage collector has deleted its pods.
            meta.update(deletionTimestamp=now(), finalizers=["foregroundDeletion"])
            self.record("jobs", "MODIFIED", job)
            self.spawn(self.collect, job)
            return copy.deepcopy(job)
        pods = self.pods_of(job)
        self.record("jobs", "DELETED", job)
        self.pods.forget(job)
        if policy == "Background":
            for pod in pods:
                self.kill(pod)
        else:
            for pod in pods:
                pod["metadata"].pop("ownerReferences", None)
                self.record("pods", "MODIFIED", pod)
        done = status_obj(200, "", "", name=meta["name"], kind="jobs", uid=meta["uid"])
        done.update(status="Success")
        done.pop("message"), done.pop("reason")
        return done

    def collect(self, job: Obj) -> None:
        """The garbage collector: delete the dependents, wait until they are gone, then the
        owner held by foregroundDeletion."""
        with self.cond:
            for pod in self.pods_of(job):
                self.kill(pod)
            self.cond.wait_for(lambda: self.closing or not self.pods_of(job))
            key = ("jobs", job["metadata"]["namespace"], job["metadata"]["name"])
            if self.objects.get(key) is job:
                self.record("jobs", "DELETED", job)
                self.pods.forget(job)

    # -- pods ------------------------------------------------------------------------------------

    def default_job(self, job: Obj) -> None:
        """What the API server adds to a new Job: its selector and the pods' identifying labels."""
        meta, spec = job["metadata"], job["spec"]
        uid, name = meta["uid"], meta["name"]
        ids = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
               "controller-uid": uid, "job-name": name}
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        template_meta = spec["template"].setdefault("metadata", {})
        template_meta["labels"] = {**(template_meta.get("labels") or {}), **ids}
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed")
        meta["generation"] = 1
        job["status"] = {}

    def start_job(self, job: Obj) -> None:
        name = job["metadata"]["name"]
        attempt = self.job_attempts[name]
        self.job_attempts[name] += 1
        job["status"].update(startTime=now(), active=0, succeeded=0, failed=0, ready=0)
        for index in range(job["spec"]["completions"]):
            self.start_pod(job, index, attempt)
        self.record("jobs", "MODIFIED", job)

    def start_pod(self, job: Obj, index: int, attempt: int) -> None:
        meta, spec = job["metadata"], job["spec"]
        tries = self.pod_tries[(meta["uid"], index)]
        self.pod_tries[(meta["uid"], index)] += 1
        template = copy.deepcopy(spec["template"])
        if not admitted(self, job, template["metadata"].get("annotations") or {}):
            return
        pod_spec = template["spec"]
        pod_spec["hostname"] = f"{meta['name']}-{index}"
        index_env = {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
            "fieldPath": f"metadata.annotations['{INDEX_LABEL}']"}}}
        for container in pod_spec["containers"]:
            container["env"] = [*(container.get("env") or []), index_env]
        container = pod_spec["containers"][0]
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"{meta['name']}-{index}-{secrets.token_hex(3)[:5]}",
                            "namespace": meta["namespace"], "uid": str(uuid.uuid4()), "creationTimestamp": now(),
                            "labels": {**template["metadata"]["labels"], INDEX_LABEL: str(index)},
                            "annotations": {**(template["metadata"].get("annotations") or {}), INDEX_LABEL: str(index)},
                            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"],
                                                 "uid": meta["uid"], "controller": True,
                                                 "blockOwnerDeletion": True}]},
               "spec": pod_spec,
               "status": {"phase": "Pending", "conditions": [],
                          "containerStatuses": [{"name": container["name"], "image": container["image"],
                                                 "imageID": "", "ready": False, "restartCount": 0,
                                                 "state": {"waiting": {"reason": "ContainerCreating"}}}]}}
        self.logs[pod["metadata"]["uid"]] = []
        job["status"]["active"] += 1
        self.unscheduled[pod["metadata"]["uid"]] = (job, pod, attempt, tries)
        self.schedule(pod["metadata"]["uid"])
        if pod["metadata"]["uid"] in self.unscheduled:
            pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                            "message": scheduling.unschedulable_message(self.node_names),
                                            "lastTransitionTime": now()}]
            self.record("pods", "ADDED", pod)

    def schedule(self, uid: str) -> None:
        """Onto the cluster's nodes that its nodeSelector takes (scheduling.py); without one the
        pod waits (hold self.cond)."""
        nodes = scheduling.candidates(self.unscheduled[uid][1], self.node_names, self.node_labels)
        if not nodes:
            if self.autoscaler is not None:  # it sees the pod wait, and may add nodes
                self.spawn(self.autoscaler, self)
            return
        job, pod, attempt, tries = self.unscheduled.pop(uid)
        index = int(pod["metadata"]["annotations"][INDEX_LABEL])
        pod["spec"]["nodeName"] = nodes[index % len(nodes)]
        pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now()}]
        self.record("pods", "ADDED" if "resourceVersion" not in pod["metadata"] else "MODIFIED", pod)
        self.pods.start(self, job, pod, attempt, tries)

    def set_nodes(self, names: tuple[str, ...], labels: dict[str, scheduling.Labels] | None = None) -> None:
        """The node pools' nodes now (and their labels); pods that waited for a node are scheduled."""
        with self.cond:
            self.node_names, self.node_labels = names, labels
            for uid in list(self.unscheduled):
                pod = self.unscheduled[uid][1]
                if not pod["metadata"].get("deletionTimestamp"):
                    self.schedule(uid)

    def pods_of(self, job: Obj) -> list[Obj]:
        uid = job["metadata"]["uid"]
        return [o for (res, _, _), o in self.objects.items()
                if res == "pods" and any(r["uid"] == uid for r in o["metadata"].get("ownerReferences", []))]

    def kill(self, pod: Obj) -> None:
        """Graceful deletion: marked now, gone once its container has stopped (hold self.cond)."""
        if pod["metadata"].get("deletionTimestamp"):
            return
        pod["metadata"]["deletionTimestamp"] = now()
        self.record("pods", "MODIFIED", pod)
        self.spawn(self._stop_and_remove, pod)

    def _stop_and_remove(self, pod: Obj) -> None:
        self.unscheduled.pop(pod["metadata"]["uid"], None)
        grace = pod["spec"].get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS)
        code = self.pods.stop(pod, float(grace))
        with self.cond:
            if "terminated" not in pod["status"]["containerStatuses"][0]["state"]:
                self.terminate(pod, 143 if code is None else code)
            self.record("pods", "DELETED", pod)
            self.settle(pod)

    # -- what the kubelets report ------------------------------------------------------------

    def container_waiting(self, pod: Obj, reason: str, message: str) -> None:
        with self.cond:
            if pod["metadata"].get("deletionTimestamp"):
                return
            pod["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": reason, "message": message}}
            self.record("pods", "MODIFIED", pod)

    def container_started(self, pod: Obj, pod_ip: str) -> bool:
        """False when the pod was deleted meanwhile (the kubelet then runs nothing)."""
        with self.cond:
            if pod["metadata"].get("deletionTimestamp") or not self.running(
                    pod["metadata"]["namespace"], pod["metadata"]["name"], pod["metadata"]["uid"]):
                return False
            pod["status"].update(phase="Running", podIP=pod_ip, podIPs=[{"ip": pod_ip}], startTime=now())
            pod["status"]["containerStatuses"][0].update(ready=True, started=True,
                                                         state={"running": {"startedAt": now()}})
            self.record("pods", "MODIFIED", pod)
            return True

    def container_output(self, pod: Obj, line: str) -> None:
        with self.cond:
            self.logs[pod["metadata"]["uid"]].append(line)
            self.cond.notify_all()

    def container_exited(self, pod: Obj, code: int, disruption: tuple[str, str] | None = None) -> None:
        """The container ended on its own (a deleted pod's end is the deletion's)."""
        with self.cond:
            if pod["metadata"].get("deletionTimestamp") or self.closing or \
                    "terminated" in pod["status"]["containerStatuses"][0]["state"]:
                return
            if disruption:
                pod["status"]["conditions"].append({"type": "DisruptionTarget", "status": "True",
                                                    "reason": disruption[0], "message": disruption[1],
                                                    "lastTransitionTime": now()})
            self.terminate(pod, code)
            self.pod_finished(pod)

    def terminate(self, pod: Obj, code: int) -> None:
        status = pod["status"]
        status["phase"] = "Succeeded" if code == 0 else "Failed"
        started = status["containerStatuses"][0]["state"].get("running", {}).get("startedAt", now())
        status["containerStatuses"][0].update(ready=False, started=False, state={"terminated": {
            "exitCode": code, "reason": "Completed" if code == 0 else "Error",
            "startedAt": started, "finishedAt": now()}})
        self.record("pods", "MODIFIED", pod)

    # -- the Job controller's rules ------------------------------------------------------------

    def job_of(self, pod: Obj) -> Obj | None:
        owners = pod["metadata"].get("ownerReferences") or []
        if not owners:  # orphaned when its Job was deleted
            return None
        job = self.objects.get(("jobs", pod["metadata"]["namespace"], owners[0]["name"]))
        return job if job is not None and job["metadata"]["uid"] == owners[0]["uid"] else None

    def pod_finished(self, pod: Obj) -> None:
        job = self.job_of(pod)
        if job is None or job["metadata"].get("deletionTimestamp"):
            return
        status, spec = job["status"], job["spec"]
        if any(c["type"] in ("FailureTarget", "SuccessCriteriaMet") for c in status.get("conditions", [])):
            return
        index = int(pod["metadata"]["labels"][INDEX_LABEL])
        status["active"] -= 1
        code = pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"]
        if code == 0:
            self._succeeded(job, index)
            return
        action, rule = self.policy_action(spec, pod, code)
        if action == "Ignore":
            self.start_pod(job, index, self.job_attempts[job["metadata"]["name"]] - 1)
        elif action == "FailJob":
            self.fail(job, "PodFailurePolicy", f"Container {pod['spec']['containers'][0]['name']} for pod "
                      f"{pod['metadata']['namespace']}/{pod['metadata']['name']} failed with exit code "
                      f"{code} matching FailJob rule at index {rule}")
        else:
            status["failed"] += 1
            if status["failed"] > spec["backoffLimit"]:
                self.fail(job, "BackoffLimitExceeded", "Job has reached the specified backoff limit")
            else:
                self.start_pod(job, index, self.job_attempts[job["metadata"]["name"]] - 1)
        self.record("jobs", "MODIFIED", job)

    def _succeeded(self, job: Obj, index: int) -> None:
        status = job["status"]
        status["succeeded"] += 1
        done = sorted({int(i) for i in filter(None, status.get("completedIndexes", "").split(","))} | {index})
        status["completedIndexes"] = ",".join(map(str, done))  # the real one writes ranges: 0-2
        if len(done) == job["spec"]["completions"]:
            status["completionTime"] = now()
            reason, message = "CompletionsReached", "Reached expected number of succeeded pods"
            self.finish(job, "SuccessCriteriaMet", reason, message)
            self.finish(job, "Complete", reason, message)
        self.record("jobs", "MODIFIED", job)

    @staticmethod
    def policy_action(spec: Obj, pod: Obj, code: int) -> tuple[str, int]:
        """The first podFailurePolicy rule that matches the failed pod decides; none: Count."""
        conditions = {(c["type"], c["status"]) for c in pod["status"].get("conditions", [])}
        for i, rule in enumerate((spec.get("podFailurePolicy") or {}).get("rules", [])):
            codes = rule.get("onExitCodes")
            if codes:
                name = codes.get("containerName")
                if name in (None, pod["spec"]["containers"][0]["name"]) and code != 0 and \
                        (code in codes["values"]) == (codes["operator"] == "In"):
                    return rule["action"], i
            for pattern in rule.get("onPodConditions") or []:
                if (pattern["type"], pattern.get("status", "True")) in conditions:
                    return rule["action"], i
        return "Count", -1

    def fail(self, job: Obj, reason: str, message: str) -> None:
        """FailureTarget at once; the Job's remaining pods are deleted, and once none runs, Failed."""
        self.finish(job, "FailureTarget", reason, message)
        self.record("jobs", "MODIFIED", job)
        for pod in self.pods_of(job):
            if "terminated" not in pod["status"]["containerStatuses"][0]["state"]:
                self.kill(pod)
        self._settle_job(job)

    def settle(self, pod: Obj) -> None:
        job = self.job_of(pod)
        if job is not None:
            self._settle_job(job)

    def _settle_job(self, job: Obj) -> None:
        conditions = job["status"].get("conditions", [])
        target = next((c for c in conditions if c["type"] == "FailureTarget"), None)
        if target is None or any(c["type"] == "Failed" for c in conditions):
            return
        if any("terminated" not in p["status"]["containerStatuses"][0]["state"] for p in self.pods_of(job)):
            return
        job["status"].update(active=0, ready=0)
        self.finish(job, "Failed", target["reason"], target["message"])
        self.record("jobs", "MODIFIED", job)

    @staticmethod
    def finish(job: Obj, kind: str, reason: str, message: str) -> None:
        job["status"].setdefault("conditions", []).append(
            {"type": kind, "status": "True", "reason": reason, "message": message,
             "lastProbeTime": now(), "lastTransitionTime": now()})
