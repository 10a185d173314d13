"""Where a GCP stack reaches Google when that is not Google's public endpoints: a private
endpoint, a proxy, or a simulated project on this machine. One record per stack, written into
its state before `up` creates anything and read by every later verb, so `bootstrap`, `launch` and
`down` reach the same place without being told again. A stack without the record uses Google's.

The record says where the controller and the nodes reach the APIs and Cloud Storage, which
Pulumi backend holds the stack and which `pulumi` to run (`tools`, first on PATH), how to start
the endpoint where it is not always up (a tunnel, a service on this machine) and how to give it
back after `down`, and what the machines behind it are where they differ from GCE's (no
accelerators, no route to the internet, namespaces of this machine). Children (the Pulumi
program, the Google clients of every module) read the endpoints from the environment this
module sets: TRAINCTL_GCP_API_ENDPOINT is also what a user sets for a private endpoint.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import urllib.parse
from typing import TYPE_CHECKING, Callable

from pydantic import BaseModel, ConfigDict

from infra.errors import ProvisionError
from infra.providers.gcp.reaper import API_ENDPOINT_ENV
from infra.providers.stack_home import cache_dir, state_dir

if TYPE_CHECKING:
    from infra.providers.inventory import Inventory

RECORD = "endpoints.json"
# Where the nodes reach the APIs when that differs from where the controller does (inside the VPC).
NODE_API_ENDPOINT_ENV = "TRAINCTL_GCP_NODE_API_ENDPOINT"


class Machines(BaseModel):
    """What the machines behind the endpoint are, where they are not GCE's."""

    model_config = ConfigDict(extra="forbid")
    accelerators: bool = True  # False: the GPUs and TPUs the VMs declare are not there
    route_to_internet: bool = True  # False: nodes install offline from a cache the controller fills
    on_this_host: bool = False  # the nodes are namespaces of this machine (they share its files)
    pulls_images: bool = True  # False: GKE pods run stand-ins for images, nothing is pulled
    user_ids: str | None = None  # on this host: where to ask the uid of a machine user ({user})
    # Where a spot VM or TPU is preempted on request (a simulator's test endpoint; Google has
    # none): {path} is its API path (projects/P/zones/Z/instances/I, projects/P/locations/Z/nodes/N),
    # POSTed {"grace_seconds": s}; it answers the action taken ({"action": "STOP"}).
    preempt: str | None = None


class PrivateEndpoints(BaseModel):
    model_config = ConfigDict(extra="forbid")
    api: str  # the base URL of every Google API, for the controller
    node_api: str | None = None  # the same, from inside the VPC
    storage: str | None = None  # Cloud Storage's host (STORAGE_EMULATOR_HOST form), for the controller
    node_storage: str | None = None
    pulumi_backend: str | None = None  # PULUMI_BACKEND_URL
    # A backend that holds no secrets of its own (a simulated one) may name the passphrase its
    # stacks use; a real backend's record names none, so the user's PULUMI_CONFIG_PASSPHRASE is needed.
    pulumi_passphrase: str | None = None
    tools: str | None = None  # a folder first on PATH: the `pulumi` and gke-gcloud-auth-plugin to run
    start: list[str] = []  # run where the API does not answer; it must leave the endpoint up
    release: list[str] = []  # run after `down`
    machines: Machines = Machines()


_in_use: PrivateEndpoints | None = None


def use(endpoints: PrivateEndpoints) -> None:
    """Point this process and its children at the endpoints (recorded by the next `up`)."""
    global _in_use
    _in_use = endpoints
    os.environ[API_ENDPOINT_ENV] = endpoints.api
    if endpoints.node_api:
        os.environ[NODE_API_ENDPOINT_ENV] = endpoints.node_api
    if endpoints.tools and endpoints.tools not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = f"{endpoints.tools}{os.pathsep}{os.environ.get('PATH', '')}"
    if endpoints.pulumi_backend:
        os.environ["PULUMI_BACKEND_URL"] = endpoints.pulumi_backend
    if endpoints.pulumi_passphrase:
        os.environ.setdefault("PULUMI_CONFIG_PASSPHRASE", endpoints.pulumi_passphrase)


def in_use() -> PrivateEndpoints | None:
    return _in_use


def of_stack(stack: str) -> PrivateEndpoints | None:
    """The endpoints this process uses, else those the stack recorded."""
    if _in_use is not None:
        return _in_use
    path = state_dir(stack) / RECORD
    return PrivateEndpoints.model_validate_json(path.read_text()) if path.is_file() else None


