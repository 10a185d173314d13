"""What the Kubernetes API server checks before it stores an object, and how it says no.

Request bodies are read with the kubernetes client's own models: a field the model does not
know is refused with 400 (`fieldValidation=Strict`, the default here as in kubectl), and the
Job fields the GKE launcher relies on are validated as the API server's Job validation does
(422 Invalid). Errors are `Status` objects in the API's shape. Only the equality-based label and
field selectors are understood; a set-based one is refused, naming the limitation.
"""

from __future__ import annotations

import json
import re
import threading
from datetime import datetime, timezone
from typing import Any

Obj = dict[str, Any]

# resource -> (apiVersion, kind, the client's model for request bodies)
KINDS = {"serviceaccounts": ("v1", "ServiceAccount", "V1ServiceAccount"),
         "services": ("v1", "Service", "V1Service"),
         "jobs": ("batch/v1", "Job", "V1Job"),
         "pods": ("v1", "Pod", "V1Pod"),
         "events": ("v1", "Event", "CoreV1Event"),
         "daemonsets": ("apps/v1", "DaemonSet", "V1DaemonSet"),
         # GKE's multi-networking custom resources: no client model, their CRD's schema (gke_networks.py)
         "gkenetworkparamsets": ("networking.gke.io/v1", "GKENetworkParamSet", ""),
         "networks": ("networking.gke.io/v1", "Network", ""),
         # installed by an admin (crds.py): no client model
         "customresourcedefinitions": ("apiextensions.k8s.io/v1", "CustomResourceDefinition", ""),
         "jobsets": ("jobset.x-k8s.io/v1alpha2", "JobSet", ""),
         "localqueues": ("kueue.x-k8s.io/v1beta2", "LocalQueue", ""),
         "clusterqueues": ("kueue.x-k8s.io/v1beta2", "ClusterQueue", ""),
         "resourceflavors": ("kueue.x-k8s.io/v1beta2", "ResourceFlavor", "")}
GROUP = {"jobs": "jobs.batch", "daemonsets": "daemonsets.apps", "jobsets": "jobsets.jobset.x-k8s.io",  # how a Status message names the resource
         "gkenetworkparamsets": "gkenetworkparamsets.networking.gke.io", "networks": "networks.networking.gke.io"}
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
# The kubernetes client's packages import their modules lazily; two request threads importing it
# first at once fail (ImportError or _DeadlockError in kubernetes.client.api_client).
_CLIENT_IMPORT = threading.Lock()


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_obj(code: int, reason: str, message: str, **details: Any) -> Obj:
    body: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                 "message": message, "reason": reason, "code": code}
    if details:
        body["details"] = details
    return body


