"""Cloud TPU v2 nodes: create, get, list, patch, stop, start, delete, getGuestAttributes; one
machine per worker host.

https://cloud.google.com/tpu/docs/reference/rest/v2/projects.locations.nodes
  - create (?nodeId=): the type and runtime must exist in the zone, the zone's TPU quota must
    take it (429 at once), the network/subnetwork must exist (404); a stockout fails the
    operation (tpu.py has the wording) and leaves no node. Accepted: the node is CREATING, each
    worker gets an internal address from the subnetwork and, with enableExternalIps, an
    external one; its machines boot ("<project>/<zone>/<node>-w<i>", worker order); READY when
    the operation is done (its response is the Node);
  - networkEndpoints list the workers in worker order (ipAddress, port 8470, accessConfig.externalIp);
  - getGuestAttributes answers one entry per worker, in worker order (workerIds filter them),
    from the machine backend, once the node is READY (empty items before);
  - stop: STOPPING -> STOPPED (machines stopped, disks kept); start: STARTING -> READY; delete:
    DELETING, gone (addresses released) when done;
  - patch (updateMask: description, tags, labels, metadata, network_config.enable_external_ips):
    metadata and tags reach the machines (backend.set_metadata);
  - spot preemption on request: POST /trainctl-sim/v1/projects/{p}/locations/{z}/nodes/{n}:preempt
    {"grace_seconds": 30}: every worker is told (backend.announce_preemption), then (once every
    worker has shut down, at the latest after the grace) the node is PREEMPTED and its machines
    stop; a preempted TPU cannot be started, only deleted (https://cloud.google.com/tpu/docs/preemptible).
Service account scopes are kept as sent (no normalisation found in the API's documentation).
Delay keys: tpu_create, tpu_stop, tpu_start, tpu_delete, tpu_update.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

from gcpsim import operations
from gcpsim.apis import compute_addresses, tpu
from gcpsim.apis.compute_capacity import stockout_of
from gcpsim.apis.compute_common import admin_project, backend, parse_ref, preemption, public, region_of
from gcpsim.apis.compute_networks import find_network, find_subnetwork, network_path
from gcpsim.errors import ApiError, already_exists, invalid_argument, not_found
from gcpsim.facts.tpus import TPUS
from gcpsim.machines import Machine, metadata_items
from gcpsim.routes import Call, admin, handles
from gcpsim.state import World, ticker

if TYPE_CHECKING:
    from gcpsim.server import Simulator

HOLDING = ("CREATING", "READY", "STARTING", "RESTARTING", "REPAIRING")
ID_PATTERN = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")


def nodes(world: World, project: str) -> dict[str, Any]:
    return world.collection(project, "tpu.nodes")


def node_path(project: str, zone: str, node_id: str) -> str:
    return f"projects/{project}/locations/{zone}/nodes/{node_id}"


def render(node: dict[str, Any]) -> dict[str, Any]:
    out = public(node)
    out["networkEndpoints"] = [{"ipAddress": w["internal"], "port": 8470,
                                **({"accessConfig": {"externalIp": w["external"]}} if w.get("external") else {})}
                               for w in node["_sim"]["workers"]]
    return out


def machines(world: World, project: str, node: dict[str, Any]) -> list[Machine]:
    sim = node["_sim"]
    t = TPUS[node["acceleratorType"]]
    account = node.get("serviceAccount") or {}
    p = world.project(project) or {}
    subnet = find_subnetwork(world, project, sim["subnet"], region_of(sim["zone"]))
    node_id = node["name"].rsplit("/", 1)[-1]
    return [Machine(key=f"{project}/{sim['zone']}/{node_id}-w{i}", project=project, zone=sim["zone"],
                    name=f"{node_id}-w{i}", network=f"{project}/{parse_ref(sim['network'], 'networks', project)[2]}",
                    subnet_cidr=subnet["ipCidrRange"] if subnet else "", internal_ip=w["internal"],
                    external_ip=w.get("external"), metadata=dict(node.get("metadata") or {}),
                    project_metadata=metadata_items({"items": p.get("commonInstanceMetadata", [])}),
                    service_account=account.get("email"), scopes=tuple(account.get("scope") or ()),
                    tags=tuple(node.get("tags") or ()), spot=sim["spot"], accelerators={t.name: t.chips_per_host},
                    machine_type=t.gke_machine_type)
            for i, w in enumerate(sim["workers"])]


def _used(world: World, project: str, zone: str, generation: str, spot: bool) -> int:
    return sum(tpu.quota_units(TPUS[n["acceleratorType"]]) for n in nodes(world, project).values()
               if n["_sim"]["zone"] == zone and n["state"] in HOLDING and n["_sim"]["spot"] == spot
               and TPUS[n["acceleratorType"]].generation == generation)


def _subnet(world: World, project: str, zone: str, config: dict[str, Any]) -> dict[str, Any]:
    region = region_of(zone)
    if config.get("subnetwork"):
        subnet = find_subnetwork(world, project, config["subnetwork"], region)
        if subnet is None:
            p, r, n = parse_ref(config["subnetwork"], "subnetworks", project, region)
            raise not_found(f"projects/{p}/regions/{r or region}/subnetworks/{n}")
        return subnet
    network = find_network(world, project, config.get("network") or "default")
    name = parse_ref(config.get("network") or "default", "networks", project)[2]
    subnet = find_subnetwork(world, project, f"regions/{region}/subnetworks/{name}", region) if network else None
    if subnet is None:
        raise not_found(network_path(project, name))
    return subnet


def create(world: World, now: float, project: str, zone: str, node_id: str, body: dict[str, Any],
           queued_resource: str | None = None) -> tuple[dict[str, Any] | None, ApiError | None]:
    """A node of a create request, stored and booting, or the error its operation fails with.
    Raises the errors the API answers at once (400, 404, 409, 429)."""
    tpu.check_location(project, zone)
    if not ID_PATTERN.fullmatch(node_id or ""):
        raise invalid_argument(f"Invalid node id \"{node_id}\": it must match {ID_PATTERN.pattern}.")
    path = node_path(project, zone, node_id)
    if f"{zone}/{node_id}" in nodes(world, project):
        raise already_exists(path)
    t = tpu.tpu_type(zone, body, project, node_id)
    scheduling = body.get("schedulingConfig") or {}
    spot = bool(scheduling.get("spot") or scheduling.get("preemptible"))
    p = world.project(project)
    assert p is not None
    quota = tpu.quota_error(world, p, zone, t, spot, _used(world, project, zone, t.generation, spot))
    if quota is not None:
        raise quota
    config = dict(body.get("networkConfig") or (body.get("networkConfigs") or [{}])[0])
    subnet = _subnet(world, project, zone, config)
    stockout = None if queued_resource is not None else stockout_of(p, zone, None, {t.name: t.chips}, spot)
    if stockout is not None:
        return None, tpu.stockout_error(project, zone, node_id, stockout.get("tpu_words", "no_more_capacity"))
    external = bool(config.get("enableExternalIps"))
    workers = []
    for i in range(t.hosts):
        owner = f"{path}/workers/{i}"
        workers.append({"internal": compute_addresses.allocate_internal(subnet, owner),
                        "external": compute_addresses.allocate_external(world, owner) if external else None})
    node = {**body, "name": path, "acceleratorType": t.name, "state": "CREATING", "health": "HEALTHY",
            "acceleratorConfig": {"type": tpu.CONFIG_TYPES[t.generation], "topology": t.topology},
            # answered in the form it was given (the provider's acceptance test sends ids and
            # expects an empty plan after: network/subnetwork are ForceNew, not diff-suppressed)
            "networkConfig": {**config, "network": config.get("network") or subnet["network"],
                              "subnetwork": config.get("subnetwork") or subnet["selfLink"],
                              "enableExternalIps": external},
            "cidrBlock": subnet["ipCidrRange"], "apiVersion": "V2", "createTime": operations.rfc3339(now),
            "id": str(world.next_id() + 7_000_000_000_000_000_000), "symptoms": [],
            "_sim": {"zone": zone, "spot": spot, "workers": workers, "subnet": subnet["selfLink"],
                     "network": subnet["network"], "next": ["READY", now + operations.delay(world, project, "tpu_create")]}}
    node.pop("networkConfigs", None)
    if queued_resource:
        node["queuedResource"] = queued_resource
    nodes(world, project)[f"{zone}/{node_id}"] = node
    for m in machines(world, project, node):
        backend(world).boot(m)
    return node, None


@handles("tpu.projects.locations.nodes.create")
def create_node(call: Call) -> Any:
    project, zone = tpu.parent_of(call)
    node_id = call.arg("nodeId") or ""
    node, failure = create(call.world, call.now, project, zone, node_id, dict(call.body or {}))
    path = node_path(project, zone, node_id)
    if failure is not None:
        return tpu.start_op(call, project, zone, "create", path, kind="tpu_create", now=call.now,
                            then="tpu.fail", args={"status": failure.status, "message": failure.message})
    return tpu.start_op(call, project, zone, "create", path, kind="tpu_create", now=call.now,
                        then="tpu.node.response", args={"project": project, "key": f"{zone}/{node_id}"})


@operations.completion("tpu.fail")
def _fail(_world: World, op: dict[str, Any], _at: float) -> None:
    raise ApiError(429 if op["args"]["status"] == "RESOURCE_EXHAUSTED" else 400, op["args"]["message"],
                   status=op["args"]["status"])


def settle(node: dict[str, Any], now: float) -> None:
    """The node's next state, if it is due."""
    step = node["_sim"].get("next")
    if step and step[1] <= now:
        node["state"], node["_sim"]["next"] = step[0], None


