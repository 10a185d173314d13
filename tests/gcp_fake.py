"""A loopback fake of the Google REST endpoints trainctl calls (Compute v1, TPU v2, GKE v1).

The real client classes (transport="rest") talk to it, so the request shape (path, verb, query
parameters, body fields) is checked by the library itself and the answers are parsed by the
library's own JSON decoders. Field names in the answers follow Google's REST references:
  compute instances.getGuestAttributes  https://cloud.google.com/compute/docs/reference/rest/v1/instances/getGuestAttributes
  compute instances.aggregatedList      https://cloud.google.com/compute/docs/reference/rest/v1/instances/aggregatedList
  compute instances.delete              https://cloud.google.com/compute/docs/reference/rest/v1/instances/delete
  compute instances.get/insert/start    https://cloud.google.com/compute/docs/reference/rest/v1/instances
  tpu nodes (v2)                        https://cloud.google.com/tpu/docs/reference/rest/v2/projects.locations.nodes
  tpu queuedResources (v2)              https://cloud.google.com/tpu/docs/reference/rest/v2/projects.locations.queuedResources
  container clusters (v1)               https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters
  compute firewalls/networks.delete     https://cloud.google.com/compute/docs/reference/rest/v1/firewalls/delete
  compute routers/subnetworks.delete    https://cloud.google.com/compute/docs/reference/rest/v1/subnetworks/delete
  storage buckets get/delete, objects list/delete  https://cloud.google.com/storage/docs/json_api/v1
Anything it does not know (path, verb, query parameter, body field) is answered 400 in the API's
error shape, so a misspelt field or a wrong request type fails the test that sent it.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

# Parameters every generated REST client adds to each request (system parameters).
SYSTEM_PARAMS = {"$alt", "prettyPrint"}


class ApiError(Exception):
    def __init__(self, code: int, status: str, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.code, self.status, self.message, self.reason = code, status, message, reason


@dataclass
class Call:
    method: str
    path: str
    query: dict[str, list[str]]
    body: dict[str, Any] | None


@dataclass
class GoogleState:
    """What the fake cloud holds; tests fill it in their API's JSON shape (camelCase)."""
    # (project, zone, instance) -> {"labels": {...}, ...}; the name/zone fields are added on list
    instances: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    # (project, zone, instance) -> list of {"namespace","key","value"} guest attribute items
    instance_guest_attributes: dict[tuple[str, str, str], list[dict[str, str]]] = field(default_factory=dict)
    # full node name -> node JSON (v2 Node)
    tpu_nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    # full node name -> per worker (in worker order) list of guest attribute items
    tpu_guest_attributes: dict[str, list[list[dict[str, str]]]] = field(default_factory=dict)
    # full queued resource name -> QueuedResource JSON
    queued_resources: dict[str, dict[str, Any]] = field(default_factory=dict)
    # (project, location, cluster) -> Cluster JSON
    clusters: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    # (project, "global" or region, collection, name) for firewalls, networks, routers, subnetworks
    network_resources: set[tuple[str, str, str, str]] = field(default_factory=set)
    # such a resource -> how many more deletes GCE refuses with resourceInUseByAnotherResource
    in_use: dict[tuple[str, str, str, str], int] = field(default_factory=dict)
    # bucket name -> {"labels": {...}, "objects": {name: bytes}}
    buckets: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)


Handler = Callable[[GoogleState, re.Match[str], dict[str, list[str]], dict[str, Any] | None], Any]


@dataclass(frozen=True)
class Route:
    method: str
    pattern: re.Pattern[str]
    query: frozenset[str]  # allowed query parameters
    body: frozenset[str] | None  # allowed body fields; None: the request has no body
    handler: Handler


def _not_found(what: str) -> ApiError:
    return ApiError(404, "NOT_FOUND", f"The resource '{what}' was not found")


def _compute_operation(project: str, zone: str, kind: str, target: str) -> dict[str, Any]:
    return {"kind": "compute#operation", "id": "1", "name": f"operation-{kind}-{target}",
            "zone": f"https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}",
            "operationType": kind, "status": "DONE", "progress": 100,
            "targetLink": f"https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}/instances/{target}",
            "selfLink": f"https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}/operations/operation-{kind}-{target}"}


