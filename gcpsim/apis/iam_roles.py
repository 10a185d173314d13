"""IAM v1 custom roles of a project: create, get, list, patch, delete (soft), undelete.

https://cloud.google.com/iam/docs/reference/rest/v1/projects.roles
A deleted role stays readable with `deleted: true` and its id stays taken until it is undeleted
or purged (https://cloud.google.com/iam/docs/creating-custom-roles#deleting-custom-role): the
Pulumi provider's create reads the role first and undeletes + patches a deleted one, so the
simulator keeps deleted roles (it never purges them).

Permission checks (where cheap): a permission is `<service>.<resource>.<verb>`; for Compute
Engine and Cloud TPU, whose permission resources are the APIs' own collections, the resource
must be one the API's discovery document has (case-insensitively: `tpu.acceleratortypes.list`),
else "Permission <p> is not valid." as IAM answers. Other services' permissions are taken as
given (GKE's include Kubernetes resources no discovery document lists).
Chosen: a create over an existing or deleted role answers the simulator's generic 409, whose
wording no source gave; the provider checks with `get` first.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Iterator

from gcpsim import discovery
from gcpsim.apis import iam_policy
from gcpsim.errors import already_exists, invalid_argument, not_found
from gcpsim.routes import Call, handles

ROLES = "roles"
ROLE_ID = re.compile(r"[a-zA-Z0-9_.]{3,64}")
CHECKED_SERVICES = {"compute": "compute.v1", "tpu": "tpu.v2"}
FIELDS = ("title", "description", "includedPermissions", "stage")


def _walk(resources: dict[str, Any]) -> Iterator[str]:
    for name, resource in resources.items():
        yield name.lower()
        yield from _walk(resource.get("resources", {}))


@functools.cache
def _collections(api_key: str) -> frozenset[str]:
    return frozenset(_walk(discovery.api(api_key).doc.get("resources", {})))


def check_permission(permission: str) -> None:
    parts = permission.split(".")
    # https://github.com/terraform-google-modules/terraform-google-iam/issues/158
    invalid = invalid_argument(f"Permission {permission} is not valid.")
    if len(parts) != 3 or not all(re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", p) for p in parts):
        raise invalid
    api_key = CHECKED_SERVICES.get(parts[0])
    if api_key and parts[1].lower() not in _collections(api_key):
        raise invalid


def _role(call: Call, name: str) -> dict[str, Any]:
    _, project_ref, _, role_id = name.split("/", 3)
    project = call.world.project(project_ref)
    role = call.world.collection(project["id"], ROLES).get(role_id) if project else None
    if role is None:
        raise not_found(name)
    return role


def _check(role: dict[str, Any]) -> None:
    for permission in role.get("includedPermissions") or []:
        check_permission(permission)


@handles("iam.projects.roles.create")
def create(call: Call) -> Any:
    body = call.body or {}
    given = dict(body.get("role") or {})
    if given.get("name"):
        # https://github.com/pulumi/pulumi-google-native/issues/209
        raise invalid_argument("Must not specify role.name.")
    role_id = body.get("roleId") or ""
    if not ROLE_ID.fullmatch(role_id):
        raise invalid_argument("Request contains an invalid argument.")
    _check(given)
    roles = call.world.collection(call.project_id, ROLES)
    name = f"projects/{call.project_id}/roles/{role_id}"
    if role_id in roles:
        raise already_exists(name)
    roles[role_id] = {"name": name, "stage": "ALPHA", **{k: given[k] for k in FIELDS if k in given},
                      "etag": iam_policy.etag_for(call.world.next_id())}
    return roles[role_id]


@handles("iam.projects.roles.get")
def get(call: Call) -> Any:
    return _role(call, call.params["name"])


@handles("iam.projects.roles.list")
def list_(call: Call) -> Any:
    roles = call.world.collection(call.project_id, ROLES)
    shown = [roles[k] for k in sorted(roles) if call.arg("showDeleted") == "true" or not roles[k].get("deleted")]
    return {"roles": shown} if shown else {}


@handles("iam.projects.roles.patch")
def patch(call: Call) -> Any:
    role = _role(call, call.params["name"])
    given = call.body or {}
    mask = call.arg("updateMask")
    fields = [f.strip() for f in mask.split(",")] if mask else [f for f in FIELDS if f in given]
    changed = {f: given.get(f) for f in fields if f in FIELDS}
    _check(changed)
    role.update({k: v for k, v in changed.items() if v is not None})
    role["etag"] = iam_policy.etag_for(call.world.next_id())
    return role


@handles("iam.projects.roles.delete")
def delete(call: Call) -> Any:
    role = _role(call, call.params["name"])
    role.update(deleted=True, etag=iam_policy.etag_for(call.world.next_id()))
    return role


@handles("iam.projects.roles.undelete")
def undelete(call: Call) -> Any:
    role = _role(call, call.params["name"])
    role.pop("deleted", None)
    role["etag"] = iam_policy.etag_for(call.world.next_id())
    return role
