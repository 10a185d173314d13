"""Compute Engine instances: insert, get, list, aggregatedList, delete, start, stop; their life
PROVISIONING -> STAGING -> RUNNING, STOPPING -> TERMINATED, told to the machine backend.

https://cloud.google.com/compute/docs/reference/rest/v1/instances
https://cloud.google.com/compute/docs/instances/instance-life-cycle
  - insert: the body is checked (compute_instance_spec.py); a name that exists: 409
    alreadyExists. Then, as GCE reports them inside the operation: quota (compute_quotas.py),
    and, unless the VM lands on a reservation, stockouts (compute_capacity.py); such an insert
    creates nothing (a GET afterwards is 404, https://github.com/googleapis/nodejs-compute/issues/377).
    Accepted, the instance exists at once (PROVISIONING, addresses allocated, boot disk made),
    its machine starts booting, it is STAGING when the insert operation is done and RUNNING
    after `instance_boot` more;
  - stop: STOPPING at once (the machine stops, its disk kept), TERMINATED when done; start: the
    same checks as insert (a stopped VM holds no CPU or GPU quota, a zone may have run out),
    then PROVISIONING -> STAGING -> RUNNING; stop of a TERMINATED VM and start of a RUNNING one
    succeed doing nothing; a VM in between answers 400 resourceNotReady (the simulator's words);
  - delete: STOPPING at once (the machine goes), gone when done, its addresses and auto-delete
    boot disk released then (its subnetwork stays in use until then); deletionProtection
    refuses it.
  - flex-start VMs (scheduling.provisioningModel FLEX_START): quota is checked at insert, a
    stockout is not (Dynamic Workload Scheduler queues the request); the instance exists at once
    in PENDING, the status GCE documents for "waiting for available capacity from DWS"
    (compute v1 discovery document, Instance.status), until it is granted `flex_start_grant`
    seconds later while its zone has capacity for it (a stockout keeps it PENDING, as long as it
    lasts), then PROVISIONING -> STAGING -> RUNNING. The simulator does not fail a request whose
    wait ran out (requestValidForDuration, which pulumi-gcp cannot send; GCE's error body for it
    is not documented): trainctl's deadline gives up on it, and deletes it.
Delay keys: instance_insert, instance_boot, instance_stop, instance_start, instance_delete,
flex_start_grant.
"""

from __future__ import annotations

from typing import Any

from gcpsim import operations
from gcpsim.apis import compute_capacity, compute_quotas, compute_reservations
from gcpsim.apis.compute_catalog import ZONES
from gcpsim.apis.compute_common import (
    aggregated, backend, check_name, collection, get_or_404, in_use, list_response, public, require_body,
    start_op)
from gcpsim.apis.compute_instance_spec import (
    admit, build, check_zone, instance_path, machine, release)
from gcpsim.errors import ApiError, already_exists
from gcpsim.routes import Call, handles
from gcpsim.state import World, ticker

TRANSITIONAL = ("PROVISIONING", "STAGING", "STOPPING", "SUSPENDING", "REPAIRING")


def instances(world: World, project: str) -> dict[str, Any]:
    return collection(world, project, "instances")


def _project(world: World, project: str) -> dict[str, Any]:
    p = world.project(project)
    assert p is not None
    return p


def placement_error(world: World, project: str, inst: dict[str, Any]) -> ApiError | None:
    """Why GCE would fail this instance's insert or start now (quota, then capacity), or None.
    A flex-start VM waits for capacity instead of failing (see the module docstring)."""
    p = _project(world, project)
    quota = compute_quotas.check(world, p, inst)
    if quota is not None or inst["_sim"].get("flex_start"):
        return quota
    if compute_reservations.consume(world, project, inst) is not None:
        return None  # reserved capacity: no stockout
    return compute_capacity.instance_stockout(p, inst)


def _boot(world: World, project: str, inst: dict[str, Any], now: float) -> None:
    inst["status"] = "PROVISIONING"
    inst["_sim"]["next"] = ["STAGING", now + operations.delay(world, project, "instance_insert")]
    backend(world).boot(machine(world, project, inst))


