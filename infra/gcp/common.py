"""Names, labels and metadata shared by the GCP components."""

from __future__ import annotations

import time

from infra.spec import ClusterSpec

TYPE_PREFIX = "trainctl:gcp"


def labels(spec: ClusterSpec, expires_at: int | None) -> dict[str, str]:
    """Labels on everything: who made it, for which stack, and when `trainctl reap` may delete it."""
    out = {"managed-by": "trainctl", "trainctl-stack": spec.name,
           "trainctl-ephemeral": str(spec.ephemeral).lower(), **spec.labels}
    if expires_at is None:
        expires_at = int(time.time() + spec.ttl_hours * 3600)
    out["trainctl-expires"] = str(expires_at)  # unix seconds: label values allow only [-_a-z0-9]
    return out


def network_tag(spec: ClusterSpec) -> str:
    return f"{spec.name}-node"


def ssh_metadata(spec: ClusterSpec, public_key: str) -> dict[str, str]:
    return {
        "ssh-keys": f"{spec.ssh.user}:{public_key.strip()} {spec.ssh.user}",
        # Only this stack's key: project-wide keys do not open these nodes.
        "block-project-ssh-keys": "TRUE",
        # The guest agent publishes the host keys here; trainctl pins them from the API.
        "enable-guest-attributes": "TRUE",
    }
