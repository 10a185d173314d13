"""GKE v1 operations: what a cluster or node pool mutation answers, and operations.get/list.

https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.operations
GKE's Operation is its own shape (not google.longrunning): name `operation-...`, operationType,
status PENDING/RUNNING/DONE, selfLink and targetLink under container.googleapis.com/v1 with the
project's number, startTime/endTime, and, when it failed, `error` (google.rpc.Status) beside the
older statusMessage. A cluster runs one operation at a time: a second mutation while one runs is
refused as GKE refuses it (400 FAILED_PRECONDITION, "Cluster is running incompatible operation
<name>.", ErrorInfo reason CLUSTER_ALREADY_HAS_OPERATION:
https://github.com/kubernetes-sigs/cluster-api-provider-gcp/issues/1363; and an `errors` entry of
reason failedPrecondition, which Go clients print as "..., failedPrecondition":
https://github.com/hashicorp/terraform-provider-google/issues/3650).
"""

from __future__ import annotations

import re
from typing import Any

from gcpsim import operations
from gcpsim.errors import ERROR_INFO, ApiError, invalid_argument
from gcpsim.routes import Call, handles
from gcpsim.state import World

API = "container.v1"
BASE = "https://container.googleapis.com/v1/"
CLUSTERS = "clusters"
NAME = re.compile(r"[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?")
NAME_RULE = ("Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?)' (only lowercase alphanumerics "
             "and '-' allowed, must start with a letter and end with an alphanumeric, and must be no longer "
             "than 40 characters).")


def not_found(path: str) -> ApiError:
    # https://github.com/sourcegraph/handbook/pull/6308: "Not found: projects/.../clusters/dogfood."
    return ApiError(404, f"Not found: {path}.")


def cluster_path(project_id: str, location: str, cluster: str) -> str:
    return f"projects/{project_id}/locations/{location}/clusters/{cluster}"


def check_name(name: str, field: str, label: str) -> None:
    """GKE's two answers for a cluster or node pool name ("cluster.name"/"Cluster",
    "node_pool.name"/"Node_pool")."""
    if len(name) > 40:
        raise invalid_argument(f"{label}.name must be less than 40 characters.")
    if not NAME.fullmatch(name):
        raise invalid_argument(f'Invalid value for field "{field}": "{name}". {NAME_RULE}')


def find_cluster(world: World, project_id: str, location: str, name: str) -> dict[str, Any]:
    found = world.collection(project_id, CLUSTERS).get(f"{location}/{name}")
    if found is None:
        raise not_found(cluster_path(project_id, location, name))
    return found


def busy(world: World, cluster: dict[str, Any]) -> None:
    """GKE refuses a mutation of a cluster while another of its operations runs."""
    running = cluster.get("operation")
    op = operations.find(world, running) if running else None
    if op is not None and not op["done"]:
        raise ApiError(400, f"Cluster is running incompatible operation {op['name']}.", status="FAILED_PRECONDITION",
                       reason="failedPrecondition", with_errors=True, details=[{"@type": ERROR_INFO, "reason": "CLUSTER_ALREADY_HAS_OPERATION",
                                 "domain": "container.googleapis.com", "metadata": {}}])


def start(call: Call, cluster: dict[str, Any], op_type: str, target: str, *, then: str,
          args: dict[str, Any], kind: str) -> dict[str, Any]:
    """Record the operation (the cluster's current one) and answer it as GKE does."""
    project_id = call.project_id
    op = operations.start(call.world, api=API, project=project_id, kind=kind, target=target,
                          scope=cluster["location"], then=then, args=args, now=call.now,
                          metadata={"operationType": op_type, "cluster": cluster["name"]})
    cluster["operation"] = op["name"]
    return render(call.world, op)


def render(world: World, op: dict[str, Any]) -> dict[str, Any]:
    project = world.project(op["project"])
    number = project["number"] if project else op["project"]
    location = op["scope"]
    out: dict[str, Any] = {
        "name": op["name"], "zone": location, "location": location,
        "operationType": op["metadata"]["operationType"], "status": "DONE" if op["done"] else "RUNNING",
        "selfLink": f"{BASE}projects/{number}/locations/{location}/operations/{op['name']}",
        "targetLink": BASE + op["target"].replace(f"projects/{op['project']}/", f"projects/{number}/", 1),
        "startTime": operations.rfc3339(op["created_at"])}
    if op["done"]:
        out["endTime"] = operations.rfc3339(op["done_at"])
        if op["error"]:
            out["error"] = {"code": operations.RPC_CODES.get(op["error"]["status"], 2),
                            "message": op["error"]["message"]}
            out["statusMessage"] = op["error"]["message"]
    return out


def _ours(world: World, params: dict[str, str]) -> bool:
    op = operations.find(world, params.get("name") or params.get("operationId", ""))
    return op is not None and op["api"] == API


def _find(call: Call, name: str) -> dict[str, Any]:
    op = operations.find(call.world, name)
    if op is None or op["api"] != API or op["project"] != call.project_id:
        raise not_found(name)
    return op


@handles("container.projects.locations.operations.get", claims=_ours)
def get(call: Call) -> Any:
    return render(call.world, _find(call, call.params["name"]))


@handles("container.projects.zones.operations.get")
def get_zonal(call: Call) -> Any:
    return render(call.world, _find(call, call.params["operationId"]))


def _list(call: Call, location: str) -> Any:
    ops = [op for op in call.world.operations().values()
           if op["api"] == API and op["project"] == call.project_id and location in ("-", op["scope"])]
    return {"operations": [render(call.world, op) for op in sorted(ops, key=lambda o: o["created_at"])]}


@handles("container.projects.locations.operations.list")
def list_(call: Call) -> Any:
    return _list(call, call.params["parent"].split("/")[3])


@handles("container.projects.zones.operations.list")
def list_zonal(call: Call) -> Any:
    return _list(call, call.params["zone"])
