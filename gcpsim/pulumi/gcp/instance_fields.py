"""google_compute_instance's fields as the provider sends and reads them
(services/compute/resource_compute_instance.go, compute_instance_helpers.go, metadata.go,
image.go, resource_compute_disk.go, tpgresource/service_scope.go)."""

from __future__ import annotations

import re
from typing import Any

from gcpsim.pulumi.gcp.base import drop_empty, last, relative, same_resource
from gcpsim.pulumi.plugins import ProviderError

# tpgresource.CanonicalizeServiceScope: gcloud's short scope names -> the auth URLs.
SCOPES = {name: f"https://www.googleapis.com/auth/{path}" for name, path in {
    "bigquery": "bigquery", "cloud-platform": "cloud-platform", "cloud-source-repos": "source.full_control",
    "cloud-source-repos-ro": "source.read_only", "compute-ro": "compute.readonly", "compute-rw": "compute",
    "datastore": "datastore", "logging-write": "logging.write", "monitoring": "monitoring",
    "monitoring-read": "monitoring.read", "monitoring-write": "monitoring.write", "pubsub": "pubsub",
    "service-control": "servicecontrol", "service-management": "service.management.readonly",
    "sql": "sqlservice", "sql-admin": "sqlservice.admin", "storage-full": "devstorage.full_control",
    "storage-ro": "devstorage.read_only", "storage-rw": "devstorage.read_write", "taskqueue": "taskqueue",
    "trace": "trace.append", "useraccounts-ro": "cloud.useraccounts.readonly",
    "useraccounts-rw": "cloud.useraccounts", "userinfo-email": "userinfo.email"}.items()}

_PROJECT = r"(?:(?:[-a-z0-9]{1,63}\.)*(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?):)?(?:[0-9]{1,19}|(?:[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?))"
_NAME = r"[-_a-zA-Z0-9]*"
IMAGE_LINK = re.compile(rf"^https://www\.googleapis\.com/compute/[a-z0-9]+/projects/({_PROJECT})/global/images/({_NAME})")
PROJECT_FAMILY = re.compile(rf"projects/({_PROJECT})/global/images/family/({_NAME})$")
PROJECT_IMAGE = re.compile(rf"projects/({_PROJECT})/global/images/({_NAME})$")


def canonical_scope(scope: str) -> str:
    return SCOPES.get(scope, scope)


def same_scopes(new: Any, old: Any) -> bool:
    """scopes is a set hashed by its canonical form (StringScopeHashcode)."""
    return {canonical_scope(s) for s in new or []} == {canonical_scope(s) for s in old or []}


UBUNTU_LTS = re.compile(r"^ubuntu-(minimal-)?([0-9]+)(?:.*(arm64|amd64))?.*$")


def family_equals(image: str, family: str) -> bool:
    """diskImageFamilyEquals: the image name contains the family name (-amd64/-arm64 variants
    kept apart), or it is the Ubuntu LTS image of that family (suppressCanonicalFamilyDiff);
    the Fedora, SUSE, COS and Windows rules are not modelled."""
    if "-arm64" not in image and family.removesuffix("-amd64") in image:
        return ("-amd64" in image) == family.endswith("-amd64")
    if family.removesuffix("-arm64") in image:
        return ("-arm64" in image) == family.endswith("-arm64")
    ubuntu = UBUNTU_LTS.match(image)
    if ubuntu is not None:
        minimal, version, arch = ubuntu.groups()
        return family == f"ubuntu-{minimal or ''}{version}-lts" + (f"-{arch}" if arch else "")
    return False


def same_image(new: Any, old: Any) -> bool:
    """DiskImageDiffSuppress: the disk's source image link against what the program named."""
    match = IMAGE_LINK.match(str(old or ""))
    if match is None:
        return bool(new == old)
    project, name = match.groups()
    new = str(new or "")
    if (m := PROJECT_FAMILY.match(new)) is not None:
        return m[1] == project and family_equals(name, m[2])
    if (m := PROJECT_IMAGE.match(new)) is not None:
        return m[1] == project and m[2] == name
    short = new.split("/")[-1]
    return short == name or family_equals(name, short)


def machine_type(inputs: dict[str, Any], project: str, zone: str) -> str:
    """ParseMachineTypesFieldValue(...).RelativeLink()."""
    value = relative(inputs["machineType"])
    return value if "/" in value else f"projects/{project}/zones/{zone}/machineTypes/{value}"


def network_interfaces(inputs: dict[str, Any], project: str, region: str) -> list[dict[str, Any]]:
    out = []
    for nic in inputs.get("networkInterfaces") or []:
        network, subnetwork = nic.get("network") or "", nic.get("subnetwork") or ""
        if network and "/" not in relative(network):
            network = f"projects/{project}/global/networks/{network}"
        if subnetwork and "/" not in relative(subnetwork):
            subnetwork = f"projects/{nic.get('subnetworkProject') or project}/regions/{region}/subnetworks/{subnetwork}"
        access = [drop_empty({"type": "ONE_TO_ONE_NAT", "natIP": ac.get("natIp"), "networkTier": ac.get("networkTier")})
                  for ac in nic.get("accessConfigs") or []]
        out.append(drop_empty({"network": relative(network), "subnetwork": relative(subnetwork),
                               "networkIP": nic.get("networkIp"), "accessConfigs": access,
                               "nicType": nic.get("nicType"), "stackType": nic.get("stackType"),
                               "queueCount": nic.get("queueCount")}))
    return out


