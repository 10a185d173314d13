"""Stockouts: a zone without capacity for a request, as the project file describes them
(`stockouts: [{zone, machine_type, accelerator, spot}]`, project.py) and as they can be switched
at run time: PUT /trainctl-sim/v1/projects/{p}/stockouts with the list (replaces it).

GCE answers an insert (or start) it cannot place with a failed operation: errors[].code
ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS, HTTP 503, "The zone 'projects/P/zones/Z' does not have
enough resources available to fulfill the request.  '(resource type:compute)'.", and details: a
Help link to the troubleshooting page, a LocalizedMessage naming the VM shape and the zones that
still have it, an ErrorInfo (reason resource_availability, metadatas attachment / vmType / zone /
zonesAvailable): https://github.com/kubernetes/k8s.io/issues/9834,
https://github.com/scylladb/scylla-cluster-tests/issues/12477 (503 SERVICE UNAVAILABLE),
https://github.com/GoogleCloudPlatform/ai-on-gke/issues/849 (no accelerator: no "with ..." part).
Cloud TPU's own stockout wording is in tpu_common.py.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from gcpsim.apis.compute_catalog import ZONES, machine_type
from gcpsim.apis.compute_common import admin_project, operation_error, region_of
from gcpsim.errors import ApiError
from gcpsim.facts.gpus import GPUS
from gcpsim.project import Stockout
from gcpsim.routes import admin

if TYPE_CHECKING:
    from gcpsim.server import Simulator

TROUBLESHOOTING = "https://cloud.google.com/compute/docs/resource-error"


def stocked_out(project: dict[str, Any], zone: str, machine: str | None, accelerators: dict[str, int],
                spot: bool) -> bool:
    return stockout_of(project, zone, machine, accelerators, spot) is not None


def stockout_of(project: dict[str, Any], zone: str, machine: str | None, accelerators: dict[str, int],
                spot: bool) -> dict[str, Any] | None:
    """The project file's stockout a request in `zone` meets, if any."""
    for s in project.get("stockouts", []):
        if s["zone"] != zone:
            continue
        if s.get("machine_type") not in (None, machine):
            continue
        if s.get("accelerator") is not None and s["accelerator"] not in accelerators:
            continue
        if s.get("spot") is not None and s["spot"] != spot:
            continue
        return dict(s)
    return None


def instance_stockout(project: dict[str, Any], inst: dict[str, Any]) -> ApiError | None:
    """The error an instance's insert or start fails with when its zone has no capacity."""
    sim = inst["_sim"]
    zone, machine = sim["zone"], sim["machine_type"]
    if not stocked_out(project, zone, machine, sim["gpus"], sim["spot"]):
        return None
    offered = machine_type(zone, machine)
    bundled = offered.bundled_gpu if offered else None
    attached = {g: n for g, n in sim["gpus"].items() if g != bundled}
    # GCE names the zones of the region that have this very shape: the machine type, its GPUs, capacity
    elsewhere = [z for z in ZONES if region_of(z) == region_of(zone) and z != zone
                 and machine_type(z, machine) is not None
                 and all(z in GPUS[g].zones for g in sim["gpus"] if g in GPUS)
                 and not stocked_out(project, z, machine, sim["gpus"], sim["spot"])]
    shape = f"A {machine} VM instance"
    if attached:
        shape += " with " + ", ".join(f"{n} {g} accelerator(s)" for g, n in attached.items())
    advice = (f" Consider trying your request in the {', '.join(elsewhere)} zone(s), which currently has "
              "capacity to accommodate your request." if elsewhere else "")
    localized = (f"{shape} is currently unavailable in the {zone} zone.{advice} Alternatively, you can try "
                 "your request again with a different VM hardware configuration or at a later time. For more "
                 "information, see the troubleshooting documentation.")
    details: list[dict[str, Any]] = [{"help": {"links": [{"description": "Troubleshooting documentation", "url": TROUBLESHOOTING}]}},
               {"localizedMessage": {"locale": "en-US", "message": localized}},
               {"errorInfo": {"domain": "compute.googleapis.com", "reason": "resource_availability",
                              "metadatas": {"attachment": ",".join(f"{g}:{n}" for g, n in attached.items()),
                                            "vmType": machine, "zone": zone,
                                            "zonesAvailable": ",".join(elsewhere)}}}]
    message = (f"The zone 'projects/{project['id']}/zones/{zone}' does not have enough resources available "
               "to fulfill the request.  '(resource type:compute)'.")
    return operation_error(503, "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", message, details)


@admin("PUT", "projects/(?P<project>[^/]+)/stockouts")
def set_stockouts(sim: Simulator, m: re.Match[str], body: Any) -> Any:
    """Replaces the project's stockouts: a list of {zone, machine_type?, accelerator?, spot?}."""
    if not isinstance(body, list):
        raise ApiError(400, "the body must be a list of stockouts ({zone, machine_type, accelerator, spot})")
    try:
        stockouts = [Stockout.model_validate(s).model_dump() for s in body]
    except ValueError as exc:
        raise ApiError(400, f"invalid stockout: {exc}") from None
    with sim.store.transaction() as world:
        project = admin_project(world, m["project"])
        project["stockouts"] = stockouts
        return {"stockouts": stockouts}
