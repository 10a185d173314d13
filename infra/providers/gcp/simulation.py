"""`--simulate`: a GCP stack stood up in a simulated project on this machine.

The GCP realizer runs unchanged; only where it reaches Google changes, as a user with a private
endpoint would set it: the Google clients' API endpoint (TRAINCTL_GCP_API_ENDPOINT), the
provider's custom endpoints (the program derives them from the same setting), the `pulumi` on
PATH (the engine stand-in, gcpsim/pulumi) and the Pulumi backend (the simulator's
own, beside its world). A stack stood up this way records it in its state, so every later verb
(bootstrap, launch, down, ...) finds the simulator again without the flag.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from infra.errors import ConfigError, ProvisionError
from infra.providers.gcp.reaper import API_ENDPOINT_ENV
from infra.providers.stack_home import cache_dir, state_dir, trainctl_home

if TYPE_CHECKING:
    from infra.providers.inventory import Inventory

SIMULATOR_ENV = "TRAINCTL_GCP_SIMULATOR"  # the simulator home in use by this process
# Where the nodes reach the APIs when that differs from where the controller does (a private
# endpoint seen from inside the VPC); the simulator's nodes reach it on its service address.
NODE_API_ENDPOINT_ENV = "TRAINCTL_GCP_NODE_API_ENDPOINT"
MARKER = "simulated.json"
RELEASE_WAIT_SECONDS = 10.0


def home() -> Path:
    return trainctl_home() / "simulator"


def active() -> bool:
    return bool(os.environ.get(SIMULATOR_ENV))


def activate(project: str | None, project_file: Path | None = None, *, api_only: bool = False) -> str:
    """Start (or find) the simulator, create the project if it does not exist yet (from the
    file, else the prepared template), and point this process and its children at it.
    `api_only`: VMs are the API's alone, no machines stand behind them (no root needed; what
    a large stack's `up` is measured with)."""
    from gcpsim.errors import SimulatorError
    from gcpsim.project import ProjectFile, load_project_file

    try:
        described = load_project_file(project_file) if project_file else None
    except SimulatorError as exc:
        raise ConfigError(str(exc)) from None
    if project is None:
        raise ConfigError("--simulate needs the stack's gcp:project (the simulated project's id)")
    if described is not None and described.project != project:
        raise ConfigError(f"the simulated project file {project_file} describes project "
                          f"{described.project!r}, but the stack names gcp:project {project!r}")
    url = _running(api_only=api_only)
    _post(url, "/trainctl-sim/v1/projects",
          (described or ProjectFile(project=project)).model_dump(mode="json"))
    _export(url)
    return url


def _export(url: str) -> None:
    from gcpsim.pulumi import write_launcher  # type: ignore[attr-defined]
    from gcpsim.pulumi.zygote import socket_path

    from gcpsim.kubernetes.auth import write_auth_plugin

    bin_dir = home() / "bin"
    write_launcher(bin_dir, server=socket_path(home()))  # the daemon's fork server
    write_auth_plugin(bin_dir, home())  # gke-gcloud-auth-plugin: the kubeconfig's credential helper
    from gcpsim.daemon import SERVICE_IP

    os.environ[API_ENDPOINT_ENV] = url
    os.environ[NODE_API_ENDPOINT_ENV] = f"http://{SERVICE_IP}:{url.rsplit(':', 1)[1]}"
    os.environ[SIMULATOR_ENV] = str(home())
    os.environ["PATH"] = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    os.environ["PULUMI_BACKEND_URL"] = f"file://{home() / 'pulumi'}"
    # The stand-in keeps no secrets encrypted, but the realizer (rightly) insists a
    # self-managed backend has a passphrase.
    os.environ.setdefault("PULUMI_CONFIG_PASSPHRASE", "simulated")


def release() -> None:
    """After a `down`: the simulator leaves now if nothing of it is alive and no other caller is
    being answered (its world stays on disk; the next command that needs it starts it again)."""
    if not active():
        return
    from gcpsim import daemon

    try:
        stopping = _post(os.environ[API_ENDPOINT_ENV], "/trainctl-sim/v1/stop-if-idle", {})["stopping"]
    except OSError:
        return
    deadline = time.monotonic() + RELEASE_WAIT_SECONDS
    while stopping and daemon.process_alive(home()) and time.monotonic() < deadline:
        time.sleep(0.1)  # `down` returns once it is gone: nothing is left running


