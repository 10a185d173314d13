"""Nodes that see the controller's filesystem link their environment to the seed the controller
built, instead of installing the same files again; a node that may change its environment, or
whose install would differ, keeps one of its own."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bootstrap.plan import BootstrapSpec, plan, seed_dir
from bootstrap.shared_env import link_command
from infra.providers.inventory import Inventory, Node

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDEuYCTEyVZpPfXSnA6n/xaBlH5vTfcOVaZcm3nX571U"


def inventory(tmp_path: Path, on_controller: bool = True) -> Inventory:
    return Inventory(
        stack="s", provider="local", bucket_uri="gs://b", ssh_private_key="/k", known_hosts="/k",
        nodes=tuple(Node(name=f"node{i}", rank=i, internal_ip=f"10.0.0.{i + 2}", ssh_host=f"10.0.0.{i + 2}",
                         host_keys=(KEY,), workdir=f"{tmp_path}/node{i}") for i in range(2)),
        node_env={"UV_CACHE_DIR": str(tmp_path / "cache" / "uv"), "UV_OFFLINE": "1"},
        offline_nodes=True, on_controller=on_controller)


def env_steps(inv: Inventory, spec: BootstrapSpec) -> list[str]:
    return [next(s for s in p.steps if s.name == "env").command for p in plan(inv, spec, listing="")]  # type: ignore[misc]


@pytest.fixture
def code(tmp_path: Path) -> Path:
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "requirements.txt").write_text("torch==2.13.0\nnumpy>=1.26  # pinned below 2 elsewhere\n")
    return tmp_path / "code"


def test_nodes_on_the_controller_link_their_environment_to_the_seed_and_install_nothing(tmp_path, code):
    spec = BootstrapSpec(code_dir=code, requirements="requirements.txt")
    inv = inventory(tmp_path)
    seed = seed_dir(inv.node_env, spec)
    for node, command in zip(inv.nodes, env_steps(inv, spec)):
        assert f"ln -sfn {seed} {node.workdir}/venv" in command
        assert "pip install" not in command
    own = env_steps(inventory(tmp_path, on_controller=False), spec)  # VMs: each installs its own
    assert all("pip install" in command and str(seed) not in command for command in own)


@pytest.mark.parametrize("change", [
    {"setup": ("pip install -e .",)},  # runs with the environment active
    {"requirements": "editable.txt"},  # the seed's would point at the controller's copy
    {"requirements": "nested.txt"},  # another file could hold an editable line
])
def test_a_node_that_may_change_its_environment_or_would_see_another_keeps_its_own(tmp_path, code, change):
    (code / "editable.txt").write_text("torch==2.13.0\n-e./libs/mine\n")
    (code / "nested.txt").write_text("--requirement=requirements.txt\n")
    spec = BootstrapSpec(code_dir=code, requirements="requirements.txt").model_copy(update=change)
    assert all("pip install" in command and "ln -sfn" not in command for command in env_steps(inventory(tmp_path), spec))


def test_the_link_replaces_an_environment_of_the_nodes_own_and_waits_for_a_finished_seed(tmp_path):
    seed, venv = tmp_path / "seed", tmp_path / "node0" / "venv"
    (seed / "bin").mkdir(parents=True)
    (seed / "bin" / "python").write_text("#!/bin/sh\n")
    (seed / "bin" / "python").chmod(0o755)
    (venv / "lib").mkdir(parents=True)  # installed by an earlier bootstrap, with setup commands

    def run() -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(["bash", "-c", link_command(str(venv), seed)], capture_output=True)

    assert run().returncode != 0 and not venv.is_symlink()  # the controller has not finished the seed
    (seed / ".complete").touch()
    assert run().returncode == 0 and venv.resolve() == seed
    assert run().returncode == 0 and venv.resolve() == seed  # again: nothing changes
    assert not (seed / "seed").exists()  # the link was replaced, not followed
