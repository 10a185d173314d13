"""Multislice TPU stacks: every worker's launch command carries the MEGASCALE_* variables that
join the slices (inspected in the plan; nothing runs)."""

from __future__ import annotations

import shlex

from infra.providers.inventory import Inventory, Node
from trainctl.launchers.spec import LaunchSpec
from trainctl.launchers.ssh.commands import plan as launch_plan

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDEuYCTEyVZpPfXSnA6n/xaBlH5vTfcOVaZcm3nX571U"


def tpu_inventory(slices: int, hosts: int = 4) -> Inventory:
    def worker(s: int, w: int) -> Node:
        node_id = f"st-tpu-{s}" if slices > 1 else "st-tpu"
        return Node(name=f"{node_id}-w{w}", rank=s * hosts + w, role="tpu-worker",
                    internal_ip=f"10.1.{s}.{10 + w}", ssh_host=f"10.1.{s}.{10 + w}", host_keys=(KEY,),
                    accelerator="tpu:v5litepod-16", workdir="/w", tpu_name=node_id,
                    tpu_slice=s if slices > 1 else None)
    return Inventory(stack="st", provider="gcp", bucket_uri="gs://bkt",
                     nodes=tuple(worker(s, w) for s in range(slices) for w in range(hosts)),
                     ssh_private_key="/k/id", known_hosts="/k/known_hosts")


def env_of(command: str) -> dict[str, str]:
    return dict(w.split("=", 1) for w in shlex.split(command) if w.startswith("MEGASCALE_"))


def test_every_worker_of_every_slice_gets_its_slice_and_slice_0_worker_0_as_coordinator():
    commands = launch_plan(tpu_inventory(2), LaunchSpec(run_id="r", command=("python", "train.py")))
    assert len(commands) == 8  # every worker of both slices runs the program
    for name, command in commands.items():
        slice_id = name.split("-")[2]
        assert env_of(command) == {"MEGASCALE_COORDINATOR_ADDRESS": "10.1.0.10:8081", "MEGASCALE_NUM_SLICES": "2",
                                   "MEGASCALE_SLICE_ID": slice_id, "MEGASCALE_PORT": "8081"}, name


def test_a_single_slice_gets_no_megascale_variables():
    commands = launch_plan(tpu_inventory(1), LaunchSpec(run_id="r", command=("python", "train.py")))
    assert len(commands) == 4 and not any(env_of(c) for c in commands.values())