def flatten_interfaces(nics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"network": n.get("network"), "subnetwork": n.get("subnetwork"),
             "subnetworkProject": relative(n.get("subnetwork", "")).split("/")[1] if n.get("subnetwork") else None,
             "networkIp": n.get("networkIP"), "name": n.get("name"), "stackType": n.get("stackType"),
             "nicType": n.get("nicType"), "queueCount": n.get("queueCount"),
             "accessConfigs": [{"natIp": ac.get("natIP"), "networkTier": ac.get("networkTier"),
                                "publicPtrDomainName": ac.get("publicPtrDomainName")}
                               for ac in n.get("accessConfigs") or []]}
            for n in nics]


def scheduling(inputs: dict[str, Any]) -> dict[str, Any]:
    """expandScheduling: the fields the program sets; automaticRestart always sent."""
    given = inputs.get("scheduling") or {}
    out: dict[str, Any] = {"automaticRestart": given.get("automaticRestart", True)}
    for key in ("preemptible", "onHostMaintenance", "provisioningModel", "instanceTerminationAction"):
        if key in given:
            out[key] = given[key]
    if given.get("maxRunDuration"):
        duration = given["maxRunDuration"]
        out["maxRunDuration"] = {"seconds": str(duration["seconds"]), **({"nanos": duration["nanos"]}
                                                                        if duration.get("nanos") else {})}
    return out


def flatten_scheduling(found: dict[str, Any]) -> dict[str, Any]:
    s = found.get("scheduling") or {}
    return {"automaticRestart": s.get("automaticRestart", True), "preemptible": bool(s.get("preemptible")),
            "onHostMaintenance": s.get("onHostMaintenance"),
            "provisioningModel": s.get("provisioningModel", "STANDARD"),
            "instanceTerminationAction": s.get("instanceTerminationAction"),
            **({"maxRunDuration": {"seconds": int(s["maxRunDuration"]["seconds"]),
                                   **({"nanos": s["maxRunDuration"]["nanos"]} if s["maxRunDuration"].get("nanos")
                                      else {})}} if s.get("maxRunDuration") else {})}


def reservation_affinity(inputs: dict[str, Any]) -> dict[str, Any] | None:
    """expandReservationAffinity: the type, and key and values for SPECIFIC_RESERVATION only
    (terraform-provider-google's compute_instance_helpers.go refuses a mismatch)."""
    given = inputs.get("reservationAffinity")
    if not given:
        return None
    specific = given.get("specificReservation")
    if (given["type"] == "SPECIFIC_RESERVATION") != bool(specific):
        raise ProviderError("specific_reservation must be set when reservation_affinity is SPECIFIC_RESERVATION, "
                         "and not set otherwise")
    out: dict[str, Any] = {"consumeReservationType": given["type"]}
    if specific:
        out.update(key=specific["key"], values=list(specific["values"]))
    return out


def flatten_reservation_affinity(found: dict[str, Any]) -> dict[str, Any] | None:
    affinity = found.get("reservationAffinity")
    if not affinity:
        return None
    out: dict[str, Any] = {"type": affinity.get("consumeReservationType")}
    if affinity.get("key"):
        out["specificReservation"] = {"key": affinity["key"], "values": affinity.get("values") or []}
    return out


def accelerators(inputs: dict[str, Any], project: str, zone: str) -> list[dict[str, Any]]:
    """expandInstanceGuestAccelerators: zero counts left out, types as relative links."""
    return [{"acceleratorCount": a["count"],
             "acceleratorType": relative(a["type"]) if "/" in relative(a["type"])
             else f"projects/{project}/zones/{zone}/acceleratorTypes/{a['type']}"}
            for a in inputs.get("guestAccelerators") or [] if a.get("count")]


def metadata(values: dict[str, str] | None, fingerprint: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"items": [{"key": k, "value": v} for k, v in (values or {}).items()]}
    if fingerprint:
        body["fingerprint"] = fingerprint
    return body


def service_accounts(inputs: dict[str, Any]) -> list[dict[str, Any]]:
    sa = inputs.get("serviceAccount")
    if not sa:
        return []
    return [{"email": sa.get("email") or "default", "scopes": [canonical_scope(s) for s in sa.get("scopes") or []]}]


def instance_suppress(path: str, new: Any, old: Any) -> bool:
    if path == "serviceAccount.scopes":
        return same_scopes(new, old)
    if path == "bootDisk.initializeParams.image":
        return same_image(new, old)
    if path in ("machineType", "bootDisk.initializeParams.type"):
        return last(str(new)) == last(str(old or ""))
    if path in ("networkInterfaces.network", "networkInterfaces.subnetwork", "guestAccelerators.type",
                "bootDisk.source"):
        return same_resource(new, old)
    return False
