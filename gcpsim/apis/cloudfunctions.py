"""Cloud Functions v2: functions (create, get, list, patch, delete) and operations.

https://cloud.google.com/functions/docs/reference/rest/v2/projects.locations.functions
A create (and a patch of the build or service config) is a long-running operation that builds
the function; the function is DEPLOYING meanwhile, then ACTIVE, or FAILED when its build fails.
A built function is a Cloud Run service (run.py) named after it, with its URI; the build leaves
its image in the region's `gcf-artifacts` Artifact Registry repository, which outlives the
function (https://cloud.google.com/functions/docs/building).

The build runs as `buildConfig.serviceAccount`, or, where none is given, as the project's
Compute Engine default service account: the default since July 2024 for new projects
(https://cloud.google.com/functions/1stgendocs/securing/build-custom-sa, "Starting in July 2024,
Cloud Build has changed the default behavior ... in new projects"), and an account new projects no
longer grant anything automatically (orgs enforce iam.automaticIamGrantsForDefaultServiceAccounts:
https://github.com/GoogleCloudPlatform/terraform-google-cloud-functions/issues/129). Every
simulated project is such a new project: its default account holds what the project's policy
grants it, nothing more. The build needs, on that account (the roles the custom build account
page lists): logs (roles/logging.logWriter on the project), the source (storage.objects.get on
the source's bucket: roles/storage.objectViewer there or on the project), and pushing the image
(roles/artifactregistry.writer). Failing, the operation ends with code 13 and Cloud Build's words:
  - logs: "... does not have permission to write logs to Cloud Logging. To fix this, grant the Logs
    Writer (roles/logging.logWriter) role to the service account."
    (https://github.com/GoogleCloudPlatform/terraform-genai-knowledge-base/issues/245, whose title
    gives the function's prefix "Could not build the function due to a missing permission on the
    build service account");
  - source: "Build failed with status: FAILURE and message: failed to Fetch: failed to download
    archive gs://<b>/<o>: Access to bucket <b> denied. You must grant Storage Object Viewer
    permission to <account>. ..." (https://github.com/GoogleCloudPlatform/marketing-analytics-jumpstart/issues/153);
  - image: Artifact Registry's denial as Docker reports it, `denied: Permission
    "artifactregistry.repositories.uploadArtifacts" denied on resource "<repo>" (or it may not
    exist)` (the form: https://github.com/firebase/firebase-tools/issues/9563).
Chosen: how these halves join is the simulator's; a function's 404/409 use the generic wording.
"""

from __future__ import annotations

import uuid
from typing import Any

from gcpsim import operations
from gcpsim.apis import artifactregistry, build_access, locations, run
from gcpsim.errors import ApiError, already_exists, not_found
from gcpsim.routes import Call, handles
from gcpsim.state import World

API = "cloudfunctions.v2"
FUNCTIONS = "functions"
METADATA_TYPE = "type.googleapis.com/google.cloud.functions.v2.OperationMetadata"
REBUILD = ("buildConfig", "serviceConfig")
SETTABLE = ("description", "labels", "buildConfig", "serviceConfig", "eventTrigger", "kmsKeyName")


def _parts(name: str) -> tuple[str, str, str]:
    """(project ref, location, function id) of projects/<p>/locations/<l>/functions/<f>."""
    p = name.split("/")
    return p[1], p[3], p[5]


def find(world: World, name: str) -> tuple[str, dict[str, Any]]:
    project_ref, _, _ = _parts(name)
    project = world.project(project_ref)
    found = world.collection(project["id"], FUNCTIONS).get(name) if project else None
    if project is None or found is None:
        raise not_found(name)
    return project["id"], found


def _operation(call: Call, project_id: str, function: dict[str, Any], verb: str, build: bool) -> Any:
    location = _parts(function["name"])[1]
    op = operations.start(call.world, api=API, project=project_id, kind="function_build" if build else "function_update",
                          target=function["name"], then="cloudfunctions.built" if build else "cloudfunctions.updated",
                          args={"name": function["name"], "verb": verb}, now=call.now,
                          metadata={"@type": METADATA_TYPE, "createTime": operations.rfc3339(call.now),
                                    "target": function["name"], "verb": verb, "apiVersion": "v2"})
    return operations.as_longrunning(op, f"projects/{project_id}/locations/{location}/operations/{op['name']}")


