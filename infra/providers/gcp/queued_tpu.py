"""A TPU VM stack's TPU through a Cloud TPU queued resource (tpu.queued): created by trainctl
through the TPU API once `pulumi up` has made the rest of the stack, because pulumi-gcp's
V2QueuedResource cannot give the node it grants metadata (the SSH key), tags (the firewall),
labels (the reaper) or a service account. The program declares the request (its `queued_tpu`
output); this module sends it, records it in the stack's state before it exists (so `down`
deletes it after a crash or Ctrl-C), waits for the grant with progress, and gives up at the
stack's tpu.queue_deadline_minutes.

States (https://cloud.google.com/tpu/docs/queued-resources): ACCEPTED → WAITING_FOR_RESOURCES →
PROVISIONING → ACTIVE; FAILED when it cannot be granted (past its validUntilDuration too),
SUSPENDED when what it granted was taken back.
"""

from __future__ import annotations

import json
import time
from typing import Any

from infra.providers.capacity_wait import CapacityWait
from infra.providers.gcp.grant_wait import GrantWait, duration
from infra.providers.gcp.program.cluster import tpu_worker
from infra.providers.gcp.program.tpu import queued_resource_id, slice_node_ids
from infra.providers.gcp.reaper import google_client
from infra.providers.protocol import PlanRow, Progress
from infra.providers.stack_home import state_dir
from infra.spec import catalog
from infra.spec.cluster import ClusterSpec

RECORD = "queued_tpu.json"
STILL_WAITING = ("STATE_UNSPECIFIED", "CREATING", "ACCEPTED", "WAITING_FOR_RESOURCES", "PROVISIONING")
NOT_GRANTED = STILL_WAITING[:-1]  # waiting for capacity; PROVISIONING: granted, being created
CREATE_TIMEOUT_SECONDS = 300
DELETE_TIMEOUT_SECONDS = 600
REPORT_EVERY_SECONDS = 60.0  # a state unchanged this long is reported again, with the time waited


def plan_rows(spec: ClusterSpec) -> list[PlanRow]:
    """What `up` asks the TPU API for beyond the program's resources."""
    if not (spec.tpu and spec.tpu.queued):
        return []
    tier = "spot" if spec.spot else f"reservation {spec.reservation}" if spec.reservation not in (None, "none") \
        else "on demand"
    request = PlanRow("tpu/queuedResource", queued_resource_id(spec),
                      {"acceleratorType": spec.tpu.type, "runtimeVersion": spec.tpu.runtime_version, "zone": spec.zone,
                       "tier": tier, "deadline": f"{spec.tpu.queue_deadline_minutes:g} min",
                       **({"slices": spec.tpu.slices} if spec.tpu.slices > 1 else {})})
    if spec.tpu.slices == 1:
        return [request]
    hosts = catalog.TPUS[spec.tpu.type].hosts
    return [request, *(PlanRow("tpu/node", node_id, {"acceleratorType": spec.tpu.type, "slice": i, "hosts": hosts,
                                                     "grantedBy": queued_resource_id(spec)})
                       for i, node_id in enumerate(slice_node_ids(spec)))]


