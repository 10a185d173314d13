"""An instances.insert body checked as GCE checks it, turned into the stored instance, its boot
disk, its addresses, and the Machine the backend makes of it.

GCE's answers (400 unless said):
  - machine type unknown in the zone: "Invalid value for field 'resource.machineType': '<as sent>'.
    Machine type with name 'x' does not exist in zone 'z'." (https://github.com/gruntwork-io/terratest/issues/1132);
  - an accelerator, image, disk type, subnetwork, network or resource policy that does not
    exist: 404 "The resource '<path>' was not found" (https://github.com/fastai/course-v3/pull/430);
  - GPUs without onHostMaintenance TERMINATE: "Instances with guest accelerators do not support
    live migration.", badRequest (https://github.com/openshift/release/pull/63296; bundled GPUs
    too: an a2-highgpu-1g there);
  - a custom-mode network without a subnetwork: "Invalid value for field
    'resource.networkInterfaces[0].subnetwork': ''. Subnetwork should be specified for custom
    subnetmode network";
  - an unknown zone: "Invalid value for field 'zone': 'x'. Unknown zone." (https://github.com/inspec/inspec-gcp/issues/301).
In the simulator's words (no GCE text found): no boot disk, a disk smaller than its image, a
machine type written as a bare name, a static natIP (the addresses API is not simulated), a NIC
whose type does not match its network (MRDMA exactly on networks with an RDMA network profile).
Spot VMs get automaticRestart false and onHostMaintenance TERMINATE where the caller left them
unset; their instanceTerminationAction defaults to STOP (Scheduling: "default action").
A provisioning model the machine series is not offered with (facts/provisioning_models.py: A3 Ultra
and A4 are not STANDARD), or RESERVATION_BOUND without a SPECIFIC_RESERVATION affinity, is refused
in the simulator's words (no GCE text found), as an invalid value of resource.scheduling.provisioningModel.
"""

from __future__ import annotations

from typing import Any

from gcpsim.apis import access_tokens, compute_addresses, compute_catalog
from gcpsim.apis.compute_common import (
    collection, fingerprint, link, parse_ref, public, region_of, stamp)
from gcpsim.apis.compute_networks import find_network, find_subnetwork, subnet_path
from gcpsim.errors import ApiError, already_exists, invalid_argument, not_found
from gcpsim.facts import provisioning_models
from gcpsim.facts.machine_types import MachineShape
from gcpsim.machines import Machine, metadata_items
from gcpsim.state import World


def check_zone(zone: str) -> None:
    if not compute_catalog.zone_exists(zone):
        raise invalid_argument(f"Invalid value for field 'zone': '{zone}'. Unknown zone.")


def instance_path(project: str, zone: str, name: str) -> str:
    return f"projects/{project}/zones/{zone}/instances/{name}"


def _machine_type(project: str, zone: str, value: str | None) -> MachineShape:
    if not value:
        raise ApiError(400, "Required field 'resource.machineType' not specified", reason="required")
    if "/" not in value:
        raise invalid_argument(f"Invalid value for field 'resource.machineType': '{value}'. The URL is malformed.")
    _, _, name = parse_ref(value, "machineTypes", project, zone)
    m = compute_catalog.machine_type(zone, name)
    if m is None:
        raise invalid_argument(f"Invalid value for field 'resource.machineType': '{value}'. "
                               f"Machine type with name '{name}' does not exist in zone '{zone}'.")
    return m


def _gpus(project: str, zone: str, body: dict[str, Any], m: MachineShape) -> dict[str, int]:
    gpus: dict[str, int] = {m.bundled_gpu: m.bundled_gpu_count} if m.bundled_gpu else {}
    for acc in body.get("guestAccelerators") or []:
        _, _, name = parse_ref(acc.get("acceleratorType", ""), "acceleratorTypes", project, zone)
        if compute_catalog.accelerator_type(zone, name) is None:
            raise not_found(f"projects/{project}/zones/{zone}/acceleratorTypes/{name}")
        gpus[name] = gpus.get(name, 0) + int(acc.get("acceleratorCount", 1))
    return gpus


