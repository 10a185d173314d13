"""trainctl from a user's own repository: `trainctl init` writes a project that trainctl (and
`pulumi up`) find by walking up from the working directory."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from conftest import trainctl
from infra.spec.stack_config import REPO_ROOT, project_root
from trainctl.jobs.experiment_file import load_experiment


def test_init_writes_a_project_that_trainctl_finds_from_any_subdirectory(tmp_path: Path) -> None:
    repo = tmp_path / "my-repo"
    made = trainctl("init", str(repo), cwd=tmp_path)
    assert made.returncode == 0, made.stderr

    pulumi = yaml.safe_load((repo / "Pulumi.yaml").read_text())
    assert pulumi["name"] == "my-repo" and pulumi["stackConfigDir"] == "stacks"
    assert pulumi["runtime"]["options"]["virtualenv"] == sys.prefix
    assert "import infra.providers.gcp.program.__main__" in (repo / pulumi["main"] / "__main__.py").read_text()
    assert load_experiment(repo / "experiment.yaml").stack == "local"

    (repo / "src" / "deep").mkdir(parents=True)
    assert project_root(repo / "src" / "deep") == repo.resolve()
    # edit the project's own stack: trainctl reads it, not the checkout's
    gpu = repo / "stacks" / "Pulumi.gpu-t4x2.yaml"
    gpu.write_text(gpu.read_text().replace("trainctl:nodes: 1", "trainctl:nodes: 2"))
    plan = trainctl("plan", "--stack", "gpu-t4x2", cwd=repo / "src" / "deep")
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.count("compute/instance") == 2
    assert trainctl("plan", "--stack", "local", cwd=repo).returncode == 0


def test_init_never_overwrites(tmp_path: Path) -> None:
    (tmp_path / "experiment.yaml").write_text("mine\n")
    result = trainctl("init", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 2 and "already has experiment.yaml" in result.stderr
    assert (tmp_path / "experiment.yaml").read_text() == "mine\n"
    assert not (tmp_path / "Pulumi.yaml").exists()  # nothing half-written


def test_outside_any_project_trainctl_uses_its_own_checkout(tmp_path: Path) -> None:
    assert project_root(tmp_path) == REPO_ROOT
