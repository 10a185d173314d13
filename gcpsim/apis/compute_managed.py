"""Instances other Google services create in a project (GKE's node pools), for their modules to
call inside a handler's transaction: the same record, checks, addresses, states and machine
backend calls as instances.insert / instances.delete, without HTTP.
"""

from __future__ import annotations

from typing import Any

from gcpsim import operations
from gcpsim.apis.compute_common import API
from gcpsim.apis.compute_instance_spec import instance_path
from gcpsim.apis.compute_instances import create, instances, remove
from gcpsim.state import World

# GKE boots Container-Optimized OS; the simulator's public images have its family.
NODE_IMAGE = "projects/cos-cloud/global/images/family/cos-stable"


def create_managed_instance(world: World, *, project: str, zone: str, name: str, machine_type: str,
                            labels: dict[str, str], network: str, subnetwork: str,
                            service_account: str | None, scopes: list[str], tags: list[str],
                            metadata: dict[str, str], spot: bool, accelerators: list[dict[str, Any]] | None,
                            created_by: str, now: float,
                            reservation_affinity: dict[str, Any] | None = None,
                            extra_nics: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """An instance as if inserted by another Google service; `created_by` becomes its
    `created-by` metadata item. Raises the ApiError an insert would fail with (including
    quota and stockout, which GKE reports on its own operation)."""
    scheduling: dict[str, Any] = {"onHostMaintenance": "TERMINATE" if accelerators else "MIGRATE"}
    if spot:
        scheduling = {"provisioningModel": "SPOT", "preemptible": True, "automaticRestart": False,
                      "onHostMaintenance": "TERMINATE"}
    body: dict[str, Any] = {
        "name": name, "machineType": f"zones/{zone}/machineTypes/{machine_type}", "labels": labels,
        "disks": [{"boot": True, "autoDelete": True,
                   "initializeParams": {"sourceImage": NODE_IMAGE, "diskSizeGb": "100"}}],
        "networkInterfaces": [{"network": network, "subnetwork": subnetwork,
                               "accessConfigs": [{"type": "ONE_TO_ONE_NAT", "name": "External NAT"}]},
                              *(extra_nics or [])],
        "serviceAccounts": [{"email": service_account, "scopes": scopes}] if service_account else [],
        "tags": {"items": tags}, "scheduling": scheduling,
        "metadata": {"items": [{"key": k, "value": v} for k, v in {**metadata, "created-by": created_by}.items()]}}
    if accelerators:
        body["guestAccelerators"] = accelerators
    if reservation_affinity:  # GKE's NodeConfig.reservationAffinity has Compute's fields
        body["reservationAffinity"] = reservation_affinity
    inst, failure = create(world, now, project, zone, body)
    if failure is not None:
        raise failure
    return inst


def delete_managed_instance(world: World, *, project: str, zone: str, name: str, now: float) -> None:
    """As instances.delete: STOPPING now, gone when its operation is done; nothing if gone."""
    key = f"{zone}/{name}"
    inst = instances(world, project).get(key)
    if inst is None or inst["_sim"].get("deleting"):
        return
    wait = remove(world, project, inst, now)
    operations.start(world, api=API, project=project, kind="instance_delete", target=instance_path(project, zone, name),
                     scope=f"zones/{zone}", after=wait, now=now, then="compute.instance.deleted",
                     args={"project": project, "key": key}, metadata={"operationType": "delete", "targetId": inst["id"]})