def _scheduling(body: dict[str, Any], gpus: dict[str, int]) -> dict[str, Any]:
    s = dict(body.get("scheduling") or {})
    spot = s.get("provisioningModel") == "SPOT" or bool(s.get("preemptible"))
    if spot:
        s.setdefault("automaticRestart", False)
        s.setdefault("onHostMaintenance", "TERMINATE")
        s.setdefault("instanceTerminationAction", "STOP")
        s["preemptible"] = True
        s.setdefault("provisioningModel", "SPOT" if s.get("provisioningModel") == "SPOT" else "STANDARD")
    s.setdefault("onHostMaintenance", "MIGRATE")
    s.setdefault("automaticRestart", True)
    s.setdefault("preemptible", False)
    s.setdefault("provisioningModel", "STANDARD")
    if gpus and s["onHostMaintenance"] != "TERMINATE":
        raise ApiError(400, "Instances with guest accelerators do not support live migration.", reason="badRequest")
    return s


def _check_provisioning_model(body: dict[str, Any], machine_type: str, model: str) -> None:
    field = f"Invalid value for field 'resource.scheduling.provisioningModel': '{model}'."
    offered = provisioning_models.offered(machine_type)
    if offered is not None and model not in offered:
        raise invalid_argument(f"{field} Machine type {machine_type} is offered with the "
                               f"{', '.join(offered)} provisioning models only.")
    needed = provisioning_models.AFFINITY_REQUIRED.get(model)
    affinity = (body.get("reservationAffinity") or {}).get("consumeReservationType", "ANY_RESERVATION")
    if needed and affinity != needed:
        raise invalid_argument(f"{field} A {model} instance needs reservationAffinity.consumeReservationType "
                               f"{needed}, not {affinity}.")


