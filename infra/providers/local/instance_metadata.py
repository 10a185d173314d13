"""The controller's use of a local stack's metadata server (metadata.py): starting it with every
node's record, describing a node as GCE would, and reading the host keys nodes publish there."""

from __future__ import annotations

import ipaddress
import json
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

from infra.providers.host_keys import key_lines, wait_for_host_keys
from namespace_nodes import metadata, metadata_admin, netns
from infra.providers.local.layout import Addresses, Names
from infra.providers.local.state import load_state
from infra.providers.protocol import Progress
from infra.spec.cluster import ClusterSpec
from infra.spec.stack_config import ConfigError

HOST_KEY_TIMEOUT = 20.0  # published at boot, before sshd starts: there by the time :22 answers
HOST_KEY_POLL_SECONDS = 0.1


def metadata_admin_url(addr: Addresses) -> str:
    return f"http://{addr.bucket}:{metadata.ADMIN_PORT}"


def metadata_admin_for(stack: str) -> str:
    """The controller side of a live stack's metadata server."""
    state = load_state(stack)
    if state is None:
        raise ConfigError(f"stack {stack!r} is not up; run `trainctl up --stack {stack}`")
    return metadata_admin_url(Addresses(ipaddress.IPv4Network(state.data["subnet"])))


def start_metadata_server(spec: ClusterSpec, names: Names, addr: Addresses, sdir: Path) -> None:
    """Every node's instance metadata, as GCE serves it. Not waited for: the nodes boot while it
    starts (they retry publishing their host keys until it answers), and `up` waits for those."""
    config = sdir / "metadata.json"
    config.write_text(json.dumps({
        "project": {"project-id": f"local-{spec.name}", "numeric-project-id": secrets.randbits(40)},
        "nodes": [metadata_record(spec, names, addr, i) for i in range(spec.node_count)]}, indent=2))
    netns.run(["ip", "addr", "add", f"{metadata.METADATA_IP}/32", "dev", "lo"], netns=names.bucket_netns)
    log = open(sdir / "metadata.log", "ab")
    subprocess.run(
        ["setsid", "-f", "ip", "netns", "exec", names.bucket_netns, sys.executable, "-m", "namespace_nodes.metadata",
         "--config", str(config), "--listen", f"{metadata.METADATA_IP}:80",
         "--admin", f"{addr.bucket}:{metadata.ADMIN_PORT}"],
        check=True, stdin=subprocess.DEVNULL, stdout=log, stderr=log)


def metadata_record(spec: ClusterSpec, names: Names, addr: Addresses, i: int) -> dict[str, Any]:
    """One node as the metadata server describes it; a node created again gets a new id."""
    return {"name": names.node(i), "ip": addr.node(i), "id": secrets.randbits(63), "zone": "local-a",
            "machine-type": "local", "spot": spec.node_is_spot(i),
            "attributes": {"enable-guest-attributes": "TRUE", "trainctl-stack": spec.name}}


def published_host_keys(addr: Addresses, nodes: list[str], progress: Progress) -> dict[str, list[str]]:
    admin = metadata_admin_url(addr)

    def look(missing: list[str]) -> dict[str, list[str]]:
        try:
            return {n: key_lines(metadata_admin.guest_attributes(admin, n, "hostkeys/")["queryValue"]["items"])
                    for n in missing}
        except OSError:  # the metadata server is still starting: look again
            return {}

    return wait_for_host_keys(nodes, look, progress, timeout=HOST_KEY_TIMEOUT, poll=HOST_KEY_POLL_SECONDS)
