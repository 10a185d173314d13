"""Reservations (specific SKU reservations) and resource policies (compact placement).

https://cloud.google.com/compute/docs/reference/rest/v1/reservations
https://cloud.google.com/compute/docs/reference/rest/v1/resourcePolicies
https://cloud.google.com/compute/docs/instances/reservations-consume
An instance consumes a reservation in its zone whose instanceProperties match its machine type
and attached GPUs and which has room (inUseCount < count, counted from the instances that
consume it and are not TERMINATED):
  - ANY_RESERVATION (the default): any such reservation not marked specificReservationRequired;
    none is no error (the VM runs on demand);
  - SPECIFIC_RESERVATION: the one named in `values` (by name or path); missing: 404; full or not
    matching: refused in the simulator's words;
  - NO_RESERVATION, and Spot VMs ("You can't consume a reservation to create ... Spot VMs or
    preemptible instances"): none.
  - with resourcePolicies, a SPECIFIC_RESERVATION that is not DENSE is refused unless the policies
    are the reservation's own (facts/reservation_policies.py; in the simulator's words);
An instance that consumes a reservation is placed on reserved capacity: stockouts do not apply.
Deleting a reservation leaves its VMs running (they stop consuming it). Deleting a resource
policy that instances use is refused (resourceInUseByAnotherResource).
Delay keys: reservation_insert, reservation_delete, resource_policy_insert, resource_policy_delete.
"""

from __future__ import annotations

from typing import Any

from gcpsim.apis import compute_catalog
from gcpsim.apis.compute_common import (
    aggregated, collection, get_or_404, in_use, insert_body, link, list_response, parse_ref, public, region_of, stamp,
    start_op)
from gcpsim.apis.compute_instance_spec import check_zone
from gcpsim.errors import ApiError, invalid_argument, not_found
from gcpsim.facts import reservation_policies
from gcpsim.routes import Call, handles
from gcpsim.state import World

RESERVATION_KEY = "compute.googleapis.com/reservation-name"


def reservation_path(project: str, zone: str, name: str) -> str:
    return f"projects/{project}/zones/{zone}/reservations/{name}"


def in_use_count(world: World, project: str, key: str) -> int:
    return sum(1 for i in collection(world, project, "instances").values()
               if i["_sim"].get("reservation") == key and i["status"] != "TERMINATED")


def _render(world: World, project: str, key: str, r: dict[str, Any]) -> dict[str, Any]:
    out = public(r)
    out["specificReservation"] = {**r["specificReservation"], "inUseCount": str(in_use_count(world, project, key))}
    return out


def _fits(world: World, project: str, key: str, r: dict[str, Any], inst: dict[str, Any]) -> bool:
    props = r["specificReservation"]["instanceProperties"]
    bundled = compute_catalog.machine_type(inst["_sim"]["zone"], inst["_sim"]["machine_type"])
    attached = {g: n for g, n in inst["_sim"]["gpus"].items() if not (bundled and bundled.bundled_gpu == g)}
    wanted = {a["acceleratorType"]: int(a["acceleratorCount"]) for a in props.get("guestAccelerators", [])}
    return (props["machineType"] == inst["_sim"]["machine_type"] and wanted == attached
            and in_use_count(world, project, key) < int(r["specificReservation"]["count"]))


def consume(world: World, project: str, inst: dict[str, Any]) -> str | None:
    """The reservation ("<zone>/<name>") the instance consumes, recorded on it; None if none."""
    zone = inst["_sim"]["zone"]
    affinity = inst.get("reservationAffinity") or {}
    kind = affinity.get("consumeReservationType", "ANY_RESERVATION")
    reservations = collection(world, project, "reservations")
    chosen = None
    if inst["_sim"]["spot"] or kind == "NO_RESERVATION":
        chosen = None
    elif kind == "SPECIFIC_RESERVATION":
        if affinity.get("key") != RESERVATION_KEY or not affinity.get("values"):
            raise invalid_argument("Invalid value for field 'resource.reservationAffinity': SPECIFIC_RESERVATION "
                                   f"needs key '{RESERVATION_KEY}' and the reservation's name in values.")
        p, z, name = parse_ref(affinity["values"][0], "reservations", project, zone)
        key = f"{z}/{name}"
        if p != project or key not in reservations:
            raise not_found(reservation_path(p, z or zone, name))
        _check_policies_on(inst, reservations[key], reservation_path(project, z or zone, name))
        if not _fits(world, project, key, reservations[key], inst):
            raise ApiError(400, f"Specified reservation '{reservation_path(project, z or zone, name)}' has no "
                                "available capacity matching this instance (machine type, accelerators).",
                           reason="invalid")
        chosen = key
    else:
        chosen = next((k for k, r in sorted(reservations.items()) if k.startswith(f"{zone}/")
                       and not r.get("specificReservationRequired") and _fits(world, project, k, r, inst)), None)
    inst["_sim"]["reservation"] = chosen
    return chosen