def create(world: World, now: float, project: str, zone: str, body: dict[str, Any]) -> tuple[dict[str, Any], ApiError | None]:
    """The instance of an insert body, stored and booting; or the error its operation fails with."""
    check_zone(zone)
    name = check_name(body)
    if f"{zone}/{name}" in instances(world, project):
        raise already_exists(instance_path(project, zone, name))
    inst = build(world, now, project, zone, body, name)
    failure = placement_error(world, project, inst)
    if failure is not None:
        return inst, failure
    admit(world, now, project, inst)
    instances(world, project)[f"{zone}/{name}"] = inst
    if inst["_sim"].get("flex_start"):
        _queue(world, project, inst, now)
    else:
        _boot(world, project, inst, now)
    return inst, None


def _queue(world: World, project: str, inst: dict[str, Any], now: float) -> None:
    """A flex-start VM waits in PENDING until its grant is due and its zone has capacity."""
    inst["status"] = "PENDING"
    inst["_sim"]["next"] = None
    inst["_sim"]["granted_at"] = now + operations.delay(world, project, "flex_start_grant")


def _grant_if_due(world: World, project: str, inst: dict[str, Any], now: float) -> None:
    if now >= inst["_sim"]["granted_at"] and compute_capacity.instance_stockout(_project(world, project), inst) is None:
        _boot(world, project, inst, now)


@handles("compute.instances.insert")
def insert(call: Call) -> Any:
    project, zone = call.project_id, call.params["zone"]
    inst, failure = create(call.world, call.now, project, zone, require_body(call))
    return start_op(call, project, f"zones/{zone}", "insert", instance_path(project, zone, inst["name"]),
                    kind="instance_insert", fail=failure, args={"target_id": inst["id"]})


def instance(call: Call) -> tuple[str, str, dict[str, Any]]:
    project, zone, name = call.project_id, call.params["zone"], call.params["instance"]
    check_zone(zone)
    return project, zone, get_or_404(instances(call.world, project), f"{zone}/{name}", instance_path(project, zone, name))


@handles("compute.instances.get")
def get(call: Call) -> Any:
    return public(instance(call)[2])


@handles("compute.instances.list")
def list_(call: Call) -> Any:
    project, zone = call.project_id, call.params["zone"]
    check_zone(zone)
    found = [i for k, i in instances(call.world, project).items() if k.startswith(f"{zone}/")]
    return list_response(call, "compute#instanceList", f"projects/{project}/zones/{zone}/instances", found)


@handles("compute.instances.aggregatedList")
def aggregated_list(call: Call) -> Any:
    project = call.project_id
    items = instances(call.world, project)
    return aggregated(call, "compute#instanceAggregatedList", project, "instances", [f"zones/{z}" for z in ZONES],
                      lambda scope: [i for k, i in items.items() if k.startswith(scope.removeprefix("zones/") + "/")])


def not_ready(path: str) -> ApiError:
    return ApiError(400, f"The resource '{path}' is not ready", reason="resourceNotReady")


@handles("compute.instances.stop")
def stop(call: Call) -> Any:
    project, zone, inst = instance(call)
    path = instance_path(project, zone, inst["name"])
    if inst["status"] in TRANSITIONAL and inst["status"] != "STOPPING":
        raise not_ready(path)
    if inst["status"] in ("RUNNING", "SUSPENDED"):
        halt(call.world, project, inst, call.now, "instance_stop")
    return start_op(call, project, f"zones/{zone}", "stop", path, kind="instance_stop",
                    args={"target_id": inst["id"]})


def halt(world: World, project: str, inst: dict[str, Any], now: float, kind: str) -> None:
    """STOPPING now, TERMINATED after the delay for `kind`; the machine is stopped."""
    inst["status"] = "STOPPING"
    inst["_sim"]["next"] = ["TERMINATED", now + operations.delay(world, project, kind)]
    backend(world).stop(machine(world, project, inst).key)