def _lro(name: str) -> dict[str, Any]:
    """A google.longrunning Operation as the TPU API returns it (still running)."""
    project_location = "/".join(name.split("/")[:4])
    return {"name": f"{project_location}/operations/operation-delete", "done": False,
            "metadata": {"@type": "type.googleapis.com/google.cloud.tpu.v2.OperationMetadata",
                         "target": name, "verb": "delete"}}


def instance_guest_attributes(s: GoogleState, m: re.Match[str], q: dict[str, list[str]], _b: Any) -> Any:
    key = (m["project"], m["zone"], m["instance"])
    if key not in s.instances:
        raise _not_found(f"projects/{key[0]}/zones/{key[1]}/instances/{key[2]}")
    path = q.get("queryPath", [""])[0]
    namespace = path.rstrip("/")
    items = [i for i in s.instance_guest_attributes.get(key, []) if i["namespace"] == namespace]
    if not items:
        # What GCE answers before the guest agent has published anything under the path.
        raise _not_found(f"guest attributes {path}")
    return {"kind": "compute#guestAttributes", "queryPath": path,
            "selfLink": f"https://www.googleapis.com/compute/v1/projects/{key[0]}/zones/{key[1]}/instances/{key[2]}/guestAttributes",
            "queryValue": {"items": items}}


def aggregated_instances(s: GoogleState, m: re.Match[str], q: dict[str, list[str]], _b: Any) -> Any:
    wanted = q.get("filter", [""])[0]
    label = re.fullmatch(r"labels\.([a-z0-9_-]+)\s*=\s*(\S+)", wanted) if wanted else None
    if wanted and label is None:
        raise ApiError(400, "INVALID_ARGUMENT", f"Invalid value for field 'filter': '{wanted}'")
    zones: dict[str, Any] = {}
    for (project, zone, name), inst in s.instances.items():
        if project != m["project"]:
            continue
        if label and inst.get("labels", {}).get(label[1]) != label[2]:
            continue
        zones.setdefault(f"zones/{zone}", {"instances": []})["instances"].append(
            {"kind": "compute#instance", "name": name, "status": "RUNNING",
             "zone": f"https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}", **inst})
    # Zones with nothing come back with a warning instead of instances, as the real API does.
    zones.setdefault("zones/europe-west4-a", {"warning": {
        "code": "NO_RESULTS_ON_PAGE", "message": "There are no results for scope 'zones/europe-west4-a' on this page.",
        "data": [{"key": "scope", "value": "zones/europe-west4-a"}]}})
    return {"kind": "compute#instanceAggregatedList", "id": f"projects/{m['project']}/aggregated/instances",
            "items": zones}


def get_instance(s: GoogleState, m: re.Match[str], _q: Any, _b: Any) -> Any:
    key = (m["project"], m["zone"], m["instance"])
    if key not in s.instances:
        raise _not_found(f"projects/{key[0]}/zones/{key[1]}/instances/{key[2]}")
    return {"kind": "compute#instance", "name": key[2], "status": "RUNNING",
            "zone": f"https://www.googleapis.com/compute/v1/projects/{key[0]}/zones/{key[1]}",
            **s.instances[key]}


def delete_instance(s: GoogleState, m: re.Match[str], _q: Any, _b: Any) -> Any:
    key = (m["project"], m["zone"], m["instance"])
    if s.instances.pop(key, None) is None:
        raise _not_found(f"projects/{key[0]}/zones/{key[1]}/instances/{key[2]}")
    return _compute_operation(key[0], key[1], "delete", key[2])


def insert_instance(s: GoogleState, m: re.Match[str], _q: Any, body: dict[str, Any] | None) -> Any:
    key = (m["project"], m["zone"], (body or {})["name"])
    if key in s.instances:
        raise ApiError(409, "ALREADY_EXISTS", f"The resource 'projects/{key[0]}/zones/{key[1]}/instances/{key[2]}' already exists")
    s.instances[key] = {k: v for k, v in (body or {}).items() if k != "name"}
    return _compute_operation(key[0], key[1], "insert", key[2])


