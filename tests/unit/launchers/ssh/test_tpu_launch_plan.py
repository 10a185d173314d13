"""Who runs what on TPU VMs, as Google's TPU recipes do it.

- PyTorch/XLA: the same command on every worker of the slice, PJRT_DEVICE=TPU.
- TensorFlow on a single-host TPU: the program drives the local chips (TPU_NAME=local, the PJRT
  pluggable device).
- TensorFlow on a multi-host slice (a `-pod` runtime): only worker 0 runs the program; the pod
  runtime already runs a TF server on every worker, which TPUClusterResolver(TPU_NAME=<slice>)
  connects to, so the program must not load libtpu itself (TPU_LOAD_LIBRARY=0). A copy of the
  program on the other workers would fight those servers for the chips.
"""

from __future__ import annotations

import shlex

import pytest

from infra.providers.inventory import Inventory, Node
from trainctl.launchers.spec import LaunchSpec
from trainctl.launchers.ssh.commands import plan as launch_plan

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDEuYCTEyVZpPfXSnA6n/xaBlH5vTfcOVaZcm3nX571U"


def tpu_inventory(tpu_type: str, hosts: int) -> Inventory:
    return Inventory(
        stack="s", provider="gcp", bucket_uri="gs://bkt",
        nodes=tuple(Node(name=f"s-tpu-w{i}", rank=i, role="tpu-worker", internal_ip=f"10.0.0.{10 + i}",
                         ssh_host=f"10.0.0.{10 + i}", host_keys=(KEY,), accelerator=f"tpu:{tpu_type}",
                         workdir=f"/w/{i}", tpu_name="s-tpu") for i in range(hosts)),
        ssh_private_key="/k/id", known_hosts="/k/known_hosts")


def env_of(command: str) -> dict[str, str]:
    return dict(w.split("=", 1) for w in shlex.split(command) if "=" in w and w.split("=", 1)[0].isupper())


SPEC = dict(run_id="tpu", command=("python", "train.py", "--steps", "10"))


def test_tensorflow_on_a_multi_host_slice_runs_only_on_worker_0_with_the_slice_name():
    inv = tpu_inventory("v5litepod-16", 4)
    commands = launch_plan(inv, LaunchSpec(framework="tensorflow", **SPEC))
    assert list(commands) == ["s-tpu-w0"]
    env = env_of(commands["s-tpu-w0"])
    assert env["TPU_NAME"] == "s-tpu" and env["TPU_LOAD_LIBRARY"] == "0"
    assert "TF_CONFIG" not in env and "PJRT_DEVICE" not in env
    assert commands["s-tpu-w0"].endswith("exec /w/0/venv/bin/python train.py --steps 10")


def test_tensorflow_on_a_single_host_tpu_drives_the_local_chips():
    inv = tpu_inventory("v5litepod-8", 1)
    (command,) = launch_plan(inv, LaunchSpec(framework="tensorflow", **SPEC)).values()
    env = env_of(command)
    assert env["TPU_NAME"] == "local"
    assert env["NEXT_PLUGGABLE_DEVICE_USE_C_API"] == "true"
    assert env["TF_PLUGGABLE_DEVICE_LIBRARY_PATH"] == "/lib/libtpu.so"
    assert "TPU_LOAD_LIBRARY" not in env and "TF_CONFIG" not in env


@pytest.mark.parametrize("tpu_type,hosts", [("v5litepod-16", 4), ("v5litepod-8", 1)])
def test_pytorch_xla_runs_the_same_command_on_every_worker(tpu_type, hosts):
    inv = tpu_inventory(tpu_type, hosts)
    commands = launch_plan(inv, LaunchSpec(framework="torch", **SPEC))
    assert len(commands) == hosts
    for name, command in commands.items():
        env = env_of(command)
        assert env["PJRT_DEVICE"] == "TPU" and "TPU_NAME" not in env and "TF_CONFIG" not in env
        assert "torchrun" not in command