@handles("compute.instances.start")
def start(call: Call) -> Any:
    project, zone, inst = instance(call)
    path = instance_path(project, zone, inst["name"])
    if inst["status"] == "TERMINATED":
        failure = placement_error(call.world, project, inst)
        if failure is not None:
            return start_op(call, project, f"zones/{zone}", "start", path, kind="instance_start", fail=failure)
        _boot(call.world, project, inst, call.now)
    elif inst["status"] != "RUNNING":
        raise not_ready(path)
    return start_op(call, project, f"zones/{zone}", "start", path, kind="instance_start",
                    args={"target_id": inst["id"]})


def remove(world: World, project: str, inst: dict[str, Any], now: float) -> float:
    """STOPPING now, gone after the delay; returns when."""
    inst["status"] = "STOPPING"
    inst["_sim"]["next"] = None
    inst["_sim"]["deleting"] = True
    backend(world).delete(machine(world, project, inst).key)
    return operations.delay(world, project, "instance_delete")


@handles("compute.instances.delete")
def delete(call: Call) -> Any:
    project, zone, inst = instance(call)
    path = instance_path(project, zone, inst["name"])
    if inst.get("deletionProtection"):
        raise ApiError(400, "Invalid resource usage: 'Resource cannot be deleted if it's protected against "
                            "deletion.'.", reason="resourceInUseByAnotherResource")
    if not inst["_sim"].get("deleting"):
        remove(call.world, project, inst, call.now)
    return start_op(call, project, f"zones/{zone}", "delete", path, kind="instance_delete",
                    then="compute.instance.deleted", args={"project": project, "key": f"{zone}/{inst['name']}",
                                                           "target_id": inst["id"]})


@operations.completion("compute.instance.deleted")
def _deleted(world: World, op: dict[str, Any], _at: float) -> None:
    gone = instances(world, op["args"]["project"]).pop(op["args"]["key"], None)
    if gone is not None:
        release(world, op["args"]["project"], gone)


def step(world: World, project: str, inst: dict[str, Any], now: float) -> None:
    """The instance reaches the states that are due (STAGING -> RUNNING takes `instance_boot`)."""
    if inst["status"] == "PENDING":
        _grant_if_due(world, project, inst, now)
    due = inst["_sim"].get("next")
    while due and due[1] <= now:
        inst["status"], at = due
        due = None
        if inst["status"] == "STAGING":
            due = ["RUNNING", at + operations.delay(world, project, "instance_boot")]
        elif inst["status"] == "RUNNING":
            inst["lastStartTimestamp"] = operations.rfc3339(at)
        elif inst["status"] == "TERMINATED":
            inst["lastStopTimestamp"] = operations.rfc3339(at)
        inst["_sim"]["next"] = due


@ticker
def advance(world: World, now: float) -> None:
    for project in world.data["projects"].values():
        for inst in list(project.get("collections", {}).get("compute.instances", {}).values()):
            step(world, project["id"], inst, now)


# -- disks (the boot disks instances make) ----------------------------------------------------

@handles("compute.disks.get")
def get_disk(call: Call) -> Any:
    project, zone, name = call.project_id, call.params["zone"], call.params["disk"]
    check_zone(zone)
    return public(get_or_404(collection(call, project, "disks"), f"{zone}/{name}",
                             f"projects/{project}/zones/{zone}/disks/{name}"))


@handles("compute.disks.list")
def list_disks(call: Call) -> Any:
    project, zone = call.project_id, call.params["zone"]
    check_zone(zone)
    found = [d for k, d in collection(call, project, "disks").items() if k.startswith(f"{zone}/")]
    return list_response(call, "compute#diskList", f"projects/{project}/zones/{zone}/disks", found)


@handles("compute.disks.delete")
def delete_disk(call: Call) -> Any:
    project, zone, name = call.project_id, call.params["zone"], call.params["disk"]
    check_zone(zone)
    path = f"projects/{project}/zones/{zone}/disks/{name}"
    disk = get_or_404(collection(call, project, "disks"), f"{zone}/{name}", path)
    if disk.get("users"):
        raise in_use("disk", path, disk["users"][0].split("/compute/v1/")[-1])
    del collection(call, project, "disks")[f"{zone}/{name}"]
    return start_op(call, project, f"zones/{zone}", "delete", path, kind="disk_delete", args={"target_id": disk["id"]})
