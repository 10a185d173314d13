"""`trainctl preempt` on a GCP stack: a spot node reclaimed on request, where the stack's endpoints
offer that (a simulated project's test endpoint, named by `machines.preempt` in the endpoints
record the stack keeps, private_endpoints.py), reached as any private endpoint is: by its URL.

Google has no API that preempts a Spot VM: Compute Engine reclaims them itself
(https://cloud.google.com/compute/docs/instances/spot#preemption-process). What Google documents
for testing how a workload handles a Spot VM's preemption and shutdown is a simulated host
maintenance event (`gcloud compute instances simulate-maintenance-event`,
https://cloud.google.com/compute/docs/instances/simulating-host-maintenance); on a stack that
reaches Google the verb is refused naming it.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from infra.errors import ConfigError, ProvisionError
from infra.providers.gcp import private_endpoints
from infra.providers.gcp.node_kinds import node_kind
from infra.providers.protocol import Progress
from infra.providers.realizers import Unsupported, unsupported
from infra.spec.cluster import ClusterSpec

SIMULATE_MAINTENANCE_DOC = "https://cloud.google.com/compute/docs/instances/simulating-host-maintenance"
ANSWER_TIMEOUT_SECONDS = 30.0


def refused_on_google(node: str, zone: str | None) -> Unsupported:
    where = f" --zone {zone}" if zone else ""
    return unsupported("gcp", "preempt", (
        "Google reclaims Spot VMs itself and has no API that preempts one. To test how the run "
        "handles a Spot VM's preemption and shutdown, Google documents a simulated host maintenance "
        f"event: `gcloud compute instances simulate-maintenance-event {node}{where}` "
        f"({SIMULATE_MAINTENANCE_DOC}). "
        "A stack brought up with --simulate is preempted through its simulator."))


def preempt(stack: str, cluster: ClusterSpec, node: str, *, grace: float, progress: Progress,
            action: str | None = None, unavailable_for: float = 0.0) -> str:
    """Ask the stack's endpoints to preempt `node` (its VM, or the TPU slice it is a worker of):
    the guest is told at once and its VM is stopped or deleted once its shutdown is over (at most
    `grace` s). Returns as soon as the notice is given, with the action the instance's
    instanceTerminationAction takes (STOP or DELETE; a TPU slice: PREEMPTED)."""
    reach = private_endpoints.of_stack(stack)
    template = reach.machines.preempt if reach is not None else None
    if template is None:
        if reach is not None:  # a private endpoint or proxy to Google, or a simulated stack from before
            raise unsupported("gcp", "preempt", (
                f"stack {stack!r} reaches Google through {reach.api}, whose endpoints record names no way to "
                "preempt a VM on request (a stack brought up with --simulate before trainctl recorded one: "
                f"`trainctl down` and `up` it again). {_google_advice(node, cluster.zone)}"))
        raise refused_on_google(node, cluster.zone)
    if action is not None:
        raise ConfigError("the termination action of a GCP spot VM is its scheduling.instanceTerminationAction "
                          "(the stack's instance_termination_action); it cannot be chosen per preemption")
    if unavailable_for > 0:
        raise ConfigError("--unavailable-for (a stockout after the preemption) is for local stacks")
    if grace < 0:
        raise ConfigError("--grace must be 0 or more seconds")
    path = node_kind(cluster).preempt_path(node)
    private_endpoints.resume(stack)  # the endpoint may have been given back after an idle while
    answer = _post(template.format(path=path), {"grace_seconds": grace})
    taken = str(answer.get("action") or "PREEMPTED")
    progress(f"{node}: preempted; shutting down (at most {grace:g} s), then {taken}")
    return taken


def _google_advice(node: str, zone: str | None) -> str:
    return str(refused_on_google(node, zone)).split(": ", 1)[1]


def _post(url: str, body: object) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=ANSWER_TIMEOUT_SECONDS) as response:
            return json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        raise ConfigError(f"the preemption was refused: {_message(exc)}") from None
    except OSError as exc:
        raise ProvisionError(f"the preemption endpoint {url} did not answer: {exc}") from None


def _message(exc: urllib.error.HTTPError) -> str:
    text = exc.read().decode(errors="replace")
    try:
        return str(json.loads(text)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return text.strip()[:400] or f"HTTP {exc.code}"
