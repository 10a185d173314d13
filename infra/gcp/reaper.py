"""`trainctl reap`: delete what trainctl created on GCP and whose expiry label has passed.

This is the TTL's second half: it needs no state from the laptop that made the resources, only
their labels (managed-by=trainctl, trainctl-expires=<unix seconds>).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping


@dataclass(frozen=True)
class Expired:
    kind: str  # "instance" | "tpu"
    name: str  # full resource path for TPUs, instance name for VMs
    zone: str
    stack: str
    expired_for_s: int


def is_expired(labels: Mapping[str, str], now: float) -> int | None:
    """Seconds past expiry for a trainctl resource, else None (unlabelled ones are never touched)."""
    if labels.get("managed-by") != "trainctl":
        return None
    try:
        expires = int(labels.get("trainctl-expires", ""))
    except ValueError:
        return None
    return int(now - expires) if now >= expires else None


def find_expired(project: str, now: float | None = None) -> list[Expired]:
    from google.cloud import compute_v1, tpu_v2

    now = time.time() if now is None else now
    found: list[Expired] = []
    request = compute_v1.AggregatedListInstancesRequest(project=project,
                                                        filter="labels.managed-by = trainctl")
    for zone, scoped in compute_v1.InstancesClient().aggregated_list(request=request):
        for inst in scoped.instances:
            late = is_expired(inst.labels, now)
            if late is not None:
                found.append(Expired("instance", inst.name, zone.split("/")[-1],
                                     inst.labels.get("trainctl-stack", "?"), late))
    tpu = tpu_v2.TpuClient()
    for node in tpu.list_nodes(parent=f"projects/{project}/locations/-"):
        late = is_expired(node.labels, now)
        if late is not None:
            found.append(Expired("tpu", node.name, node.name.split("/")[3],
                                 node.labels.get("trainctl-stack", "?"), late))
    return found


def delete(project: str, items: Iterable[Expired], report: Callable[[str], None]) -> None:
    from google.cloud import compute_v1, tpu_v2

    for item in items:
        if item.kind == "instance":
            compute_v1.InstancesClient().delete(project=project, zone=item.zone, instance=item.name)
        else:
            tpu_v2.TpuClient().delete_node(name=item.name)
        report(f"deleted {item.kind} {item.name} (stack {item.stack}, expired {item.expired_for_s}s ago)")