def start_instance(s: GoogleState, m: re.Match[str], _q: Any, _b: Any) -> Any:
    key = (m["project"], m["zone"], m["instance"])
    if key not in s.instances:
        raise _not_found(f"projects/{key[0]}/zones/{key[1]}/instances/{key[2]}")
    s.instances[key]["status"] = "RUNNING"
    return _compute_operation(key[0], key[1], "start", key[2])


def _in_location(name: str, project: str, location: str) -> bool:
    parts = name.split("/")
    return parts[1] == project and location in ("-", parts[3])


def list_tpu_nodes(s: GoogleState, m: re.Match[str], _q: Any, _b: Any) -> Any:
    return {"nodes": [{"name": n, **node} for n, node in s.tpu_nodes.items()
                      if _in_location(n, m["project"], m["location"])]}


def tpu_guest_attributes(s: GoogleState, m: re.Match[str], _q: Any, body: dict[str, Any] | None) -> Any:
    name = m["name"]
    if name not in s.tpu_nodes:
        raise _not_found(name)
    path = (body or {}).get("queryPath", "")
    namespace = path.rstrip("/")
    workers = s.tpu_guest_attributes.get(name, [])
    wanted = (body or {}).get("workerIds")
    chosen = [w for i, w in enumerate(workers) if not wanted or str(i) in wanted]
    return {"guestAttributes": [
        {"queryPath": path, "queryValue": {"items": [i for i in w if i["namespace"] == namespace]}}
        for w in chosen]}


def get_tpu_node(s: GoogleState, m: re.Match[str], _q: Any, _b: Any) -> Any:
    if m["name"] not in s.tpu_nodes:
        raise _not_found(m["name"])
    return {"name": m["name"], "state": "READY", **s.tpu_nodes[m["name"]]}


def delete_tpu_node(s: GoogleState, m: re.Match[str], _q: Any, _b: Any) -> Any:
    if s.tpu_nodes.pop(m["name"], None) is None:
        raise _not_found(m["name"])
    return _lro(m["name"])


def create_tpu_node(s: GoogleState, m: re.Match[str], q: dict[str, list[str]], body: dict[str, Any] | None) -> Any:
    name = f"projects/{m['project']}/locations/{m['location']}/nodes/{q['nodeId'][0]}"
    if name in s.tpu_nodes:
        raise ApiError(409, "ALREADY_EXISTS", f"{name} already exists")
    s.tpu_nodes[name] = {**(body or {}), "state": "READY"}
    return {**_lro(name), "metadata": {"@type": "type.googleapis.com/google.cloud.tpu.v2.OperationMetadata",
                                       "target": name, "verb": "create"}}


def get_tpu_operation(s: GoogleState, m: re.Match[str], _q: Any, _b: Any) -> Any:
    """Every TPU operation of the fake has finished by the time it is polled."""
    return {"name": m["name"], "done": True,
            "response": {"@type": "type.googleapis.com/google.protobuf.Empty"}}


def list_queued(s: GoogleState, m: re.Match[str], _q: Any, _b: Any) -> Any:
    return {"queuedResources": [{"name": n, **qr} for n, qr in s.queued_resources.items()
                                if _in_location(n, m["project"], m["location"])]}


def delete_queued(s: GoogleState, m: re.Match[str], q: dict[str, list[str]], _b: Any) -> Any:
    qr = s.queued_resources.get(m["name"])
    if qr is None:
        raise _not_found(m["name"])
    if qr.get("state", {}).get("state") == "ACTIVE" and q.get("force") != ["true"]:
        # The API refuses to delete a queued resource whose TPU exists unless force is set.
        raise ApiError(400, "FAILED_PRECONDITION", "queued resource is ACTIVE; use force")
    del s.queued_resources[m["name"]]
    return _lro(m["name"])


def list_clusters(s: GoogleState, m: re.Match[str], _q: Any, _b: Any) -> Any:
    return {"clusters": [{"name": c, "location": loc, **cl} for (p, loc, c), cl in s.clusters.items()
                         if p == m["project"] and m["location"] in ("-", loc)]}


