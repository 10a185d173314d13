"""`pulumi up` run by hand in a project that `trainctl init` wrote (not this checkout) finds the
program through the project's Pulumi.yaml `main:` and stands the stack up; `pulumi destroy`
takes it away again."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import trainctl
from namespace_nodes import keys
from tests.fakes.sim_stacks import Project, gcp, make_gcp, simulated_gcp  # noqa: F401 (fixtures)


def pulumi(cwd: Path, *argv: str) -> None:
    done = subprocess.run(["pulumi", *argv], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_pulumi_up_in_an_init_project_stands_the_stack_up_and_destroy_removes_it(
        gcp: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "user"))  # the program puts ~/.ssh/id_ed25519.pub on the nodes
    keys.write_ed25519_keypair(tmp_path / "user" / ".ssh" / "id_ed25519", "user@laptop")
    mine = tmp_path / "my-repo"
    assert trainctl("init", str(mine), cwd=tmp_path).returncode == 0
    stack = "gpu-t4x2"
    shutil.copy(gcp.root / "stacks" / f"Pulumi.{stack}.yaml", mine / "stacks")  # names the simulated project

    pulumi(mine, "stack", "init", stack)
    pulumi(mine, "up", "--yes", "--skip-preview", "--stack", stack)
    assert gcp.instance(f"{stack}-node-0") is not None

    pulumi(mine, "destroy", "--yes", "--skip-preview", "--stack", stack)
    assert gcp.instances() == {} and gcp.names("networks") == set()
