"""Changes to an existing instance, as the Terraform provider makes them, and its guest
attributes.

https://cloud.google.com/compute/docs/reference/rest/v1/instances
  - setMetadata needs the current metadata fingerprint: stale or missing, 412 conditionNotMet
    "Supplied fingerprint does not match current metadata fingerprint."
    (https://github.com/cloudfoundry/bosh-google-cpi-release/issues/159; the provider retries
    on that 412, resource_compute_instance.go); the guest sees the new metadata
    (backend.set_metadata);
  - setLabels needs labelFingerprint: 412 conditionNotMet "Labels fingerprint either invalid or
    resource labels have changed" (https://github.com/hashicorp/terraform-provider-google/issues/18826);
  - setTags needs the tags fingerprint (412 in the simulator's words);
  - setServiceAccount and setMachineType only on a stopped (TERMINATED) instance, as the
    provider's allow_stopping_for_update assumes (400 in the simulator's words otherwise);
  - setScheduling keeps the GPU rule (onHostMaintenance TERMINATE);
  - getGuestAttributes asks the machine backend (what the guest agent published), once the
    instance has booted and where guest attributes are enabled (metadata
    enable-guest-attributes=TRUE on the instance or the project); before, GCE answers 404
    (the path named as the simulator words it).
Delay key: instance_update.
"""

from __future__ import annotations

from typing import Any

from gcpsim.apis.compute_catalog import machine_type
from gcpsim.apis.compute_common import backend, fingerprint, link, parse_ref, start_op
from gcpsim.apis.compute_instance_spec import instance_path, machine
from gcpsim.apis.compute_instances import instance
from gcpsim.errors import ApiError, invalid_argument, not_found
from gcpsim.machines import metadata_items
from gcpsim.routes import Call, handles


def _done(call: Call, project: str, zone: str, inst: dict[str, Any], op_type: str) -> Any:
    inst["fingerprint"] = fingerprint({k: v for k, v in inst.items() if k not in ("_sim", "fingerprint")})
    return start_op(call, project, f"zones/{zone}", op_type, instance_path(project, zone, inst["name"]),
                    kind="instance_update", args={"target_id": inst["id"]})


def _precondition(message: str) -> ApiError:
    return ApiError(412, message, reason="conditionNotMet")


@handles("compute.instances.setMetadata")
def set_metadata(call: Call) -> Any:
    project, zone, inst = instance(call)
    body = call.body or {}
    if body.get("fingerprint") != inst["metadata"]["fingerprint"]:
        raise _precondition("Supplied fingerprint does not match current metadata fingerprint.")
    items = body.get("items") or []
    inst["metadata"] = {"kind": "compute#metadata", "items": items, "fingerprint": fingerprint(items)}
    if not inst["_sim"].get("deleting"):
        backend(call.world).set_metadata(machine(call.world, project, inst))
    return _done(call, project, zone, inst, "setMetadata")


@handles("compute.instances.setLabels")
def set_labels(call: Call) -> Any:
    project, zone, inst = instance(call)
    body = call.body or {}
    if body.get("labelFingerprint") != inst["labelFingerprint"]:
        raise _precondition("Labels fingerprint either invalid or resource labels have changed")
    inst["labels"] = body.get("labels") or {}
    inst["labelFingerprint"] = fingerprint(inst["labels"])
    return _done(call, project, zone, inst, "setLabels")


@handles("compute.instances.setTags")
def set_tags(call: Call) -> Any:
    project, zone, inst = instance(call)
    body = call.body or {}
    if body.get("fingerprint") != inst["tags"]["fingerprint"]:
        raise _precondition("Supplied fingerprint does not match current tags fingerprint.")
    items = body.get("items") or []
    inst["tags"] = {"items": items, "fingerprint": fingerprint(items)}
    if not inst["_sim"].get("deleting"):
        backend(call.world).set_metadata(machine(call.world, project, inst))
    return _done(call, project, zone, inst, "setTags")


