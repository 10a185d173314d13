"""google_compute_instance (services/compute/resource_compute_instance.go).

Create (resourceComputeInstanceCreate): the boot disk's type is looked up (diskTypes.get,
readDiskType), the instance inserted with everything in one body (machine type, disk,
interfaces, accelerators, scheduling, metadata, tags, labels with the attribution label, service
account with canonical scopes), then two waits, each as the provider's source has it:
  - the zone operation ("instance to create"), ComputeOperationWaitTime within the *create*
    timeout (customTimeouts.create). Its failure, a timeout included, drops the resource
    (`d.SetId("")`, "The resource didn't actually create"): nothing is kept in the state, even
    where the instance exists;
  - then waitUntilInstanceHasDesiredStatus(RUNNING): a retry.StateChangeConf (terraform-plugin-sdk
    helper/retry/state.go) within the *update* timeout (customTimeouts.update, 20 minutes by
    default), its pending states computeInstanceStatus without RUNNING (PROVISIONING, REPAIRING,
    STAGING, STOPPED, STOPPING, SUSPENDED, SUSPENDING, TERMINATED: no PENDING), so a state
    outside that list (a flex-start VM's PENDING) fails it at once. The id was set before: the
    instance stays in the state with the error (Pulumi's init errors; the next `up` updates it).
Then read. Read
gets the instance and its boot disk (disks.get; if that fails the program's initialize_params are
kept, as the provider does). Update, field by field
as the provider does: metadata (setMetadata with the current fingerprint), labels (setLabels),
tags (setTags), scheduling (setScheduling), deletion protection; a machine type or service
account change needs the instance stopped, which only allow_stopping_for_update permits
(stop, setMachineType / setServiceAccount, start). Everything else the schema marks ForceNew
(boot disk, network interfaces, guest accelerators, preemptible, provisioning model, ...)
replaces the instance. Delete refuses while deletion_protection is set.
"""

from __future__ import annotations

from typing import Any

from gcpsim.pulumi.gcp import instance_fields as f
from gcpsim.pulumi.gcp.base import GcpResource, drop_empty, failing_as, last
from gcpsim.pulumi.gcp.rest import DEFAULT_TIMEOUT_SECONDS, wait_for_state
from gcpsim.pulumi.plugins import Diff, ProviderError

NEEDS_STOP = ("machineType", "serviceAccount", "minCpuPlatform")
# computeInstanceStatus (resource_compute_instance.go): the statuses the provider's waits know;
# getAllStatusBut(status) is their pending list. PENDING is not among them.
INSTANCE_STATUS = ("PROVISIONING", "REPAIRING", "RUNNING", "STAGING", "STOPPED", "STOPPING", "SUSPENDED",
                   "SUSPENDING", "TERMINATED")


