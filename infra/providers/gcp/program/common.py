"""Names, labels and metadata shared by the GCP components."""

from __future__ import annotations

import time

import pulumi

from infra.spec.cluster import ClusterSpec

TYPE_PREFIX = "trainctl:gcp"


def labels(spec: ClusterSpec, expires_at: int | None) -> dict[str, str]:
    """Labels on everything: who made it, for which stack, and when `trainctl reap` may delete it."""
    out = {"managed-by": "trainctl", "trainctl-stack": spec.name,
           "trainctl-ephemeral": str(spec.ephemeral).lower(), **spec.labels}
    if expires_at is None:
        expires_at = int(time.time() + spec.ttl_hours * 3600)
    out[EXPIRY_LABEL] = str(expires_at)  # unix seconds: label values allow only [-_a-z0-9]
    return out


def network_tag(spec: ClusterSpec) -> str:
    return f"{spec.name}-node"


def ssh_metadata(spec: ClusterSpec, public_key: str) -> dict[str, str]:
    return {
        "ssh-keys": f"{spec.ssh.user}:{public_key.strip()} {spec.ssh.user}",
        # ssh-keys metadata is ignored where OS Login is on (org policy or project metadata).
        "enable-oslogin": "FALSE",
        # Only this stack's key: project-wide keys do not open these nodes.
        "block-project-ssh-keys": "TRUE",
        # The guest agent publishes the host keys here; trainctl pins them from the API.
        "enable-guest-attributes": "TRUE",
    }


def child_opts(parent: pulumi.Resource, opts: pulumi.ResourceOptions | None) -> pulumi.ResourceOptions:
    """Children of a component: Pulumi does not pass a component's depends_on (the enabled
    APIs) or ignore_changes (a floating expiry) down to them, so each child carries them."""
    if opts is None:
        return pulumi.ResourceOptions(parent=parent)
    return pulumi.ResourceOptions(parent=parent, depends_on=opts.depends_on,
                                  ignore_changes=opts.ignore_changes)


EXPIRY_LABEL = "trainctl-expires"
# Where the expiry label sits on trainctl's labeled resources, as Pulumi property paths.
EXPIRY_PATHS = [f'labels["{EXPIRY_LABEL}"]', f'resourceLabels["{EXPIRY_LABEL}"]',
                f'nodeConfig.resourceLabels["{EXPIRY_LABEL}"]']


def expiry_ignore(expires_at: int | None) -> list[str] | None:
    """A plain `pulumi up` has no recorded expiry and computes now + TTL: that value may only
    be written when a resource is created, or every `up` would show a diff and quietly push
    the deadline back. trainctl records the expiry once and passes it: then it is applied."""
    return None if expires_at is not None else list(EXPIRY_PATHS)
