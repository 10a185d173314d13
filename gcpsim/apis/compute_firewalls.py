"""Firewall rules and Cloud Routers (with their Cloud NAT configurations).

https://cloud.google.com/compute/docs/reference/rest/v1/firewalls
https://cloud.google.com/compute/docs/reference/rest/v1/routers
Every change to a network's firewall rules is handed to the machine backend at once
(apply_firewall: the network's enabled INGRESS allow rules, and the project's caller_ip, the
address trainctl's traffic is seen from). Deny and egress rules are kept and shown but not
enforced on machines (egress is open; trainctl's program declares allow rules only).
Routers carry their NATs inline (`nats`), as the API does: the Terraform provider's
google_compute_router_nat reads the router and PATCHes its `nats` list.
Delay keys: firewall_insert, firewall_update, firewall_delete, router_insert, router_update,
router_delete.
"""

from __future__ import annotations

from typing import Any

from gcpsim.apis.compute_common import (
    backend, collection, fingerprint, get_or_404, insert_body, link, list_response, parse_ref, public,
    stamp, start_op)
from gcpsim.apis.compute_networks import find_network, network_path
from gcpsim.errors import invalid_argument, not_found
from gcpsim.machines import FirewallRule
from gcpsim.routes import Call, handles
from gcpsim.state import World


def firewall_path(project: str, name: str) -> str:
    return f"projects/{project}/global/firewalls/{name}"


def rules_of(world: World, project: str, network_link: str) -> list[FirewallRule]:
    """The network's enforced rules: enabled, INGRESS, allow."""
    rules = []
    for fw in collection(world, project, "firewalls").values():
        if fw["network"] != network_link or fw.get("disabled") or fw["direction"] != "INGRESS":
            continue
        if not fw.get("allowed"):
            continue
        rules.append(FirewallRule(
            name=fw["name"], source_ranges=tuple(fw.get("sourceRanges", ())),
            source_tags=tuple(fw.get("sourceTags", ())), target_tags=tuple(fw.get("targetTags", ())),
            allowed=tuple((a["IPProtocol"], tuple(a.get("ports", ()))) for a in fw["allowed"]),
            priority=int(fw.get("priority", 1000))))
    return sorted(rules, key=lambda r: (r.priority, r.name))


def apply(world: World, project: str, network_link: str) -> None:
    p = world.project(project) or {}
    _, _, name = parse_ref(network_link, "networks", project)
    backend(world).apply_firewall(f"{project}/{name}", rules_of(world, project, network_link),
                                  p.get("caller_ip", ""))


def _normalised(call: Call, body: dict[str, Any], project: str) -> dict[str, Any]:
    network = find_network(call.world, project, body.get("network") or "global/networks/default")
    if network is None:
        _, _, name = parse_ref(body.get("network") or "default", "networks", project)
        raise not_found(network_path(project, name))
    if bool(body.get("allowed")) == bool(body.get("denied")):
        # https://cloud.google.com/compute/docs/reference/rest/v1/firewalls: a rule has
        # `allowed` or `denied`, not both (the simulator's wording).
        raise invalid_argument("Invalid value for field 'resource': exactly one of 'allowed' or 'denied' "
                               "must be specified.")
    out = {**body, "network": network["selfLink"], "direction": body.get("direction", "INGRESS"),
           "priority": int(body.get("priority", 1000)), "disabled": bool(body.get("disabled", False))}
    no_source = not (body.get("sourceRanges") or body.get("sourceTags") or body.get("sourceServiceAccounts"))
    if out["direction"] == "INGRESS" and no_source:
        out["sourceRanges"] = ["0.0.0.0/0"]  # firewalls: "If no ranges are specified, ... 0.0.0.0/0"
    if out["direction"] == "EGRESS" and not body.get("destinationRanges"):
        out["destinationRanges"] = ["0.0.0.0/0"]
    return out


@handles("compute.firewalls.insert")
def insert_firewall(call: Call) -> Any:
    project = call.project_id
    body, name, _ = insert_body(call, project, "firewalls", None, lambda n: firewall_path(project, n))
    firewalls = collection(call, project, "firewalls")
    path = firewall_path(project, name)
    fw = stamp(_normalised(call, body, project), call.world, "compute#firewall", path, call.now)
    firewalls[name] = fw
    apply(call.world, project, fw["network"])
    return start_op(call, project, "global", "insert", path, kind="firewall_insert", args={"target_id": fw["id"]})


@handles("compute.firewalls.get")
def get_firewall(call: Call) -> Any:
    project, name = call.project_id, call.params["firewall"]
    return public(get_or_404(collection(call, project, "firewalls"), name, firewall_path(project, name)))


@handles("compute.firewalls.list")
def list_firewalls(call: Call) -> Any:
    p = call.project_id
    return list_response(call, "compute#firewallList", f"projects/{p}/global/firewalls",
                         collection(call, p, "firewalls").values())


