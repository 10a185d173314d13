"""`down --force` after a failed destroy: what labels cannot find, and the stack's bucket.

Firewalls, routers (with their Cloud NAT), subnetworks and networks carry no labels in the
Compute API. The program names each after the stack (infra/providers/gcp/program/network.py), so exactly those
names are deleted, never a pattern. A subnetwork is refused while VMs being deleted still use it
(`resourceInUseByAnotherResource`): it is asked again until they are gone, within a bound.

An ephemeral stack's bucket goes with its objects (its checkpoints); a named stack's bucket is
kept, as on a normal `down`. Before deleting, the bucket must carry the stack's labels: a name
alone never decides that a bucket is ours.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from infra.errors import ConfigError, ProvisionError
from infra.providers.gcp.program.gpu_network import gpu_network_names
from infra.providers.gcp.program.network import region_of
from infra.providers.gcp.reaper import API_ENDPOINT_ENV, google_client
from infra.providers.gcp.program.storage import bucket_name, kept_on_down
from infra.spec.cluster import ClusterSpec

IN_USE = "resourceInUseByAnotherResource"
IN_USE_TIMEOUT_SECONDS = 600.0  # VMs and GKE node pools take minutes to go
IN_USE_POLL_SECONDS = 10.0
OBJECT_DELETES_AT_ONCE = 16


def network_names(spec: ClusterSpec) -> list[tuple[str, str]]:
    """(collection, name) in deletion order: what uses a network goes before it (the placement
    policy and a GPUDirect family's extra networks first, program/gpu_network.py)."""
    return [*gpu_network_names(spec), ("firewalls", f"{spec.name}-fw-ssh"),
            ("firewalls", f"{spec.name}-fw-internal"), ("routers", f"{spec.name}-router"),
            ("subnetworks", f"{spec.name}-subnet"), ("networks", f"{spec.name}-vpc")]


def _singular(collection: str) -> str:
    return {"resourcePolicies": "resource policy"}.get(collection, collection[:-1])


def _in_use(exc: Exception) -> bool:
    reasons = [e.get("reason") for e in getattr(exc, "errors", None) or [] if isinstance(e, dict)]
    return IN_USE in reasons or IN_USE in str(exc) or "is already being used by" in str(exc)


def sweep_network(spec: ClusterSpec, progress: Callable[[str], None], *,
                  timeout: float = IN_USE_TIMEOUT_SECONDS, poll: float = IN_USE_POLL_SECONDS,
                  sleep: Callable[[float], None] = time.sleep) -> None:
    from google.api_core.exceptions import GoogleAPICallError, NotFound
    from google.cloud import compute_v1

    assert spec.project and spec.zone
    project, region = spec.project, region_of(spec.zone)
    firewalls = google_client(compute_v1.FirewallsClient)
    networks = google_client(compute_v1.NetworksClient)
    routers = google_client(compute_v1.RoutersClient)
    subnetworks = google_client(compute_v1.SubnetworksClient)
    policies = google_client(compute_v1.ResourcePoliciesClient)
    deletes: dict[str, Callable[[str], Any]] = {
        "resourcePolicies": lambda n: policies.delete(project=project, region=region, resource_policy=n),
        "firewalls": lambda n: firewalls.delete(project=project, firewall=n),
        "networks": lambda n: networks.delete(project=project, network=n),
        "routers": lambda n: routers.delete(project=project, region=region, router=n),
        "subnetworks": lambda n: subnetworks.delete(project=project, region=region, subnetwork=n),
    }
    for collection, name in network_names(spec):
        deadline = time.monotonic() + timeout
        while True:
            try:
                deletes[collection](name).result(timeout=timeout)
                progress(f"deleted {_singular(collection)} {name}")
                break
            except NotFound:  # never made (no NAT, no SSH rule), or gone already
                break
            except GoogleAPICallError as exc:
                if not _in_use(exc):
                    raise
                if time.monotonic() + poll > deadline:
                    raise ProvisionError(
                        f"{_singular(collection)} {name} is still in use {timeout:.0f} s after its VMs were deleted "
                        f"({exc.message}); run `trainctl down --stack {spec.name} --force` again") from exc
                progress(f"{_singular(collection)} {name} is still in use (its VMs are going): "
                         f"asking again in {poll:g} s")
                sleep(poll)


def _storage_client(project: str) -> Any:
    import os

    from google.cloud import storage

    endpoint = os.environ.get(API_ENDPOINT_ENV)
    if not endpoint:
        return storage.Client(project=project)
    from google.auth.credentials import AnonymousCredentials

    return storage.Client(project=project, credentials=AnonymousCredentials(),
                          client_options={"api_endpoint": endpoint})


def sweep_bucket(spec: ClusterSpec, progress: Callable[[str], None]) -> None:
    from google.api_core.exceptions import NotFound

    assert spec.project
    name = bucket_name(spec)
    if kept_on_down(spec):  # `down` says so, with the command that deletes it
        return
    client = _storage_client(spec.project)
    bucket = client.lookup_bucket(name)
    if bucket is None:
        return
    labels = bucket.labels or {}
    if labels.get("managed-by") != "trainctl" or labels.get("trainctl-stack") != spec.name:
        progress(f"bucket {name} does not carry stack {spec.name}'s labels: left alone")
        return

    def delete(blob: Any) -> int:
        try:
            blob.delete()
            return 1
        except NotFound:  # deleted meanwhile (a lifecycle rule, another sweep)
            return 0

    # GCS deletes a bucket only once it is empty, one request per object: side by side, a run's
    # thousands of checkpoint objects take seconds, not minutes.
    with ThreadPoolExecutor(max_workers=OBJECT_DELETES_AT_ONCE) as pool:
        removed = sum(pool.map(delete, client.list_blobs(bucket)))
    bucket.delete()
    progress(f"deleted bucket {name} and its {removed} object(s)")


def not_swept(spec: ClusterSpec) -> list[str]:
    """The gcloud commands for what the stack may have left that trainctl has no client for
    (Artifact Registry, IAM, Cloud Functions and Cloud Scheduler are not among its dependencies).
    None of them bills by the hour; the repository bills for the images it stores."""
    from infra.providers.gcp.program.cluster import service_account_id
    from infra.providers.gcp.program.registry import repository_id
    from infra.providers.gcp.program.scheduled_reaper import reaper_account_id

    assert spec.project and spec.zone
    where = f"--project {spec.project}"
    region = region_of(spec.zone)
    commands = [f"gcloud artifacts repositories delete {repository_id(spec)} --location {region} {where}",
                f"gcloud iam service-accounts delete {service_account_id(spec)}@{spec.project}"
                f".iam.gserviceaccount.com {where}"]
    if spec.scheduled_reaper:
        reaper_account = reaper_account_id(spec)
        commands += [f"gcloud scheduler jobs delete {spec.name}-reaper --location {region} {where}",
                     f"gcloud functions delete {spec.name}-reaper --gen2 --region {region} {where}",
                     f"gcloud iam service-accounts delete {reaper_account}@{spec.project}"
                     f".iam.gserviceaccount.com {where}"]
    return commands


def delete_vms(spec: ClusterSpec, progress: Callable[[str], None], *,
               timeout: float = IN_USE_TIMEOUT_SECONDS) -> None:
    """Every VM carrying the stack's labels, deleted, waited until gone: those a failed create
    left out of the state as well (terraform-provider-google drops an instance whose insert
    operation's wait failed, `d.SetId("")` in resourceComputeInstanceCreate, although it may
    exist and be granted later). Gone before `pulumi destroy`, they hold no subnetwork."""
    from google.api_core.exceptions import NotFound
    from google.cloud import compute_v1

    from infra.providers.gcp.reaper import find_stack

    assert spec.project
    client = google_client(compute_v1.InstancesClient)
    going = []
    for vm in find_stack(spec.project, spec.name, progress):
        if vm.kind != "instance":
            continue
        try:
            going.append((vm.name, client.delete(project=spec.project, zone=vm.zone, instance=vm.name)))
        except NotFound:  # gone meanwhile
            continue
    for name, operation in going:
        operation.result(timeout=timeout)
        progress(f"deleted VM {name}")


def sweep_labelled(stack: str, meta: dict[str, Any] | None, progress: Callable[[str], None]) -> None:
    """What a failed destroy left: everything labelled as the stack's, then its network (which
    labels cannot find: by the names the program gives it, once the VMs using it are gone) and
    an ephemeral stack's bucket."""
    from infra.providers.gcp.reaper import delete, find_stack
    from infra.spec.stack_config import load_stack

    spec = ClusterSpec.model_validate(meta["spec"]) if meta and meta.get("spec") else load_stack(stack)
    if spec.project is None:
        raise ConfigError(f"stack {stack!r}: no project known to sweep (no state, no stack file)")
    delete(spec.project, find_stack(spec.project, stack, progress), progress)
    sweep_network(spec, progress)
    sweep_bucket(spec, progress)
    progress("if the destroy left them, delete these by hand (trainctl has no client for them; "
             "a NotFound answer means it is gone):\n  " + "\n  ".join(not_swept(spec)))
