"""The `gpunet` bootstrap step: on a VM of a GPUDirect family, what NCCL needs to use the GPU NICs
(the TCPX/TCPXO plugin and its receive-data-path manager, or the gIB plugin for RDMA; first, for
TCPXO, the host's dmabuf import helper module and aperture devices), installed once as root, as
infra/spec/gpu_networks.py says. Other nodes get no such step; a simulated GCP node (no GPU, no
GPU NICs) runs a step that says what it would set up and install, and does neither."""

from __future__ import annotations

import hashlib
import shlex

from infra.providers.inventory import Node
from infra.spec import gpu_networks
from infra.spec.gpu_networks import GpuDirect

# Root for the installs: the SSH user on GCE is not root but has passwordless sudo.
AS_ROOT = ('if [ "$(id -u)" = 0 ]; then AS_ROOT=""; elif sudo -n true 2>/dev/null; then AS_ROOT="sudo -n"; '
           'else echo "installing the GPUDirect NCCL plugin needs root, and sudo asks user $(id -un) for a '
           'password: give this user passwordless sudo" >&2; exit 4; fi')


def node_gpudirect(node: Node) -> GpuDirect | None:
    """The node's GPUDirect family, by what it declares (a simulated node declares GPUs it lacks)."""
    declared = node.simulates or node.accelerator
    return gpu_networks.gpudirect(node.machine_type) if declared.kind == "gpu" else None


def install_script(profile: GpuDirect) -> str:
    host = profile.nccl.host.commands if profile.nccl.host else ()
    return " && ".join((*host, *profile.nccl.install))


def simulated_note(profile: GpuDirect) -> str:
    """What a simulated node (no GPU, no GPU NICs) says in place of the step."""
    host = profile.nccl.host
    undone = f"{host.what} not set up; " if host else ""
    return f"simulated node (no GPU, no GPU NICs): {undone}{profile.nccl.plugin} for {profile.name} not installed"


def gpunet_command(node: Node) -> tuple[str, str] | None:
    """(shell line, fingerprint) of the step for this node, or None where it has none."""
    profile = node_gpudirect(node)
    if profile is None:
        return None
    script = install_script(profile)
    fingerprint = hashlib.sha256(f"gpunet\0{script}".encode()).hexdigest()[:16]
    if node.simulates is not None:
        return f"echo {shlex.quote(simulated_note(profile))}", fingerprint
    return f"{AS_ROOT}; $AS_ROOT bash -c {shlex.quote('set -e; ' + script)}", fingerprint
