"""`pulumi up` entry point (Pulumi.yaml: main: infra/). One ClusterSpec from the stack config."""

from __future__ import annotations

import os
from pathlib import Path

import pulumi

from infra.providers.gcp.program.cluster import build
from infra.spec.cluster import ClusterSpec
from infra.spec.stack_config import ConfigError, spec_from_pulumi_config


def public_key(spec_key: str | None) -> str:
    """The key allowed on the nodes: trainctl passes its per-stack key; a plain `pulumi up`
    uses trainctl:ssh.public_key or the user's own ~/.ssh/id_ed25519.pub."""
    for candidate in (os.environ.get("TRAINCTL_SSH_PUBLIC_KEY"), spec_key):
        if candidate:
            return candidate
    default = Path.home() / ".ssh" / "id_ed25519.pub"
    if default.is_file():
        return default.read_text().strip()
    raise ConfigError("no SSH public key: set trainctl:ssh.public_key, or create ~/.ssh/id_ed25519.pub")


# trainctl passes its validated spec (ephemeral stacks have no config file); a plain
# `pulumi up` reads the stack's config.
spec_json = os.environ.get("TRAINCTL_SPEC_JSON")
spec = ClusterSpec.model_validate_json(spec_json) if spec_json else spec_from_pulumi_config()
expires = os.environ.get("TRAINCTL_EXPIRES_AT")
# GKE nodes are reached through the Kubernetes API, never over SSH: no key is needed there.
key = None if spec.kind == "gke" else public_key(spec.ssh.public_key)
outputs = build(spec, key, int(expires) if expires else None)
for key, value in outputs.items():
    pulumi.export(key, value)