class KubeError(Exception):
    """An answer of the API server other than success, as a Status body."""

    def __init__(self, code: int, reason: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.body = status_obj(code, reason, message, **details)


def not_found(resource: str, name: str) -> KubeError:
    return KubeError(404, "NotFound", f'{GROUP.get(resource, resource)} "{name}" not found',
                     name=name, kind=resource)


def unknown_fields(raw: Any, known: Any, path: str = "") -> list[str]:
    """Fields of a request body that the typed model dropped (written apart from trainctl's own
    check in trainctl/launchers/gke/manifests.py on purpose: the API server is the oracle of that check)."""
    if isinstance(raw, dict) and isinstance(known, dict):
        out: list[str] = []
        for key, value in raw.items():
            if value is None:
                continue
            out += [path + key] if key not in known else unknown_fields(value, known[key], f"{path}{key}.")
        return out
    if isinstance(raw, list) and isinstance(known, list):
        return [p for i, (r, k) in enumerate(zip(raw, known))
                for p in unknown_fields(r, k, f"{path.rstrip('.')}[{i}].")]
    return []


def check_body(resource: str, body: Any) -> None:
    with _CLIENT_IMPORT:
        from kubernetes.client import ApiClient

    api_version, kind, model = KINDS[resource]
    if not isinstance(body, dict) or body.get("kind") != kind or body.get("apiVersion") != api_version:
        raise KubeError(400, "BadRequest", f"expected {api_version} {kind} in the body")
    client = ApiClient()
    try:
        typed = client.deserialize(json.dumps(body), model, "application/json")
    except Exception as exc:
        raise KubeError(400, "BadRequest", f"{kind} in version {api_version} cannot be handled: {exc}")
    unknown = unknown_fields(body, client.sanitize_for_serialization(typed))
    if unknown:
        raise KubeError(400, "BadRequest", "strict decoding error: "
                        + ", ".join(f'unknown field "{p}"' for p in unknown))


def _check_exit_codes(where: str, codes: Obj, containers: set[str]) -> list[str]:
    errors, values = [], codes.get("values") or []
    if codes.get("operator") not in ("In", "NotIn"):
        errors.append(f"{where}.onExitCodes.operator: Unsupported value: {codes.get('operator')!r}")
    if not 1 <= len(values) <= 255:
        errors.append(f"{where}.onExitCodes.values: Invalid value: between 1 and 255 values")
    if any(b <= a for a, b in zip(values, values[1:])):
        errors.append(f"{where}.onExitCodes.values: Invalid value: must be ordered and unique")
    if codes.get("operator") == "In" and 0 in values:
        errors.append(f"{where}.onExitCodes.values: Invalid value: 0 with the In operator")
    if codes.get("containerName") not in (None, *containers):
        errors.append(f"{where}.onExitCodes.containerName: Invalid value: no such container")
    return errors


def check_job(job: Obj) -> None:
    """The API server's validation of the Job fields the launcher sets (422 Invalid)."""
    spec, errors = job["spec"], []
    pod = spec["template"]["spec"]
    if spec.get("completionMode") == "Indexed" and spec.get("completions") is None:
        errors.append("spec.completions: Required value: when completion mode is Indexed")
    if spec.get("backoffLimit", 0) < 0:
        errors.append("spec.backoffLimit: Invalid value: must be greater than or equal to 0")
    rules = (spec.get("podFailurePolicy") or {}).get("rules", [])
    if rules and pod.get("restartPolicy") != "Never":
        errors.append("spec.template.spec.restartPolicy: Invalid value: only Never is supported "
                      "when podFailurePolicy is specified")
    containers = {c["name"] for c in pod["containers"]}
    for i, rule in enumerate(rules):
        where = f"spec.podFailurePolicy.rules[{i}]"
        if rule.get("action") not in ("FailJob", "FailIndex", "Ignore", "Count"):
            errors.append(f"{where}.action: Unsupported value: {rule.get('action')!r}")
        if rule.get("action") == "FailIndex" and spec.get("backoffLimitPerIndex") is None:
            errors.append(f"{where}.action: Invalid value: requires the backoffLimitPerIndex field")
        codes, conditions = rule.get("onExitCodes"), rule.get("onPodConditions")
        if (codes is None) == (conditions is None):
            errors.append(f"{where}: Invalid value: specify one of onExitCodes and onPodConditions")
        if codes is not None:
            errors += _check_exit_codes(where, codes, containers)
    if errors:
        name = job["metadata"]["name"]
        raise KubeError(422, "Invalid", f'Job.batch "{name}" is invalid: ' + "; ".join(errors),
                        name=name, group="batch", kind="Job")


def parse_selector(selector: str) -> list[tuple[str, str, str]]:
    """Equality-based selectors (a=b, a==b, a!=b), comma-joined; the set-based forms are refused."""
    terms = []
    for term in filter(None, selector.split(",")):
        match = re.fullmatch(r"([\w./-]+)\s*(==|=|!=)\s*([\w./-]*)", term.strip())
        if not match:
            raise KubeError(400, "BadRequest", f"unable to parse requirement: {term!r} (the simulated "
                                               "API server knows equality-based selectors only)")
        terms.append((match[1], match[2], match[3]))
    return terms


def selector_matches(selector: str, values: dict[str, str]) -> bool:
    return all((values.get(key) == value) != (op == "!=") for key, op, value in parse_selector(selector))


def labels_match(selector: dict[str, str], labels: dict[str, str]) -> bool:
    """A Service's `selector` map against a pod's labels."""
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())