@operations.completion("tpu.node.response")
def _response(world: World, op: dict[str, Any], at: float) -> dict[str, Any] | None:
    node = nodes(world, op["args"]["project"]).get(op["args"]["key"])
    if node is None:
        return None
    settle(node, at)  # the operation and the state it leads to are due together
    return {"@type": tpu.NODE_TYPE, **render(node)}


def node_of(call: Call) -> tuple[str, str, dict[str, Any]]:
    project, zone, node_id = tpu.split_name(call)
    node = nodes(call.world, project).get(f"{zone}/{node_id}")
    if node is None:
        raise not_found(node_path(project, zone, node_id))
    return project, zone, node


@handles("tpu.projects.locations.nodes.get")
def get_node(call: Call) -> Any:
    return render(node_of(call)[2])


@handles("tpu.projects.locations.nodes.list")
def list_nodes(call: Call) -> Any:
    project, zone = tpu.parent_of(call)
    found = [render(n) for k, n in sorted(nodes(call.world, project).items()) if zone in ("-", k.split("/")[0])]
    return {"nodes": found}


def _transition(call: Call, verb: str, need: tuple[str, ...], now_state: str, then_state: str, kind: str) -> Any:
    project, zone, node = node_of(call)
    if node["state"] not in need:
        raise ApiError(400, f"Cannot {verb} node {node['name']} in state {node['state']}.",
                       status="FAILED_PRECONDITION")
    node["state"] = now_state
    node["_sim"]["next"] = [then_state, call.now + operations.delay(call.world, project, kind)]
    for m in machines(call.world, project, node):
        if verb == "stop":
            backend(call.world).stop(m.key)
        else:
            backend(call.world).boot(m)
    key = f"{zone}/{node['name'].rsplit('/', 1)[-1]}"
    return tpu.start_op(call, project, zone, verb, node["name"], kind=kind, now=call.now,
                        then="tpu.node.response", args={"project": project, "key": key})


