"""`trainctl reap`: delete what trainctl created on GCP and whose expiry label has passed.

This is the TTL's second half: it needs no state from the laptop that made the resources, only
their labels (managed-by=trainctl, trainctl-expires=<unix seconds>). It covers VMs, TPU nodes,
TPU queued resources and GKE clusters.

This file is also shipped alone as the scheduled reaper's Cloud Function source, so it imports
nothing from trainctl.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, TypeVar

# Points every Google API client trainctl makes at another endpoint over plain REST with
# anonymous credentials: the tests' loopback fake of Google's APIs. Unset in production, where
# the clients take their defaults (Google's endpoints, application default credentials).
API_ENDPOINT_ENV = "TRAINCTL_GCP_API_ENDPOINT"

C = TypeVar("C")


def google_client(cls: Callable[..., C]) -> C:
    """The one place trainctl constructs a google-cloud-* client."""
    endpoint = os.environ.get(API_ENDPOINT_ENV)
    if not endpoint:
        return cls()
    from google.auth.credentials import AnonymousCredentials

    return cls(transport="rest", credentials=AnonymousCredentials(),
               client_options={"api_endpoint": endpoint})


@dataclass(frozen=True)
class Expired:
    kind: str  # "instance" | "tpu" | "queued-tpu" | "gke"
    name: str  # instance name for VMs; the full resource path for the others
    zone: str  # zone, or the cluster's location (a region or a zone)
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


# Decides for one resource's labels whether it goes: seconds past expiry (0 for "now"), or None.
Pick = Callable[[Mapping[str, str]], "int | None"]


def _picked(kind: str, name: str, zone: str, labels: Mapping[str, str], pick: Pick) -> list[Expired]:
    late = pick(labels)
    return [] if late is None else [Expired(kind, name, zone, labels.get("trainctl-stack", "?"), late)]


def _instances(project: str, pick: Pick) -> list[Expired]:
    from google.cloud import compute_v1

    request = compute_v1.AggregatedListInstancesRequest(project=project,
                                                        filter="labels.managed-by = trainctl")
    found: list[Expired] = []
    for scope, scoped in google_client(compute_v1.InstancesClient).aggregated_list(request=request):
        for inst in scoped.instances:  # scopes without instances carry only a warning
            found += _picked("instance", inst.name, scope.split("/")[-1], inst.labels, pick)
    return found


def _tpus(project: str, pick: Pick) -> list[Expired]:
    from google.cloud import tpu_v2

    client = google_client(tpu_v2.TpuClient)
    parent = f"projects/{project}/locations/-"
    found: list[Expired] = []
    for node in client.list_nodes(parent=parent):
        found += _picked("tpu", node.name, node.name.split("/")[3], node.labels, pick)
    for qr in client.list_queued_resources(parent=parent):
        # A queued resource has no labels of its own: its node specs carry them (when the
        # creator could set them), so it is reaped by its nodes' labels.
        labels: dict[str, str] = {}
        for spec in qr.tpu.node_spec:
            labels.update(spec.node.labels)
        found += _picked("queued-tpu", qr.name, qr.name.split("/")[3], labels, pick)
    return found


def _clusters(project: str, pick: Pick) -> list[Expired]:
    from google.cloud import container_v1

    response = google_client(container_v1.ClusterManagerClient).list_clusters(
        parent=f"projects/{project}/locations/-")
    found: list[Expired] = []
    for cluster in response.clusters:
        found += _picked("gke", f"projects/{project}/locations/{cluster.location}/clusters/{cluster.name}",
                         cluster.location, cluster.resource_labels, pick)
    return found


def _find(project: str, pick: Pick) -> list[Expired]:
    return _instances(project, pick) + _tpus(project, pick) + _clusters(project, pick)


def find_expired(project: str, now: float | None = None) -> list[Expired]:
    at = time.time() if now is None else now
    return _find(project, lambda labels: is_expired(labels, at))


def find_stack(project: str, stack: str) -> list[Expired]:
    """Everything trainctl labelled as the stack's, expired or not: `down --force` after a
    failed destroy."""
    return _find(project, lambda labels: 0 if labels.get("managed-by") == "trainctl"
                 and labels.get("trainctl-stack") == stack else None)


def _delete_one(project: str, item: Expired, clients: dict[Any, Any]) -> None:
    from google.cloud import compute_v1, container_v1, tpu_v2

    def client(cls: Callable[..., Any]) -> Any:
        # one client per class for the whole sweep (each holds a connection pool)
        if cls not in clients:
            clients[cls] = google_client(cls)
        return clients[cls]

    if item.kind == "instance":
        client(compute_v1.InstancesClient).delete(project=project, zone=item.zone, instance=item.name)
    elif item.kind == "tpu":
        client(tpu_v2.TpuClient).delete_node(name=item.name)
    elif item.kind == "queued-tpu":
        # force: also deletes the TPU the queue granted; without it an ACTIVE one is refused.
        client(tpu_v2.TpuClient).delete_queued_resource(
            request=tpu_v2.DeleteQueuedResourceRequest(name=item.name, force=True))
    elif item.kind == "gke":
        client(container_v1.ClusterManagerClient).delete_cluster(name=item.name)
    else:
        raise ValueError(f"unknown kind {item.kind!r}")


def delete(project: str, items: Iterable[Expired], report: Callable[[str], None]) -> None:
    clients: dict[Any, Any] = {}
    for item in items:
        _delete_one(project, item, clients)
        report(f"deleted {item.kind} {item.name} (stack {item.stack}, expired {item.expired_for_s}s ago)")
