"""Cloud Run Admin API v2: the services behind 2nd-gen Cloud Functions, and their IAM policies.

https://cloud.google.com/run/docs/reference/rest/v2/projects.locations.services
A 2nd-gen function is served by a Cloud Run service of the same (lowercased) name, made by its
build and removed with it (cloudfunctions.py); invoking it takes roles/run.invoker on that
service (https://cloud.google.com/functions/docs/securing/managing-access-iam). Its URI is the
deterministic form https://<service>-<project number>.<region>.run.app
(https://cloud.google.com/run/docs/triggering/https-request#deterministic).
Chosen: services are made only by functions (create/patch/delete answer 501, the program declares
none); the 404 uses the simulator's generic wording.
"""

from __future__ import annotations

import uuid
from typing import Any

from gcpsim import operations
from gcpsim.apis import iam_policy, locations
from gcpsim.routes import Call, handles
from gcpsim.state import World

API = "run.v2"
SERVICES = "run_services"
INGRESS = {"ALLOW_ALL": "INGRESS_TRAFFIC_ALL", "ALLOW_INTERNAL_ONLY": "INGRESS_TRAFFIC_INTERNAL_ONLY",
           "ALLOW_INTERNAL_AND_GCLB": "INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER"}


def service_id(function_id: str) -> str:
    return function_id.lower().replace("_", "-")


def serve_function(world: World, project_id: str, location: str, function_id: str, config: dict[str, Any],
                   at: float) -> dict[str, Any]:
    """The function's service, made or updated; returns the function's serviceConfig as Cloud
    Functions reports it."""
    project = world.project(project_id)
    assert project is not None
    sid = service_id(function_id)
    name = f"projects/{project_id}/locations/{location}/services/{sid}"
    uri = f"https://{sid}-{project['number']}.{location}.run.app"
    services = world.collection(project_id, SERVICES)
    previous = services.get(name)
    generation = int(previous["generation"]) + 1 if previous else 1
    revision = f"{sid}-{generation:05d}-sim"
    stamp = operations.rfc3339(at)
    services[name] = {
        "name": name, "uid": previous["uid"] if previous else str(uuid.uuid4()), "generation": str(generation),
        "labels": {"goog-managed-by": "cloudfunctions"}, "createTime": previous["createTime"] if previous else stamp,
        "updateTime": stamp, "launchStage": "GA", "ingress": INGRESS.get(config.get("ingressSettings", "ALLOW_ALL"),
                                                                          "INGRESS_TRAFFIC_ALL"),
        "template": {"serviceAccount": config.get("serviceAccountEmail") or f"{project['number']}-compute@developer.gserviceaccount.com",
                     "timeout": f"{config.get('timeoutSeconds', 60)}s",
                     "scaling": {"maxInstanceCount": config.get("maxInstanceCount", 100)},
                     "maxInstanceRequestConcurrency": config.get("maxInstanceRequestConcurrency", 1)},
        "traffic": [{"type": "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST", "percent": 100}],
        "uri": uri, "urls": [uri], "latestReadyRevision": f"{name}/revisions/{revision}",
        "latestCreatedRevision": f"{name}/revisions/{revision}", "observedGeneration": str(generation),
        "terminalCondition": {"type": "Ready", "state": "CONDITION_SUCCEEDED", "lastTransitionTime": stamp},
        "etag": f'"{world.next_id()}"'}
    return {**config, "service": name, "uri": uri, "revision": revision,
            "ingressSettings": config.get("ingressSettings", "ALLOW_ALL"), "allTrafficOnLatestRevision": True}


def remove_service(world: World, project_id: str, name: str) -> None:
    world.collection(project_id, SERVICES).pop(name, None)
    iam_policy.drop(world, project_id, name)


@handles("run.projects.locations.services.get")
def get(call: Call) -> Any:
    return locations.find(call, SERVICES, call.params["name"])


@handles("run.projects.locations.services.list")
def list_(call: Call) -> Any:
    return locations.children(call, SERVICES, "services")


def _policy_of(call: Call) -> tuple[str, str]:
    return call.project_id, locations.find(call, SERVICES, call.params["resource"])["name"]


iam_policy.policy_methods("run.projects.locations.services.getIamPolicy",
                          "run.projects.locations.services.setIamPolicy", _policy_of)
locations.operations_get(API, "run.projects.locations.operations.get")
