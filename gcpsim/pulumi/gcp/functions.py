"""google_cloudfunctions2_function and google_cloud_scheduler_job (services/cloudfunctions2/
resource_cloudfunctions2_function.go, services/cloudscheduler/resource_cloud_scheduler_job.go).

A function is created with POST .../functions?functionId={name} and its operation ("Creating
function"), read with GET (serviceConfig.service and .uri are what the service reports),
updated with a PATCH whose updateMask names description, buildConfig, serviceConfig,
eventTrigger, kmsKeyName and labels as they changed (a new source object is a buildConfig
change: the function is built again), deleted with DELETE and its operation. A scheduler job is
created with POST .../jobs (no operation), PATCHed on change (then paused or resumed when
`paused` changed), and deleted with DELETE.
"""

from __future__ import annotations

from typing import Any

from gcpsim.pulumi.gcp.base import GcpResource, drop_empty, failing_as, last
from gcpsim.pulumi.plugins import Diff

FUNCTION_MASK = {"description": "description", "buildConfig": "buildConfig", "serviceConfig": "serviceConfig",
                 "eventTrigger": "eventTrigger", "kmsKeyName": "kmsKeyName", "labels": "labels"}


class Function(GcpResource):
    token = "gcp:cloudfunctionsv2/function:Function"
    endpoint = "cloudfunctions2CustomEndpoint"
    default_url = "https://cloudfunctions.googleapis.com/v2beta/"
    force_new = frozenset({"name", "location", "project", "buildConfig.source.repoSource.projectId"})

    def suppress(self, path: str, new: Any, old: Any) -> bool:
        if path == "serviceConfig.environmentVariables":  # environmentVariablesDiffSuppress
            return dict(new or {}) == {k: v for k, v in (old or {}).items() if k != "LOG_EXECUTION_ID"}
        return False

    def _id(self, inputs: dict[str, Any]) -> str:
        return f"projects/{self.project(inputs)}/locations/{self.region(inputs, 'location')}/functions/{inputs['name']}"

    def _body(self, inputs: dict[str, Any], labels: dict[str, str] | None) -> dict[str, Any]:
        return drop_empty({"name": self._id(inputs), "description": inputs.get("description"),
                           "buildConfig": inputs.get("buildConfig"), "serviceConfig": inputs.get("serviceConfig"),
                           "eventTrigger": inputs.get("eventTrigger"), "kmsKeyName": inputs.get("kmsKeyName"),
                           "labels": labels})

    def create(self, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        id_ = self._id(inputs)
        parent = id_.rsplit("/functions/", 1)[0]
        with failing_as("Error creating function"):
            op = self.rest.call("POST", self.url(f"{parent}/functions"),
                                self._body(inputs, self.labels_on_create(inputs.get("labels"))),
                                {"functionId": inputs["name"]})
        with failing_as("Error waiting to create function"):
            self.wait_lro(op, "Creating function")
        return id_, self.read(id_, inputs, inputs) or inputs

    def read(self, id_: str, inputs: dict[str, Any], state: dict[str, Any]) -> dict[str, Any] | None:
        found = self.fetch(self.url(id_), f"Cloudfunctions2function {id_!r}")
        if found is None:
            return None
        return {**state, **inputs, "id": id_, "name": last(found["name"]), "project": id_.split("/")[1],
                "location": id_.split("/")[3], "description": found.get("description"),
                "buildConfig": found.get("buildConfig"), "serviceConfig": found.get("serviceConfig"),
                "eventTrigger": found.get("eventTrigger"), "state": found.get("state"), "url": found.get("url"),
                "environment": found.get("environment"), "updateTime": found.get("updateTime"),
                **self.labels_outputs(inputs.get("labels") or state.get("labels"), found.get("labels"))}

    def update(self, id_: str, state: dict[str, Any], news: dict[str, Any], diff: Diff) -> dict[str, Any]:
        changed = {p.split(".")[0] for p in diff.changed}
        mask = [FUNCTION_MASK[c] for c in FUNCTION_MASK if c in changed]
        if mask:
            labels = self.labels_on_update(news.get("labels"), state.get("effectiveLabels") or {})
            with failing_as(f"Error updating function {id_!r}"):
                op = self.rest.call("PATCH", self.url(id_), self._body(news, labels), {"updateMask": ",".join(mask)})
                self.wait_lro(op, "Updating function")
        return self.read(id_, news, state) or state

    def delete(self, id_: str, state: dict[str, Any]) -> None:
        op = self.delete_request(self.url(id_), "function")
        if op is not None:
            with failing_as("Error waiting to delete function"):
                self.wait_lro(op, "Deleting function")


class Job(GcpResource):
    token = "gcp:cloudscheduler/job:Job"
    endpoint = "cloudSchedulerCustomEndpoint"
    default_url = "https://cloudscheduler.googleapis.com/v1/"
    force_new = frozenset({"name", "region", "project"})

    def suppress(self, path: str, new: Any, old: Any) -> bool:
        if path == "httpTarget.uri":  # LastSlashDiffSuppress
            return str(new).rstrip("/") == str(old or "").rstrip("/")
        if path == "attemptDeadline":
            return new in ("", "180s", None) and old in ("", "180s", None)
        return False

    def _id(self, inputs: dict[str, Any]) -> str:
        return f"projects/{self.project(inputs)}/locations/{self.region(inputs)}/jobs/{inputs['name']}"

    def _body(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return drop_empty({"name": self._id(inputs), "description": inputs.get("description"),
                           "schedule": inputs.get("schedule"), "timeZone": inputs.get("timeZone"),
                           "attemptDeadline": inputs.get("attemptDeadline"), "retryConfig": inputs.get("retryConfig"),
                           "httpTarget": inputs.get("httpTarget"), "pubsubTarget": inputs.get("pubsubTarget")})

    def create(self, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        id_ = self._id(inputs)
        with failing_as("Error creating Job"):
            self.rest.call("POST", self.url(id_.rsplit("/jobs/", 1)[0] + "/jobs"), self._body(inputs))
            if inputs.get("paused"):
                self.rest.call("POST", self.url(f"{id_}:pause"), {})
        return id_, self.read(id_, inputs, inputs) or inputs

    def read(self, id_: str, inputs: dict[str, Any], state: dict[str, Any]) -> dict[str, Any] | None:
        found = self.fetch(self.url(id_), f"CloudSchedulerJob {id_!r}")
        if found is None:
            return None
        return {**state, **inputs, "id": id_, "name": last(found["name"]), "project": id_.split("/")[1],
                "region": id_.split("/")[3], "schedule": found.get("schedule"), "timeZone": found.get("timeZone"),
                "httpTarget": found.get("httpTarget"), "state": found.get("state"),
                "paused": found.get("state") == "PAUSED", "attemptDeadline": found.get("attemptDeadline")}

    def update(self, id_: str, state: dict[str, Any], news: dict[str, Any], diff: Diff) -> dict[str, Any]:
        with failing_as(f"Error updating Job {id_!r}"):
            self.rest.call("PATCH", self.url(id_), self._body(news))
            if any(p.startswith("paused") for p in diff.changed):
                self.rest.call("POST", self.url(f"{id_}:{'pause' if news.get('paused') else 'resume'}"), {})
        return self.read(id_, news, state) or state

    def delete(self, id_: str, state: dict[str, Any]) -> None:
        self.delete_request(self.url(id_), "Job")


TYPES = (Function, Job)
