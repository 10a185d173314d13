"""Artifact Registry v1: repositories (create, get, list, patch, delete, IAM) and operations.

https://cloud.google.com/artifact-registry/docs/reference/rest/v1/projects.locations.repositories
Create and delete are long-running operations (google.longrunning.Operation named
projects/<p>/locations/<l>/operations/<id>); the repository exists once the create is done.
A repository's id is lowercase letters, digits and hyphens, a letter first, at most 63
characters (the API's resource-name rule, as program's registry.py relies on).
Chosen: images are not simulated (a repository is empty; `trainctl build` pushes to the stack's
local registry on the local stack only); the 409/404 bodies use the simulator's generic wording
(no source quoted Artifact Registry's exact text; ALREADY_EXISTS is its status for a second
create: https://github.com/hexclave/hexclave/pull/2025); a location is any region name.
"""

from __future__ import annotations

import re
from typing import Any

from gcpsim import operations
from gcpsim.apis import iam_policy, locations
from gcpsim.errors import already_exists, invalid_argument, not_found
from gcpsim.routes import Call, handles
from gcpsim.state import World

API = "artifactregistry.v1"
REPOSITORIES = "repositories"
REPOSITORY_ID = re.compile(r"[a-z]([a-z0-9-]{0,61}[a-z0-9])?")
METADATA = {"@type": "type.googleapis.com/google.devtools.artifactregistry.v1.OperationMetadata"}
SETTABLE = ("format", "description", "labels", "mode", "dockerConfig", "cleanupPolicies",
            "cleanupPolicyDryRun", "kmsKeyName", "vulnerabilityScanningConfig", "mavenConfig")


def _split(name: str) -> tuple[str, str]:
    """(project ref, location) of projects/<p>/locations/<l>[/...]."""
    parts = name.split("/")
    return parts[1], parts[3]


def repository(world: World, name: str) -> tuple[str, dict[str, Any]]:
    project_ref, _ = _split(name)
    project = world.project(project_ref)
    found = world.collection(project["id"], REPOSITORIES).get(name) if project else None
    if project is None or found is None:
        raise not_found(name)
    return project["id"], found


def _op_name(project_id: str, location: str, op: dict[str, Any]) -> str:
    return f"projects/{project_id}/locations/{location}/operations/{op['name']}"


def make_repository(world: World, project_id: str, location: str, repository_id: str,
                    body: dict[str, Any], now: float) -> dict[str, Any]:
    """The record of a created repository (also what Cloud Functions' builds make)."""
    project = world.project(project_id)
    assert project is not None
    name = f"projects/{project_id}/locations/{location}/repositories/{repository_id}"
    at = operations.rfc3339(now)
    record = {"name": name, "format": "DOCKER", "mode": "STANDARD_REPOSITORY",
              **{k: body[k] for k in SETTABLE if k in body},
              "createTime": at, "updateTime": at, "sizeBytes": "0",
              "registryUri": f"{location}-docker.pkg.dev/{project_id}/{repository_id}"}
    world.collection(project_id, REPOSITORIES)[name] = record
    return record


@handles("artifactregistry.projects.locations.repositories.create")
def create(call: Call) -> Any:
    project_id, location = call.project_id, _split(call.params["parent"])[1]
    # the provider sends repository_id (the proto name), clients repositoryId
    repository_id = call.arg("repositoryId") or call.arg("repository_id") or ""
    if not REPOSITORY_ID.fullmatch(repository_id):
        # AR's 400 for a request it cannot take carries no detail
        # (https://github.com/pulumi/pulumi-google-native/issues/259)
        raise invalid_argument("Request contains an invalid argument.")
    name = f"projects/{project_id}/locations/{location}/repositories/{repository_id}"
    if name in call.world.collection(project_id, REPOSITORIES):
        raise already_exists(name)
    record = make_repository(call.world, project_id, location, repository_id, call.body or {}, call.now)
    record["creating"] = True  # invisible to get until the operation is done (it may be at once)
    op = operations.start(call.world, api=API, project=project_id, kind="repository_create", target=name,
                          then="artifactregistry.done", args={"name": name}, metadata=METADATA, now=call.now)
    return operations.as_longrunning(op, _op_name(project_id, location, op))


@operations.completion("artifactregistry.done")
def _done(world: World, op: dict[str, Any], _at: float) -> dict[str, Any] | None:
    project_id, _ = _split(op["args"]["name"])
    record = world.collection(project_id, REPOSITORIES).get(op["args"]["name"])
    if record is None:  # a delete's operation
        return {"@type": "type.googleapis.com/google.protobuf.Empty"}
    record.pop("creating", None)
    return {"@type": "type.googleapis.com/google.devtools.artifactregistry.v1.Repository", **record}


def _visible(world: World, name: str) -> tuple[str, dict[str, Any]]:
    project_id, record = repository(world, name)
    if "creating" in record:
        raise not_found(name)
    return project_id, record


@handles("artifactregistry.projects.locations.repositories.get")
def get(call: Call) -> Any:
    return _visible(call.world, call.params["name"])[1]


@handles("artifactregistry.projects.locations.repositories.list")
def list_(call: Call) -> Any:
    prefix = call.params["parent"] + "/repositories/"
    found = [r for n, r in sorted(call.world.collection(call.project_id, REPOSITORIES).items())
             if n.startswith(prefix) and "creating" not in r]
    return {"repositories": found} if found else {}


@handles("artifactregistry.projects.locations.repositories.patch")
def patch(call: Call) -> Any:
    _, record = _visible(call.world, call.params["name"])
    body = call.body or {}
    for field in locations.masked_fields(call, SETTABLE):
        if field in ("format", "mode"):  # immutable
            raise invalid_argument("Request contains an invalid argument.")
        record[field] = body.get(field)
    record["updateTime"] = operations.rfc3339(call.now)
    return record


@handles("artifactregistry.projects.locations.repositories.delete")
def delete(call: Call) -> Any:
    project_id, record = _visible(call.world, call.params["name"])
    del call.world.collection(project_id, REPOSITORIES)[record["name"]]
    iam_policy.drop(call.world, project_id, record["name"])
    op = operations.start(call.world, api=API, project=project_id, kind="repository_delete",
                          target=record["name"], then="artifactregistry.done", args={"name": record["name"]},
                          metadata=METADATA, now=call.now)
    return operations.as_longrunning(op, _op_name(project_id, _split(record["name"])[1], op))


def _policy_of(call: Call) -> tuple[str, str]:
    project_id, record = _visible(call.world, call.params["resource"])
    return project_id, record["name"]


iam_policy.policy_methods("artifactregistry.projects.locations.repositories.getIamPolicy",
                          "artifactregistry.projects.locations.repositories.setIamPolicy", _policy_of)
locations.operations_get(API, "artifactregistry.projects.locations.operations.get")
