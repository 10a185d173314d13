"""An unpinned or ranged torch on nodes that compute on the CPU resolves to a CPU build, not PyPI's
CUDA build with its nvidia-* packages (issue 48: PyTorch's DDP tutorial asks for `torch>=1.11.0`):
offline nodes get the wheelhouse's, online ones ask uv for PyTorch's CPU index."""

from __future__ import annotations

from pathlib import Path

import pytest

from bootstrap.cpu_torch import for_nodes
from bootstrap.plan import BootstrapSpec, install_args, plan
from infra.providers.inventory import Inventory, Node


def inventory(wheelhouse: Path, accelerator: str = "cpu", offline: bool = True, **env: str) -> Inventory:
    node = Node(name="node0", rank=0, internal_ip="10.0.0.2", ssh_host="10.0.0.2", ssh_user="root",
                host_keys=("ssh-ed25519 AAAA",), accelerator=accelerator, workdir="/root/work")
    return Inventory(stack="s", provider="local", nodes=(node,), bucket_uri="gs://b", ssh_private_key="/k",
                     known_hosts="/h", offline_nodes=offline, node_env={"UV_FIND_LINKS": str(wheelhouse), **env})


@pytest.fixture
def wheelhouse(tmp_path):
    folder = tmp_path / "wheels"
    folder.mkdir()
    for name in ("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
                 "torch-2.11.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
                 "torch-2.14.0-cp311-cp311-manylinux_2_28_x86_64.whl",  # not a CPU build
                 "numpy-2.3.0-cp311-cp311-manylinux_2_28_x86_64.whl"):
        (folder / name).write_bytes(b"")
    return folder


def spec_with(tmp_path: Path, requirements: str) -> BootstrapSpec:
    (tmp_path / "requirements.txt").write_text(requirements)
    return BootstrapSpec(code_dir=tmp_path, requirements="requirements.txt")


@pytest.mark.parametrize("requirements, added", [
    ("torch>=1.11.0\n", "torch==2.13.0+cpu"),         # the tutorial's line: the newest CPU build
    ("numpy\ntorch  # any\n", "torch==2.13.0+cpu"),
    ("torch>=2.0,<2.13\n", "torch==2.11.0+cpu"),      # the newest CPU build the range admits
    ("torch==2.*\n", "torch==2.13.0+cpu"),
    ("torch>=2.14\n", None),                          # none admitted: left to the resolver
    ("torch==2.13.0\n", None),                        # an exact pin is the user's
    ("numpy\n", None),                                # no torch at all
])
def test_an_open_torch_requirement_gets_the_wheelhouse_cpu_build(tmp_path, wheelhouse, requirements, added):
    spec = spec_with(tmp_path, requirements)
    narrowed = for_nodes(inventory(wheelhouse), spec)
    assert install_args(narrowed) == ["-r", "requirements.txt", *([added] if added else [])]


def test_gpu_or_online_nodes_keep_the_requirements_as_written(tmp_path, wheelhouse):
    spec = spec_with(tmp_path, "torch>=1.11.0\n")
    assert for_nodes(inventory(wheelhouse, accelerator="gpu:1xnvidia-tesla-t4"), spec) == spec
    assert for_nodes(inventory(wheelhouse, offline=False), spec) == spec
    assert for_nodes(inventory(tmp_path / "no-such-folder"), spec) == spec


def env_step(inventory: Inventory, spec: BootstrapSpec) -> str:
    (node_plan,) = plan(inventory, spec, listing="")
    return next(step.command for step in node_plan.steps if step.name == "env")


def test_online_cpu_nodes_install_from_pytorchs_cpu_index_and_others_as_they_are(tmp_path, wheelhouse):
    spec = spec_with(tmp_path, "torch>=1.11.0\n")
    assert "UV_TORCH_BACKEND=cpu " in env_step(inventory(wheelhouse, offline=False), spec)
    assert "UV_TORCH_BACKEND" not in env_step(inventory(wheelhouse, offline=True), spec)  # no route to that index
    assert "UV_TORCH_BACKEND" not in env_step(inventory(wheelhouse, "gpu:1xnvidia-tesla-t4", offline=False), spec)
    kept = env_step(inventory(wheelhouse, offline=False, UV_TORCH_BACKEND="cu130"), spec)
    assert "UV_TORCH_BACKEND=cu130 " in kept and "UV_TORCH_BACKEND=cpu" not in kept
    # the backend is part of the environment's fingerprint: a CPU stack installed before reinstalls
    (online,) = plan(inventory(wheelhouse, offline=False), spec, listing="")
    (pinned,) = plan(inventory(wheelhouse, offline=False, UV_TORCH_BACKEND="auto"), spec, listing="")
    assert [s.fingerprint for s in online.steps if s.name == "env"] != \
        [s.fingerprint for s in pinned.steps if s.name == "env"]