@handles("tpu.projects.locations.nodes.stop")
def stop_node(call: Call) -> Any:
    return _transition(call, "stop", ("READY",), "STOPPING", "STOPPED", "tpu_stop")


@handles("tpu.projects.locations.nodes.start")
def start_node(call: Call) -> Any:
    return _transition(call, "start", ("STOPPED",), "STARTING", "READY", "tpu_start")


def remove(world: World, project: str, node: dict[str, Any], now: float) -> float:
    """DELETING now (machines deleted); the record goes with the operation. Returns the delay."""
    node["state"] = "DELETING"
    node["_sim"]["next"] = None
    for m in machines(world, project, node):
        backend(world).delete(m.key)
    return operations.delay(world, project, "tpu_delete")


@handles("tpu.projects.locations.nodes.delete")
def delete_node(call: Call) -> Any:
    project, zone, node = node_of(call)
    after = None if node["state"] == "DELETING" else remove(call.world, project, node, call.now)
    key = f"{zone}/{node['name'].rsplit('/', 1)[-1]}"
    return tpu.start_op(call, project, zone, "delete", node["name"], kind="tpu_delete", now=call.now, after=after,
                        then="tpu.node.deleted", args={"project": project, "key": key})


def _release(world: World, project: str, node: dict[str, Any]) -> None:
    subnet = find_subnetwork(world, project, node["_sim"]["subnet"], region_of(node["_sim"]["zone"]))
    for w in node["_sim"]["workers"]:
        compute_addresses.release_internal(subnet, w["internal"])
        compute_addresses.release_external(world, w.get("external"))


