"""`framework: jax` end to end: the JAX digits trainer (trainers/digits_jax.py), unchanged, trains
data-parallel across the nodes with `jax.distributed` set up by trainctl alone (the program calls
`jax.distributed.initialize()` with no arguments), to the bar the other digits runs reach:
- on 3 local nodes (JAX's CPU backend, gloo between the namespaces, through the stack's firewall);
- on a multi-host TPU VM stack (tpu-v5e-16: 4 workers) in a simulated project, its workers CPU
  machines standing in for the TPU hosts.
Both cheap: 6 epochs of 11-14 steps; what costs is 3-4 JAX imports sharing the machine's cores.
The per-node variables are golden plans in tests/unit/launchers/ssh/test_jax_launch_plan.py."""

from __future__ import annotations

import json

import pytest
import yaml

from conftest import REPO, leftovers, run_id_of, trainctl
from tests.e2e.test_gcp_stack_on_the_simulator import _leftovers, simulated_home  # noqa: F401 (fixture)

pytestmark = pytest.mark.e2e

EXAMPLE = REPO / "examples" / "digits-jax.yaml"
ACCURACY_BAR = 0.95  # the other digits runs' bar (tests/e2e/test_run_end_to_end.py)


def jax_experiment(tmp_path, **changes) -> str:
    exp = yaml.safe_load(EXAMPLE.read_text())
    exp.update(code=str(REPO), **changes)
    path = tmp_path / "digits-jax.yaml"
    path.write_text(yaml.safe_dump(exp))
    return str(path)


def trained(runs, output: str, world: int) -> str:
    run_id = run_id_of(output)
    metrics = json.loads((runs / run_id / "metrics.json").read_text())
    assert (metrics["strategy"], metrics["world_size"], metrics["devices"]) == ("jax.distributed", world, world)
    assert metrics["test_accuracy"] >= ACCURACY_BAR, metrics["history"]
    assert (runs / run_id / "model" / "weights.npz").exists()
    return run_id


def test_three_local_nodes_train_jax_digits_to_the_bar_with_trainctls_jax_distributed(tmp_path, trainctl_home):
    runs = tmp_path / "runs"
    done = trainctl("run", jax_experiment(tmp_path), "--runs-dir", str(runs), timeout=900)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    run_id = trained(runs, output, 3)
    for rank in range(3):  # every node ran the program as its own JAX process, over the CPU backend
        assert f"process {rank}/3: 3 cpu device(s)" in done.stdout, output[-4000:]
    assert "checkpoint saved in" in done.stdout
    assert leftovers(run_id) == []


def test_a_multi_host_tpu_vm_stack_runs_it_through_simulate(simulated_home, tmp_path):  # noqa: F811
    runs = tmp_path / "runs"
    done = trainctl("run", jax_experiment(tmp_path, stack="tpu-v5e-16", overrides={}), "--simulate",
                    "--runs-dir", str(runs), timeout=900)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    trained(runs, output, 4)
    for rank in range(4):  # all four workers of the slice, none left out as TensorFlow's would be
        assert f"process {rank}/4: 4 cpu device(s)" in done.stdout, output[-4000:]
    assert _leftovers(simulated_home) == []