@handles("cloudfunctions.projects.locations.functions.create")
def create(call: Call) -> Any:
    project_id, location = call.project_id, call.params["parent"].split("/")[3]
    function_id = call.arg("functionId") or call.arg("function_id") or ""
    name = f"projects/{project_id}/locations/{location}/functions/{function_id}"
    functions = call.world.collection(project_id, FUNCTIONS)
    if name in functions:
        raise already_exists(name)
    body = call.body or {}
    at = operations.rfc3339(call.now)
    functions[name] = {"name": name, **{k: body[k] for k in SETTABLE if k in body}, "state": "DEPLOYING",
                       "environment": "GEN_2", "createTime": at, "updateTime": at,
                       "url": f"https://{location}-{project_id}.cloudfunctions.net/{function_id}"}
    return _operation(call, project_id, functions[name], "create", build=True)


@operations.completion("cloudfunctions.built")
def _built(world: World, op: dict[str, Any], at: float) -> dict[str, Any]:
    project_id, function = find(world, op["args"]["name"])
    _, location, function_id = _parts(function["name"])
    build = function.setdefault("buildConfig", {})
    build["build"] = f"projects/{world.project(project_id)['number']}/locations/{location}/builds/{uuid.uuid4()}"  # type: ignore[index]
    repository = f"projects/{project_id}/locations/{location}/repositories/gcf-artifacts"
    build["dockerRepository"] = repository
    failure = build_access.missing(world, project_id, build, repository)
    if failure is not None:
        function.update(state="FAILED", stateMessages=[{"severity": "ERROR", "type": "BuildFailed", "message": failure}])
        raise ApiError(500, failure, status="INTERNAL")
    if repository not in world.collection(project_id, artifactregistry.REPOSITORIES):
        artifactregistry.make_repository(world, project_id, location, "gcf-artifacts", {"format": "DOCKER"}, at)
    function["serviceConfig"] = run.serve_function(world, project_id, location, function_id,
                                                   function.get("serviceConfig") or {}, at)
    function.update(state="ACTIVE", updateTime=operations.rfc3339(at))
    function.pop("stateMessages", None)
    return {"@type": "type.googleapis.com/google.cloud.functions.v2.Function", **function}


@operations.completion("cloudfunctions.updated")
def _updated(world: World, op: dict[str, Any], at: float) -> dict[str, Any]:
    _, function = find(world, op["args"]["name"])
    function["updateTime"] = operations.rfc3339(at)
    return {"@type": "type.googleapis.com/google.cloud.functions.v2.Function", **function}


@handles("cloudfunctions.projects.locations.functions.get")
def get(call: Call) -> Any:
    return find(call.world, call.params["name"])[1]


@handles("cloudfunctions.projects.locations.functions.list")
def list_(call: Call) -> Any:
    return locations.children(call, FUNCTIONS, "functions")


@handles("cloudfunctions.projects.locations.functions.patch")
def patch(call: Call) -> Any:
    project_id, function = find(call.world, call.params["name"])
    body = call.body or {}
    fields = locations.masked_fields(call, SETTABLE)
    for field in fields:
        function[field] = body.get(field)
    rebuild = any(f in REBUILD for f in fields)
    if rebuild:
        function["state"] = "DEPLOYING"
    return _operation(call, project_id, function, "update", build=rebuild)


@handles("cloudfunctions.projects.locations.functions.delete")
def delete(call: Call) -> Any:
    project_id, function = find(call.world, call.params["name"])
    del call.world.collection(project_id, FUNCTIONS)[function["name"]]
    service = (function.get("serviceConfig") or {}).get("service")
    if service:
        run.remove_service(call.world, project_id, service)
    location = _parts(function["name"])[1]
    op = operations.start(call.world, api=API, project=project_id, kind="function_delete", target=function["name"],
                          now=call.now, metadata={"@type": METADATA_TYPE, "target": function["name"], "verb": "delete",
                                                  "apiVersion": "v2", "createTime": operations.rfc3339(call.now)})
    return operations.as_longrunning(op, f"projects/{project_id}/locations/{location}/operations/{op['name']}")


locations.operations_get(API, "cloudfunctions.projects.locations.operations.get")
