"""VPC networks and subnetworks.

https://cloud.google.com/compute/docs/reference/rest/v1/networks
https://cloud.google.com/compute/docs/reference/rest/v1/subnetworks
A resource exists from its insert on (a second insert of the name: 409 alreadyExists); a delete
takes effect when its operation is done. GCE's dependency rules:
  - a network that subnetworks, firewalls, routers, instances or TPU nodes use is not deleted:
    its delete operation fails with RESOURCE_IN_USE_BY_ANOTHER_RESOURCE, "The network resource
    '...' is already being used by '...'" (an operation error, HTTP 400:
    https://github.com/googleapis/java-compute/pull/161, https://github.com/kubernetes/kops/issues/13855);
  - a subnetwork with instances (or TPU workers) is refused at once, 400
    resourceInUseByAnotherResource (https://github.com/genevieve/leftovers/issues/6).
A deleted network is removed from the machine backend (remove_network).
Auto-mode networks (autoCreateSubnetworks: true) get one subnetwork per simulated region from
10.128.0.0/9, /20 each in region order (GCP's own table assigns them differently).
In the simulator's words (no GCE text found): overlapping ranges in one network, a subnetwork
patch with a stale fingerprint (GCE requires it: subnetworks/patch), an unparseable range.
Delay keys: network_insert, network_delete, subnetwork_insert, subnetwork_delete, subnetwork_update.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from gcpsim import operations
from gcpsim.apis import compute_addresses, compute_network_profiles
from gcpsim.apis.compute_catalog import REGIONS
from gcpsim.apis.compute_common import (
    backend, check_name, collection, fingerprint, get_or_404, in_use, insert_body, link, list_response,
    operation_error, parse_ref, public, require_body, stamp, start_op)
from gcpsim.errors import already_exists, invalid_argument, not_found
from gcpsim.routes import Call, handles
from gcpsim.state import World


def network_path(project: str, name: str) -> str:
    return f"projects/{project}/global/networks/{name}"


def subnet_path(project: str, region: str, name: str) -> str:
    return f"projects/{project}/regions/{region}/subnetworks/{name}"


def find_subnetwork(world: World, project: str, ref: str, region: str | None) -> dict[str, Any] | None:
    p, r, name = parse_ref(ref, "subnetworks", project, region)
    return collection(world, p, "subnetworks").get(f"{r}/{name}")


def find_network(world: World, project: str, ref: str) -> dict[str, Any] | None:
    p, _, name = parse_ref(ref, "networks", project)
    return collection(world, p, "networks").get(name)


# -- networks ---------------------------------------------------------------------------------

@handles("compute.networks.insert")
def insert_network(call: Call) -> Any:
    project = call.project_id
    body, name, _ = insert_body(call, project, "networks", None, lambda n: network_path(project, n))
    networks = collection(call, project, "networks")
    path = network_path(project, name)
    auto = bool(body.get("autoCreateSubnetworks"))
    profile = compute_network_profiles.resolve(project, body["networkProfile"]) if body.get("networkProfile") else None
    if profile is not None:
        body = {**body, "networkProfile": profile["selfLink"]}
    default_mtu = compute_network_profiles.RDMA_DEFAULT_MTU if profile else 1460
    network = stamp({**body, "autoCreateSubnetworks": auto, "subnetworks": [], "mtu": body.get("mtu", default_mtu),
                     "routingConfig": body.get("routingConfig") or {"routingMode": "REGIONAL"},
                     "networkFirewallPolicyEnforcementOrder": body.get(
                         "networkFirewallPolicyEnforcementOrder", "AFTER_CLASSIC_FIREWALL")},
                    call.world, "compute#network", path, call.now)
    network["selfLinkWithId"] = link(f"projects/{project}/global/networks/{network['id']}")
    networks[name] = network
    if auto:
        for i, region in enumerate(REGIONS):
            cidr = str(ipaddress.ip_network("10.128.0.0/20").network_address + i * 4096) + "/20"
            _create_subnetwork(call, project, region, {"name": name, "network": path, "ipCidrRange": cidr})
    return start_op(call, project, "global", "insert", path, kind="network_insert",
                    args={"target_id": network["id"]})


@handles("compute.networks.get")
def get_network(call: Call) -> Any:
    project, name = call.project_id, call.params["network"]
    return public(get_or_404(collection(call, project, "networks"), name, network_path(project, name)))


@handles("compute.networks.list")
def list_networks(call: Call) -> Any:
    p = call.project_id
    return list_response(call, "compute#networkList", f"projects/{p}/global/networks",
                         collection(call, p, "networks").values())


@handles("compute.networks.patch")
def patch_network(call: Call) -> Any:
    project, name = call.project_id, call.params["network"]
    network = get_or_404(collection(call, project, "networks"), name, network_path(project, name))
    for key in ("routingConfig", "mtu", "description", "networkFirewallPolicyEnforcementOrder"):
        if key in (call.body or {}):
            network[key] = call.body[key]
    return start_op(call, project, "global", "patch", network_path(project, name), kind="network_update")


def network_users(world: World, project: str, name: str) -> list[str]:
    """Paths of what uses the network, in the order GCE names them (subnetworks first)."""
    path = network_path(project, name)

    def uses(ref: str | None) -> bool:
        return bool(ref) and parse_ref(str(ref), "networks", project)[::2] == (project, name)

    users = [public(s)["selfLink"] for s in collection(world, project, "subnetworks").values() if uses(s["network"])]
    users += [f["selfLink"] for f in collection(world, project, "firewalls").values() if uses(f["network"])]
    users += [r["selfLink"] for r in collection(world, project, "routers").values() if uses(r["network"])]
    for inst in collection(world, project, "instances").values():
        if any(uses(nic.get("network")) for nic in inst.get("networkInterfaces", [])):
            users.append(inst["selfLink"])
    for node in world.collection(project, "tpu.nodes").values():
        if uses(node.get("networkConfig", {}).get("network")):
            users.append(node["name"])
    return [u.split("/compute/v1/")[-1] for u in users if u != link(path)]


@handles("compute.networks.delete")
def delete_network(call: Call) -> Any:
    project, name = call.project_id, call.params["network"]
    path = network_path(project, name)
    network = get_or_404(collection(call, project, "networks"), name, path)
    # An auto-mode network's own subnetworks go with it.
    users = [u for u in network_users(call.world, project, name)
             if not (network["autoCreateSubnetworks"] and u.endswith(f"/subnetworks/{name}"))]
    if users:
        fail = operation_error(400, "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE",
                               f"The network resource '{path}' is already being used by '{users[0]}'")
        return start_op(call, project, "global", "delete", path, kind="network_delete", fail=fail)
    # Nothing uses it: its trace on this machine goes now, the resource when the operation is done.
    backend(call.world).remove_network(f"{project}/{name}")
    return start_op(call, project, "global", "delete", path, kind="network_delete",
                    then="compute.network.deleted", args={"project": project, "name": name,
                                                          "target_id": network["id"]})


@operations.completion("compute.network.deleted")
def _network_deleted(world: World, op: dict[str, Any], _at: float) -> None:
    project, name = op["args"]["project"], op["args"]["name"]
    subnets = collection(world, project, "subnetworks")
    for key in [k for k, s in subnets.items() if s["network"].endswith(f"/networks/{name}")]:
        del subnets[key]
    collection(world, project, "networks").pop(name, None)


# -- subnetworks ------------------------------------------------------------------------------

def _check_range(world: World, project: str, network: str, cidr: str | None, name: str) -> str:
    if not cidr:
        raise invalid_argument("Required field 'resource.ipCidrRange' not specified", reason="required")
    try:
        net = ipaddress.ip_network(cidr)
    except ValueError:
        raise invalid_argument(f"Invalid value for field 'resource.ipCidrRange': '{cidr}'. "
                               "Invalid IPCidrRange: " + cidr) from None
    _check_range_against(collection(world, project, "subnetworks").values(), network, net)
    return str(net)


def _check_range_against(others: Any, network: str, net: Any) -> None:
    for other in others:
        if other["network"] == network and ipaddress.ip_network(other["ipCidrRange"]).overlaps(net):
            raise invalid_argument(f"Invalid IPCidrRange: {net} conflicts with existing subnetwork "
                                   f"'{other['name']}' in region '{other['region'].rsplit('/', 1)[-1]}'.")


def _create_subnetwork(call: Call, project: str, region: str, body: dict[str, Any]) -> dict[str, Any]:
    name = check_name(body)
    subnets = collection(call, project, "subnetworks")
    path = subnet_path(project, region, name)
    if f"{region}/{name}" in subnets:
        raise already_exists(path)
    if not body.get("network"):
        raise invalid_argument("Required field 'resource.network' not specified", reason="required")
    net_project, _, net_name = parse_ref(body["network"], "networks", project)
    network = collection(call, net_project, "networks").get(net_name)
    if network is None:
        raise not_found(network_path(net_project, net_name))
    cidr = _check_range(call.world, project, network["selfLink"], body.get("ipCidrRange"), name)
    subnet = stamp({**body, "network": network["selfLink"], "ipCidrRange": cidr,
                    "region": link(f"projects/{project}/regions/{region}"),
                    "gatewayAddress": str(ipaddress.ip_network(cidr).network_address + 1),
                    "privateIpGoogleAccess": bool(body.get("privateIpGoogleAccess")),
                    "stackType": body.get("stackType", "IPV4_ONLY"), "purpose": body.get("purpose", "PRIVATE")},
                   call.world, "compute#subnetwork", path, call.now)
    subnet["fingerprint"] = fingerprint(public(subnet))
    subnets[f"{region}/{name}"] = subnet
    network["subnetworks"] = sorted({*network["subnetworks"], subnet["selfLink"]})
    return subnet


def _subnet(call: Call) -> tuple[str, str, str, dict[str, Any]]:
    project, region, name = call.project_id, call.params["region"], call.params["subnetwork"]
    subnet = get_or_404(collection(call, project, "subnetworks"), f"{region}/{name}", subnet_path(project, region, name))
    return project, region, name, subnet


@handles("compute.subnetworks.insert")
def insert_subnetwork(call: Call) -> Any:
    project, region = call.project_id, call.params["region"]
    subnet = _create_subnetwork(call, project, region, require_body(call))
    return start_op(call, project, f"regions/{region}", "insert", subnet["selfLink"].split("/compute/v1/")[-1],
                    kind="subnetwork_insert", args={"target_id": subnet["id"]})


@handles("compute.subnetworks.get")
def get_subnetwork(call: Call) -> Any:
    return public(_subnet(call)[3])


@handles("compute.subnetworks.list")
def list_subnetworks(call: Call) -> Any:
    project, region = call.project_id, call.params["region"]
    found = [s for k, s in collection(call, project, "subnetworks").items() if k.startswith(f"{region}/")]
    return list_response(call, "compute#subnetworkList", f"projects/{project}/regions/{region}/subnetworks", found)


def _updated(call: Call, project: str, region: str, subnet: dict[str, Any], op_type: str) -> Any:
    subnet["fingerprint"] = fingerprint(public(subnet))
    return start_op(call, project, f"regions/{region}", op_type, subnet["selfLink"].split("/compute/v1/")[-1],
                    kind="subnetwork_update")


@handles("compute.subnetworks.setPrivateIpGoogleAccess")
def set_private_ip_google_access(call: Call) -> Any:
    project, region, _, subnet = _subnet(call)
    subnet["privateIpGoogleAccess"] = bool((call.body or {}).get("privateIpGoogleAccess"))
    return _updated(call, project, region, subnet, "setPrivateIpGoogleAccess")


@handles("compute.subnetworks.expandIpCidrRange")
def expand_ip_cidr_range(call: Call) -> Any:
    """A larger range containing the current one (subnetworks/expandIpCidrRange: a range can
    only grow; refused otherwise in the simulator's words)."""
    project, region, name, subnet = _subnet(call)
    wanted = (call.body or {}).get("ipCidrRange") or ""
    try:
        bigger = ipaddress.IPv4Network(wanted)
    except ValueError:
        raise invalid_argument(f"Invalid value for field 'ipCidrRange': '{wanted}'.") from None
    current = ipaddress.IPv4Network(subnet["ipCidrRange"])
    if not (current.subnet_of(bigger) and bigger != current):
        raise invalid_argument(f"Invalid value for field 'ipCidrRange': '{wanted}'. The new range must contain "
                               f"the subnetwork's current range {current} and be larger.")
    others = [s for k, s in collection(call, project, "subnetworks").items() if k != f"{region}/{name}"]
    _check_range_against(others, subnet["network"], bigger)
    subnet["ipCidrRange"] = str(bigger)
    return _updated(call, project, region, subnet, "expandIpCidrRange")


@handles("compute.subnetworks.patch")
def patch_subnetwork(call: Call) -> Any:
    project, region, _, subnet = _subnet(call)
    body = dict(call.body or {})
    if body.get("fingerprint") != subnet["fingerprint"]:
        # https://cloud.google.com/compute/docs/reference/rest/v1/subnetworks/patch: the
        # fingerprint "must be provided in order to update the Subnetwork".
        raise operation_error(412, "conditionNotMet", "Invalid fingerprint.")
    for key in ("logConfig", "secondaryIpRanges", "privateIpGoogleAccess", "description", "stackType"):
        if key in body:
            subnet[key] = body[key]
    return _updated(call, project, region, subnet, "patch")


@handles("compute.subnetworks.delete")
def delete_subnetwork(call: Call) -> Any:
    project, region, name, subnet = _subnet(call)
    users = compute_addresses.internal_in_use(subnet)
    path = subnet_path(project, region, name)
    if users:
        raise in_use("subnetwork", path, _owner_path(sorted(users.values())[0]))
    return start_op(call, project, f"regions/{region}", "delete", path, kind="subnetwork_delete",
                    then="compute.subnetwork.deleted",
                    args={"project": project, "region": region, "name": name, "target_id": subnet["id"]})


def _owner_path(owner: str) -> str:
    """An address owner ("<project>/<zone>/<name>" or a TPU node's path) as GCE names a user."""
    if owner.startswith("projects/"):
        return owner
    project, zone, name = owner.split("/", 2)
    return f"projects/{project}/zones/{zone}/instances/{name}"


@operations.completion("compute.subnetwork.deleted")
def _subnetwork_deleted(world: World, op: dict[str, Any], _at: float) -> None:
    a = op["args"]
    subnet = collection(world, a["project"], "subnetworks").pop(f"{a['region']}/{a['name']}", None)
    if subnet is None:
        return
    net_project, _, net_name = parse_ref(subnet["network"], "networks", a["project"])
    network = collection(world, net_project, "networks").get(net_name)
    if network is not None:
        network["subnetworks"] = [s for s in network["subnetworks"] if s != subnet["selfLink"]]
