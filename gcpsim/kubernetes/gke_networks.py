"""GKE multi-networking in a simulated cluster: the `networking.gke.io/v1` custom resources
GKENetworkParamSet and Network (cluster-scoped, as the CRDs GKE installs with multi-networking),
checked against their schemas, and the admission of pods whose `networking.gke.io/interfaces`
annotation names Networks: a pod naming one that does not exist is not created.

The schemas are the CRDs' fields (GoogleCloudPlatform/gke-networking-api apis/network/v1:
GKENetworkParamSetSpec, NetworkSpec with its enums DeviceModeType and NetworkType); a field the
schema does not know is refused as the API server refuses it under fieldValidation=Strict (400),
a missing required field or a value outside an enum with the API server's 422 wording.

A refused pod of a Job is what the Job controller records as an event (reason FailedCreate,
"Error creating: <the admission's error>"), and the Job keeps no pod. The admission's own words
are the simulator's: GKE's webhook message for this case is not published where it could be
checked from here, so the text names the missing Network and the annotation, nothing more.
"""

from __future__ import annotations

import json
import secrets
import uuid
from typing import Any

from gcpsim.kubernetes.objects import KubeError, Obj, now
from gcpsim.kubernetes.store import ApiStore

API_VERSION = "networking.gke.io/v1"
CUSTOM = {"gkenetworkparamsets": "GKENetworkParamSet", "networks": "Network"}
INTERFACES = "networking.gke.io/interfaces"
DEFAULT_NETWORKS = ("default", "pod-network")  # the pod network GKE itself provides

# field -> allowed values (a tuple), a nested schema (a dict), or None (any value)
_REF = {"group": None, "kind": None, "name": None, "namespace": None}
SPECS: dict[str, dict[str, Any]] = {
    "GKENetworkParamSet": {"vpc": None, "vpcSubnet": None, "deviceMode": ("DPDK-VFIO", "NetDevice", "RDMA"),
                           "podIPv4Ranges": {"rangeNames": None}},
    "Network": {"type": ("L2", "L3", "Device"), "provider": ("GKE",), "nodeInterfaceMatcher": {"interfaceName": None},
                "l2NetworkConfig": {"vlanID": None, "prefixLength4": None},
                "networkLifecycle": ("AnthosManaged", "UserManaged"), "routes": None, "gateway4": None,
                "dnsConfig": {"nameservers": None, "searches": None}, "externalDHCP4": None,
                "parametersRef": _REF, "IPAMMode": ("Internal", "External"), "IPAMMode6": ("Internal", "External")},
}
REQUIRED = {"GKENetworkParamSet": ("vpc", "vpcSubnet"), "Network": ("type",)}
_TOP = ("apiVersion", "kind", "metadata", "spec", "status")


def _unknown(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    out = []
    for key, inner in (value or {}).items():
        if key not in schema:
            out.append(f'unknown field "{path}{key}"')
        elif isinstance(schema[key], dict) and isinstance(inner, dict):
            out += _unknown(inner, schema[key], f"{path}{key}.")
    return out


def check_custom(resource: str, body: Any) -> None:
    kind = CUSTOM[resource]
    if not isinstance(body, dict) or body.get("kind") != kind or body.get("apiVersion") != API_VERSION:
        raise KubeError(400, "BadRequest", f"expected {API_VERSION} {kind} in the body")
    spec = body.get("spec") or {}
    unknown = [f'unknown field "{k}"' for k in body if k not in _TOP] + _unknown(spec, SPECS[kind], "spec.")
    if unknown:
        raise KubeError(400, "BadRequest", "strict decoding error: " + ", ".join(unknown))
    errors = [f"spec.{k}: Required value" for k in REQUIRED[kind] if not spec.get(k)]
    errors += [f'spec.{k}: Unsupported value: "{v}": supported values: ' + ", ".join(f'"{s}"' for s in allowed)
               for k, allowed in SPECS[kind].items() if isinstance(allowed, tuple) and (v := spec.get(k)) is not None
               and v not in allowed]
    if kind == "Network" and spec.get("parametersRef") is not None:
        errors += [f"spec.parametersRef.{k}: Required value" for k in ("group", "kind", "name")
                   if not spec["parametersRef"].get(k)]
    if errors:
        name = (body.get("metadata") or {}).get("name", "")
        raise KubeError(422, "Invalid", f'{kind}.networking.gke.io "{name}" is invalid: ' + "; ".join(errors),
                        name=name, group="networking.gke.io", kind=kind)


def missing_networks(existing: set[str], annotations: dict[str, str]) -> list[str]:
    """The Networks a pod's interfaces annotation names that the cluster does not have."""
    raw = annotations.get(INTERFACES)
    if raw is None:
        return []
    try:
        refs = json.loads(raw)
    except ValueError:
        return [f"(annotation {INTERFACES} is not JSON)"]
    names = [str(r["network"]) for r in refs if isinstance(r, dict) and r.get("network")]
    return [n for n in names if n not in DEFAULT_NETWORKS and n not in existing]


def admission_refusal(existing: set[str], annotations: dict[str, str]) -> str | None:
    missing = missing_networks(existing, annotations)
    if not missing:
        return None
    return (f"pod names network(s) {', '.join(missing)} in annotation {INTERFACES}, and no Network "
            f"object of that name exists in the cluster")


def admitted(store: ApiStore, job: Obj, annotations: dict[str, str]) -> bool:
    """GKE's admission of a Job's pod by its networks; a refusal becomes the Job controller's
    event (the caller holds store.cond)."""
    refusal = admission_refusal({n for (res, _, n) in store.objects if res == "networks"}, annotations)
    if refusal:
        store.record("events", "ADDED", failed_create(job, refusal))
    return refusal is None


def failed_create(job: Obj, message: str) -> Obj:
    """The Job controller's event for a pod it could not create."""
    meta = job["metadata"]
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{secrets.token_hex(8)}", "namespace": meta["namespace"],
                         "uid": str(uuid.uuid4()), "creationTimestamp": now()},
            "involvedObject": {"apiVersion": "batch/v1", "kind": "Job", "namespace": meta["namespace"],
                               "name": meta["name"], "uid": meta["uid"]},
            "reason": "FailedCreate", "message": f"Error creating: {message}", "type": "Warning",
            "source": {"component": "job-controller"}, "firstTimestamp": now(), "lastTimestamp": now(), "count": 1}
