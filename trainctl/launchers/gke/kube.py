"""The Kubernetes calls of a GKE run, in one namespace: objects created unless already there,
and the Job and Service deleted (the Job in the foreground, waiting for its pods)."""

from __future__ import annotations

import time
from typing import Any, Callable, cast

from infra.providers.inventory import Inventory
from infra.spec.stack_config import ConfigError
from trainctl.launchers.gke.jobset import JOBSET_GROUP, JOBSET_VERSION, KUEUE_GROUP, ClusterApis
from trainctl.launchers.gke.manifests import import_kubernetes


def _discard(response: Any) -> None:
    """Read and release a raw response. Deletions are read raw: a Job deleted in the foreground
    answers with the Job itself, which the client's V1Status model refuses."""
    response.data
    response.release_conn()


class Kube:
    """The Kubernetes calls of a run, in one namespace."""

    def __init__(self, inventory: Inventory, namespace: str, streams: int) -> None:
        import_kubernetes()
        from kubernetes import client, config

        if not inventory.kubeconfig:
            raise ConfigError(f"stack {inventory.stack} has no kubeconfig (not a GKE stack?)")
        configuration = client.Configuration()
        # One connection per log stream, two watches and the calls in between.
        configuration.connection_pool_maxsize = streams + 8
        self.api = config.new_client_from_config(config_file=inventory.kubeconfig, persist_config=False,
                                                 client_configuration=configuration)
        self.core = client.CoreV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.ns = namespace

    def keep_or_create(self, create: Callable[..., Any], body: Any) -> bool:
        """Create; an object of that name already there is kept. True when created."""
        from kubernetes.client.exceptions import ApiException

        try:
            create(self.ns, body, field_validation="Strict")
            return True
        except ApiException as exc:
            if exc.status != 409:
                raise
            return False

    def missing_networks(self, names: list[str]) -> list[str]:
        """Which of these multi-networking Network objects (cluster-scoped) the cluster lacks."""
        from kubernetes import client

        listed = cast(dict, client.CustomObjectsApi(self.api).list_cluster_custom_object("networking.gke.io", "v1",
                                                                                            "networks"))
        present = {item["metadata"]["name"] for item in listed.get("items", [])}
        return [n for n in names if n not in present]

    def job_exists(self, name: str) -> bool:
        from kubernetes.client.exceptions import ApiException

        try:
            self.batch.read_namespaced_job(name, self.ns)
            return True
        except ApiException as exc:
            if exc.status != 404:
                raise
            return False

    def delete_job(self, name: str, wait: float, poll: float) -> None:
        """Foreground: the Job stays until its pods are gone, so `wait` covers the pods too."""
        from kubernetes.client.exceptions import ApiException

        try:
            _discard(self.batch.delete_namespaced_job(name, self.ns, propagation_policy="Foreground",
                                                      _preload_content=False))
        except ApiException as exc:
            if exc.status != 404:
                raise
        deadline = time.monotonic() + wait
        while wait and self.job_exists(name):
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {name} still terminating after {wait:.0f} s")
            time.sleep(poll)

    def delete_service(self, name: str) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            _discard(self.core.delete_namespaced_service(name, self.ns, _preload_content=False))
        except ApiException as exc:
            if exc.status != 404:
                raise

    # -- JobSet and Kueue ------------------------------------------------------------------------

    def apis(self) -> ClusterApis:
        """What the cluster serves, from its API discovery (GET /apis): a CRD's group and versions
        are listed there once it is installed."""
        from kubernetes import client

        groups = {g.name: g for g in client.ApisApi(self.api).get_api_versions().groups}
        jobset = groups.get(JOBSET_GROUP)
        kueue = groups.get(KUEUE_GROUP)
        return ClusterApis(jobset=bool(jobset and any(v.version == JOBSET_VERSION for v in jobset.versions)),
                           kueue_version=kueue.preferred_version.version if kueue and kueue.preferred_version else None)

    def local_queue_exists(self, version: str, name: str) -> bool:
        from kubernetes.client.exceptions import ApiException

        try:
            self.custom.get_namespaced_custom_object(KUEUE_GROUP, version, self.ns, "localqueues", name)
            return True
        except ApiException as exc:
            if exc.status != 404:
                raise
            return False

    def create_jobset(self, body: dict[str, Any]) -> dict[str, Any]:
        return cast(dict, self.custom.create_namespaced_custom_object(JOBSET_GROUP, JOBSET_VERSION, self.ns, "jobsets",
                                                                      body, field_validation="Strict"))

    def read_jobset(self, name: str) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException

        try:
            return cast(dict, self.custom.get_namespaced_custom_object(JOBSET_GROUP, JOBSET_VERSION, self.ns,
                                                                       "jobsets", name))
        except ApiException as exc:
            if exc.status != 404:
                raise
            return None

    def delete_jobset(self, name: str, wait: float, poll: float) -> None:
        """Foreground, as delete_job: its Jobs, and their pods, go before it does."""
        from kubernetes.client.exceptions import ApiException

        try:
            self.custom.delete_namespaced_custom_object(JOBSET_GROUP, JOBSET_VERSION, self.ns, "jobsets", name,
                                                        propagation_policy="Foreground")
        except ApiException as exc:
            if exc.status != 404:
                raise
        deadline = time.monotonic() + wait
        while wait and self.read_jobset(name) is not None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"jobset {name} still terminating after {wait:.0f} s")
            time.sleep(poll)