def _change(call: Call, replace: bool) -> Any:
    project, name = call.project_id, call.params["firewall"]
    firewalls = collection(call, project, "firewalls")
    path = firewall_path(project, name)
    fw = get_or_404(firewalls, name, path)
    body = {**({} if replace else public(fw)), **(call.body or {})}
    body = {k: v for k, v in body.items() if k not in ("kind", "id", "selfLink", "creationTimestamp")}
    if "network" in (call.body or {}) and parse_ref(call.body["network"], "networks", project)[2] != \
            parse_ref(fw["network"], "networks", project)[2]:
        raise invalid_argument("Invalid value for field 'resource.network': a firewall's network cannot be changed.")
    updated = _normalised(call, {**body, "name": name}, project)
    keep = {k: fw[k] for k in ("kind", "id", "selfLink", "creationTimestamp")}
    firewalls[name] = {**updated, **keep}
    apply(call.world, project, fw["network"])
    return start_op(call, project, "global", "update" if replace else "patch", path, kind="firewall_update")


@handles("compute.firewalls.patch")
def patch_firewall(call: Call) -> Any:
    return _change(call, replace=False)


@handles("compute.firewalls.update")
def update_firewall(call: Call) -> Any:
    return _change(call, replace=True)


@handles("compute.firewalls.delete")
def delete_firewall(call: Call) -> Any:
    project, name = call.project_id, call.params["firewall"]
    firewalls = collection(call, project, "firewalls")
    path = firewall_path(project, name)
    fw = get_or_404(firewalls, name, path)
    del firewalls[name]
    apply(call.world, project, fw["network"])
    return start_op(call, project, "global", "delete", path, kind="firewall_delete", args={"target_id": fw["id"]})


# -- routers and their NATs -------------------------------------------------------------------

def router_path(project: str, region: str, name: str) -> str:
    return f"projects/{project}/regions/{region}/routers/{name}"


def _nats(nats: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    out = []
    for nat in nats or []:
        if not nat.get("name"):
            raise invalid_argument("Required field 'resource.nats[0].name' not specified", reason="required")
        out.append({"natIpAllocateOption": "AUTO_ONLY", "endpointTypes": ["ENDPOINT_TYPE_VM"],
                    "enableEndpointIndependentMapping": False, **nat})
    return out


@handles("compute.routers.insert")
def insert_router(call: Call) -> Any:
    project, region = call.project_id, call.params["region"]
    body, name, key = insert_body(call, project, "routers", region, lambda n: router_path(project, region, n))
    path = router_path(project, region, name)
    network = find_network(call.world, project, body.get("network") or "")
    if network is None:
        raise not_found(network_path(project, parse_ref(body.get("network") or "default", "networks", project)[2]))
    router = stamp({**body, "network": network["selfLink"], "nats": _nats(body.get("nats")),
                    "region": link(f"projects/{project}/regions/{region}")},
                   call.world, "compute#router", path, call.now)
    collection(call, project, "routers")[key] = router
    return start_op(call, project, f"regions/{region}", "insert", path, kind="router_insert",
                    args={"target_id": router["id"]})


def _router(call: Call) -> tuple[str, str, str, dict[str, Any]]:
    project, region, name = call.project_id, call.params["region"], call.params["router"]
    router = get_or_404(collection(call, project, "routers"), f"{region}/{name}", router_path(project, region, name))
    return project, region, name, router


@handles("compute.routers.get")
def get_router(call: Call) -> Any:
    return public(_router(call)[3])


@handles("compute.routers.list")
def list_routers(call: Call) -> Any:
    project, region = call.project_id, call.params["region"]
    found = [r for k, r in collection(call, project, "routers").items() if k.startswith(f"{region}/")]
    return list_response(call, "compute#routerList", f"projects/{project}/regions/{region}/routers", found)


def _change_router(call: Call, replace: bool) -> Any:
    project, region, name, router = _router(call)
    body = dict(call.body or {})
    if replace:
        keep = {k: router[k] for k in ("kind", "id", "selfLink", "creationTimestamp", "region", "network")}
        router.clear()
        router.update({**body, **keep})
    else:
        router.update({k: v for k, v in body.items() if k not in ("kind", "id", "selfLink", "network", "region")})
    router["nats"] = _nats(router.get("nats"))
    router["fingerprint"] = fingerprint(router["nats"])
    return start_op(call, project, f"regions/{region}", "update" if replace else "patch",
                    router_path(project, region, name), kind="router_update")


@handles("compute.routers.patch")
def patch_router(call: Call) -> Any:
    return _change_router(call, replace=False)


@handles("compute.routers.update")
def update_router(call: Call) -> Any:
    return _change_router(call, replace=True)


@handles("compute.routers.delete")
def delete_router(call: Call) -> Any:
    project, region, name, router = _router(call)
    del collection(call, project, "routers")[f"{region}/{name}"]
    return start_op(call, project, f"regions/{region}", "delete", router_path(project, region, name),
                    kind="router_delete", args={"target_id": router["id"]})
