"""Compute Engine's network profiles (read-only): the RoCE profile `<zone>-vpc-roce` of every zone
that offers a machine type with MRDMA NICs.

https://cloud.google.com/compute/docs/reference/rest/v1/networkProfiles (get, list; the
NetworkProfile schema of compute.v1's discovery document).
https://cloud.google.com/vpc/docs/rdma-network-profiles: the RoCE profile is named `ZONE-vpc-roce`,
is offered "in the same zones as their supported machine types" (A3 Ultra, A4), its networks take
MRDMA NICs only, and a network created with it defaults to an 8896-byte MTU.
Not simulated: the Falcon (`-vpc-falcon`, H4D) and bare-metal (`-vpc-roce-metal`) profiles, and the
profile's other `features` (the docs' table names them; trainctl reads none of them).
"""

from __future__ import annotations

from typing import Any

from gcpsim.apis.compute_catalog import CREATED
from gcpsim.apis.compute_common import link, list_response, parse_ref, stable_id
from gcpsim.errors import not_found
from gcpsim.facts.gpu_networks import MRDMA_MACHINE_TYPES
from gcpsim.facts.gpus import GPUS
from gcpsim.facts.machine_types import MACHINE_TYPES
from gcpsim.routes import Call, handles

ROCE_SUFFIX = "-vpc-roce"
RDMA_DEFAULT_MTU = 8896


def _roce_zones() -> tuple[str, ...]:
    gpus = {MACHINE_TYPES[m].bundled_gpu for m in MRDMA_MACHINE_TYPES}
    return tuple(sorted({z for g in gpus if g for z in GPUS[g].zones}))


PROFILES: tuple[str, ...] = tuple(f"{z}{ROCE_SUFFIX}" for z in _roce_zones())


def profile_path(project: str, name: str) -> str:
    return f"projects/{project}/global/networkProfiles/{name}"


def network_profile(project: str, name: str) -> dict[str, Any] | None:
    if name not in PROFILES:
        return None
    zone = name.removesuffix(ROCE_SUFFIX)
    return {"kind": "compute#networkProfile", "id": stable_id("networkProfile", name), "name": name,
            "description": f"RDMA over Converged Ethernet (RoCE v2) network profile for {zone}",
            "creationTimestamp": CREATED, "location": {"name": zone, "scope": "ZONE"},
            "profileType": {"networkType": "RDMA", "rdmaSubtype": "ROCE"},
            "features": {"interfaceTypes": ["MRDMA"]},
            "selfLink": link(profile_path(project, name)),
            "selfLinkWithId": link(profile_path(project, stable_id("networkProfile", name)))}


def resolve(project: str, ref: str) -> dict[str, Any]:
    """The profile a network's `networkProfile` names (a full or partial URL), or 404."""
    p, _, name = parse_ref(ref, "networkProfiles", project)
    found = network_profile(p, name)
    if found is None:
        raise not_found(profile_path(p, name))
    return found


@handles("compute.networkProfiles.get")
def get_network_profile(call: Call) -> Any:
    return resolve(call.project_id, call.params["networkProfile"])


@handles("compute.networkProfiles.list")
def list_network_profiles(call: Call) -> Any:
    p = call.project_id
    return list_response(call, "compute#networkProfileList", f"projects/{p}/global/networkProfiles",
                         [network_profile(p, n) or {} for n in PROFILES])
