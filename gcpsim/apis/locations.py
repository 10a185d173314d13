"""What the APIs whose resources live under projects/<p>/locations/<l> share: finding a resource
by its full name, listing a parent's children, reading an update mask, and the
google.longrunning operations.get of APIs that share the `.../locations/l/operations/o` path
(Artifact Registry, Cloud Functions, Cloud Run, GKE and TPU: each claims only its own)."""

from __future__ import annotations

import re
from typing import Any

from gcpsim import operations
from gcpsim.errors import not_found
from gcpsim.routes import Call, handles
from gcpsim.state import World


def find(call: Call, collection: str, name: str) -> dict[str, Any]:
    """A resource of the request's project by its full name; the simulator's generic 404."""
    found = call.world.collection(call.project_id, collection).get(name)
    if found is None:
        raise not_found(name)
    return found


def children(call: Call, collection: str, kind: str) -> dict[str, Any]:
    """The list answer for `<parent>/<kind>/*` (a `-` location lists every location's)."""
    parent = call.params["parent"]
    pattern = re.escape(parent).replace(r"/locations/\-", "/locations/[^/]+") + f"/{kind}/"
    found = [r for n, r in sorted(call.world.collection(call.project_id, collection).items()) if re.match(pattern, n)]
    return {kind: found} if found else {}


def masked_fields(call: Call, settable: tuple[str, ...]) -> list[str]:
    """The top-level fields an update names: its mask (camelCase or snake_case, either query
    spelling), else every settable field its body has."""
    body = call.body or {}
    mask = call.arg("updateMask") or call.arg("update_mask")
    if not mask:
        return [k for k in settable if k in body]
    fields = [re.sub(r"_([a-z])", lambda m: m[1].upper(), f.strip()).split(".")[0] for f in mask.split(",")]
    return [f for f in dict.fromkeys(fields) if f in settable]


def operations_get(api: str, method_id: str) -> None:
    """Registers `method_id` as the google.longrunning operations.get of `api`."""
    def ours(world: World, params: dict[str, str]) -> bool:
        op = operations.find(world, params["name"])
        return op is not None and op["api"] == api

    def get_operation(call: Call) -> Any:
        op = operations.find(call.world, call.params["name"])
        if op is None or op["api"] != api:
            raise not_found(call.params["name"])
        return operations.as_longrunning(op, call.params["name"])

    handles(method_id, claims=ours)(get_operation)
