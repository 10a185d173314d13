"""Addresses of simulated machines: internal ones from their subnetwork, external ones from a
pool unique in the whole world (every simulated project on this machine).

Internal: the lowest free address of the subnetwork's ipCidrRange, skipping the four GCP keeps
for itself in every primary range: the network address, the default gateway (first host) and
the second-to-last and last addresses (https://cloud.google.com/vpc/docs/subnets#reserved_ip_addresses_in_every_subnet).
The allocation is recorded on the subnetwork (under "_sim"), so the same address is never
handed out twice while its instance or TPU worker exists.

External (an access config's natIP, a TPU worker's externalIp): from the machine backend's
external range (real machines: the world's own /24 of EXTERNAL_POOL, external_ranges.py; no
machines: the whole pool), recorded in the world's "external-ips" names. The root namespace
routes each one to its network's edge, so two stacks whose subnetworks overlap (both
10.128.0.0/20) stay reachable by their external addresses, and two worlds never route the same
one. The range's network address, first host and broadcast are never handed out (the first
host is left for whatever gateway the machine backend puts on the range).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from gcpsim.errors import ApiError
from gcpsim.external_ranges import EXTERNAL_POOL
from gcpsim.state import World

EXTERNAL_NAMESPACE = "external-ips"


def _allocations(subnet: dict[str, Any]) -> dict[str, str]:
    return subnet.setdefault("_sim", {}).setdefault("allocated", {})


def _usable(cidr: str) -> tuple[int, int]:
    net = ipaddress.ip_network(cidr)
    # [first, end): the second-to-last and last addresses are GCP's
    return int(net.network_address) + 2, int(net.broadcast_address) - 1


def allocate_internal(subnet: dict[str, Any], owner: str, wanted: str | None = None) -> str:
    """An address of the subnetwork for `owner` ("<project>/<zone>/<name>"); `wanted` is a
    networkIP the caller asked for (refused, in the simulator's words, where it is outside
    the usable range or taken)."""
    first, end = _usable(subnet["ipCidrRange"])
    taken = _allocations(subnet)
    if wanted is not None:
        if not first <= int(ipaddress.ip_address(wanted)) < end or wanted in taken:
            raise ApiError(400, f"Invalid value for field 'resource.networkInterfaces[0].networkIP': "
                                f"'{wanted}'. The address is outside the subnetwork's usable range "
                                "or already in use.", reason="invalid")
        taken[wanted] = owner
        return wanted
    for n in range(first, end):
        ip = str(ipaddress.ip_address(n))
        if ip not in taken:
            taken[ip] = owner
            return ip
    raise ApiError(400, f"IP space of '{subnet['selfLink'].split('/compute/v1/')[-1]}' is exhausted.",
                   reason="ipSpaceExhausted")


def release_internal(subnet: dict[str, Any] | None, ip: str | None) -> None:
    if subnet is not None and ip is not None:
        _allocations(subnet).pop(ip, None)


def internal_in_use(subnet: dict[str, Any]) -> dict[str, str]:
    """address -> owner, for the subnetwork's users (delete refuses while any exist)."""
    return dict(_allocations(subnet))


def external_range(world: World) -> ipaddress.IPv4Network:
    """Where this world's external addresses come from (its machine backend decides)."""
    backend = world.backend
    return backend.external_range() if backend is not None else EXTERNAL_POOL


def allocate_external(world: World, owner: str) -> str:
    taken = world.names(EXTERNAL_NAMESPACE)
    pool = external_range(world)
    hosts = pool.hosts()
    next(hosts)  # the first host stays free (see the module docstring)
    for ip in hosts:
        if str(ip) not in taken:
            taken[str(ip)] = owner
            return str(ip)
    raise ApiError(403, "Quota 'IN_USE_ADDRESSES' exceeded: the simulator's external address range "
                        f"{pool} is used up.", reason="quotaExceeded")


def release_external(world: World, ip: str | None) -> None:
    if ip is not None:
        world.names(EXTERNAL_NAMESPACE).pop(ip, None)
