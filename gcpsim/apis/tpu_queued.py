"""Cloud TPU v2 queued resources: a request for TPU nodes that waits for capacity.

https://cloud.google.com/tpu/docs/reference/rest/v2/projects.locations.queuedResources
https://cloud.google.com/tpu/docs/queued-resources (the states)
  - create (?queuedResourceId=): each nodeSpec's node is checked as nodes.create checks it (a
    multislice nodeSpec's multisliceParams: nodeCount > 1 nodes `<nodeIdPrefix>-<i>`, all of them)
    (type, runtime, quota: 429 at once); the request is ACCEPTED, WAITING_FOR_RESOURCES after
    `tpu_qr_accept`, and stays there while its zone is stocked out (or before validAfter); then
    PROVISIONING, and ACTIVE after `tpu_qr_provision`, when the nodes it grants are created
    (READY, `queuedResource` naming it). Past validUntil while waiting: FAILED (failedData);
    capacity frees up `tpu_qr_grant` seconds after WAITING_FOR_RESOURCES began (the queue's own
    wait, which a stockout lengthens); a request on reserved capacity (`reservationName`, or its
    node's `schedulingConfig.reserved`) is served from the reservation, so a stockout does not
    hold it; an ACTIVE one whose node is preempted is SUSPENDED (stateInitiator SERVICE) and is
    not granted again (the states' page: "When a request is in the SUSPENDED state, it's no
    longer eligible for further allocation"); the page says its resources are deleted, but users
    report suspended queued resources still holding TPU quota until deleted
    (marin-community/marin#87), so the simulator keeps the preempted node until then;
  - delete: refused (FAILED_PRECONDITION) while its nodes exist unless force=true, which deletes
    them first ("the queued resource will only be deleted if its nodes have already been
    deleted or the queued resource is in the ACCEPTED, FAILED, or SUSPENDED state" — the API's
    `force` parameter; the refusal's words are the simulator's).
Delay keys: tpu_qr_create, tpu_qr_accept, tpu_qr_provision, tpu_qr_delete; and tpu_qr_grant, the
queue's wait (no operation: 0 unless the project file names it, whatever default_delay says).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from gcpsim import operations
from gcpsim.apis import tpu, tpu_nodes
from gcpsim.apis.compute_capacity import stocked_out
from gcpsim.apis.compute_common import public
from gcpsim.errors import ApiError, already_exists, invalid_argument, not_found
from gcpsim.routes import Call, handles
from gcpsim.state import World, ticker


def queued(world: World, project: str) -> dict[str, Any]:
    return world.collection(project, "tpu.queuedResources")


def qr_path(project: str, zone: str, qr_id: str) -> str:
    return f"projects/{project}/locations/{zone}/queuedResources/{qr_id}"


def _after(now: float, duration: str | None) -> float | None:
    """now + a google-duration ("3600s")."""
    return None if not duration else now + float(duration.rstrip("s"))


def _timestamp(value: str | None) -> float | None:
    return None if not value else datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _window(policy: dict[str, Any], now: float) -> tuple[float | None, float | None]:
    after = _timestamp(policy.get("validAfterTime")) or _after(now, policy.get("validAfterDuration"))
    until = _timestamp(policy.get("validUntilTime")) or _after(now, policy.get("validUntilDuration"))
    interval = policy.get("validInterval") or {}
    return after or _timestamp(interval.get("startTime")), until or _timestamp(interval.get("endTime"))


def node_ids(spec: dict[str, Any], qr_id: str) -> list[str]:
    """The nodes one nodeSpec asks for: its nodeId, or multisliceParams' nodeCount nodes named
    `<nodeIdPrefix>-<i>` (the prefix defaults to the queued resource's id)."""
    multi = spec.get("multisliceParams")
    if not multi:
        return [spec.get("nodeId") or ""]
    prefix = multi.get("nodeIdPrefix") or qr_id
    return [f"{prefix}-{i}" for i in range(int(multi.get("nodeCount") or 0))]


def _check_specs(world: World, project: str, zone: str, qr_id: str, specs: list[dict[str, Any]],
                 spot: bool) -> None:
    if not specs:
        raise invalid_argument("Required field 'tpu.node_spec' is empty.")
    p = world.project(project)
    assert p is not None
    asked: dict[str, int] = {}  # quota units this request takes, per generation
    for spec in specs:
        count = int((spec.get("multisliceParams") or {}).get("nodeCount") or 0)
        if spec.get("multisliceParams") and count <= 1:  # the field's own words: "This needs to be > 1."
            raise invalid_argument("tpu.node_spec.multislice_params.node_count needs to be > 1.")
        if not spec.get("node") or not all(node_ids(spec, qr_id)):
            raise invalid_argument("Each tpu.node_spec needs node_id (or multislice_params) and node.")
        for node_id in node_ids(spec, qr_id):
            if f"{zone}/{node_id}" in tpu_nodes.nodes(world, project):
                raise already_exists(tpu_nodes.node_path(project, zone, node_id))
            t = tpu.tpu_type(zone, spec["node"], project, node_id)
            used = tpu_nodes._used(world, project, zone, t.generation, spot) + asked.get(t.generation, 0)
            error = tpu.quota_error(world, p, zone, t, spot, used)
            if error is not None:
                raise error
            asked[t.generation] = asked.get(t.generation, 0) + tpu.quota_units(t)


def _reserved(body: dict[str, Any], specs: list[dict[str, Any]]) -> bool:
    return bool(body.get("reservationName")) or any(
        (spec["node"].get("schedulingConfig") or {}).get("reserved") for spec in specs)


@handles("tpu.projects.locations.queuedResources.create")
def create(call: Call) -> Any:
    project, zone = tpu.parent_of(call)
    tpu.check_location(project, zone)
    qr_id = call.arg("queuedResourceId") or ""
    path = qr_path(project, zone, qr_id)
    if not tpu_nodes.ID_PATTERN.fullmatch(qr_id):
        raise invalid_argument(f"Invalid queued resource id \"{qr_id}\".")
    if f"{zone}/{qr_id}" in queued(call.world, project):
        raise already_exists(path)
    body = dict(call.body or {})
    specs = (body.get("tpu") or {}).get("nodeSpec") or []
    # the request's spot tier, or its node's own scheduling (as Google's spot sample asks for one)
    spot = "spot" in body or any((s.get("node") or {}).get("schedulingConfig", {}).get(k)
                                 for s in specs for k in ("spot", "preemptible"))
    _check_specs(call.world, project, zone, qr_id, specs, spot)
    after, until = _window(body.get("queueingPolicy") or {}, call.now)
    accept = call.now + operations.delay(call.world, project, "tpu_qr_accept")
    # The queue's own wait is no operation: default_delay leaves it alone, 0 unless named.
    grant = accept + float((call.world.project(project) or {}).get("delays", {}).get("tpu_qr_grant", 0.0))
    queued(call.world, project)[f"{zone}/{qr_id}"] = {
        **body, "name": path, "createTime": operations.rfc3339(call.now),
        "state": {"state": "ACCEPTED", "stateInitiator": "USER", "acceptedData": {}},
        "_sim": {"zone": zone, "spot": spot, "next": ["WAITING_FOR_RESOURCES", accept], "after": after, "until": until,
                 "grant": grant, "reserved": _reserved(body, specs)}}
    return tpu.start_op(call, project, zone, "create", path, kind="tpu_qr_create", now=call.now,
                        then="tpu.qr.response", args={"project": project, "key": f"{zone}/{qr_id}"})


@operations.completion("tpu.qr.response")
def _response(world: World, op: dict[str, Any], _at: float) -> dict[str, Any] | None:
    qr = queued(world, op["args"]["project"]).get(op["args"]["key"])
    return None if qr is None else {"@type": tpu.QR_TYPE, **public(qr)}


def _qr(call: Call) -> tuple[str, str, str, dict[str, Any]]:
    project, zone, qr_id = tpu.split_name(call)
    qr = queued(call.world, project).get(f"{zone}/{qr_id}")
    if qr is None:
        raise not_found(qr_path(project, zone, qr_id))
    return project, zone, qr_id, qr


@handles("tpu.projects.locations.queuedResources.get")
def get(call: Call) -> Any:
    return public(_qr(call)[3])


@handles("tpu.projects.locations.queuedResources.list")
def list_(call: Call) -> Any:
    project, zone = tpu.parent_of(call)
    return {"queuedResources": [public(q) for k, q in sorted(queued(call.world, project).items())
                                if zone in ("-", k.split("/")[0])]}


def _asked(qr: dict[str, Any]) -> list[str]:
    qr_id = qr["name"].rsplit("/", 1)[-1]
    return [node_id for spec in (qr.get("tpu") or {}).get("nodeSpec") or [] for node_id in node_ids(spec, qr_id)]


def _granted(world: World, project: str, zone: str, qr: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for node_id in _asked(qr):
        node = tpu_nodes.nodes(world, project).get(f"{zone}/{node_id}")
        if node is not None and node.get("queuedResource") == qr["name"]:
            found.append(node)
    return found


@handles("tpu.projects.locations.queuedResources.delete")
def delete(call: Call) -> Any:
    project, zone, qr_id, qr = _qr(call)
    granted = [n for n in _granted(call.world, project, zone, qr) if n["state"] != "DELETING"]
    force = (call.arg("force") or "false").lower() == "true"
    # "... only be deleted if its nodes have already been deleted or the queued resource is in
    # the ACCEPTED, FAILED, or SUSPENDED state": then what it still holds goes with it.
    if granted and not force and qr["state"]["state"] not in ("ACCEPTED", "FAILED", "SUSPENDED"):
        raise ApiError(400, f"Queued resource {qr['name']} still has node {granted[0]['name']}: delete the node "
                            "first or set force=true.", status="FAILED_PRECONDITION")
    wait = max([tpu_nodes.remove(call.world, project, n, call.now) for n in granted] or [0.0])
    for n in granted:
        tpu.start_op(call, project, zone, "delete", n["name"], kind="tpu_delete", now=call.now, after=wait,
                     then="tpu.node.deleted",
                     args={"project": project, "key": f"{zone}/{n['name'].rsplit('/', 1)[-1]}"})
    qr["state"] = {"state": "DELETING", "stateInitiator": "USER", "deletingData": {}}
    qr["_sim"]["next"] = None
    after = wait + operations.delay(call.world, project, "tpu_qr_delete")
    return tpu.start_op(call, project, zone, "delete", qr["name"], kind="tpu_qr_delete", now=call.now, after=after,
                        then="tpu.qr.deleted", args={"project": project, "key": f"{zone}/{qr_id}"})


@operations.completion("tpu.qr.deleted")
def _deleted(world: World, op: dict[str, Any], _at: float) -> dict[str, Any]:
    queued(world, op["args"]["project"]).pop(op["args"]["key"], None)
    return {"@type": "type.googleapis.com/google.protobuf.Empty"}


def _set(qr: dict[str, Any], state: str, data: dict[str, Any] | None = None) -> None:
    key = {"WAITING_FOR_RESOURCES": None, "PROVISIONING": "provisioningData", "ACTIVE": "activeData",
           "FAILED": "failedData"}.get(state)
    qr["state"] = {"state": state, "stateInitiator": "SERVICE", **({key: data or {}} if key else {})}


def _provision(world: World, project: dict[str, Any], zone: str, qr: dict[str, Any], at: float) -> None:
    """PROVISIONING -> ACTIVE: the nodes it asked for exist and are READY (or none of them, and
    FAILED with the reason)."""
    made: list[str] = []
    try:
        qr_id = qr["name"].rsplit("/", 1)[-1]
        for spec in qr["tpu"]["nodeSpec"]:
            for node_id in node_ids(spec, qr_id):
                node, _ = tpu_nodes.create(world, at, project["id"], zone, node_id, dict(spec["node"]),
                                           queued_resource=qr["name"])
                assert node is not None
                made.append(f"{zone}/{node_id}")
                node["state"], node["_sim"]["next"] = "READY", None
        _set(qr, "ACTIVE")
    except ApiError as exc:
        for key in made:
            tpu_nodes.discard(world, project["id"], key)
        _set(qr, "FAILED", {"error": {"code": operations.RPC_CODES.get(exc.status, 2), "message": exc.message}})


def _due(world: World, project: dict[str, Any], zone: str, qr: dict[str, Any], now: float) -> bool:
    """Applies the queued resource's next state if it is due; whether it was."""
    sim = qr["_sim"]
    if not sim.get("next") or sim["next"][1] > now:
        return False
    target, at = sim["next"]
    sim["next"] = None
    if target == "ACTIVE":
        _provision(world, project, zone, qr, at)
    else:
        _set(qr, target)
    return True


def _waiting(world: World, project: dict[str, Any], zone: str, qr: dict[str, Any], now: float) -> None:
    """WAITING_FOR_RESOURCES: FAILED past validUntil; PROVISIONING once in its window and the
    zone has the capacity."""
    sim = qr["_sim"]
    if sim.get("until") is not None and now > sim["until"]:
        _set(qr, "FAILED", {"error": {"code": 4, "message": "The queued resource could not be provisioned before "
                                                             "its validUntil time."}})
        return
    if sim.get("after") is not None and now < sim["after"]:
        return
    if now < sim.get("grant", 0.0):
        return
    qr_id = qr["name"].rsplit("/", 1)[-1]
    types = [tpu.tpu_type(zone, s["node"], project["id"], node_id) for s in qr["tpu"]["nodeSpec"]
             for node_id in node_ids(s, qr_id)]
    if not sim.get("reserved") and any(stocked_out(project, zone, None, {t.name: t.chips}, sim["spot"])
                                       for t in types):
        return
    _set(qr, "PROVISIONING")
    sim["next"] = ["ACTIVE", now + operations.delay(world, project["id"], "tpu_qr_provision")]


def _step(world: World, project: dict[str, Any], zone: str, qr: dict[str, Any], now: float) -> None:
    while True:
        moved = _due(world, project, zone, qr, now)
        if qr["state"]["state"] == "WAITING_FOR_RESOURCES" and not qr["_sim"].get("next"):
            _waiting(world, project, zone, qr, now)
            moved = moved or qr["state"]["state"] != "WAITING_FOR_RESOURCES"
        if not moved:
            return


def _suspend_if_preempted(world: World, project: dict[str, Any], zone: str, qr: dict[str, Any]) -> None:
    if any(n["state"] == "PREEMPTED" for n in _granted(world, project["id"], zone, qr)):
        qr["state"] = {"state": "SUSPENDED", "stateInitiator": "SERVICE", "suspendedData": {}}


@ticker
def advance(world: World, now: float) -> None:
    for project in world.data["projects"].values():
        for key, qr in project.get("collections", {}).get("tpu.queuedResources", {}).items():
            if qr["state"]["state"] == "ACTIVE":
                _suspend_if_preempted(world, project, key.split("/")[0], qr)
            elif qr["state"]["state"] not in ("FAILED", "DELETING", "SUSPENDED"):
                _step(world, project, key.split("/")[0], qr, now)
