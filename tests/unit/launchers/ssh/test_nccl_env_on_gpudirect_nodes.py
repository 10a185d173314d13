"""On a VM of a GPUDirect family the launch plan gives every rank NCCL's settings for the family's
GPU NICs, as GCP's recipes set them (TCPXO: the plugin's profile, then NCCL_FASTRAK_*; RDMA: the
gIB plugin's libraries and NCCL_IB_*), and the user's env wins. Other nodes, and simulated ones
(no GPU NICs: gloo on their CPU), get none of it."""

from __future__ import annotations

import os
import shlex
import subprocess

from infra.providers.inventory import Inventory, Node
from trainctl.launchers.spec import LaunchSpec
from trainctl.launchers.ssh.commands import plan as launch_plan

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDEuYCTEyVZpPfXSnA6n/xaBlH5vTfcOVaZcm3nX571U"


def inventory(machine: str, gpu: str, simulated: bool = False) -> Inventory:
    accelerator = f"gpu:8x{gpu}"
    return Inventory(
        stack="s", provider="gcp", bucket_uri="gs://bkt",
        nodes=tuple(Node(name=f"s-node-{i}", rank=i, internal_ip=f"10.0.0.{10 + i}", ssh_host=f"10.0.0.{10 + i}",
                         host_keys=(KEY,), workdir=f"/w/{i}", machine_type=machine,
                         accelerator="cpu" if simulated else accelerator,
                         simulates=accelerator if simulated else None) for i in range(2)),
        ssh_private_key="/k/id", known_hosts="/k/known_hosts")


def env_of(command: str) -> dict[str, str]:
    return dict(w.split("=", 1) for w in shlex.split(command) if "=" in w and w.split("=", 1)[0].isupper())


SPEC = LaunchSpec(run_id="r", framework="torch", command=("python", "train.py"))


def test_a3_mega_ranks_get_tcpxo_settings_after_the_plugins_profile():
    command = launch_plan(inventory("a3-megagpu-8g", "nvidia-h100-mega-80gb"), SPEC)["s-node-1"]
    env = env_of(command)
    assert env["NCCL_FASTRAK_CTRL_DEV"] == env["NCCL_SOCKET_IFNAME"] == "enp0s12"
    assert len(env["NCCL_FASTRAK_IFNAME"].split(",")) == 8  # one per GPU NIC
    profile = command.index("nccl-env-profile.sh")
    assert profile < command.index("NCCL_FASTRAK_IFNAME=")  # the recipe's order: profile, then ours


def test_a4_ranks_find_the_gib_plugin_and_its_settings_in_a_real_shell():
    command = launch_plan(inventory("a4-highgpu-8g", "nvidia-b200"), SPEC)["s-node-0"]
    # run what precedes the program for real: its exports as the rank would see them
    head = command.split("echo $$")[0].split("&& ", 2)[2]
    out = subprocess.run(["bash", "-c", head + "env"], capture_output=True, text=True, check=True,
                         env={"PATH": os.environ["PATH"], "LD_LIBRARY_PATH": "/opt/x"}).stdout
    seen = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    assert seen["LD_LIBRARY_PATH"] == "/usr/local/gib/lib64:/opt/x"
    assert (seen["NCCL_IB_GID_INDEX"], seen["NCCL_NET_GDR_LEVEL"], seen["NCCL_CROSS_NIC"]) == ("3", "PIX", "0")


def test_the_users_env_wins_over_the_familys_settings():
    spec = LaunchSpec(run_id="r", framework="torch", command=("python", "train.py"), env={"NCCL_CROSS_NIC": "1"})
    assert env_of(launch_plan(inventory("a4-highgpu-8g", "nvidia-b200"), spec)["s-node-0"])["NCCL_CROSS_NIC"] == "1"


def test_other_and_simulated_nodes_get_no_gpudirect_settings():
    for inv in (inventory("a2-highgpu-8g", "nvidia-tesla-a100"),
                inventory("a3-megagpu-8g", "nvidia-h100-mega-80gb", simulated=True)):
        command = launch_plan(inv, SPEC)["s-node-0"]
        assert not [k for k in env_of(command) if k.startswith(("NCCL_FASTRAK", "NCCL_IB", "NCCL_NET"))]
        assert "nccl-env-profile" not in command and "gib" not in command
