"""torch's CPU build for nodes that compute on the CPU, where the requirements leave it open.

PyPI's torch wheels for Linux are CUDA builds that pull ~16 `nvidia-*` packages (a 5 GB
environment); the CPU builds are a `+cpu` local version published on PyTorch's own index
(https://download.pytorch.org/whl/cpu; uv's PyTorch guide). An unpinned or ranged `torch`
(`torch>=1.11.0`, as PyTorch's DDP tutorial asks) resolves to the newest CUDA build from PyPI.
Nodes without a route off the machine (the local stack, a simulated project's VMs) install from
the controller's cache and its wheelhouse (`UV_FIND_LINKS`): there the requirement is narrowed
to the newest `+cpu` wheel the wheelhouse holds that it admits, as one more package of the same
resolution. A requirement that admits none of them is left as the user wrote it. Nodes that
reach PyPI themselves ask uv for the CPU index instead (`install_env`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

if TYPE_CHECKING:  # bootstrap.plan imports this module
    from bootstrap.plan import BootstrapSpec
    from infra.providers.inventory import Inventory


def wheelhouse_cpu_torches(folder: str | None) -> list[Version]:
    """The `+cpu` torch versions a find-links folder holds, newest first."""
    if not folder or not Path(folder).is_dir():
        return []
    found = set()
    for wheel in Path(folder).glob("torch-*.whl"):
        try:
            name, version, _build, _tags = parse_wheel_filename(wheel.name)
        except InvalidWheelFilename:
            continue
        if name == "torch" and version.local == "cpu":
            found.add(version)
    return sorted(found, reverse=True)


def _torch_requirement(spec: BootstrapSpec) -> Requirement | None:
    path = spec.code_dir / spec.requirements if spec.requirements else None
    lines = path.read_text().splitlines() if path is not None and path.is_file() else []
    for line in [*lines, *spec.packages]:
        line = line.split(" #", 1)[0].strip()
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue  # options, paths, URLs, comments
        if canonicalize_name(requirement.name) == "torch":
            return requirement
    return None


def computes_on_cpu(inventory: Inventory) -> bool:
    """Every node computes on the CPU (no GPU, no TPU): torch's CUDA build is dead weight there."""
    return all(n.accelerator.kind == "cpu" for n in inventory.nodes)


def for_nodes(inventory: Inventory, spec: BootstrapSpec) -> BootstrapSpec:
    """`spec` with torch narrowed to the wheelhouse's CPU build where every node computes on the
    CPU, installs offline, and the requirements admit that build without naming it."""
    if spec.image or not inventory.offline_nodes or not computes_on_cpu(inventory):
        return spec
    torch = _torch_requirement(spec)
    # an exact pin is the user's choice (and uv takes a wheelhouse's +cpu build of it already)
    if torch is None or torch.url or any(s.operator == "===" or "+" in s.version or
                                         (s.operator == "==" and not s.version.endswith(".*")) for s in torch.specifier):
        return spec
    admitted = [v for v in wheelhouse_cpu_torches(inventory.node_env.get("UV_FIND_LINKS"))
                if torch.specifier.contains(v, prereleases=True)]
    if not admitted:
        return spec
    return spec.model_copy(update={"packages": (*spec.packages, f"torch=={admitted[0]}")})


def install_env(inventory: Inventory) -> dict[str, str]:
    """The environment of the nodes' installs. Online nodes that all compute on the CPU get
    uv's own switch to PyTorch's CPU index for the PyTorch packages (`UV_TORCH_BACKEND=cpu`: uv's
    PyTorch guide, "Automatic backend selection"; out of preview since uv 0.7.14); offline ones
    cannot reach that index and get the wheelhouse's build (`for_nodes`). A backend the stack's
    node_env names is kept."""
    if inventory.offline_nodes or not computes_on_cpu(inventory):
        return dict(inventory.node_env)
    return {"UV_TORCH_BACKEND": "cpu", **inventory.node_env}
