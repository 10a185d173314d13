"""Host maintenance on request: what GCE does to a VM whose host is to be serviced.

POST /trainctl-sim/v1/projects/{p}/zones/{z}/instances/{i}:maintenance   {"notice_seconds": 60}
As GCE does (https://cloud.google.com/compute/docs/metadata/getting-live-migration-notice,
https://cloud.google.com/compute/docs/gpus/gpu-host-maintenance): the guest's
`instance/maintenance-event` announces it first, as the instance's scheduling.onHostMaintenance
says (MIGRATE_ON_HOST_MAINTENANCE, or TERMINATE_ON_HOST_MAINTENANCE; GPU VMs cannot migrate),
60 s ahead, an hour ahead on GPU VMs (`notice_seconds` shortens it). Then a migrating VM goes on
(the value back to NONE), a terminating one is stopped (TERMINATED, its disk kept) and stays so
until it is started again. GCE would restart it by itself where automaticRestart is true; the
simulator leaves that to whoever recovers it (trainctl's repair starts it, as instances.start).
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

from gcpsim.apis.compute_common import backend as machine_backend
from gcpsim.apis.compute_instance_spec import machine
from gcpsim.apis.compute_instances import halt, step
from gcpsim.apis.compute_spot import named_instance
from gcpsim.errors import ApiError
from gcpsim.routes import admin
from gcpsim.state import World, ticker
from namespace_nodes.metadata import MAINTENANCE_EVENTS

if TYPE_CHECKING:
    from gcpsim.server import Simulator

EVENTS = dict(zip(("MIGRATE", "TERMINATE"), MAINTENANCE_EVENTS[1:]))  # by scheduling.onHostMaintenance
NOTICE_SECONDS, GPU_NOTICE_SECONDS = 60.0, 3600.0


@admin("POST", "projects/(?P<project>[^/]+)/zones/(?P<zone>[^/]+)/instances/(?P<instance>[^/:]+):maintenance")
def announce(sim: Simulator, m: re.Match[str], body: Any) -> Any:
    with sim.store.transaction() as world:
        project, inst, path = named_instance(world, m)
        if inst is None:
            raise ApiError(404, f"The resource '{path}' was not found")
        if inst["status"] != "RUNNING" or inst["_sim"].get("maintenance"):
            raise ApiError(400, f"{path} is {inst['status']}"
                                f"{' and under maintenance' if inst['_sim'].get('maintenance') else ''}: "
                                "only a RUNNING one can have host maintenance announced")
        event = EVENTS[inst["scheduling"].get("onHostMaintenance", "MIGRATE")]
        notice = float((body or {}).get("notice_seconds",
                                        GPU_NOTICE_SECONDS if inst["_sim"]["gpus"] else NOTICE_SECONDS))
        if notice < 0:
            raise ApiError(400, "notice_seconds must be 0 or more")
        inst["_sim"]["maintenance"] = {"event": event, "at": time.time() + notice}
        machine_backend(world).announce_maintenance(machine(world, project["id"], inst).key, event)
        return {"instance": path, "event": event, "at": inst["_sim"]["maintenance"]["at"]}


@ticker
def maintain(world: World, now: float) -> None:
    """Announced maintenance whose notice is over: the VM is migrated (goes on) or stopped."""
    for project in world.data["projects"].values():
        for inst in project.get("collections", {}).get("compute.instances", {}).values():
            due = inst["_sim"].get("maintenance")
            if due is None or due["at"] > now:
                continue
            inst["_sim"]["maintenance"] = None
            if inst["_sim"].get("deleting") or inst["status"] != "RUNNING":
                continue
            if due["event"] == EVENTS["MIGRATE"]:
                machine_backend(world).announce_maintenance(machine(world, project["id"], inst).key, "NONE")
            else:
                halt(world, project["id"], inst, due["at"], "instance_stop")
                step(world, project["id"], inst, now)