def delete_cluster(s: GoogleState, m: re.Match[str], _q: Any, _b: Any) -> Any:
    key = (m["project"], m["location"], m["cluster"])
    cluster = s.clusters.get(key)
    if cluster is None:
        raise _not_found(f"projects/{key[0]}/locations/{key[1]}/clusters/{key[2]}")
    if cluster.get("deletionProtection"):
        raise ApiError(400, "FAILED_PRECONDITION", "Cannot delete cluster: deletion protection is enabled")
    del s.clusters[key]
    return {"name": f"operation-delete-{key[2]}", "zone": key[1], "operationType": "DELETE_CLUSTER",
            "status": "RUNNING", "selfLink": f"https://container.googleapis.com/v1/projects/{key[0]}/locations/{key[1]}/operations/operation-delete-{key[2]}",
            "targetLink": f"https://container.googleapis.com/v1/projects/{key[0]}/locations/{key[1]}/clusters/{key[2]}"}


IN_USE = "resourceInUseByAnotherResource"


def delete_network_resource(s: GoogleState, m: re.Match[str], _q: Any, _b: Any) -> Any:
    scope = m.groupdict().get("region") or "global"
    key = (m["project"], scope, m["collection"], m["name"])
    where = f"projects/{key[0]}/{'global' if scope == 'global' else 'regions/' + scope}/{key[2]}/{key[3]}"
    if key not in s.network_resources:
        raise _not_found(where)
    if s.in_use.get(key, 0) > 0:
        s.in_use[key] -= 1
        raise ApiError(400, "BAD_REQUEST", f"The {key[2][:-1]} resource '{where}' is already being used by "
                                           f"'projects/{key[0]}/zones/{scope}-a/instances/vm'", reason=IN_USE)
    s.network_resources.discard(key)
    base = f"https://www.googleapis.com/compute/v1/projects/{key[0]}"
    scope_url = f"{base}/global" if scope == "global" else f"{base}/regions/{scope}"
    return {"kind": "compute#operation", "id": "2", "name": f"operation-delete-{key[3]}",
            **({} if scope == "global" else {"region": scope_url}),
            "operationType": "delete", "status": "DONE", "progress": 100,
            "targetLink": f"{scope_url}/{key[2]}/{key[3]}",
            "selfLink": f"{scope_url}/operations/operation-delete-{key[3]}"}


def _bucket(s: GoogleState, name: str) -> dict[str, Any]:
    if name not in s.buckets:
        raise _not_found(f"b/{name}")
    return s.buckets[name]


def get_bucket(s: GoogleState, m: re.Match[str], _q: Any, _b: Any) -> Any:
    return {"kind": "storage#bucket", "id": m["bucket"], "name": m["bucket"],
            "labels": _bucket(s, m["bucket"])["labels"]}


def list_objects(s: GoogleState, m: re.Match[str], q: dict[str, list[str]], _b: Any) -> Any:
    # GCS pages in name order and its token continues after the last name given, so objects
    # deleted meanwhile move nothing; small pages make the caller follow them.
    after = (q.get("pageToken") or [""])[0]
    names = [n for n in sorted(_bucket(s, m["bucket"])["objects"]) if n > after]
    size = int((q.get("maxResults") or ["2"])[0])
    page = names[:size]
    more = {"nextPageToken": page[-1]} if len(names) > size else {}
    return {"kind": "storage#objects", **more,
            "items": [{"kind": "storage#object", "bucket": m["bucket"], "name": n} for n in page]}


def delete_object(s: GoogleState, m: re.Match[str], _q: Any, _b: Any) -> Any:
    name = unquote(m["object"])
    if _bucket(s, m["bucket"])["objects"].pop(name, None) is None:
        raise _not_found(f"b/{m['bucket']}/o/{name}")
    return {}


def delete_bucket(s: GoogleState, m: re.Match[str], _q: Any, _b: Any) -> Any:
    if _bucket(s, m["bucket"])["objects"]:
        raise ApiError(409, "CONFLICT", "The bucket you tried to delete is not empty.")
    del s.buckets[m["bucket"]]
    return {}


