"""google_artifact_registry_repository (services/artifactregistry/
resource_artifact_registry_repository.go): created with
POST projects/{p}/locations/{l}/repositories?repository_id={id} and its operation, read with GET,
updated with a PATCH whose updateMask names the changed fields (no operation), deleted with
DELETE and its operation. `name` is an output (the repository id): nothing is auto-named, so a
replacement creates the new repository before deleting the old one, as the bridge does."""

from __future__ import annotations

from typing import Any

from gcpsim.pulumi.gcp.base import GcpResource, drop_empty, failing_as, last
from gcpsim.pulumi.plugins import Diff

MASK = {"description": "description", "dockerConfig": "dockerConfig", "cleanupPolicies": "cleanupPolicies",
        "cleanupPolicyDryRun": "cleanupPolicyDryRun", "labels": "labels"}


class Repository(GcpResource):
    token = "gcp:artifactregistry/repository:Repository"
    endpoint = "artifactRegistryCustomEndpoint"
    default_url = "https://artifactregistry.googleapis.com/v1/"
    autoname = None
    force_new = frozenset({"format", "repositoryId", "location", "project", "kmsKeyName", "mode",
                           "remoteRepositoryConfig", "virtualRepositoryConfig.upstreamPolicies.id"})

    def suppress(self, path: str, new: Any, old: Any) -> bool:
        return path == "format" and str(new).upper() == str(old).upper()  # CaseDiffSuppress

    def _path(self, inputs: dict[str, Any]) -> str:
        return (f"projects/{self.project(inputs)}/locations/{self.region(inputs, 'location')}"
                f"/repositories/{inputs['repositoryId']}")

    def create(self, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        id_ = self._path(inputs)
        parent = id_.rsplit("/repositories/", 1)[0]
        body = drop_empty({"format": inputs.get("format"), "description": inputs.get("description"),
                           "labels": self.labels_on_create(inputs.get("labels")), "mode": inputs.get("mode"),
                           "dockerConfig": inputs.get("dockerConfig"), "kmsKeyName": inputs.get("kmsKeyName")})
        with failing_as("Error creating Repository"):
            op = self.rest.call("POST", self.url(f"{parent}/repositories"), body,
                                {"repository_id": inputs["repositoryId"]})
        with failing_as("Error waiting to create Repository"):
            self.wait_lro(op, "Creating Repository")
        return id_, self.read(id_, inputs, inputs) or inputs

    def read(self, id_: str, inputs: dict[str, Any], state: dict[str, Any]) -> dict[str, Any] | None:
        found = self.fetch(self.url(id_), f"ArtifactRegistryRepository {id_!r}")
        if found is None:
            return None
        parts = id_.split("/")
        return {**inputs, "id": id_, "name": last(found.get("name", id_)), "repositoryId": parts[5],
                "project": parts[1], "location": parts[3], "format": found.get("format"),
                "description": found.get("description"), "mode": found.get("mode"),
                "createTime": found.get("createTime"), "updateTime": found.get("updateTime"),
                "registryUri": found.get("registryUri"),
                **self.labels_outputs(inputs.get("labels"), found.get("labels"))}

    def update(self, id_: str, state: dict[str, Any], news: dict[str, Any], diff: Diff) -> dict[str, Any]:
        changed = {p.split(".")[0] for p in diff.changed}
        mask = [MASK[c] for c in sorted(changed) if c in MASK]
        if mask:
            body = drop_empty({"description": news.get("description"), "dockerConfig": news.get("dockerConfig")})
            if "labels" in changed:
                body["labels"] = self.labels_on_update(news.get("labels"), state.get("effectiveLabels") or {})
            with failing_as(f"Error updating Repository {id_!r}"):
                self.rest.call("PATCH", self.url(id_), body, {"updateMask": ",".join(mask)})
        return self.read(id_, news, state) or state

    def delete(self, id_: str, state: dict[str, Any]) -> None:
        op = self.delete_request(self.url(id_), "Repository")
        if op is not None:
            with failing_as("Error waiting to delete Repository"):
                self.wait_lro(op, "Deleting Repository")


TYPES = (Repository,)
