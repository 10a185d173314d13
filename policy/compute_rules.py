"""Compute Engine's constraints: GPU VMs stop for host maintenance, bundled-GPU machine types
declare no accelerators, spot scheduling is consistent, Spot VMs (and spot GKE nodes) ask for no
reserved capacity, SSH is never open to the internet, and ssh-keys metadata comes with OS Login off."""

from __future__ import annotations

import ipaddress
from typing import Any, Iterator, Mapping

from policy.declared import (T_FIREWALL, T_INSTANCE, T_NODEPOOL, T_TPU_VM, Resource, as_list, is_false_string,
                             mapping)


_BUNDLED_GPU_FAMILIES = ("a2", "a3", "a4", "g2", "g4")


def _machine_family(props: Mapping[str, Any]) -> str:
    machine = props.get("machineType")
    return machine.split("-", 1)[0].lower() if isinstance(machine, str) else ""


def _has_gpu(props: Mapping[str, Any]) -> bool:
    return bool(as_list(props.get("guestAccelerators"))) or _machine_family(props) in _BUNDLED_GPU_FAMILIES


def gpu_terminate(r: Resource) -> Iterator[str]:
    if r.type == T_INSTANCE and _has_gpu(r.props):
        policy = mapping(r.props.get("scheduling")).get("onHostMaintenance")
        if policy != "TERMINATE":
            yield (f"VM {r.props.get('name', r.name)!r} has GPUs but scheduling.onHostMaintenance is "
                   f"{policy or 'unset (MIGRATE)'}; GPU VMs cannot live-migrate: set "
                   "on_host_maintenance='TERMINATE'")


def bundled_gpu_no_accelerators(r: Resource) -> Iterator[str]:
    if r.type == T_INSTANCE and _machine_family(r.props) in _BUNDLED_GPU_FAMILIES \
            and "guestAccelerators" in r.props:
        yield (f"VM {r.props.get('name', r.name)!r} is {r.props.get('machineType')}, whose GPUs come "
               f"with the machine type, yet declares guestAccelerators="
               f"{r.props.get('guestAccelerators')!r}: the API reports the attached GPUs, so the "
               "declaration differs from the VM on every update; leave guest_accelerators out")


def spot_scheduling(r: Resource) -> Iterator[str]:
    if r.type != T_INSTANCE:
        return
    s = mapping(r.props.get("scheduling"))
    name = r.props.get("name", r.name)
    if s.get("provisioningModel") == "SPOT":
        if s.get("preemptible") is not True:
            yield f"spot VM {name!r}: set scheduling preemptible=True (SPOT requires it)"
        if s.get("automaticRestart") is not False:
            yield f"spot VM {name!r}: set scheduling automatic_restart=False (Spot VMs cannot restart automatically)"
        if s.get("onHostMaintenance") not in (None, "TERMINATE"):
            yield f"spot VM {name!r}: set on_host_maintenance='TERMINATE' (Spot VMs cannot live-migrate)"
        if s.get("instanceTerminationAction") not in ("STOP", "DELETE"):
            yield (f"spot VM {name!r}: set instance_termination_action to 'STOP' or 'DELETE' "
                   "(what happens when the capacity is reclaimed)")
    elif s.get("instanceTerminationAction") and not (s.get("maxRunDuration") or s.get("terminationTime")):
        yield (f"standard VM {name!r} sets instance_termination_action "
               f"{s.get('instanceTerminationAction')!r} without a max run duration or termination "
               "time: it applies only to Spot VMs or time-limited VMs; remove it")


def _spot_affinity(r: Resource) -> tuple[str, Mapping[str, Any]] | None:
    """(what to call it, its reservation affinity) for a spot VM or a spot GKE node pool."""
    if r.type == T_INSTANCE:
        s = mapping(r.props.get("scheduling"))
        if s.get("provisioningModel") == "SPOT" or s.get("preemptible") is True:
            return f"spot VM {r.props.get('name', r.name)!r}", mapping(r.props.get("reservationAffinity"))
    if r.type == T_NODEPOOL:
        config = mapping(r.props.get("nodeConfig"))
        if config.get("spot") is True or config.get("preemptible") is True:
            return (f"spot GKE node pool {r.props.get('name', r.name)!r}",
                    mapping(config.get("reservationAffinity")))
    return None


def spot_no_reservation(r: Resource) -> Iterator[str]:
    found = _spot_affinity(r)
    if found is None:
        return
    what, affinity = found
    # an instance's affinity says `type`, a node pool's `consumeReservationType`
    wanted = affinity.get("type") or affinity.get("consumeReservationType")
    if wanted and wanted != "NO_RESERVATION":
        yield (f"{what} asks for reserved capacity (reservation affinity {wanted}), and Compute Engine "
               "cannot consume a reservation to create Spot VMs or preemptible instances: set the affinity "
               "to NO_RESERVATION (trainctl: reservation: none), or make the VMs standard (spot: false)")


def _ports_cover(ports: list[Any], port: int) -> bool:
    for p in ports:
        text = str(p).strip()
        low, _, high = text.partition("-")
        if low.isdigit() and int(low) <= port <= int(high if high.isdigit() else low):
            return True
    return False


def _opens_ssh(allow: Mapping[str, Any]) -> bool:
    protocol = str(allow.get("protocol", "")).lower()
    if protocol not in ("tcp", "all", "6"):
        return False
    ports = as_list(allow.get("ports"))
    return not ports or _ports_cover(ports, 22)  # no ports = every port


def _is_anywhere(cidr: Any) -> bool:
    try:
        return ipaddress.ip_network(str(cidr), strict=False).prefixlen == 0
    except ValueError:
        return False


def firewall_no_public_ssh(r: Resource) -> Iterator[str]:
    if r.type != T_FIREWALL or str(r.props.get("direction", "INGRESS")).upper() != "INGRESS":
        return
    if r.props.get("disabled") is True:
        return
    anywhere = [c for c in as_list(r.props.get("sourceRanges")) if _is_anywhere(c)]
    if anywhere and any(_opens_ssh(mapping(a)) for a in as_list(r.props.get("allows"))):
        yield (f"firewall {r.props.get('name', r.name)!r} opens SSH (tcp:22) to {', '.join(anywhere)}: "
               "allow only your own ranges (trainctl:ssh.source_ranges) or use IAP (35.235.240.0/20)")


def oslogin_off_with_ssh_keys(r: Resource) -> Iterator[str]:
    if r.type not in (T_INSTANCE, T_TPU_VM):
        return
    meta = mapping(r.props.get("metadata"))
    if ("ssh-keys" in meta or "sshKeys" in meta) and not is_false_string(meta.get("enable-oslogin")):
        yield (f"{r.props.get('name', r.name)!r} puts keys in ssh-keys metadata but does not set "
               f"enable-oslogin to FALSE (it is {meta.get('enable-oslogin', 'unset')!r}); where "
               "OS Login is on (e.g. by project metadata or org policy) ssh-keys are ignored: set "
               "metadata enable-oslogin='FALSE'")