def record(stack: str) -> None:
    """Before `up` (or an adoption) creates anything: later verbs reach the same endpoints, and
    the same Pulumi backend (the user's PULUMI_BACKEND_URL, where they set one since)."""
    if _in_use is not None:
        used = _in_use.model_copy(update={"pulumi_backend": os.environ.get("PULUMI_BACKEND_URL")
                                          or _in_use.pulumi_backend})
        (state_dir(stack) / RECORD).write_text(used.model_dump_json(indent=2))


def resume(stack: str) -> None:
    """Reach the endpoints this process uses, else those the stack recorded, started where they
    are not up (a `down` may have given them back)."""
    endpoints = of_stack(stack)
    if endpoints is None:
        return
    if endpoints.start and not _answers(endpoints.api):
        done = subprocess.run(endpoints.start, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise ProvisionError(f"stack {stack!r} reaches Google through {endpoints.api}, which does not "
                                 f"answer, and starting it failed: {(done.stderr or done.stdout).strip()[-400:]}")
    if endpoints is not _in_use:
        use(endpoints)


def release() -> None:
    """After a `down`: an endpoint started for the stack is given back."""
    if _in_use is not None and _in_use.release:
        subprocess.run(_in_use.release, capture_output=True, stdin=subprocess.DEVNULL)


def _answers(url: str) -> bool:
    parsed = urllib.parse.urlsplit(url)
    try:
        with socket.create_connection((parsed.hostname or "", parsed.port or 443), timeout=2):
            return True
    except OSError:
        return False


def adapt(inventory: Inventory, progress: Callable[[str], None]) -> Inventory:
    """The inventory as the machines behind the endpoints are: where they have no accelerators
    they compute on the CPU (what they declare is kept in `simulates`); the bucket is reached
    through the endpoints' storage; nodes without a route install offline from a cache."""
    endpoints = in_use()
    if endpoints is None:
        return inventory
    from infra.spec.accelerator import Cpu

    machines = endpoints.machines
    nodes = inventory.nodes
    if not machines.accelerators:
        declared = sorted({str(n.accelerator) for n in nodes if n.accelerator.kind != "cpu"})
        if declared:
            progress(f"the VMs' accelerators ({', '.join(declared)}) are declared, not present on "
                     "their machines: the nodes compute on CPU")
        nodes = tuple(n if n.accelerator.kind == "cpu"
                      else n.model_copy(update={"accelerator": Cpu(), "simulates": n.accelerator}) for n in nodes)
    node_env = dict(inventory.node_env)
    if endpoints.node_storage:
        node_env.update({"STORAGE_EMULATOR_HOST": endpoints.node_storage,
                         # gcsfs probes buckets over gRPC/TLS first, which such an endpoint does not serve
                         "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"})
    if not machines.route_to_internet:
        node_env.update(_cache_env(machines, nodes[0].ssh_user if nodes else "root"))
    return inventory.model_copy(update={
        "nodes": nodes, "storage_emulator_host": endpoints.storage or inventory.storage_emulator_host,
        "offline_nodes": inventory.offline_nodes or not machines.route_to_internet,
        "on_controller": inventory.on_controller or machines.on_this_host, "node_env": node_env})


def _cache_env(machines: Machines, user: str) -> dict[str, str]:
    """uv's offline settings over a cache the machines' user owns: uv must write into its cache,
    and the kernel lets a user hardlink only files it owns (fs.protected_hardlinks), so one
    cache per uid, filled on the controller as that uid (bootstrap installs as the cache's
    owner), keeps N nodes at one copy of each package."""
    import urllib.error
    import urllib.request

    from infra.providers.offline_uv import offline_uv_env

    if user == "root" or not machines.on_this_host or not machines.user_ids:
        return offline_uv_env(cache_dir())
    try:
        with urllib.request.urlopen(machines.user_ids.format(user=user), timeout=30) as response:
            uid = int(json.loads(response.read())["uid"])
    except urllib.error.HTTPError as exc:
        if exc.code != 404:
            raise
        return offline_uv_env(cache_dir())  # VMs with no machine behind them: no user to install as
    owned = cache_dir() / f"simulated-uid{uid}"
    for path in (owned, owned / "uv"):
        path.mkdir(parents=True, exist_ok=True)
        os.chown(path, uid, uid)
    return offline_uv_env(owned)