_SEG = r"[^/:?]+"
_NODE = rf"projects/{_SEG}/locations/{_SEG}/nodes/{_SEG}"
_QR = rf"projects/{_SEG}/locations/{_SEG}/queuedResources/{_SEG}"
_PAGING = frozenset({"pageSize", "pageToken"})

ROUTES: tuple[Route, ...] = (
    Route("GET", re.compile(rf"/compute/v1/projects/(?P<project>{_SEG})/zones/(?P<zone>{_SEG})"
                            rf"/instances/(?P<instance>{_SEG})/getGuestAttributes"),
          frozenset({"queryPath", "variableKey"}), None, instance_guest_attributes),
    Route("GET", re.compile(rf"/compute/v1/projects/(?P<project>{_SEG})/aggregated/instances"),
          frozenset({"filter", "includeAllScopes", "maxResults", "orderBy", "pageToken",
                     "returnPartialSuccess", "serviceProjectNumber"}), None, aggregated_instances),
    Route("DELETE", re.compile(rf"/compute/v1/projects/(?P<project>{_SEG})/zones/(?P<zone>{_SEG})"
                               rf"/instances/(?P<instance>{_SEG})"),
          frozenset({"requestId", "noGracefulShutdown"}), None, delete_instance),
    Route("GET", re.compile(rf"/compute/v1/projects/(?P<project>{_SEG})/zones/(?P<zone>{_SEG})"
                            rf"/instances/(?P<instance>{_SEG})"), frozenset(), None, get_instance),
    Route("POST", re.compile(rf"/compute/v1/projects/(?P<project>{_SEG})/zones/(?P<zone>{_SEG})"
                             rf"/instances/(?P<instance>{_SEG})/start"), frozenset({"requestId"}), None,
          start_instance),
    Route("POST", re.compile(rf"/compute/v1/projects/(?P<project>{_SEG})/zones/(?P<zone>{_SEG})/instances"),
          frozenset({"requestId", "sourceInstanceTemplate", "sourceMachineImage"}),
          frozenset({"name", "machineType", "labels", "scheduling", "metadata", "status"}), insert_instance),
    Route("GET", re.compile(rf"/v2/projects/(?P<project>{_SEG})/locations/(?P<location>{_SEG})/nodes"),
          _PAGING, None, list_tpu_nodes),
    Route("POST", re.compile(rf"/v2/(?P<name>{_NODE}):getGuestAttributes"),
          frozenset(), frozenset({"queryPath", "workerIds"}), tpu_guest_attributes),
    Route("DELETE", re.compile(rf"/v2/(?P<name>{_NODE})"), frozenset({"requestId"}), None, delete_tpu_node),
    Route("POST", re.compile(rf"/v2/projects/(?P<project>{_SEG})/locations/(?P<location>{_SEG})/nodes"),
          frozenset({"nodeId", "requestId"}),
          frozenset({"acceleratorType", "runtimeVersion", "labels", "metadata", "tags", "schedulingConfig"}),
          create_tpu_node),
    Route("GET", re.compile(rf"/v2/(?P<name>projects/{_SEG}/locations/{_SEG}/operations/{_SEG})"),
          frozenset(), None, get_tpu_operation),
    Route("GET", re.compile(rf"/v2/(?P<name>{_NODE})"), frozenset(), None, get_tpu_node),
    Route("GET", re.compile(rf"/v2/projects/(?P<project>{_SEG})/locations/(?P<location>{_SEG})/queuedResources"),
          _PAGING, None, list_queued),
    Route("DELETE", re.compile(rf"/v2/(?P<name>{_QR})"), frozenset({"requestId", "force"}), None, delete_queued),
    Route("GET", re.compile(rf"/v1/projects/(?P<project>{_SEG})/locations/(?P<location>{_SEG})/clusters"),
          frozenset({"projectId", "zone"}), None, list_clusters),
    Route("DELETE", re.compile(rf"/v1/projects/(?P<project>{_SEG})/locations/(?P<location>{_SEG})"
                               rf"/clusters/(?P<cluster>{_SEG})"),
          frozenset({"projectId", "zone", "clusterId"}), None, delete_cluster),
    Route("DELETE", re.compile(rf"/compute/v1/projects/(?P<project>{_SEG})/global"
                               rf"/(?P<collection>firewalls|networks)/(?P<name>{_SEG})"),
          frozenset({"requestId"}), None, delete_network_resource),
    Route("DELETE", re.compile(rf"/compute/v1/projects/(?P<project>{_SEG})/regions/(?P<region>{_SEG})"
                               rf"/(?P<collection>routers|subnetworks)/(?P<name>{_SEG})"),
          frozenset({"requestId"}), None, delete_network_resource),
    Route("GET", re.compile(rf"/storage/v1/b/(?P<bucket>{_SEG})"), frozenset({"projection"}), None, get_bucket),
    Route("GET", re.compile(rf"/storage/v1/b/(?P<bucket>{_SEG})/o"),
          frozenset({"projection", "maxResults", "pageToken", "prefix", "delimiter", "versions",
                     "includeTrailingDelimiter", "matchGlob", "startOffset", "endOffset"}), None, list_objects),
    Route("DELETE", re.compile(rf"/storage/v1/b/(?P<bucket>{_SEG})/o/(?P<object>{_SEG})"),
          frozenset({"generation"}), None, delete_object),
    Route("DELETE", re.compile(rf"/storage/v1/b/(?P<bucket>{_SEG})"), frozenset(), None, delete_bucket),
)