def granted(spec: ClusterSpec, outputs: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """The program's outputs with the queued TPU's workers in the inventory, once it is granted
    (the outputs as they are for every other stack)."""
    body = outputs.get("queued_tpu")
    if not body:
        return outputs
    from google.cloud import tpu_v2

    assert spec.tpu is not None and spec.tpu.queue_deadline_minutes is not None
    client = google_client(tpu_v2.TpuClient)
    name = _create(client, spec, body, progress)
    _wait(client, name, spec, progress)
    (asked,) = body["tpu"]["nodeSpec"]
    multislice = spec.tpu.slices > 1
    workers = []
    for index, node_id in enumerate(slice_node_ids(spec)):
        node = client.get_node(name=f"{asked['parent']}/nodes/{node_id}")
        workers += [tpu_worker(spec, i, ep.ip_address, ep.access_config.external_ip or None,
                               (index, node_id) if multislice else None)
                    for i, ep in enumerate(node.network_endpoints)]
    return {**outputs, "inventory": {**outputs["inventory"], "nodes": workers}}


def _create(client: Any, spec: ClusterSpec, body: dict[str, Any], progress: Progress) -> str:
    from google.api_core.exceptions import Conflict
    from google.cloud import tpu_v2

    parent = body["tpu"]["nodeSpec"][0]["parent"]
    name = f"{parent}/queuedResources/{queued_resource_id(spec)}"
    _record(spec.name, name)
    try:
        client.create_queued_resource(
            parent=parent, queued_resource_id=queued_resource_id(spec),
            queued_resource=tpu_v2.QueuedResource.from_json(json.dumps(body))).result(timeout=CREATE_TIMEOUT_SECONDS)
        progress(f"queued TPU {name}: requested")
    except Conflict:  # 409 ALREADY_EXISTS (over REST: Conflict): an earlier `up` asked and was stopped
        progress(f"queued TPU {name}: already requested, waiting for it")  # (or a `pulumi up` user did)
    return name


def _wait(client: Any, name: str, spec: ClusterSpec, progress: Progress) -> None:
    assert spec.tpu is not None and spec.tpu.queue_deadline_minutes is not None
    deadline = spec.tpu.queue_deadline_minutes * 60
    latest: dict[str, Any] = {}

    def read() -> dict[str, str | None]:
        latest["request"] = client.get_queued_resource(name=name)
        return {name: latest["request"].state.state.name}

    wait = GrantWait("queued TPU", deadline, read, lambda state: state in STILL_WAITING, progress,
                     remind_s=REPORT_EVERY_SECONDS, ungranted=lambda state: state in NOT_GRANTED)
    # Poll often for a short deadline (and the tests' simulated ones), at most every 15 s.
    state = wait.until_granted(min(1.0, deadline / 20), 15.0)[name]
    began, granted = wait.capacity_wait() or (time.time(), time.time())
    progress(CapacityWait(f"queued TPU {name}: {'granted' if state == 'ACTIVE' else 'not granted'} after "
                          f"waiting {duration(granted - began)} for capacity", began, granted))
    if state == "ACTIVE":
        progress(f"queued TPU {name}: ACTIVE")
        return
    tries = "raise tpu.queue_deadline_minutes or try another zone" + (" or on-demand capacity" if spec.spot else "")
    wait.give_up(f"queued TPU {name} {_why_not(latest['request'], spec)}; the request is deleted. To try again, "
                 f"{tries}; `trainctl down --stack {spec.name}` removes the rest of the stack",
                 remove=lambda: release(spec.name, progress))


def _why_not(qr: Any, spec: ClusterSpec) -> str:
    assert spec.tpu is not None
    state, within = qr.state.state.name, f"within tpu.queue_deadline_minutes ({spec.tpu.queue_deadline_minutes:g})"
    if state == "FAILED":  # also Google's end of the wait: the request's validUntilDuration is the deadline
        return f"FAILED {within}: {qr.state.failed_data.error.message}"
    if state == "SUSPENDED":
        return "was SUSPENDED: the TPU it granted was taken back (a preempted spot TPU)"
    return f"was not granted {within}: still {state}"


def release(stack: str, progress: Progress) -> None:
    """Delete the stack's queued resource and what it granted (force), if it has one."""
    from google.api_core.exceptions import NotFound
    from google.cloud import tpu_v2

    record = state_dir(stack) / RECORD
    if not record.exists():
        return
    name = json.loads(record.read_text())["name"]
    progress(f"deleting queued TPU {name} and the TPU it granted")
    try:
        google_client(tpu_v2.TpuClient).delete_queued_resource(
            request=tpu_v2.DeleteQueuedResourceRequest(name=name, force=True)).result(timeout=DELETE_TIMEOUT_SECONDS)
    except NotFound:
        pass
    record.unlink()


def _record(stack: str, name: str) -> None:
    path = state_dir(stack) / RECORD
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text(json.dumps({"name": name}) + "\n")
