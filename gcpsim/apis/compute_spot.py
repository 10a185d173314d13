"""Spot VM preemption on request: what Google does to a spot VM when it reclaims it.

POST /trainctl-sim/v1/projects/{p}/zones/{z}/instances/{i}:preempt   {"grace_seconds": 30}
As GCE does (https://cloud.google.com/compute/docs/instances/spot#preemption-process): the guest
is told first (the metadata server's instance/preempted turns TRUE and its processes get
SIGTERM: backend.announce_preemption), and once its guest OS has shut down (backend.shut_down:
its programs have ended), at the latest once the grace period has passed, the VM is stopped or
deleted per scheduling.instanceTerminationAction (STOP unless DELETE). The grace period is a
most, not a wait: Compute Engine "allows a short time for the guest OS to fully shut down" and
forces the shutdown only if it has not finished by then
(https://cloud.google.com/compute/docs/instances/graceful-shutdown-overview); for a Spot VM that
time is 30 s between ACPI G2 Soft Off and G3 Mechanical Off (the Compute API's
Scheduling.skipGuestOsShutdown, https://cloud.google.com/compute/docs/reference/rest/v1/instances),
the default here. GCE records the event as a zone operation of type compute.instances.preempted,
which `gcloud compute operations list` shows; so does the simulator.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

from gcpsim import operations
from gcpsim.apis.compute_common import API, admin_project, collection, preemption
from gcpsim.apis.compute_common import backend as machine_backend
from gcpsim.apis.compute_instance_spec import instance_path, machine
from gcpsim.apis.compute_instances import halt, remove, step
from gcpsim.routes import admin
from gcpsim.state import World, ticker

if TYPE_CHECKING:
    from gcpsim.server import Simulator


@admin("POST", "projects/(?P<project>[^/]+)/zones/(?P<zone>[^/]+)/instances/(?P<instance>[^/:]+):preempt")
def preempt(sim: Simulator, m: re.Match[str], body: Any) -> Any:
    with sim.store.transaction() as world:
        project, inst, path = named_instance(world, m)
        grace = preemption(body, path, inst, "status", "RUNNING")
        assert inst is not None
        now = time.time()
        inst["_sim"]["preempt_at"] = now + grace
        machine_backend(world).announce_preemption(machine(world, project["id"], inst).key)
        op = operations.start(world, api=API, project=project["id"], kind="instance_preempted", target=path,
                              scope=f"zones/{m['zone']}", after=grace, now=now,
                              metadata={"operationType": "compute.instances.preempted", "targetId": inst["id"]})
        inst["_sim"]["preempt_op"] = op["name"]
        return {"instance": path, "action": _action(inst), "at": inst["_sim"]["preempt_at"]}


def named_instance(world: World, m: re.Match[str]) -> tuple[dict[str, Any], dict[str, Any] | None, str]:
    """The project, the instance (None: there is none) and its path, as an admin endpoint's
    path (project, zone, instance) names them."""
    project = admin_project(world, m["project"])
    inst = collection(world, project["id"], "instances").get(f"{m['zone']}/{m['instance']}")
    return project, inst, instance_path(project["id"], m["zone"], m["instance"])


def _action(inst: dict[str, Any]) -> str:
    return "DELETE" if inst["scheduling"].get("instanceTerminationAction") == "DELETE" else "STOP"


@ticker
def reclaim(world: World, now: float) -> None:
    """Preempted VMs whose guest has shut down, or whose grace period is over, are stopped or
    deleted."""
    for project in world.data["projects"].values():
        for key, inst in list(project.get("collections", {}).get("compute.instances", {}).items()):
            due = inst["_sim"].get("preempt_at")
            if due is None or (due > now and not _shut_down(world, project["id"], inst, now)):
                continue
            due = min(due, now)
            inst["_sim"]["preempt_at"] = None
            inst["_sim"].pop("preempt_op", None)
            if inst["_sim"].get("deleting") or inst["status"] == "TERMINATED":
                continue
            if _action(inst) == "STOP":
                halt(world, project["id"], inst, due, "instance_stop")
                step(world, project["id"], inst, now)
            else:
                wait = remove(world, project["id"], inst, due)
                zone = inst["_sim"]["zone"]
                operations.start(world, api=API, project=project["id"], kind="instance_delete",
                                 target=instance_path(project["id"], zone, inst["name"]), scope=f"zones/{zone}",
                                 after=wait, now=due, then="compute.instance.deleted",
                                 args={"project": project["id"], "key": key},
                                 metadata={"operationType": "delete", "targetId": inst["id"]})


def _shut_down(world: World, project: str, inst: dict[str, Any], now: float) -> bool:
    """The preempted VM's guest has shut down before its grace period ended: GCE stops it then
    (the preemption's operation is done at the same moment)."""
    if not machine_backend(world).shut_down(f"{project}/{inst['_sim']['zone']}/{inst['name']}"):
        return False
    op = operations.find(world, inst["_sim"].get("preempt_op") or "")
    if op is not None:
        operations.finish(world, op, now)
    return True
