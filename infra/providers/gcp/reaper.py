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

# GKE labels every node VM it creates with this (and copies the cluster's resource labels onto
# it): https://cloud.google.com/kubernetes-engine/docs/how-to/creating-managing-labels
GKE_NODE_LABEL = "goog-gke-node"


def google_client(cls: Callable[..., C]) -> C:
    """The one place trainctl constructs a google-cloud-* client."""
    endpoint = os.environ.get(API_ENDPOINT_ENV)
    if not endpoint:
        return cls()
    from google.auth.credentials import AnonymousCredentials

    client = cls(transport="rest", credentials=AnonymousCredentials(),
                 client_options={"api_endpoint": endpoint})
    _operations_at(client, endpoint)
    return client


def _operations_at(client: object, endpoint: str) -> None:
    """google-cloud-compute polls an operation (`.result()`) through operations clients it
    builds without the caller's client_options (transports/base.py: ZoneOperationsClient(
    credentials=..., transport=...)), i.e. at compute.googleapis.com whatever endpoint the
    client was given: give its transport ones that use the same endpoint."""
    services = getattr(getattr(client, "_transport", None), "_extended_operations_services", None)
    if services is None:
        return
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import compute_v1

    for key, ops in (("global_operations", compute_v1.GlobalOperationsClient),
                     ("region_operations", compute_v1.RegionOperationsClient),
                     ("zone_operations", compute_v1.ZoneOperationsClient)):
        services[key] = ops(transport="rest", credentials=AnonymousCredentials(),
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
            if GKE_NODE_LABEL in inst.labels:
                continue  # its cluster's: it goes with the cluster, never one by one
            found += _picked("instance", inst.name, scope.split("/")[-1], inst.labels, pick)
    return found


def _tpus(project: str, pick: Pick) -> list[Expired]:
    from google.cloud import tpu_v2

    client = google_client(tpu_v2.TpuClient)
    parent = f"projects/{project}/locations/-"
    found: list[Expired] = []
    for node in client.list_nodes(parent=parent):
        if node.queued_resource:
            continue  # granted by a queued resource: it goes with it (delete with force)
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


def _service_disabled(exc: Exception) -> bool:
    """A 403 SERVICE_DISABLED: the project never turned that API on, so it holds nothing of
    that kind (a GPU stack's project has no TPU or GKE API until a TPU or GKE stack needs it)."""
    return getattr(exc, "reason", None) == "SERVICE_DISABLED" or "SERVICE_DISABLED" in str(exc)


def _listed(kind: str, finder: Callable[[str, Pick], list[Expired]], project: str, pick: Pick,
            report: Callable[[str], None]) -> list[Expired]:
    from google.api_core.exceptions import Forbidden

    try:
        return finder(project, pick)
    except Forbidden as exc:  # 403 over REST (PermissionDenied is gRPC's)
        if not _service_disabled(exc):
            raise
        report(f"no {kind} to look at: its API is not enabled in project {project}")
        return []


def _find(project: str, pick: Pick, report: Callable[[str], None] = lambda _: None) -> list[Expired]:
    return (_listed("VMs", _instances, project, pick, report)
            + _listed("TPUs", _tpus, project, pick, report)
            + _listed("GKE clusters", _clusters, project, pick, report))


def find_expired(project: str, now: float | None = None,
                 report: Callable[[str], None] = lambda _: None) -> list[Expired]:
    at = time.time() if now is None else now
    return _find(project, lambda labels: is_expired(labels, at), report)


def find_stack(project: str, stack: str, report: Callable[[str], None] = lambda _: None) -> list[Expired]:
    """Everything trainctl labelled as the stack's, expired or not: `down --force` after a
    failed destroy."""
    return _find(project, lambda labels: 0 if labels.get("managed-by") == "trainctl"
                 and labels.get("trainctl-stack") == stack else None, report)


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


class SweepIncomplete(Exception):
    """Some items could not be deleted; every other item was."""


def delete(project: str, items: Iterable[Expired], report: Callable[[str], None]) -> None:
    """Deletes each item; one item's failure never ends the sweep. An item already gone (404)
    or already being deleted counts as done. Raises SweepIncomplete naming the failures."""
    from google.api_core.exceptions import GoogleAPICallError, NotFound

    clients: dict[Any, Any] = {}
    failed: list[str] = []
    for item in items:
        try:
            _delete_one(project, item, clients)
        except NotFound:
            report(f"{item.kind} {item.name} is already gone")
            continue
        except GoogleAPICallError as exc:
            if _being_deleted(project, item, clients):
                report(f"{item.kind} {item.name} is already being deleted")
                continue
            failed.append(f"{item.kind} {item.name}: {exc}")
            report(f"could not delete {item.kind} {item.name}: {exc}")
            continue
        report(f"deleted {item.kind} {item.name} (stack {item.stack}, expired {item.expired_for_s}s ago)")
    if failed:
        raise SweepIncomplete(f"{len(failed)} item(s) not deleted: " + "; ".join(failed))


# Each kind's state while its deletion is under way (Compute: instance status; TPU: node and
# queued-resource state; GKE: cluster status), from the APIs' reference enums.
GOING = {"instance": {"STOPPING", "DEPROVISIONING"}, "tpu": {"DELETING"},
         "queued-tpu": {"DELETING"}, "gke": {"STOPPING"}}


def _state_of(project: str, item: Expired, clients: dict[Any, Any]) -> str | None:
    """The item's state as its API reports it now; None once it no longer exists."""
    from google.api_core.exceptions import NotFound
    from google.cloud import compute_v1, container_v1, tpu_v2

    def client(cls: Callable[..., Any]) -> Any:
        if cls not in clients:
            clients[cls] = google_client(cls)
        return clients[cls]

    try:
        if item.kind == "instance":
            return client(compute_v1.InstancesClient).get(project=project, zone=item.zone,
                                                          instance=item.name).status
        if item.kind == "tpu":
            return client(tpu_v2.TpuClient).get_node(name=item.name).state.name
        if item.kind == "queued-tpu":
            return client(tpu_v2.TpuClient).get_queued_resource(name=item.name).state.state.name
        return client(container_v1.ClusterManagerClient).get_cluster(name=item.name).status.name
    except NotFound:
        return None


def _being_deleted(project: str, item: Expired, clients: dict[Any, Any]) -> bool:
    """A delete refused because the item is already gone or already going (another sweep, the
    stack's own `down`, GKE removing its nodes) has nothing left to do."""
    from google.api_core.exceptions import GoogleAPICallError

    try:
        state = _state_of(project, item, clients)
    except GoogleAPICallError:
        return False
    return state is None or state in GOING[item.kind]