def record(stack: str) -> None:
    """Called by the realizer before it creates anything: later verbs find the simulator."""
    if active():
        (state_dir(stack) / MARKER).write_text(json.dumps({"home": os.environ[SIMULATOR_ENV]}))


def resume(stack: str) -> None:
    """If the stack was stood up in the simulator, point this process at it again."""
    from gcpsim import daemon

    if active():
        if daemon.url_of(home()) is None:  # left after an earlier `down` in this process
            _export(_running())
        return
    marker = state_dir(stack) / MARKER
    if not marker.is_file():
        return

    recorded = Path(json.loads(marker.read_text())["home"])
    if recorded != home():
        raise ConfigError(f"stack {stack!r} was stood up in the simulator at {recorded}, but "
                          f"TRAINCTL_HOME now points at {home()}")
    _export(_running())


def _running(*, api_only: bool = False) -> str:
    from gcpsim import daemon

    try:
        return daemon.ensure_running(home(), api_only=api_only)
    except daemon.SimulatorUnavailable as exc:
        raise ProvisionError(str(exc)) from None


def adapt(inventory: Inventory, progress: Callable[[str], None]) -> Inventory:
    """A simulated stack's inventory as the nodes really are: they compute on the CPU (what
    they declare is kept in `simulates`, and the nodes say so themselves), reach the bucket
    through the simulator's storage (the controller on loopback, the nodes at SERVICE_IP),
    and install offline from a package cache their user owns (they have no route off this
    machine, like local nodes)."""
    if not active():
        return inventory
    from infra.spec.accelerator import Cpu
    from gcpsim.daemon import SERVICE_IP

    url = os.environ[API_ENDPOINT_ENV]
    port = url.rsplit(":", 1)[1]
    declared = sorted({str(n.accelerator) for n in inventory.nodes if n.accelerator.kind != "cpu"})
    if declared:
        progress(f"simulated accelerators ({', '.join(declared)}) are declared, not present: "
                 "the nodes compute on CPU")
    nodes = tuple(n if n.accelerator.kind == "cpu"
                  else n.model_copy(update={"accelerator": Cpu(), "simulates": n.accelerator})
                  for n in inventory.nodes)
    user = inventory.nodes[0].ssh_user if inventory.nodes else "root"
    return inventory.model_copy(update={
        "nodes": nodes, "storage_emulator_host": url, "offline_nodes": True,
        "on_controller": True,
        "node_env": {**inventory.node_env, "STORAGE_EMULATOR_HOST": f"http://{SERVICE_IP}:{port}",
                     "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false", **_cache_env(url, user)}})


def _cache_env(url: str, user: str) -> dict[str, str]:
    """uv's offline settings over a cache the machines' user owns: uv must write into its cache,
    and the kernel lets a user hardlink only files it owns (fs.protected_hardlinks), so one
    cache per uid, filled on the controller as that uid (bootstrap installs as the cache's
    owner), keeps N nodes at one copy of each package."""
    from infra.providers.offline_uv import offline_uv_env

    import urllib.error

    if user == "root":
        return offline_uv_env(cache_dir())
    try:
        uid = int(_get(url, f"/trainctl-sim/v1/users/{user}")["uid"])
    except urllib.error.HTTPError as exc:
        if exc.code != 404:
            raise
        return offline_uv_env(cache_dir())  # API-only VMs: no machine, no user to install as
    owned = cache_dir() / f"simulated-uid{uid}"
    for path in (owned, owned / "uv"):
        path.mkdir(parents=True, exist_ok=True)
        os.chown(path, uid, uid)
    return offline_uv_env(owned)


def _get(url: str, path: str) -> Any:
    import urllib.request

    with urllib.request.urlopen(url + path, timeout=30) as response:
        return json.loads(response.read())


def _post(url: str, path: str, body: Any) -> Any:
    import urllib.request

    request = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())
