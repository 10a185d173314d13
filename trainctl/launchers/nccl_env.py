"""NCCL's environment on a VM of a GPUDirect family (infra/spec/gpu_networks.py): the plugin's
settings as variables and the shell lines that put its libraries first and source its profile.
Without them NCCL picks plain TCP on nic0 and says nothing. A simulated node (no GPUs, no GPU
NICs, gloo on its CPU) gets none; the user's own `env` wins over every variable set here."""

from __future__ import annotations

from bootstrap.gpunet import node_gpudirect
from infra.providers.inventory import Node


def nccl_env(node: Node) -> dict[str, str]:
    profile = node_gpudirect(node)
    return dict(profile.nccl.env) if profile and node.simulates is None else {}


def nccl_preamble(node: Node) -> str:
    """Shell lines run before the program starts: `line; line; ` or nothing."""
    profile = node_gpudirect(node)
    if profile is None or node.simulates is not None:
        return ""
    return "".join(f"{line}; " for line in profile.nccl.env_script)
