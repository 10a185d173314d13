"""`--simulate`: a GCP stack stood up in a simulated project on this machine.

The GCP realizer runs unchanged; only where it reaches Google changes, as a user with a private
endpoint would set it: the Google clients' API endpoint (TRAINCTL_GCP_API_ENDPOINT), the
provider's custom endpoints (the program derives them from the same setting), the `pulumi` on
PATH (the engine stand-in, infra/gcp/simulator/pulumi) and the Pulumi backend (the simulator's
own, beside its world). A stack stood up this way records it in its state, so every later verb
(bootstrap, launch, down, ...) finds the simulator again without the flag.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from infra.errors import ConfigError
from infra.gcp.reaper import API_ENDPOINT_ENV
from infra.stack_home import cache_dir, state_dir, trainctl_home

SIMULATOR_ENV = "TRAINCTL_GCP_SIMULATOR"  # the simulator home in use by this process
MARKER = "simulated.json"


def home() -> Path:
    return trainctl_home() / "simulator"


def active() -> bool:
    return bool(os.environ.get(SIMULATOR_ENV))


def activate(project: str | None, project_file: Path | None = None, *, api_only: bool = False) -> str:
    """Start (or find) the simulator, create the project if it does not exist yet (from the
    file, else the prepared template), and point this process and its children at it.
    `api_only`: VMs are the API's alone, no machines stand behind them (no root needed; what
    a large stack's `up` is measured with)."""
    from infra.gcp.simulator import daemon
    from infra.gcp.simulator.project import ProjectFile, load_project_file

    described = load_project_file(project_file) if project_file else None
    if project is None:
        raise ConfigError("--simulate needs the stack's gcp:project (the simulated project's id)")
    if described is not None and described.project != project:
        raise ConfigError(f"the simulated project file {project_file} describes project "
                          f"{described.project!r}, but the stack names gcp:project {project!r}")
    url = daemon.ensure_running(home(), api_only=api_only)
    _post(url, "/trainctl-sim/v1/projects",
          (described or ProjectFile(project=project)).model_dump(mode="json"))
    _export(url)
    return url


def _export(url: str) -> None:
    from infra.gcp.simulator.pulumi import write_launcher  # type: ignore[attr-defined]

    bin_dir = home() / "bin"
    write_launcher(bin_dir)
    os.environ[API_ENDPOINT_ENV] = url
    os.environ[SIMULATOR_ENV] = str(home())
    os.environ["PATH"] = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    os.environ["PULUMI_BACKEND_URL"] = f"file://{home() / 'pulumi'}"
    # The stand-in keeps no secrets encrypted, but the realizer (rightly) insists a
    # self-managed backend has a passphrase.
    os.environ.setdefault("PULUMI_CONFIG_PASSPHRASE", "simulated")


def record(stack: str) -> None:
    """Called by the realizer before it creates anything: later verbs find the simulator."""
    if active():
        (state_dir(stack) / MARKER).write_text(json.dumps({"home": os.environ[SIMULATOR_ENV]}))


def resume(stack: str) -> None:
    """If the stack was stood up in the simulator, point this process at it again."""
    marker = state_dir(stack) / MARKER
    if active() or not marker.is_file():
        return
    from infra.gcp.simulator import daemon

    recorded = Path(json.loads(marker.read_text())["home"])
    if recorded != home():
        raise ConfigError(f"stack {stack!r} was stood up in the simulator at {recorded}, but "
                          f"TRAINCTL_HOME now points at {home()}")
    _export(daemon.ensure_running(home()))


def inventory_extras() -> dict[str, Any]:
    """What a simulated stack's inventory adds: the bucket's endpoint (the simulator's storage,
    for the controller and, through the service address, for the nodes) and offline installs
    (simulated machines, like local nodes, have no route off this machine)."""
    if not active():
        return {}
    from infra.gcp.simulator.daemon import SERVICE_IP
    from infra.local.realizer import offline_uv_env

    url = os.environ[API_ENDPOINT_ENV]
    port = url.rsplit(":", 1)[1]
    return {"storage_emulator_host": url, "offline_nodes": True,
            "node_env": {"STORAGE_EMULATOR_HOST": f"http://{SERVICE_IP}:{port}",
                         "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false", **offline_uv_env(cache_dir())}}


def _post(url: str, path: str, body: Any) -> Any:
    import urllib.request

    request = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())
