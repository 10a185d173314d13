"""Custom resources an admin installs on a simulated cluster: JobSet's and Kueue's APIs appear
(in discovery, GET /apis, and at their paths) once their CustomResourceDefinitions are created,
as `kubectl apply --server-side -f` of their release manifests does
(https://jobset.sigs.k8s.io/docs/installation/, https://kueue.sigs.k8s.io/docs/installation/).
The simulator models the controllers of the CRDs in MODELLED only (jobsets.py); any other CRD
is refused, naming what it models, rather than stored with nothing behind it."""

from __future__ import annotations

import copy
import uuid
from typing import Any

from gcpsim.kubernetes.jobsets import JobSetController
from gcpsim.kubernetes.objects import KubeError, Obj, now, not_found

MODELLED = {"jobsets.jobset.x-k8s.io": ("jobsets", "jobset.x-k8s.io", ("v1alpha2",)),
            "localqueues.kueue.x-k8s.io": ("localqueues", "kueue.x-k8s.io", ("v1beta2", "v1beta1")),
            "clusterqueues.kueue.x-k8s.io": ("clusterqueues", "kueue.x-k8s.io", ("v1beta2", "v1beta1")),
            "resourceflavors.kueue.x-k8s.io": ("resourceflavors", "kueue.x-k8s.io", ("v1beta2", "v1beta1"))}
BUILT_IN = {"batch": ("v1",), "apps": ("v1",), "apiextensions.k8s.io": ("v1",), "networking.gke.io": ("v1",)}
CUSTOM_STORED = ("localqueues", "clusterqueues", "resourceflavors")


class CustomResources(JobSetController):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.installed: set[str] = set()

    def served(self, resource: str) -> bool:
        return any(r == resource for crd, (r, _, _) in MODELLED.items() if crd in self.installed)

    def discovery(self) -> Obj:
        """GET /apis: an APIGroupList of the built-in groups the simulator serves and the installed ones."""
        groups: dict[str, tuple[str, ...]] = dict(BUILT_IN)
        for crd in sorted(self.installed):
            _, group, versions = MODELLED[crd]
            groups[group] = versions
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
             "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]}} for g, vs in groups.items()]}

    def create(self, resource: str, ns: str, body: Any, query: dict[str, str]) -> Obj:
        if resource == "customresourcedefinitions":
            return self.install(body)
        if resource in ("jobsets", *CUSTOM_STORED):
            if not self.served(resource):
                raise KubeError(404, "NotFound", "the server could not find the requested resource")
            name = ((body or {}).get("metadata") or {}).get("name")
            if not name:
                raise KubeError(422, "Invalid", "metadata.name: Required value: name or generateName is required")
            with self.cond:
                if (resource, ns, name) in self.objects:
                    raise KubeError(409, "AlreadyExists", f'{resource} "{name}" already exists', name=name, kind=resource)
                if resource == "jobsets":
                    return self.create_jobset(ns, body)
                obj = copy.deepcopy(body)
                obj["metadata"].update(namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=now())
                self.record(resource, "ADDED", obj)
                self.admit_waiting()
                return copy.deepcopy(obj)
        return super().create(resource, ns, body, query)

    def install(self, body: Any) -> Obj:
        name = ((body or {}).get("metadata") or {}).get("name", "")
        if name not in MODELLED:
            raise KubeError(422, "Invalid", f"the simulated cluster models the controllers of {', '.join(sorted(MODELLED))} "
                                            f"only; it does not run CRD {name!r}")
        with self.cond:
            if name in self.installed:
                raise KubeError(409, "AlreadyExists", f'customresourcedefinitions.apiextensions.k8s.io "{name}" '
                                                      "already exists", name=name, kind="customresourcedefinitions")
            self.installed.add(name)
            obj = copy.deepcopy(body)
            obj["metadata"].update(namespace="", uid=str(uuid.uuid4()), creationTimestamp=now())
            self.record("customresourcedefinitions", "ADDED", obj)
            return copy.deepcopy(obj)

    def delete(self, resource: str, ns: str, name: str, policy: str | None) -> Obj:
        if resource != "jobsets":
            return super().delete(resource, ns, name, policy)
        with self.cond:
            js = self.get(resource, ns, name)
            if js["metadata"].get("deletionTimestamp"):
                return copy.deepcopy(js)
            # A custom resource's default propagation is Background (the garbage collector's).
            if (policy or "Background") == "Foreground":
                js["metadata"].update(deletionTimestamp=now(), finalizers=["foregroundDeletion"])
                self.record("jobsets", "MODIFIED", js)
            else:
                self.record("jobsets", "DELETED", js)
            for job in self.children(js):
                super().delete("jobs", ns, job["metadata"]["name"], "Foreground")
            self.spawn(self.collect_jobset, js)
            self.admit_waiting()
            return copy.deepcopy(js)

    def collect_jobset(self, js: Obj) -> None:
        with self.cond:
            self.cond.wait_for(lambda: self.closing or not self.children(js))
            key = ("jobsets", js["metadata"]["namespace"], js["metadata"]["name"])
            if self.objects.get(key) is js:
                self.record("jobsets", "DELETED", js)
            self.admit_waiting()

    def get(self, resource: str, ns: str, name: str) -> Obj:
        if resource in ("jobsets", *CUSTOM_STORED) and not self.served(resource):
            raise not_found(resource, name)
        return super().get(resource, ns, name)