def _check_policies_on(inst: dict[str, Any], reservation: dict[str, Any], path: str) -> None:
    """A plain (non-dense) reservation takes no external resource policies."""
    external = sorted(p for p in inst.get("resourcePolicies") or []
                      if p.rsplit("/", 1)[-1] not in reservation_policies.own_policies(reservation))
    if external and not reservation_policies.takes_external_policies(reservation):
        raise invalid_argument(f"Invalid value for field 'resource.resourcePolicies': '{external[0]}'. Reservation "
                               f"'{path}' is not a DENSE reservation and takes no resource policies but its own.")


@handles("compute.reservations.insert")
def insert_reservation(call: Call) -> Any:
    project, zone = call.project_id, call.params["zone"]
    check_zone(zone)
    body, name, key = insert_body(call, project, "reservations", zone, lambda n: reservation_path(project, zone, n))
    r = store(call.world, project, zone, body, call.now)
    return start_op(call, project, f"zones/{zone}", "insert", reservation_path(project, zone, name),
                    kind="reservation_insert", args={"target_id": r["id"]})


def store(world: World, project: str, zone: str, body: dict[str, Any], now: float) -> dict[str, Any]:
    """A reservations.insert body checked and kept, READY (also a project file's reservations)."""
    name = body["name"]
    spec = dict(body.get("specificReservation") or {})
    props = dict(spec.get("instanceProperties") or {})
    machine = str(props.get("machineType", "")).rsplit("/", 1)[-1]
    if compute_catalog.machine_type(zone, machine) is None:
        raise invalid_argument(f"Invalid value for field 'resource.specificReservation.instanceProperties.machineType':"
                               f" '{props.get('machineType', '')}'. Machine type with name '{machine}' does not exist "
                               f"in zone '{zone}'.")
    accelerators = []
    for acc in props.get("guestAccelerators", []):
        gpu = str(acc.get("acceleratorType", "")).rsplit("/", 1)[-1]
        if compute_catalog.accelerator_type(zone, gpu) is None:
            raise not_found(f"projects/{project}/zones/{zone}/acceleratorTypes/{gpu}")
        accelerators.append({**acc, "acceleratorType": gpu})
    if int(spec.get("count", 0)) < 1:
        raise invalid_argument("Invalid value for field 'resource.specificReservation.count': "
                               f"'{spec.get('count', 0)}'. Must be greater than 0.")
    props.update(machineType=machine, **({"guestAccelerators": accelerators} if accelerators else {}))
    spec.update(count=str(int(spec["count"])), instanceProperties=props)
    r = stamp({**body, "specificReservation": spec, "status": "READY", "zone": link(f"projects/{project}/zones/{zone}"),
               "specificReservationRequired": bool(body.get("specificReservationRequired"))},
              world, "compute#reservation", reservation_path(project, zone, name), now)
    collection(world, project, "reservations")[f"{zone}/{name}"] = r
    return r


def _reservation(call: Call) -> tuple[str, str, str, dict[str, Any]]:
    project, zone, name = call.project_id, call.params["zone"], call.params["reservation"]
    check_zone(zone)
    r = get_or_404(collection(call, project, "reservations"), f"{zone}/{name}", reservation_path(project, zone, name))
    return project, zone, name, r


@handles("compute.reservations.get")
def get_reservation(call: Call) -> Any:
    project, zone, name, r = _reservation(call)
    return _render(call.world, project, f"{zone}/{name}", r)


@handles("compute.reservations.list")
def list_reservations(call: Call) -> Any:
    project, zone = call.project_id, call.params["zone"]
    check_zone(zone)
    found = [_render(call.world, project, k, r) for k, r in collection(call, project, "reservations").items()
             if k.startswith(f"{zone}/")]
    return list_response(call, "compute#reservationList", f"projects/{project}/zones/{zone}/reservations", found)