def _dispatch(state: GoogleState, method: str, raw_path: str, raw_body: bytes) -> tuple[int, Any]:
    url = urlsplit(raw_path)
    query = parse_qs(url.query, keep_blank_values=True)
    body = json.loads(raw_body) if raw_body else None
    state.calls.append(Call(method, url.path, query, body))
    for route in ROUTES:
        m = route.pattern.fullmatch(url.path)
        if m is None or route.method != method:
            continue
        unknown = set(query) - route.query - SYSTEM_PARAMS
        if unknown:
            raise ApiError(400, "INVALID_ARGUMENT", f"Invalid JSON payload received. Unknown name "
                                                    f"{sorted(unknown)!r}: Cannot bind query parameter.")
        if route.body is None and body:
            raise ApiError(400, "INVALID_ARGUMENT", f"{method} {url.path} takes no request body")
        if route.body is not None:
            extra = set(body or {}) - route.body
            if extra:
                raise ApiError(400, "INVALID_ARGUMENT", f"Invalid JSON payload received. Unknown name "
                                                        f"{sorted(extra)!r}: Cannot find field.")
        return 200, route.handler(state, m, query, body)
    raise ApiError(400, "INVALID_ARGUMENT", f"the fake knows no {method} {url.path}")


class _Handler(BaseHTTPRequestHandler):
    server: "FakeGoogleServer"

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            code, payload = _dispatch(self.server.state, self.command, self.path, raw)
        except ApiError as e:
            self.server.errors.append(f"{self.command} {self.path}: {e.code} {e.message}")
            code, payload = e.code, {"error": {"code": e.code, "message": e.message, "status": e.status}}
            if e.reason:  # Compute's errors name their reason, as GCE's answers do
                payload["error"]["errors"] = [{"message": e.message, "domain": "global", "reason": e.reason}]
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = do_PATCH = do_PUT = _serve

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass


class FakeGoogleServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = GoogleState()
        # 4xx answers other than 404 mean the client sent something the API would refuse.
        self.errors: list[str] = []
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def start(self) -> "FakeGoogleServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join()

    def refused(self) -> list[str]:
        """Answers that say the request was wrong; not found and in use are states, not faults."""
        return [e for e in self.errors if ": 404 " not in e and "is already being used by" not in e]


@pytest.fixture
def google(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGoogleServer]:
    """The fake, with every Google client trainctl makes pointed at it; it must refuse nothing."""
    from infra.gcp.reaper import API_ENDPOINT_ENV

    server = FakeGoogleServer().start()
    monkeypatch.setenv(API_ENDPOINT_ENV, server.endpoint)
    try:
        yield server
    finally:
        server.stop()
    assert server.refused() == []