def _boot_disk(world: World, project: str, zone: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
    """The boot disk to create (a compute#disk), from disks[0].initializeParams."""
    boots = [d for d in body.get("disks") or [] if d.get("boot")] or (body.get("disks") or [])[:1]
    if not boots or not boots[0].get("initializeParams"):
        raise invalid_argument("Invalid value for field 'resource.disks': a boot disk with initializeParams "
                               "must be specified.")
    params = boots[0]["initializeParams"]
    source = params.get("sourceImage") or ""
    img_project, _, image_name = parse_ref(source.replace("/images/family/", "/families/"),
                                           "families" if "/family/" in source else "images", project)
    image = (compute_catalog.image_from_family(img_project, image_name) if "/family/" in source
             else compute_catalog.image(img_project, image_name))
    if image is None:
        kind = "images/family" if "/family/" in source else "images"
        raise not_found(f"projects/{img_project}/global/{kind}/{image_name}")
    _, _, disk_type = parse_ref(params.get("diskType") or "pd-standard", "diskTypes", project, zone)
    if disk_type not in compute_catalog.DISK_TYPES:
        raise not_found(f"projects/{project}/zones/{zone}/diskTypes/{disk_type}")
    size = int(params.get("diskSizeGb") or image["diskSizeGb"])
    if size < int(image["diskSizeGb"]):
        raise invalid_argument(f"Invalid value for field 'resource.disks[0].initializeParams.diskSizeGb': "
                               f"'{size}'. Requested disk size cannot be smaller than the image size "
                               f"({image['diskSizeGb']} GB)")
    disk_name = params.get("diskName") or name
    if f"{zone}/{disk_name}" in collection(world, project, "disks"):
        raise already_exists(f"projects/{project}/zones/{zone}/disks/{disk_name}")
    return {"name": disk_name, "sizeGb": str(size), "zone": link(f"projects/{project}/zones/{zone}"),
            "status": "READY", "sourceImage": image["selfLink"], "sourceImageId": image["id"],
            "type": link(f"projects/{project}/zones/{zone}/diskTypes/{disk_type}"),
            "labels": params.get("labels", {}), "physicalBlockSizeBytes": "4096", "architecture": "X86_64",
            "users": [link(instance_path(project, zone, name))], "_auto_delete": boots[0].get("autoDelete", True),
            "_device": boots[0].get("deviceName") or disk_name}


def _interfaces(world: World, project: str, zone: str, body: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(network interface as stored, its subnetwork record) per interface."""
    out = []
    for i, nic in enumerate(body.get("networkInterfaces") or [{"network": "global/networks/default"}]):
        subnet = None
        if nic.get("subnetwork"):
            subnet = find_subnetwork(world, project, nic["subnetwork"], region_of(zone))
            if subnet is None:
                p, r, n = parse_ref(nic["subnetwork"], "subnetworks", project, region_of(zone))
                raise not_found(subnet_path(p, r or region_of(zone), n))
        else:
            network = find_network(world, project, nic.get("network") or "global/networks/default")
            if network is None:
                raise not_found(f"projects/{project}/global/networks/"
                                f"{parse_ref(nic.get('network') or 'default', 'networks', project)[2]}")
            if not network["autoCreateSubnetworks"]:
                raise invalid_argument(f"Invalid value for field 'resource.networkInterfaces[{i}].subnetwork': ''. "
                                       "Subnetwork should be specified for custom subnetmode network")
            subnet = collection(world, project, "subnetworks").get(f"{region_of(zone)}/{network['name']}")
            if subnet is None:
                raise not_found(subnet_path(project, region_of(zone), network["name"]))
        if any(ac.get("natIP") for ac in nic.get("accessConfigs") or []):
            raise invalid_argument("Invalid value for field 'resource.networkInterfaces[0].accessConfigs[0].natIP': "
                                   "static external addresses are not simulated (leave natIP unset).")
        stored = {"kind": "compute#networkInterface", "name": f"nic{i}", "network": subnet["network"],
                  "subnetwork": subnet["selfLink"], "stackType": "IPV4_ONLY",
                  "accessConfigs": [{"kind": "compute#accessConfig", "type": "ONE_TO_ONE_NAT",
                                     "name": ac.get("name", "External NAT"),
                                     "networkTier": ac.get("networkTier", "PREMIUM")}
                                    for ac in (nic.get("accessConfigs") or [])[:1]]}
        if nic.get("networkIP"):
            stored["networkIP"] = nic["networkIP"]
        if nic.get("nicType"):
            stored["nicType"] = nic["nicType"]
        _check_nic_type(world, project, i, stored)
        out.append((stored, subnet))
    return out


def _check_nic_type(world: World, project: str, index: int, nic: dict[str, Any]) -> None:
    """A RoCE network takes MRDMA NICs only, and an MRDMA NIC only a RoCE network
    (https://cloud.google.com/vpc/docs/rdma-network-profiles, "RDMA network interfaces only")."""
    network = find_network(world, project, nic["network"]) or {}
    roce = bool(network.get("networkProfile"))
    if roce != (nic.get("nicType") == "MRDMA"):
        raise invalid_argument(
            f"Invalid value for field 'resource.networkInterfaces[{index}].nicType': '{nic.get('nicType', '')}'. "
            + ("A network with an RDMA network profile takes MRDMA network interfaces only." if roce
               else "An MRDMA network interface must be attached to a network with an RDMA network profile."))


def _check_policies(world: World, project: str, zone: str, body: dict[str, Any]) -> list[str]:
    found = []
    for ref in body.get("resourcePolicies") or []:
        p, r, name = parse_ref(ref, "resourcePolicies", project, region_of(zone))
        policy = collection(world, p, "resourcePolicies").get(f"{r}/{name}")
        if policy is None:
            raise not_found(f"projects/{p}/regions/{r}/resourcePolicies/{name}")
        found.append(policy["selfLink"])
    return found


def build(world: World, now: float, project: str, zone: str, body: dict[str, Any], name: str) -> dict[str, Any]:
    """The instance as stored (status PROVISIONING), without addresses yet; its boot disk and
    interfaces' subnetworks wait under "_sim" for `admit`."""
    m = _machine_type(project, zone, body.get("machineType"))
    gpus = _gpus(project, zone, body, m)
    disk = _boot_disk(world, project, zone, name, body)
    nics = _interfaces(world, project, zone, body)
    policies = _check_policies(world, project, zone, body)
    scheduling = _scheduling(body, gpus)
    _check_provisioning_model(body, m.name, scheduling["provisioningModel"])
    items = (body.get("metadata") or {}).get("items") or []
    tags = (body.get("tags") or {}).get("items") or []
    path = instance_path(project, zone, name)
    inst = {**{k: v for k, v in body.items() if k not in ("disks", "networkInterfaces", "sourceMachineImage")},
            "name": name, "zone": link(f"projects/{project}/zones/{zone}"),
            "machineType": link(f"projects/{project}/zones/{zone}/machineTypes/{m.name}"),
            "status": "PROVISIONING", "cpuPlatform": "Intel Cascade Lake", "startRestricted": False,
            "deletionProtection": bool(body.get("deletionProtection")), "canIpForward": bool(body.get("canIpForward")),
            "scheduling": scheduling, "labels": body.get("labels") or {},
            "labelFingerprint": fingerprint(body.get("labels") or {}),
            "metadata": {"kind": "compute#metadata", "items": items, "fingerprint": fingerprint(items)},
            "tags": {"items": tags, "fingerprint": fingerprint(tags)},
            "serviceAccounts": body.get("serviceAccounts") or [], "networkInterfaces": [n for n, _ in nics],
            "resourcePolicies": policies,
            "reservationAffinity": body.get("reservationAffinity") or {"consumeReservationType": "ANY_RESERVATION"}}
    if body.get("guestAccelerators"):
        inst["guestAccelerators"] = [{"acceleratorType": link(f"projects/{project}/zones/{zone}/acceleratorTypes/"
                                                              + parse_ref(a["acceleratorType"], "acceleratorTypes",
                                                                          project, zone)[2]),
                                      "acceleratorCount": int(a.get("acceleratorCount", 1))}
                                     for a in body["guestAccelerators"]]
    stamp(inst, world, "compute#instance", path, now)
    inst["fingerprint"] = fingerprint(inst)
    inst["_sim"] = {"zone": zone, "machine_type": m.name, "gpus": gpus, "spot": scheduling["preemptible"],
                    "flex_start": scheduling["provisioningModel"] == "FLEX_START",
                    "disk": disk, "subnets": [public(s)["selfLink"] for _, s in nics], "next": None}
    return inst


def admit(world: World, now: float, project: str, inst: dict[str, Any]) -> None:
    """Everything an accepted insert allocates: addresses, the boot disk."""
    sim, zone = inst["_sim"], inst["_sim"]["zone"]
    owner = f"{project}/{zone}/{inst['name']}"
    for nic, subnet_link in zip(inst["networkInterfaces"], sim["subnets"]):
        subnet = find_subnetwork(world, project, subnet_link, region_of(zone))
        assert subnet is not None
        nic["networkIP"] = compute_addresses.allocate_internal(subnet, owner, nic.get("networkIP"))
        for ac in nic["accessConfigs"]:
            ac["natIP"] = compute_addresses.allocate_external(world, owner)
        nic["fingerprint"] = fingerprint(nic)
    first = inst["networkInterfaces"][0]
    sim["internal"] = first["networkIP"]
    sim["external"] = first["accessConfigs"][0]["natIP"] if first["accessConfigs"] else None
    disk = sim.pop("disk")
    inst["disks"] = [{"kind": "compute#attachedDisk", "type": "PERSISTENT", "mode": "READ_WRITE",
                      "source": link(f"projects/{project}/zones/{zone}/disks/{disk['name']}"),
                      "deviceName": disk.pop("_device"), "index": 0, "boot": True,
                      "autoDelete": disk.pop("_auto_delete"), "interface": "SCSI", "diskSizeGb": disk["sizeGb"]}]
    path = f"projects/{project}/zones/{zone}/disks/{disk['name']}"
    collection(world, project, "disks")[f"{zone}/{disk['name']}"] = stamp(disk, world, "compute#disk", path, now)


def release(world: World, project: str, inst: dict[str, Any]) -> None:
    """What a deleted instance gives back: its addresses, its auto-delete boot disk."""
    zone = inst["_sim"]["zone"]
    for nic in inst["networkInterfaces"]:
        compute_addresses.release_internal(find_subnetwork(world, project, nic["subnetwork"], region_of(zone)),
                                           nic.get("networkIP"))
        for ac in nic.get("accessConfigs", []):
            compute_addresses.release_external(world, ac.get("natIP"))
    disks = collection(world, project, "disks")
    for attached in inst.get("disks", []):
        key = f"{zone}/{attached['source'].rsplit('/', 1)[-1]}"
        if attached.get("autoDelete") and key in disks:
            del disks[key]
        elif key in disks:
            disks[key]["users"] = [u for u in disks[key].get("users", []) if u != inst["selfLink"]]


def machine(world: World, project: str, inst: dict[str, Any]) -> Machine:
    sim, nic = inst["_sim"], inst["networkInterfaces"][0]
    subnet = find_subnetwork(world, project, nic["subnetwork"], region_of(sim["zone"]))
    accounts = inst.get("serviceAccounts") or [{}]
    p = world.project(project) or {}
    return Machine(
        key=f"{project}/{sim['zone']}/{inst['name']}", project=project, zone=sim["zone"], name=inst["name"],
        network=f"{project}/{parse_ref(nic['network'], 'networks', project)[2]}",
        subnet_cidr=subnet["ipCidrRange"] if subnet else "", internal_ip=sim["internal"],
        external_ip=sim.get("external"), metadata=metadata_items(inst["metadata"]),
        project_metadata=metadata_items({"items": p.get("commonInstanceMetadata", [])}),
        service_account=accounts[0].get("email"), scopes=tuple(accounts[0].get("scopes", ())),
        access_token=access_tokens.mint(world, accounts[0]["email"]) if accounts[0].get("email") else None,
        tags=tuple(inst["tags"]["items"]), spot=sim["spot"], accelerators=dict(sim["gpus"]),
        machine_type=sim["machine_type"])
