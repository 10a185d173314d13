"""Service Usage v1: which APIs a project has enabled.

https://cloud.google.com/service-usage/docs/reference/rest/v1/services
Enabling is a long-running operation (operations/<name>); the service is ENABLED once it is done.
Names are `projects/<id or number>/services/<service>`; a service name that is no Google API
is refused as the API does.
"""

from __future__ import annotations

from typing import Any

from gcpsim import discovery, operations
from gcpsim.errors import ApiError, invalid_argument
from gcpsim.routes import Call, handles
from gcpsim.state import World

PARENT = "projects/{}"


def known_services() -> dict[str, str]:
    """service name -> title, for the APIs this simulator serves (and so can enable)."""
    return {discovery.api(key).service: discovery.api(key).doc.get("title", "")
            for key in discovery.APIS}


def _service(project: dict[str, Any], name: str) -> dict[str, Any]:
    state = project["services"].get(name, "DISABLED")
    return {"name": f"projects/{project['number']}/services/{name}",
            "parent": f"projects/{project['number']}", "state": state,
            "config": {"name": name, "title": known_services().get(name, name)}}


def _split(name: str) -> tuple[str, str]:
    parent, _, service = name.rpartition("/services/")
    return parent.removeprefix("projects/"), service


def _check_name(service: str) -> None:
    if not service.endswith(".googleapis.com"):
        raise invalid_argument(f"Invalid service name {service!r}.")


@handles("serviceusage.services.get")
def get(call: Call) -> Any:
    project_id, service = _split(call.params["name"])
    project = call.world.project(project_id)
    assert project is not None
    return _service(project, service)


@handles("serviceusage.services.list")
def list_(call: Call) -> Any:
    project = call.world.project(call.params["parent"].removeprefix("projects/"))
    assert project is not None
    wanted = call.arg("filter")
    services = [_service(project, s) for s in sorted(project["services"])]
    if wanted == "state:ENABLED":
        services = [s for s in services if s["state"] == "ENABLED"]
    elif wanted not in (None, ""):
        raise invalid_argument(f"Invalid filter {wanted!r}.")
    return {"services": services}


def _enable(call: Call, project_id: str, services: list[str]) -> Any:
    for service in services:
        _check_name(service)
    op = operations.start(call.world, api="serviceusage.v1", project=project_id, kind="service_enable",
                          target=f"projects/{project_id}", then="serviceusage.enabled",
                          args={"project": project_id, "services": services},
                          metadata={"@type": "type.googleapis.com/google.api.serviceusage.v1.OperationMetadata",
                                    "resourceNames": [f"services/{s}/projectSettings/{project_id}" for s in services]},
                          now=call.now)
    return operations.as_longrunning(op, f"operations/{op['name']}")


@handles("serviceusage.services.enable")
def enable(call: Call) -> Any:
    project_id, service = _split(call.params["name"])
    return _enable(call, project_id, [service])


@handles("serviceusage.services.batchEnable")
def batch_enable(call: Call) -> Any:
    project_id = call.params["parent"].removeprefix("projects/")
    ids = (call.body or {}).get("serviceIds") or []
    if not ids or len(ids) > 20:
        raise invalid_argument("serviceIds must name 1 to 20 services.")
    return _enable(call, project_id, list(ids))


@handles("serviceusage.services.disable")
def disable(call: Call) -> Any:
    project_id, service = _split(call.params["name"])
    project = call.world.project(project_id)
    assert project is not None
    project["services"][service] = "DISABLED"
    op = operations.start(call.world, api="serviceusage.v1", project=project_id, kind="service_disable",
                          target=call.params["name"], after=0, now=call.now)
    return operations.as_longrunning(op, f"operations/{op['name']}")


@operations.completion("serviceusage.enabled")
def _enabled(world: World, op: dict[str, Any], _at: float) -> dict[str, Any]:
    project = world.project(op["args"]["project"])
    if project is None:
        raise ApiError(404, f"project {op['args']['project']} no longer exists")
    for service in op["args"]["services"]:
        project["services"][service] = "ENABLED"
    return {"@type": "type.googleapis.com/google.api.serviceusage.v1.EnableServiceResponse",
            "service": _service(project, op["args"]["services"][0])}


@handles("serviceusage.operations.get")
def get_operation(call: Call) -> Any:
    op = operations.find(call.world, call.params["name"])
    if op is None or op["api"] != "serviceusage.v1":
        raise ApiError(404, f"Operation {call.params['name']} not found.")
    return operations.as_longrunning(op, f"operations/{op['name']}")
