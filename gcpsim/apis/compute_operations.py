"""Compute Engine operations: zoneOperations, regionOperations, globalOperations.

https://cloud.google.com/compute/docs/reference/rest/v1/zoneOperations
`wait` answers at once with the operation as it stands: GCE documents that it returns when the
operation is DONE *or* on a deadline, "not guaranteed to be DONE" (zoneOperations/wait), and a
request here holds the world's lock, so it never sleeps; callers poll again as they must anyway.
"""

from __future__ import annotations

from typing import Any

from gcpsim.apis.compute_common import API, find_op, list_response, render_op
from gcpsim.routes import Call, handles


def _scope(call: Call) -> str:
    if "zone" in call.params:
        return f"zones/{call.params['zone']}"
    if "region" in call.params:
        return f"regions/{call.params['region']}"
    return "global"


def _get(call: Call) -> Any:
    return render_op(find_op(call, call.project_id, _scope(call), call.params["operation"]))


def _list(call: Call) -> Any:
    scope = _scope(call)
    ops = [render_op(op) for op in call.world.operations().values()
           if op["api"] == API and op["scope"] == scope and op["project"] == call.project_id]
    return list_response(call, "compute#operationList", f"projects/{call.project_id}/{scope}/operations", ops)


def _delete(call: Call) -> Any:
    op = find_op(call, call.project_id, _scope(call), call.params["operation"])
    del call.world.operations()[op["name"]]
    return None


for _family in ("zoneOperations", "regionOperations", "globalOperations"):
    handles(f"compute.{_family}.get")(_get)
    handles(f"compute.{_family}.wait")(_get)
    handles(f"compute.{_family}.list")(_list)
    handles(f"compute.{_family}.delete")(_delete)
