"""`framework: jax` where it is declared and where it is refused: `run --plan` shows what every
process will be told; a target that cannot run JAX yet (GKE) refuses it, in the plan and in
`run`, before anything exists, naming why and what works; SSH targets take it."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import REPO, trainctl
from infra.errors import ConfigError
from infra.providers import realizers
from infra.spec.stack_config import load_stack
from trainctl.jobs.experiment import refuse_framework_mismatch
from trainctl.launchers.jax_env import BOOT_SHOWN
from trainctl.launchers.spec import FRAMEWORKS, LaunchSpec


def experiment(tmp_path: Path, stack: str = "local", nodes: int = 3) -> Path:
    path = tmp_path / "jax.yaml"
    path.write_text(f"name: digits-jax\nstack: {stack}\noverrides: {{nodes: {nodes}}}\ncode: {REPO}\n"
                    "requirements: trainers/requirements-jax.txt\n"
                    "run:\n  framework: jax\n  command: python -m trainers.digits_jax --job-dir {job_dir}\n")
    return path


def test_jax_is_one_of_the_declared_frameworks():
    assert FRAMEWORKS == ("torch", "tensorflow", "jax")
    assert LaunchSpec(run_id="r", command=("python", "t.py"), framework="jax").framework == "jax"


def test_run_plan_shows_each_processs_coordinator_count_and_id(tmp_path):
    done = trainctl("run", str(experiment(tmp_path)), "--plan")
    assert done.returncode == 0, done.stderr
    assert "  framework: jax" in done.stdout
    ranks = [line for line in done.stdout.splitlines() if line.startswith("# rank ")]
    assert len(ranks) == 3
    for r, line in enumerate(ranks):
        assert f"TRAINCTL_JAX_PROCESS_ID={r} " in line and "TRAINCTL_JAX_NUM_PROCESSES=3 " in line
        assert "JAX_COORDINATOR_ADDRESS='<rank-0-internal-ip>:8482'" in line
        assert line.endswith(f"python -c {BOOT_SHOWN} -m trainers.digits_jax --job-dir {{job_dir}}")
        assert ("JAX_COORDINATOR_BIND_ADDRESS" in line) is (r == 0)


@pytest.mark.parametrize("stack", ["gke-l4", "gke-tpu-v5e"])
def test_gke_stacks_refuse_jax_naming_why_and_the_stacks_that_run_it(stack):
    spec = load_stack(stack)
    assert "jax" in realizers.capabilities(spec).refused_frameworks
    with pytest.raises(ConfigError) as refused:
        refuse_framework_mismatch(spec, "jax")
    said = str(refused.value)
    assert "framework jax cannot run on a gke stack" in said and "TPU VM or GPU VM stack" in said
    refuse_framework_mismatch(spec, "torch")


def test_the_plan_of_a_jax_run_on_gke_is_refused_before_anything_is_shown(tmp_path):
    done = trainctl("run", str(experiment(tmp_path, stack="gke-l4", nodes=2)), "--plan")
    assert done.returncode == 2 and "framework jax cannot run on a gke stack" in done.stderr
    assert "# rank" not in done.stdout and "Traceback" not in done.stderr


@pytest.mark.parametrize("stack", ["local", "tpu-v5e-16", "tpu-v5e-2x16", "gpu-t4x2"])
def test_ssh_stacks_take_jax(stack):
    spec = load_stack(stack)
    assert realizers.capabilities(spec).refused_frameworks == {}
    refuse_framework_mismatch(spec, "jax")