class Instance(GcpResource):
    token = "gcp:compute/instance:Instance"
    endpoint = "computeCustomEndpoint"
    default_url = "https://compute.googleapis.com/compute/beta/"
    autoname_lower = True
    force_new = frozenset({"name", "zone", "project", "bootDisk", "networkInterfaces", "guestAccelerators",
                           "scheduling.preemptible", "scheduling.provisioningModel", "hostname",
                           "scratchDisks", "reservationAffinity", "confidentialInstanceConfig"})

    def suppress(self, path: str, new: Any, old: Any) -> bool:
        return f.instance_suppress(path, new, old)

    def _where(self, inputs: dict[str, Any]) -> tuple[str, str]:
        return self.project(inputs), self.zone(inputs)

    def _body(self, inputs: dict[str, Any]) -> dict[str, Any]:
        project, zone = self._where(inputs)
        region = zone.rsplit("-", 1)[0]
        return drop_empty({
            "name": inputs["name"], "description": inputs.get("description"),
            "machineType": f.machine_type(inputs, project, zone),
            "disks": [self._boot_disk(inputs, project, zone)],
            "networkInterfaces": f.network_interfaces(inputs, project, region),
            "guestAccelerators": f.accelerators(inputs, project, zone),
            "scheduling": f.scheduling(inputs), "metadata": f.metadata(inputs.get("metadata")),
            "reservationAffinity": f.reservation_affinity(inputs),
            "tags": {"items": inputs["tags"]} if inputs.get("tags") else None,
            "labels": self.labels_on_create(inputs.get("labels")),
            "serviceAccounts": f.service_accounts(inputs), "minCpuPlatform": inputs.get("minCpuPlatform"),
            "hostname": inputs.get("hostname"), "resourcePolicies": _policies(inputs.get("resourcePolicies"))}) | {
            "canIpForward": bool(inputs.get("canIpForward")),
            "deletionProtection": bool(inputs.get("deletionProtection"))}

    def _boot_disk(self, inputs: dict[str, Any], project: str, zone: str) -> dict[str, Any]:
        boot = inputs.get("bootDisk") or {}
        params = boot.get("initializeParams") or {}
        disk: dict[str, Any] = {"boot": True, "autoDelete": bool(boot.get("autoDelete", True))}
        if boot.get("source"):
            disk["source"] = boot["source"]
        init = drop_empty({"diskSizeGb": str(params["size"]) if params.get("size") else None,
                           "sourceImage": params.get("image"), "labels": params.get("labels")})
        if params.get("type"):
            with failing_as(f"Error loading disk type '{params['type']}'"):
                found = self.rest.get(self.url(f"projects/{project}/zones/{zone}/diskTypes/{last(params['type'])}"))
            init["diskType"] = f"projects/{project}/zones/{zone}/diskTypes/{found.get('name', params['type'])}"
        if init:
            disk["initializeParams"] = init
        return disk

    def create(self, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        project, zone = self._where(inputs)
        body = self._body(inputs)
        with failing_as("Error creating instance"):
            op = self.rest.call("POST", self.url(f"projects/{project}/zones/{zone}/instances"), body)
        id_ = f"projects/{project}/zones/{zone}/instances/{inputs['name']}"
        # a failed wait raises without the id: the resource is dropped (d.SetId(""))
        self.wait_compute(op, project, "instance to create", self.create_timeout or DEFAULT_TIMEOUT_SECONDS)
        try:
            self._wait_status(id_, "RUNNING")
        except ProviderError as exc:  # the id was set: the instance stays in the state
            raise ProviderError(f"Error waiting for status: {exc}", (id_, inputs)) from None
        return id_, self.read(id_, inputs, inputs) or inputs

    def _wait_status(self, id_: str, status: str) -> None:
        """waitUntilInstanceHasDesiredStatus (resource_compute_instance.go)."""
        def fetch() -> dict[str, Any]:
            return self.rest.get(self.url(id_))
        with failing_as(f"Error waiting for instance to reach desired status {status}"):
            wait_for_state(fetch, lambda i: str(i.get("status")), [s for s in INSTANCE_STATUS if s != status],
                           status, self.update_timeout or DEFAULT_TIMEOUT_SECONDS)

    def read(self, id_: str, inputs: dict[str, Any], state: dict[str, Any]) -> dict[str, Any] | None:
        found = self.fetch(self.url(id_), f"Instance {id_!r}")
        if found is None:
            return None
        declared = {**state, **inputs}
        project, zone = id_.split("/")[1], id_.split("/")[3]
        meta = found.get("metadata") or {}
        sa = (found.get("serviceAccounts") or [None])[0]
        return {**declared, "id": id_, "name": found["name"], "project": project, "zone": zone,
                "machineType": last(found.get("machineType", "")), "selfLink": found.get("selfLink"),
                "instanceId": found.get("id"), "cpuPlatform": found.get("cpuPlatform"),
                "currentStatus": found.get("status"), "bootDisk": self._flat_boot(found, declared),
                "networkInterfaces": f.flatten_interfaces(found.get("networkInterfaces") or []),
                "guestAccelerators": [{"count": a.get("acceleratorCount"), "type": a.get("acceleratorType")}
                                      for a in found.get("guestAccelerators") or []],
                "scheduling": f.flatten_scheduling(found),
                **({"reservationAffinity": f.flatten_reservation_affinity(found)}
                   if declared.get("reservationAffinity") else {}),
                "metadata": {i["key"]: i.get("value") for i in meta.get("items") or []},
                "metadataFingerprint": meta.get("fingerprint"),
                "tags": (found.get("tags") or {}).get("items") or [],
                "tagsFingerprint": (found.get("tags") or {}).get("fingerprint"),
                "labelFingerprint": found.get("labelFingerprint"),
                "serviceAccount": {"email": sa.get("email"), "scopes": sa.get("scopes") or []} if sa else None,
                "deletionProtection": bool(found.get("deletionProtection")),
                "allowStoppingForUpdate": declared.get("allowStoppingForUpdate"),
                **self.labels_outputs(declared.get("labels"), found.get("labels"))}

    def _flat_boot(self, found: dict[str, Any], declared: dict[str, Any]) -> dict[str, Any]:
        disk: dict[str, Any] = next((d for d in found.get("disks") or [] if d.get("boot")), {})
        params = (declared.get("bootDisk") or {}).get("initializeParams")
        try:
            details = self.rest.get(disk["source"].replace("https://www.googleapis.com/compute/v1/", self.base))
            params = {"image": details.get("sourceImage"), "size": int(details.get("sizeGb", 0) or 0),
                      "type": last(details.get("type", "")), "labels": details.get("labels") or {}}
        except (KeyError, ProviderError):
            pass  # "Cannot retrieve boot disk details": the declared parameters stay
        return {"autoDelete": disk.get("autoDelete"), "deviceName": disk.get("deviceName"),
                "mode": disk.get("mode"), "source": disk.get("source"), "initializeParams": params}

    def _call(self, id_: str, verb: str, body: Any, activity: str) -> None:
        with failing_as(f"Error updating {activity}"):
            op = self.rest.call("POST", self.url(f"{id_}/{verb}"), body)
            self.wait_compute(op, id_.split("/")[1], activity)

    def update(self, id_: str, state: dict[str, Any], news: dict[str, Any], diff: Diff) -> dict[str, Any]:
        changed = {p.split(".")[0] for p in diff.changed}
        current = self.rest.get(self.url(id_))
        if "metadata" in changed:
            self._call(id_, "setMetadata", f.metadata(news.get("metadata"), (current.get("metadata") or {}).get(
                "fingerprint")), "metadata")
        if "labels" in changed:
            labels = self.labels_on_update(news.get("labels"), current.get("labels") or {})
            self._call(id_, "setLabels", {"labels": labels, "labelFingerprint": current.get("labelFingerprint")},
                       "labels")
        if "tags" in changed:
            self._call(id_, "setTags", {"items": news.get("tags") or [],
                                        "fingerprint": (current.get("tags") or {}).get("fingerprint")}, "tags")
        if "scheduling" in changed:
            self._call(id_, "setScheduling", f.scheduling(news), "scheduling")
        if "deletionProtection" in changed:
            with failing_as("Error updating deletion protection flag"):
                op = self.rest.call("POST", self.url(f"{id_}/setDeletionProtection"),
                                    query={"deletionProtection": str(bool(news.get("deletionProtection"))).lower()})
                self.wait_compute(op, id_.split("/")[1], "deletion protection to update")
        if changed & set(NEEDS_STOP):
            self._stopped_update(id_, current, news, changed)
        return self.read(id_, news, state) or state

    def _stopped_update(self, id_: str, current: dict[str, Any], news: dict[str, Any], changed: set[str]) -> None:
        if current.get("status") == "RUNNING" and not news.get("allowStoppingForUpdate"):
            raise ProviderError(
                "Changing the machine_type, min_cpu_platform, service_account, enable_display, "
                "shielded_instance_config, scheduling.node_affinities, scheduling.max_run_duration or "
                "network_interface.[#d].(network/subnetwork/subnetwork_project) or advanced_machine_features on a "
                "started instance requires stopping it. To acknowledge this, please set allow_stopping_for_update = "
                "true in your config. You can also stop it by setting desired_status = \"TERMINATED\", but the "
                "instance will not be restarted after the update.")
        project, zone = id_.split("/")[1], id_.split("/")[3]
        self._call(id_, "stop", None, "instance to stop")
        if "machineType" in changed:
            self._call(id_, "setMachineType", {"machineType": f.machine_type(news, project, zone)}, "machine type")
        if "serviceAccount" in changed:
            sa = (f.service_accounts(news) or [{"email": "", "scopes": []}])[0]
            self._call(id_, "setServiceAccount", sa, "service account")
        self._call(id_, "start", None, "instance to start")
        self._wait_status(id_, "RUNNING")

    def delete(self, id_: str, state: dict[str, Any]) -> None:
        if state.get("deletionProtection"):
            raise ProviderError(f"Cannot delete instance {state.get('name')}: instance Deletion Protection "
                                "is enabled. Set deletion_protection to false for this resource and run "
                                "\"terraform apply\" before attempting to delete it.")
        op = self.delete_request(self.url(id_), "instance")
        if op is not None:
            self.wait_compute(op, id_.split("/")[1], "instance to delete")


def _policies(value: Any) -> list[str] | None:
    """pulumi-gcp takes one policy's self link as a string; the API takes a list of them."""
    if not value:
        return None
    return [value] if isinstance(value, str) else list(value)


TYPES = (Instance,)
