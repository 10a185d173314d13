"""What every Compute Engine resource family shares: links, ids, lists, filters, operations.

Resources are stored as Compute's own JSON (camelCase, selfLink, id, creationTimestamp), with the
simulator's private bookkeeping under the key "_sim" (never rendered). Links are written as GCE
writes them, https://www.googleapis.com/compute/v1/projects/..., whatever endpoint the caller
used: clients compare links by their path and build request URLs from names, so nothing follows
them back to Google (the Terraform provider reads an operation by its selfLink only to recheck a
failed delete).

Mutations answer a compute#operation that is DONE some time later (the project's `delays`,
operations.py); an error found at admission that GCE reports inside the operation (quota,
stockout, a network in use) is such an operation, failed when it is due. Operation kinds
(delay keys): see each module.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any, Callable, Iterable

from gcpsim import operations
from gcpsim.errors import ApiError, already_exists, invalid_argument, not_found
from gcpsim.machines import MachineBackend
from gcpsim.routes import Call
from gcpsim.state import World

GCE = "https://www.googleapis.com/compute/v1/"
API = "compute.v1"
# GCE shows a limit it does not enforce as the largest int64 (e.g. LOCAL_SSD_TOTAL_GB: 9.22337e+18
# in `gcloud compute regions describe`, https://pastebin.com/9MY1rdpX).
UNLIMITED = 9.223372036854776e18

# HTTP reason phrases GCE puts in a failed operation's httpErrorMessage
# (https://github.com/GoogleCloudPlatform/ai-on-gke/issues/849: 403 FORBIDDEN).
HTTP_MESSAGES = {400: "BAD REQUEST", 403: "FORBIDDEN", 404: "NOT FOUND", 409: "CONFLICT",
                 412: "PRECONDITION FAILED", 503: "SERVICE UNAVAILABLE"}


# -- resources --------------------------------------------------------------------------------

def public(resource: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in resource.items() if not k.startswith("_")}


def new_id(world: World) -> str:
    """A uint64 as GCE ids are (19 digits), unique in the world."""
    return str(1_000_000_000_000_000_000 + world.next_id())


def stable_id(*parts: str) -> str:
    """An id that every process derives alike for a catalog entry (zones, machine types)."""
    return str(int(hashlib.sha256("/".join(parts).encode()).hexdigest(), 16) % 10**15)


def link(path: str) -> str:
    return GCE + path


def fingerprint(value: Any) -> str:
    """An opaque 8-byte fingerprint of a value, base64 as GCE writes them ("-goaeN2SGek=")."""
    digest = hashlib.sha256(json.dumps(value, sort_keys=True).encode()).digest()[:8]
    return base64.urlsafe_b64encode(digest).decode()


def stamp(resource: dict[str, Any], world: World, kind: str, path: str, now: float) -> dict[str, Any]:
    resource.update(kind=kind, id=new_id(world), selfLink=link(path),
                    creationTimestamp=operations.rfc3339(now))
    return resource


def collection(call_or_world: Call | World, project: str, name: str) -> dict[str, Any]:
    world = call_or_world.world if isinstance(call_or_world, Call) else call_or_world
    return world.collection(project, f"compute.{name}")


def get_or_404(items: dict[str, Any], key: str, path: str) -> dict[str, Any]:
    if key not in items:
        raise not_found(path)
    return items[key]


_REF = re.compile(r"(?:^|/)(?:projects/(?P<project>[^/]+)/)?(?:(?P<scope_kind>zones|regions)/(?P<scope>[^/]+)/|global/)?"
                  r"(?P<kind>[a-zA-Z]+)/(?P<name>[^/]+)$")


def parse_ref(value: str, kind: str, project: str, scope: str | None = None) -> tuple[str, str | None, str]:
    """A reference as callers write them (a full link, projects/p/regions/r/subnetworks/s,
    regions/r/subnetworks/s, or a bare name) -> (project, zone or region, name)."""
    if "/" not in value:
        return project, scope, value
    m = _REF.search(value)
    if m is None or m["kind"] != kind:
        raise invalid_argument(f"Invalid value for field '{kind}': '{value}'. The URL is malformed.")
    return m["project"] or project, m["scope"] or scope, m["name"]


def region_of(zone: str) -> str:
    return zone.rsplit("-", 1)[0]


def backend(world: World) -> MachineBackend:
    """The machine backend of the simulator serving this request (also from tickers)."""
    machines: MachineBackend = world.backend
    return machines

# GCE's wording for a bad name, e.g. "Invalid value for field 'resource.name': 'My_VM'. Must be a
# match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'".
NAME_REGEX = "(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)"


def check_name(body: dict[str, Any]) -> str:
    """The resource name GCE requires (RFC 1035, at most 63 characters)."""
    name = body.get("name")
    if not name:
        raise ApiError(400, "Required field 'resource.name' not specified", reason="required")
    if not re.fullmatch(NAME_REGEX, name):
        raise invalid_argument(f"Invalid value for field 'resource.name': '{name}'. "
                               f"Must be a match of regex '{NAME_REGEX}'")
    return str(name)


def insert_body(call: Call, project: str, kind: str, scope: str | None,
                path_of: Callable[[str], str]) -> tuple[dict[str, Any], str, str]:
    """An insert's (body, name, collection key), the name checked and not taken (409 as GCE
    answers: "The resource '<path>' already exists")."""
    body = require_body(call)
    name = check_name(body)
    key = f"{scope}/{name}" if scope else name
    if key in collection(call, project, kind):
        raise already_exists(path_of(name))
    return body, name, key


def admin_project(world: World, project: str) -> dict[str, Any]:
    """The project an admin endpoint names (404 in the simulator's words if there is none)."""
    found = world.project(project)
    if found is None:
        raise ApiError(404, f"no simulated project {project}")
    return found


SPOT_NOTICE_SECONDS = 30.0  # the notice Google gives a spot VM or TPU before it reclaims it


def preemption(body: Any, path: str, found: dict[str, Any] | None, state_key: str, ready: str) -> float:
    """The grace period of a preemption request for `found` (at `path`), refused where Google
    would not preempt it: missing, not spot, not `ready`, already being reclaimed."""
    grace = float((body or {}).get("grace_seconds", SPOT_NOTICE_SECONDS))
    if grace < 0:
        raise ApiError(400, "grace_seconds must be 0 or more")
    if found is None:
        raise ApiError(404, f"The resource '{path}' was not found")
    if not found["_sim"]["spot"]:
        raise ApiError(400, f"{path} is not Spot (or preemptible): Google does not preempt it")
    if found[state_key] != ready or found["_sim"].get("preempt_at"):
        raise ApiError(400, f"{path} is {found[state_key]}: only a {ready} one can be preempted")
    return grace


def require_body(call: Call) -> dict[str, Any]:
    """GCE's answer to an insert without a resource
    (https://github.com/stackql-registry/stackql-provider-google/issues/41)."""
    if not call.body:
        raise ApiError(400, "Required field 'resource' not specified", reason="required")
    return dict(call.body)


# -- lists ------------------------------------------------------------------------------------

_TERM = re.compile(r"\(?\s*(?P<field>[A-Za-z][\w.-]*)\s*(?P<op>!=|=|:|\beq\b|\bne\b)\s*"
                   r"(?P<value>\"[^\"]*\"|'[^']*'|[^\s()]+)\s*\)?")


def parse_filter(text: str | None) -> list[tuple[str, str, str]]:
    """A list filter as Compute takes it (`labels.managed-by = trainctl`, several terms joined
    by AND or written side by side in parentheses) -> [(field, op, value)]. Refused in GCE's
    words where it is not of that form."""
    if not text or not text.strip():
        return []
    terms, rest = [], text.strip()
    while rest:
        m = _TERM.match(rest)
        if m is None:
            raise invalid_argument(f"Invalid value for field 'filter': '{text}'. Invalid list filter expression.")
        value = m["value"].strip("\"'")
        op = {"eq": "=", "ne": "!="}.get(m["op"], m["op"])
        terms.append((m["field"], op, value))
        rest = re.sub(r"^\s*AND\s+", "", rest[m.end():].lstrip(), flags=re.I)
    return terms


def _field(resource: dict[str, Any], path: str) -> Any:
    value: Any = resource
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def matches(resource: dict[str, Any], terms: list[tuple[str, str, str]]) -> bool:
    for field, op, wanted in terms:
        value = _field(resource, field)
        if isinstance(value, str) and value.startswith(GCE):
            value = value.rsplit("/", 1)[-1]  # `zone = us-central1-a` compares the name
        text = "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        if op == ":":
            ok = value is not None and (wanted == "*" or re.fullmatch(wanted.replace("*", ".*"), text) is not None)
        else:
            ok = re.fullmatch(wanted.replace("*", ".*"), text) is not None if "*" in wanted else text == wanted
            ok = ok if op == "=" else not ok
        if not ok:
            return False
    return True


def page(call: Call, items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str | None]:
    """maxResults/pageToken as offsets: the token is opaque to callers."""
    start = int(call.arg("pageToken") or 0)
    size = int(call.arg("maxResults") or 500)
    chunk = items[start:start + size]
    return chunk, (str(start + size) if start + size < len(items) else None)


def list_response(call: Call, kind: str, path: str, resources: Iterable[dict[str, Any]]) -> dict[str, Any]:
    terms = parse_filter(call.arg("filter"))
    chosen = [public(r) for r in resources if matches(r, terms)]
    chosen.sort(key=lambda r: r.get("name", ""))
    items, token = page(call, chosen)
    out: dict[str, Any] = {"kind": kind, "id": path, "items": items, "selfLink": link(path)}
    if token:
        out["nextPageToken"] = token
    return out


def aggregated(call: Call, kind: str, project: str, key: str, scopes: Iterable[str],
               items_of: Callable[[str], list[dict[str, Any]]]) -> dict[str, Any]:
    """An aggregatedList: every scope ("zones/us-central1-a") present, those without results
    carrying the warning GCE gives them
    (https://cloud.google.com/compute/docs/reference/rest/v1/instances/aggregatedList)."""
    terms = parse_filter(call.arg("filter"))
    out: dict[str, Any] = {}
    for scope in scopes:
        found = [public(r) for r in items_of(scope) if matches(r, terms)]
        if found:
            out[scope] = {key: sorted(found, key=lambda r: r.get("name", ""))}
        else:
            out[scope] = {"warning": {"code": "NO_RESULTS_ON_PAGE",
                                      "message": f"There are no results for scope '{scope}' on this page.",
                                      "data": [{"key": "scope", "value": scope}]}}
    return {"kind": kind, "id": f"projects/{project}/aggregated/{key}", "items": out,
            "selfLink": link(f"projects/{project}/aggregated/{key}")}


# -- errors -----------------------------------------------------------------------------------

def in_use(kind: str, path: str, user_path: str) -> ApiError:
    """What GCE answers deleting a resource something still uses
    (https://github.com/genevieve/leftovers/issues/6: 'The subnetwork resource ... is already
    being used by ...', resourceInUseByAnotherResource)."""
    return ApiError(400, f"The {kind} resource '{path}' is already being used by '{user_path}'",
                    reason="resourceInUseByAnotherResource")


def operation_error(code: int, reason: str, message: str, details: list[dict[str, Any]] | None = None) -> ApiError:
    """An error GCE reports inside the operation: `reason` becomes errors[].code
    (QUOTA_EXCEEDED, ZONE_RESOURCE_POOL_EXHAUSTED, RESOURCE_IN_USE_BY_ANOTHER_RESOURCE)."""
    return ApiError(code, message, reason=reason, details=details or [])


# -- operations -------------------------------------------------------------------------------

def start_op(call: Call, project: str, scope: str, op_type: str, target: str, *, kind: str,
             then: str | None = None, args: dict[str, Any] | None = None,
             fail: ApiError | None = None, after: float | None = None) -> dict[str, Any]:
    """A compute#operation on `target` (a path), in `scope` ("zones/z", "regions/r", "global"),
    done after the project's delay for `kind`, running completion `then`, or failing with
    `fail` when it is due."""
    if fail is not None:
        then, args = "compute.fail", {"code": fail.code, "reason": fail.reason, "message": fail.message,
                                      "details": fail.details}
    op = operations.start(call.world, api=API, project=project, kind=kind, target=target, scope=scope,
                          then=then, args=args, after=after, now=call.now,
                          metadata={"operationType": op_type, "targetId": (args or {}).get("target_id", "")})
    return render_op(op)


@operations.completion("compute.fail")
def _fail(_world: World, op: dict[str, Any], _at: float) -> None:
    a = op["args"]
    raise operation_error(a["code"], a["reason"], a["message"], a["details"])


def render_op(op: dict[str, Any]) -> dict[str, Any]:
    project, scope = op["project"], op["scope"]
    base = f"projects/{project}/{scope}"
    out: dict[str, Any] = {
        "kind": "compute#operation", "id": str(int(op["created_at"] * 1000) % 10**19),
        "name": op["name"], "operationType": op["metadata"].get("operationType", ""),
        "targetLink": link(op["target"]), "status": "DONE" if op["done"] else "RUNNING",
        "progress": 100 if op["done"] else 0, "insertTime": operations.rfc3339(op["created_at"]),
        "startTime": operations.rfc3339(op["created_at"]), "selfLink": link(f"{base}/operations/{op['name']}")}
    if op["metadata"].get("targetId"):
        out["targetId"] = op["metadata"]["targetId"]
    if scope.startswith("zones/"):
        out["zone"] = link(f"projects/{project}/{scope}")
    elif scope.startswith("regions/"):
        out["region"] = link(f"projects/{project}/{scope}")
    if op["done"]:
        out["endTime"] = operations.rfc3339(op["done_at"])
    if op["done"] and op["error"]:
        e = op["error"]
        item: dict[str, Any] = {"code": e["reason"], "message": e["message"]}
        if e.get("details"):
            item["errorDetails"] = e["details"]
        out["error"] = {"errors": [item]}
        out["httpErrorStatusCode"] = e["code"]
        out["httpErrorMessage"] = HTTP_MESSAGES.get(e["code"], "ERROR")
    return out


def find_op(call: Call, project: str, scope: str, name: str) -> dict[str, Any]:
    op = operations.find(call.world, name)
    if op is None or op["api"] != API or op["scope"] != scope or op["project"] != project:
        raise not_found(f"projects/{project}/{scope}/operations/{name}")
    return op