def _stopped(inst: dict[str, Any], what: str) -> None:
    if inst["status"] != "TERMINATED":
        raise ApiError(400, f"The instance must be stopped (TERMINATED) to change its {what}; it is "
                            f"{inst['status']}.", reason="resourceNotReady")


@handles("compute.instances.setServiceAccount")
def set_service_account(call: Call) -> Any:
    project, zone, inst = instance(call)
    _stopped(inst, "service account")
    body = call.body or {}
    inst["serviceAccounts"] = [{"email": body["email"], "scopes": body.get("scopes") or []}] if body.get("email") else []
    return _done(call, project, zone, inst, "setServiceAccount")


@handles("compute.instances.setMachineType")
def set_machine_type(call: Call) -> Any:
    project, zone, inst = instance(call)
    _stopped(inst, "machine type")
    value = (call.body or {}).get("machineType") or ""
    _, _, name = parse_ref(value, "machineTypes", project, zone)
    m = machine_type(zone, name)
    if m is None:
        raise invalid_argument(f"Invalid value for field 'resource.machineType': '{value}'. "
                               f"Machine type with name '{name}' does not exist in zone '{zone}'.")
    attached = {a["acceleratorType"].rsplit("/", 1)[-1]: int(a["acceleratorCount"])
                for a in inst.get("guestAccelerators", [])}
    inst["machineType"] = link(f"projects/{project}/zones/{zone}/machineTypes/{m.name}")
    inst["_sim"].update(machine_type=m.name,
                        gpus={**({m.bundled_gpu: m.bundled_gpu_count} if m.bundled_gpu else {}), **attached})
    return _done(call, project, zone, inst, "setMachineType")


@handles("compute.instances.setScheduling")
def set_scheduling(call: Call) -> Any:
    project, zone, inst = instance(call)
    scheduling = {**inst["scheduling"], **(call.body or {})}
    if inst["_sim"]["gpus"] and scheduling.get("onHostMaintenance") != "TERMINATE":
        raise ApiError(400, "Instances with guest accelerators do not support live migration.", reason="badRequest")
    inst["scheduling"] = scheduling
    inst["_sim"]["spot"] = bool(scheduling.get("preemptible")) or scheduling.get("provisioningModel") == "SPOT"
    return _done(call, project, zone, inst, "setScheduling")


@handles("compute.instances.setDeletionProtection")
def set_deletion_protection(call: Call) -> Any:
    project, zone, inst = instance(call)
    inst["deletionProtection"] = (call.arg("deletionProtection", "true") or "true").lower() == "true"
    return _done(call, project, zone, inst, "setDeletionProtection")


def _guest_attributes_enabled(call: Call, inst: dict[str, Any]) -> bool:
    project = call.world.project(call.project_id) or {}
    values = {**metadata_items({"items": project.get("commonInstanceMetadata", [])}),
              **metadata_items(inst["metadata"])}
    return values.get("enable-guest-attributes", "").upper() == "TRUE"


@handles("compute.instances.getGuestAttributes")
def get_guest_attributes(call: Call) -> Any:
    project, zone, inst = instance(call)
    path = instance_path(project, zone, inst["name"])
    query_path, variable = call.arg("queryPath"), call.arg("variableKey")
    booted = inst["status"] not in ("PROVISIONING", "STAGING") and not inst["_sim"].get("deleting")
    items: list[dict[str, str]] = []
    if booted and _guest_attributes_enabled(call, inst):
        key = machine(call.world, project, inst).key
        if variable:
            namespace, _, name = variable.partition("/")
            items = [i for i in backend(call.world).guest_attributes(key, namespace + "/") if i["key"] == name]
        else:
            items = backend(call.world).guest_attributes(key, query_path or "")
    if not items:
        raise not_found(f"{path}/guestAttributes/{variable or query_path or ''}")
    out: dict[str, Any] = {"kind": "compute#guestAttributes", "selfLink": link(f"{path}/guestAttributes")}
    if variable:
        out.update(variableKey=variable, variableValue=items[0]["value"])
    else:
        out.update(queryPath=query_path or "", queryValue={"items": items})
    return out
