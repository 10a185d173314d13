"""GPUDirect families' and compact placement's documented constraints: the NICs each family's VMs
must have (count and vNIC types, infra/spec/gpu_networks.py), the families that boot from
Hyperdisk only, and what a COMPACT placement policy may hold (supported families, at most
COMPACT_PLACEMENT_MAX_VMS VMs, VMs that TERMINATE on host maintenance)."""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Sequence

from infra.spec import gpu_networks
from policy.declared import T_INSTANCE, Resource, as_list, mapping

T_RESOURCE_POLICY = "gcp:compute/resourcePolicy:ResourcePolicy"


def _name(r: Resource) -> str:
    return str(r.props.get("name", r.name))


def _nic_types(props: Mapping[str, Any]) -> list[str]:
    return [str(mapping(n).get("nicType") or "default") for n in as_list(props.get("networkInterfaces"))]


def gpudirect_nics(r: Resource) -> Iterator[str]:
    profile = gpu_networks.gpudirect(r.props.get("machineType")) if r.type == T_INSTANCE else None
    if profile is None:
        return
    types = _nic_types(r.props)
    want = ["GVNIC"] * profile.host_nics + [profile.gpu_nic_type] * profile.gpu_nics
    if types != want:
        yield (f"VM {_name(r)!r} is {profile.machine_type} ({profile.name}): it needs {profile.host_nics} gVNIC "
               f"NIC(s) then {profile.gpu_nics} {profile.gpu_nic_type} NICs, each on its own network, but declares "
               f"{len(types)} NIC(s) of types {types}; without them NCCL falls back to plain TCP on nic0")


def hyperdisk_boot(r: Resource) -> Iterator[str]:
    profile = gpu_networks.gpudirect(r.props.get("machineType")) if r.type == T_INSTANCE else None
    if profile is None or not profile.hyperdisk_only:
        return
    disk = str(mapping(mapping(r.props.get("bootDisk")).get("initializeParams")).get("type") or "pd-standard")
    if not disk.startswith("hyperdisk-"):
        yield (f"VM {_name(r)!r} is {profile.machine_type}, which takes Hyperdisk only, but its boot disk is "
               f"{disk!r}: use hyperdisk-balanced")


def _compact(r: Resource) -> bool:
    return r.type == T_RESOURCE_POLICY and \
        mapping(r.props.get("groupPlacementPolicy")).get("collocation") == "COLLOCATED"


def _policy_of(instance: Resource) -> str:
    return str(instance.props.get("resourcePolicies") or "")


def compact_placement_limits(resources: Sequence[Resource]) -> Iterator[tuple[str, str]]:
    for policy in filter(_compact, resources):
        name = str(policy.props.get("name", policy.name))
        members = [r for r in resources if r.type == T_INSTANCE and _policy_of(r).rsplit("/", 1)[-1] == name]
        limit = gpu_networks.COMPACT_PLACEMENT_MAX_VMS
        if len(members) > limit:
            yield policy.name, f"compact placement policy {name!r} holds {len(members)} VMs; at most {limit}"
        for vm in members:
            machine = str(vm.props.get("machineType", ""))
            if not gpu_networks.takes_compact_placement(machine):
                yield vm.name, (f"VM {_name(vm)!r} ({machine}) is in compact placement policy {name!r}, which "
                                f"takes {', '.join(gpu_networks.COMPACT_PLACEMENT_FAMILIES)} machines only")
            if mapping(vm.props.get("scheduling")).get("onHostMaintenance") != "TERMINATE":
                yield vm.name, (f"VM {_name(vm)!r} is in compact placement policy {name!r} but would live-migrate: "
                                "compactly placed VMs must set on_host_maintenance='TERMINATE'")