@handles("compute.reservations.aggregatedList")
def aggregated_reservations(call: Call) -> Any:
    project = call.project_id
    held = collection(call, project, "reservations")
    return aggregated(call, "compute#reservationAggregatedList", project, "reservations",
                      [f"zones/{z}" for z in compute_catalog.ZONES],
                      lambda scope: [_render(call.world, project, k, r) for k, r in held.items()
                                     if k.startswith(scope.removeprefix("zones/") + "/")])


@handles("compute.reservations.resize")
def resize_reservation(call: Call) -> Any:
    project, zone, name, r = _reservation(call)
    count = int((call.body or {}).get("specificSkuCount", 0))
    if count < 0:
        raise invalid_argument(f"Invalid value for field 'specificSkuCount': '{count}'.")
    r["specificReservation"]["count"] = str(count)
    return start_op(call, project, f"zones/{zone}", "resize", reservation_path(project, zone, name),
                    kind="reservation_update")


@handles("compute.reservations.delete")
def delete_reservation(call: Call) -> Any:
    project, zone, name, r = _reservation(call)
    key = f"{zone}/{name}"
    del collection(call, project, "reservations")[key]
    for inst in collection(call, project, "instances").values():
        if inst["_sim"].get("reservation") == key:
            inst["_sim"]["reservation"] = None
    return start_op(call, project, f"zones/{zone}", "delete", reservation_path(project, zone, name),
                    kind="reservation_delete", args={"target_id": r["id"]})


# -- resource policies ------------------------------------------------------------------------

def policy_path(project: str, region: str, name: str) -> str:
    return f"projects/{project}/regions/{region}/resourcePolicies/{name}"


@handles("compute.resourcePolicies.insert")
def insert_policy(call: Call) -> Any:
    project, region = call.project_id, call.params["region"]
    if region not in compute_catalog.REGIONS:
        raise invalid_argument(f"Invalid value for field 'region': '{region}'. Unknown region.")
    body, name, key = insert_body(call, project, "resourcePolicies", region, lambda n: policy_path(project, region, n))
    path = policy_path(project, region, name)
    placement = body.get("groupPlacementPolicy")
    if placement is not None and placement.get("collocation", "COLLOCATED") not in ("COLLOCATED", "UNSPECIFIED_COLLOCATION"):
        raise invalid_argument(f"Invalid value for field 'resource.groupPlacementPolicy.collocation': "
                               f"'{placement.get('collocation')}'.")
    policy = stamp({**body, "region": link(f"projects/{project}/regions/{region}"), "status": "READY"},
                   call.world, "compute#resourcePolicy", path, call.now)
    collection(call, project, "resourcePolicies")[key] = policy
    return start_op(call, project, f"regions/{region}", "insert", path, kind="resource_policy_insert",
                    args={"target_id": policy["id"]})


def _policy(call: Call) -> tuple[str, str, str, dict[str, Any]]:
    project, region, name = call.project_id, call.params["region"], call.params["resourcePolicy"]
    policy = get_or_404(collection(call, project, "resourcePolicies"), f"{region}/{name}",
                        policy_path(project, region, name))
    return project, region, name, policy


@handles("compute.resourcePolicies.get")
def get_policy(call: Call) -> Any:
    return public(_policy(call)[3])


@handles("compute.resourcePolicies.list")
def list_policies(call: Call) -> Any:
    project, region = call.project_id, call.params["region"]
    found = [p for k, p in collection(call, project, "resourcePolicies").items() if k.startswith(f"{region}/")]
    return list_response(call, "compute#resourcePolicyList", f"projects/{project}/regions/{region}/resourcePolicies",
                         found)


@handles("compute.resourcePolicies.delete")
def delete_policy(call: Call) -> Any:
    project, region, name, policy = _policy(call)
    path = policy_path(project, region, name)
    users = [i["selfLink"].split("/compute/v1/")[-1] for i in collection(call, project, "instances").values()
             if policy["selfLink"] in i.get("resourcePolicies", []) and region_of(i["_sim"]["zone"]) == region]
    if users:
        raise in_use("resource_policy", path, users[0])
    del collection(call, project, "resourcePolicies")[f"{region}/{name}"]
    return start_op(call, project, f"regions/{region}", "delete", path, kind="resource_policy_delete",
                    args={"target_id": policy["id"]})