def discard(world: World, project: str, key: str) -> None:
    """A node gone at once, machines and addresses included (a provisioning that failed)."""
    node = nodes(world, project).pop(key, None)
    if node is not None:
        for m in machines(world, project, node):
            backend(world).delete(m.key)
        _release(world, project, node)


@operations.completion("tpu.node.deleted")
def _deleted(world: World, op: dict[str, Any], _at: float) -> dict[str, Any]:
    node = nodes(world, op["args"]["project"]).pop(op["args"]["key"], None)
    if node is not None:
        _release(world, op["args"]["project"], node)
    return {"@type": "type.googleapis.com/google.protobuf.Empty"}


PATCHABLE = {"description": "description", "tags": "tags", "labels": "labels", "metadata": "metadata",
             "network_config.enable_external_ips": "networkConfig.enableExternalIps"}


@handles("tpu.projects.locations.nodes.patch")
def patch_node(call: Call) -> Any:
    project, zone, node = node_of(call)
    fields = [f.strip() for f in (call.arg("updateMask") or "").split(",") if f.strip()]
    if not fields or any(f not in PATCHABLE for f in fields):
        raise invalid_argument(f"Invalid update mask {call.arg('updateMask')!r}: supported fields are "
                               + ", ".join(PATCHABLE))
    body = call.body or {}
    for f in fields:
        if f == "network_config.enable_external_ips":
            node["networkConfig"]["enableExternalIps"] = bool(body.get("networkConfig", {}).get("enableExternalIps"))
        else:
            node[PATCHABLE[f]] = body.get(PATCHABLE[f])
    if {"metadata", "tags"} & set(fields) and node["state"] != "DELETING":
        for m in machines(call.world, project, node):
            backend(call.world).set_metadata(m)
    key = f"{zone}/{node['name'].rsplit('/', 1)[-1]}"
    return tpu.start_op(call, project, zone, "update", node["name"], kind="tpu_update", now=call.now,
                        then="tpu.node.response", args={"project": project, "key": key})


@handles("tpu.projects.locations.nodes.getGuestAttributes")
def get_guest_attributes(call: Call) -> Any:
    project, _, node = node_of(call)
    body = call.body or {}
    query_path = body.get("queryPath") or ""
    wanted = {str(w) for w in body.get("workerIds") or []}
    answers = []
    for i, m in enumerate(machines(call.world, project, node)):
        if wanted and str(i) not in wanted:
            continue
        items = backend(call.world).guest_attributes(m.key, query_path) if node["state"] == "READY" else []
        answers.append({"queryPath": query_path, "queryValue": {"items": items}})
    return {"guestAttributes": answers}


@ticker
def advance(world: World, now: float) -> None:
    """Nodes reach their next state; preempted spot nodes stop once every worker has shut down,
    at the latest when their grace is over (as a Spot VM does: compute_spot.py)."""
    for project in world.data["projects"].values():
        for node in project.get("collections", {}).get("tpu.nodes", {}).values():
            settle(node, now)
            due = node["_sim"].get("preempt_at")
            if due is not None and (due <= now or all(backend(world).shut_down(m.key)
                                                      for m in machines(world, project["id"], node))):
                node["_sim"]["preempt_at"] = None
                if node["state"] != "DELETING":
                    node["state"] = "PREEMPTED"
                    for m in machines(world, project["id"], node):
                        backend(world).stop(m.key)


@admin("POST", "projects/(?P<project>[^/]+)/locations/(?P<zone>[^/]+)/nodes/(?P<node>[^/:]+):preempt")
def preempt(sim: Simulator, m: re.Match[str], body: Any) -> Any:
    with sim.store.transaction() as world:
        project = admin_project(world, m["project"])
        node = nodes(world, project["id"]).get(f"{m['zone']}/{m['node']}")
        path = node_path(project["id"], m["zone"], m["node"])
        grace = preemption(body, path, node, "state", "READY")
        assert node is not None
        node["_sim"]["preempt_at"] = time.time() + grace
        for machine in machines(world, project["id"], node):
            backend(world).announce_preemption(machine.key)
        return {"node": path, "at": node["_sim"]["preempt_at"]}
