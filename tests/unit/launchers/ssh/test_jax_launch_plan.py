"""`framework: jax` on SSH nodes, as golden plans: every node of the group runs the program under
the boot wrapper, with the coordinator on rank 0 at trainctl's port, the process count and its
own id; rank 0 alone binds the coordinator, to its cluster address. The same on a local stack's
CPU nodes and on a multi-host TPU slice (where nothing TensorFlow's or PyTorch/XLA's is set).
What the wrapper then does inside a real JAX: tests/unit/launchers/test_jax_boot.py."""

from __future__ import annotations

import shlex

import pytest

from infra.errors import ConfigError
from infra.providers.inventory import Inventory, Node
from tests.unit.launchers.ssh.test_plans import inventory as local_inventory
from tests.unit.launchers.ssh.test_tpu_launch_plan import KEY, tpu_inventory
from trainctl.launchers.jax_env import BOOT_SHOWN, BOOT_SOURCE, INITIALIZATION_TIMEOUT_SECONDS
from trainctl.launchers.protocol import LaunchPlan
from trainctl.launchers.spec import LaunchSpec
from trainctl.launchers.ssh.commands import plan as launch_plan

SPEC = LaunchSpec(run_id="j-1", framework="jax",
                  command=("python", "-m", "trainers.digits_jax", "--job-dir", "{job_dir}"))
JAX_NAMES = ("JAX_", "TRAINCTL_JAX_", "TF_CONFIG", "TPU_", "PJRT_", "MEGASCALE_", "TORCHELASTIC_")


def jax_env_of(command: str) -> dict[str, str]:
    """The variables of the command that JAX, TensorFlow, PyTorch/XLA or libtpu would read."""
    words = shlex.split(command)
    pairs = (w.split("=", 1) for w in words[:words.index("exec")] if "=" in w)
    return {k: v for k, v in pairs if k.startswith(JAX_NAMES)}


def program_of(command: str) -> list[str]:
    words = shlex.split(command)
    return words[words.index("exec") + 1:]


def golden_env(coordinator: str, count: int, pid: int, bind: str | None = None) -> dict[str, str]:
    env = {"JAX_COORDINATOR_ADDRESS": f"{coordinator}:8482", "TRAINCTL_JAX_NUM_PROCESSES": str(count),
           "TRAINCTL_JAX_PROCESS_ID": str(pid), "TRAINCTL_JAX_INITIALIZATION_TIMEOUT": "3600"}
    return env | ({"JAX_COORDINATOR_BIND_ADDRESS": f"{bind}:8482"} if bind else {})


def test_every_local_node_runs_the_program_with_its_process_id_and_rank_0_as_coordinator():
    commands = launch_plan(local_inventory(3), SPEC)
    assert list(commands) == ["node0", "node1", "node2"]
    assert jax_env_of(commands["node0"]) == golden_env("10.0.0.10", 3, 0, bind="10.0.0.10")
    assert jax_env_of(commands["node1"]) == golden_env("10.0.0.10", 3, 1)
    assert jax_env_of(commands["node2"]) == golden_env("10.0.0.10", 3, 2)
    for i in range(3):
        assert program_of(commands[f"node{i}"]) == [
            f"/w/node{i}/venv/bin/python", "-c", BOOT_SOURCE, "-m", "trainers.digits_jax", "--job-dir", "gs://bkt/j-1"]
        assert "torchrun" not in commands[f"node{i}"]
    assert INITIALIZATION_TIMEOUT_SECONDS == 3600  # a recreated node's bootstrap outlasts JAX's 300 s


def test_every_worker_of_a_multi_host_tpu_slice_runs_it_with_nothing_of_tensorflows_or_torch_xlas():
    inv = tpu_inventory("v5litepod-16", 4)
    commands = launch_plan(inv, SPEC)
    assert list(commands) == [f"s-tpu-w{i}" for i in range(4)]
    for i in range(4):
        assert jax_env_of(commands[f"s-tpu-w{i}"]) == golden_env("10.0.0.10", 4, i, bind="10.0.0.10" if i == 0 else None)


def test_a_multislice_stacks_process_ids_run_over_the_slices_beside_their_megascale_variables():
    nodes = tuple(Node(name=f"w{s}-{i}", rank=4 * s + i, role="tpu-worker", internal_ip=f"10.0.{s}.{i + 2}",
                       ssh_host=f"10.0.{s}.{i + 2}", host_keys=(KEY,), accelerator="tpu:v5litepod-16", workdir="/w",
                       tpu_name=f"t-{s}",
                       tpu_slice=s) for s in range(2) for i in range(4))
    inv = Inventory(stack="m", provider="gcp", bucket_uri="gs://b", nodes=nodes,
                    ssh_private_key="/k/id", known_hosts="/k/kh")
    commands = launch_plan(inv, SPEC)
    for node in nodes:
        env = jax_env_of(commands[node.name])
        assert env["TRAINCTL_JAX_PROCESS_ID"] == str(node.rank) and env["TRAINCTL_JAX_NUM_PROCESSES"] == "8"
        assert env["JAX_COORDINATOR_ADDRESS"] == "10.0.0.2:8482"
        assert env["MEGASCALE_SLICE_ID"] == str(node.tpu_slice)
        assert env["MEGASCALE_COORDINATOR_ADDRESS"].split(":")[0] == "10.0.0.2"  # the same host


@pytest.mark.parametrize("command,wrapped", [
    (("python", "train.py", "--steps", "3"), True),
    (("python3", "-m", "pkg.train"), True),
    (("python", "-u", "train.py"), False),  # interpreter options: run as given
    (("bash", "run.sh"), False),
])
def test_python_programs_run_under_the_boot_wrapper_and_others_as_given(command, wrapped):
    (first, *_) = launch_plan(local_inventory(2), LaunchSpec(run_id="j-2", framework="jax", command=command)).values()
    program = program_of(first)
    assert (program[1:3] == ["-c", BOOT_SOURCE]) is wrapped
    assert program[-len(command) + 1:] == list(command[1:])
    assert jax_env_of(first)["TRAINCTL_JAX_PROCESS_ID"] == "0"  # a script reads them itself


def test_the_plan_names_the_wrapper_instead_of_spelling_it_out():
    inv = local_inventory(2)
    shown = LaunchPlan(cluster=None, inventory=inv, spec=SPEC, commands=launch_plan(inv, SPEC)).render()  # type: ignore[arg-type]
    assert BOOT_SOURCE not in shown and shown.count(BOOT_SHOWN) == 2
    assert "JAX_COORDINATOR_ADDRESS=10.0.0.10:8482" in shown


def test_a_parameter_server_pool_is_refused_for_jax():
    nodes = tuple(Node(name=f"n{i}", rank=i, internal_ip=f"10.0.0.{i + 2}", ssh_host=f"10.0.0.{i + 2}",
                       host_keys=(KEY,), workdir="/w", task=task) for i, task in enumerate(("chief", "worker", "ps")))
    inv = Inventory(stack="p", provider="local", bucket_uri="gs://b", nodes=nodes, ssh_private_key="/k", known_hosts="/kh")
    with pytest.raises(ConfigError, match="JAX has no parameter servers"):
        launch_plan(inv, SPEC)
