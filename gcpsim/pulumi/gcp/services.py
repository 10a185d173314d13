"""google_project_service (services/resourcemanager/resource_google_project_service.go).

Create lists the project's enabled services (Service Usage services.list, state:ENABLED); an
enabled one is only recorded (no read follows). Otherwise it enables it (services.enable: the
provider's batcher sends a batch of one as a single enable, serviceusage_batching.go), waits on
the operation, waits until the list shows it, then reads. Read first gets the project from
Cloud Resource Manager (projects.get: a project being deleted reads as gone, and a project
whose CRM API is off fails here), then lists the enabled services; one not enabled is gone.
Delete disables only with disable_on_destroy (services.disable, then its operation).
The provider batches enables of several resources within a few seconds into one
services:batchEnable; this stand-in enables one service per resource.
"""

from __future__ import annotations

from typing import Any

from gcpsim.pulumi.gcp.base import GcpResource, failing_as, last
from gcpsim.pulumi.gcp.rest import GoogleApiError, poll
from gcpsim.pulumi.plugins import Diff, ProviderError

CRM_DEFAULT = "https://cloudresourcemanager.googleapis.com/v1/"


class Service(GcpResource):
    token = "gcp:projects/service:Service"
    endpoint = "serviceUsageCustomEndpoint"
    default_url = "https://serviceusage.googleapis.com/v1beta1/"
    go_client_version = "v1"  # google.golang.org/api/serviceusage/v1 (serviceusage/client.go)
    autoname = None
    force_new = frozenset({"service", "project"})

    def _enabled(self, project: str) -> set[str]:
        names: set[str] = set()
        token = ""
        while True:
            query = {"alt": "json", "filter": "state:ENABLED", "pageSize": "200",
                     "fields": "services/name,nextPageToken", **({"pageToken": token} if token else {})}
            page = self.rest.get(self.url(f"projects/{project}/services"), query)
            names |= {last(s["name"]) for s in page.get("services") or []}
            token = page.get("nextPageToken") or ""
            if not token:
                return names

    def create(self, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        project, service = last(self.project(inputs)), inputs["service"]
        id_ = f"{project}/{service}"
        with failing_as(f"Error when reading or editing Project Service {id_}"):
            enabled = service in self._list(project)
        if enabled:
            return id_, self._state(id_, inputs)
        with failing_as("failed to enable services"):
            op = self.rest.call("POST", self.url(f"projects/{project}/services/{service}:enable"), {})
            self.wait_lro(op, f"Enable Project {project!r} Services: [{service}]")
        poll(lambda: {"done": service in self._list(project)}, lambda o: o["done"],
             f"services {service} to be enabled")
        found = self.read(id_, inputs, inputs)
        if found is None:
            raise ProviderError(f"Error when reading or editing Project Service {id_}: not enabled after enabling")
        return id_, found

    def _list(self, project: str) -> set[str]:
        try:
            return self._enabled(project)
        except GoogleApiError as exc:
            raise ProviderError(f"Failed to list enabled services for project {project}: {exc}") from None

    def _state(self, id_: str, inputs: dict[str, Any]) -> dict[str, Any]:
        project, service = id_.split("/", 1)
        return {**inputs, "id": id_, "project": project, "service": service,
                "disableOnDestroy": inputs.get("disableOnDestroy", True),
                "disableDependentServices": inputs.get("disableDependentServices", False)}

    def read(self, id_: str, inputs: dict[str, Any], state: dict[str, Any]) -> dict[str, Any] | None:
        project, service = id_.split("/", 1)
        crm = str(self.config.get("resourceManagerCustomEndpoint") or CRM_DEFAULT)
        crm = crm.rstrip("/").rsplit("/", 1)[0] + "/v1/"  # the v1 Go client of resourcemanager/client
        with failing_as(f"Error when reading or editing Project Service {id_}"):
            try:
                found = self.rest.get(f"{crm}projects/{project}")
            except GoogleApiError as exc:
                if exc.code == 404:
                    return None
                raise
            if found.get("lifecycleState") == "DELETE_REQUESTED":
                return None
            if service not in self._list(project):
                return None
        return self._state(id_, {**state, **inputs})

    def update(self, id_: str, state: dict[str, Any], news: dict[str, Any], diff: Diff) -> dict[str, Any]:
        return self._state(id_, news)  # only the provider-side flags change

    def delete(self, id_: str, state: dict[str, Any]) -> None:
        if not state.get("disableOnDestroy", True):
            return
        project, service = id_.split("/", 1)
        body = {"disableDependentServices": bool(state.get("disableDependentServices")),
                "checkIfServiceHasUsage": "CHECK" if state.get("checkIfServiceHasUsageOnDestroy") else "SKIP"}
        with failing_as(f"Error disabling service {service!r} for project {project!r}"):
            try:
                op = self.rest.call("POST", self.url(f"projects/{project}/services/{service}:disable"), body)
            except GoogleApiError as exc:
                if exc.code == 404:
                    return
                raise
            self.wait_lro(op, "api to disable")


TYPES = (Service,)
