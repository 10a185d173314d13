"""How a client reaches this simulator, as a user reaches a private endpoint, and what the
machines behind it are: the one description a client records (trainctl keeps it in the stack's
state) instead of knowing anything of the simulator.

    python -m gcpsim ensure --home DIR   starts the simulator if it is not running; prints this
    python -m gcpsim release --home DIR  lets it leave now if nothing of it is alive
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from gcpsim import daemon

RELEASE_WAIT_SECONDS = 10.0


def tools_dir(home: Path) -> Path:
    return home / "bin"


def ensure(home: Path, *, api_only: bool = False) -> dict[str, Any]:
    """Start the simulator of `home` if needed and describe how to reach it."""
    from gcpsim.kubernetes.auth import write_auth_plugin
    from gcpsim.pulumi import write_launcher  # type: ignore[attr-defined]
    from gcpsim.pulumi.zygote import socket_path

    url = daemon.ensure_running(home, api_only=api_only)
    write_launcher(tools_dir(home), server=socket_path(home))  # the daemon's fork server
    write_auth_plugin(tools_dir(home), home)  # gke-gcloud-auth-plugin: the kubeconfig's credential helper
    node_url = f"http://{daemon.SERVICE_IP}:{url.rsplit(':', 1)[1]}"
    here = [sys.executable, "-m", "gcpsim"]
    return {
        "api": url, "node_api": node_url,
        # Cloud Storage is served on the same address, as STORAGE_EMULATOR_HOST takes it.
        "storage": url, "node_storage": node_url,
        "pulumi_backend": f"file://{home / 'pulumi'}",
        # The stand-in keeps no secrets encrypted; a self-managed backend still needs a passphrase.
        "pulumi_passphrase": "simulated",
        # The `pulumi` stand-in (no Pulumi CLI can be installed here) and the GKE auth plugin.
        "tools": str(tools_dir(home)),
        "start": [*here, "ensure", "--home", str(home)],
        "release": [*here, "release", "--home", str(home)],
        # What the machines behind the VMs are: this machine's namespaces, with no GPU or TPU
        # and no route off this machine; GKE pods run stand-ins for images (nothing is pulled).
        "machines": {"accelerators": False, "route_to_internet": False, "on_this_host": True,
                     "pulls_images": False, "user_ids": f"{url}/trainctl-sim/v1/users/{{user}}",
                     # spot preemption on request (gcpsim/apis/compute_spot.py, tpu_nodes.py)
                     "preempt": f"{url}/trainctl-sim/v1/{{path}}:preempt"},
    }


def release(home: Path) -> None:
    """After a `down`: the simulator leaves now if nothing of it is alive and no other caller is
    being answered (its world stays on disk; the next `ensure` starts it again)."""
    url = daemon.url_of(home)
    if url is None:
        return
    request = urllib.request.Request(f"{url}/trainctl-sim/v1/stop-if-idle", data=b"{}", method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            stopping = json.loads(response.read())["stopping"]
    except OSError:
        return
    deadline = time.monotonic() + RELEASE_WAIT_SECONDS
    while stopping and daemon.process_alive(home) and time.monotonic() < deadline:
        time.sleep(0.1)  # the caller returns once it is gone: nothing is left running
