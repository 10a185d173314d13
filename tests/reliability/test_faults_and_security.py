"""Faults and security on the real local stack: an intruder on the cluster's own bridge, key
material, a full disk during checkpointing, and racing commands on one stack."""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, Streamed, leftovers, listening, reach, trainctl
from namespace_nodes import netns

pytestmark = pytest.mark.e2e

def test_an_intruder_on_the_cluster_bridge_reaches_nothing(local_stack):
    inv = local_stack("guarded", nodes=2)
    from infra.providers.local.layout import Names

    names = Names("guarded")
    intruder, veth = "tc-guarded-intruder", f"tcv{names.digest[:6]}x"
    subnet = inv.nodes[0].internal_ip.rsplit(".", 1)[0]
    netns.create_node_netns(intruder, veth, names.bridge, f"{subnet}.200/24")
    try:
        with listening("tc-guarded-n0", inv.nodes[0].internal_ip, 29400):
            _assert_intruder_blocked(inv, intruder)
    finally:
        netns.delete_netns(intruder)
        netns.delete_link(veth)


def _assert_intruder_blocked(inv, intruder: str) -> None:
    emulator = inv.storage_emulator_host.split("//")[1].split(":")[0]
    assert reach("tc-guarded-n1", inv.nodes[0].internal_ip, 29400).startswith("open")  # a peer
    for host, port in ((inv.nodes[0].internal_ip, 29400), (inv.nodes[0].internal_ip, 22),
                       (emulator, 9023)):
        assert reach(intruder, host, port).startswith("blocked"), (host, port)


def test_keys_are_private_and_never_in_state_inventory_plans_or_logs(local_stack, trainctl_home, tmp_path):
    inv = local_stack("secrets", nodes=1)
    private_paths = [Path(inv.ssh_private_key)] + list((trainctl_home / "stacks" / "secrets" / "nodes")
                                                       .glob("*/ssh_host_ed25519_key"))
    secrets = [p.read_text() for p in private_paths]
    for p in private_paths:
        assert stat.S_IMODE(p.stat().st_mode) == 0o600
        assert stat.S_IMODE(p.parent.stat().st_mode) & 0o077 == 0 or p.name.startswith("ssh_host")
    body = lambda s: "".join(s.splitlines()[1:-1])  # noqa: E731  the base64 between the armour lines
    plan = trainctl("bootstrap", "--stack", "secrets", "--code", str(REPO / "trainers"), "--plan")
    launch_plan = trainctl("launch", "--stack", "secrets", "--plan", "--", "python", "x.py")
    texts = [plan.stdout, launch_plan.stdout]
    texts += [p.read_text(errors="replace") for p in (trainctl_home / "stacks" / "secrets").rglob("*")
              if p.is_file() and p not in private_paths and "ssh_host" not in p.name and "id_ed25519" not in p.name]
    for text in texts:
        for secret in secrets:
            assert body(secret) not in text


def test_two_ups_of_one_stack_race_and_exactly_one_wins(trainctl_home, tmp_path):
    """The one that comes second while the first holds the stack is refused as busy; one that
    comes after it finished finds the stack made (a second `up` is idempotent)."""
    stack_file = tmp_path / "Pulumi.race.yaml"
    stack_file.write_text("config:\n  trainctl:provider: local\n  trainctl:nodes: 2\n")
    procs = [subprocess.Popen([sys.executable, "-m", "trainctl.cli", "up", "--stack", str(stack_file)],
                              cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = [(p.wait(timeout=60), p.stderr.read()) for p in procs]
    try:
        assert 0 in [code for code, _ in results], results
        refused = [err for code, err in results if code != 0]
        assert all(code in (0, 2) for code, _ in results) and all("is busy" in err for err in refused), results
        # the creator's progress names the bridge it made; the other made none
        assert sum(bool(re.search(r"^bridge \S+ ", err, re.M)) for _, err in results) == 1, results
    finally:
        assert trainctl("down", "--stack", "race").returncode == 0
    assert leftovers("race") == []


def test_down_while_launch_runs_stops_the_launch_and_leaves_nothing(local_stack, trainctl_home, tmp_path):
    local_stack("racing", nodes=2)
    boot = trainctl("bootstrap", "--stack", "racing", "--code", str(REPO),
                    "--requirements", "trainers/requirements.txt")
    assert boot.returncode == 0, boot.stderr
    launch = Streamed("launch", "--stack", "racing", "--", "python", "-m", "trainers.digits_ddp",
                      "--epochs", "50", "--epoch-sleep", "1", "--job-dir", "{job_dir}", cwd=tmp_path)
    launch.wait_for("epoch 1/", timeout=120)
    assert trainctl("down", "--stack", "racing").returncode == 0
    # The nodes vanish under the job: it fails, and is not rerun on a stack being taken down.
    output = launch.finish(timeout=60)
    assert launch.proc.returncode != 0
    assert "was taken down: no retry" in output
    assert leftovers("racing") == []


def test_ctrl_c_while_a_node_is_still_connecting_never_starts_the_job_there(local_stack, tmp_path):
    inv = local_stack("latecomer", nodes=2)
    boot = trainctl("bootstrap", "--stack", "latecomer", "--code", str(REPO),
                    "--requirements", "trainers/requirements.txt")
    assert boot.returncode == 0, boot.stderr
    block = ["iptables", "-I", "INPUT", "1", "-p", "tcp", "--dport", "22", "-j", "DROP"]
    netns.run(block, netns="tc-latecomer-n1")  # node1 answers SSH only later
    launch = Streamed("launch", "--stack", "latecomer", "--run-id", "late-1", "--", "python", "-m",
                      "trainers.digits_ddp", "--epochs", "50", "--epoch-sleep", "1",
                      "--job-dir", "{job_dir}", cwd=tmp_path)
    launch.wait_for(r"run late-1 on 2 node\(s\)")
    time.sleep(1)  # node0 starts its agent; node1's connection is still unanswered
    os.killpg(launch.proc.pid, signal.SIGINT)
    netns.run(["iptables", "-D", "INPUT", "1"], netns="tc-latecomer-n1")
    # Without the check it would start after the stop went out, and wait for a rendezvous
    # that never comes: this would hang until the guard.
    output = launch.finish(timeout=120)
    assert launch.proc.returncode == 130, output[-2000:]
    assert "interrupted: stopping run late-1" in output
    assert not (Path(inv.nodes[1].workdir) / ".trainctl" / "runs" / "late-1" / "launcher.pid").exists()


def test_a_full_disk_on_a_node_during_checkpointing_keeps_the_previous_checkpoint_loadable(local_stack):
    inv = local_stack("diskfull", nodes=1)
    node = inv.nodes[0]
    boot = trainctl("bootstrap", "--stack", "diskfull", "--code", str(REPO),
                    "--requirements", "trainers/requirements.txt")
    assert boot.returncode == 0, boot.stderr
    # A 256 KiB disk mounted inside the node's own mount namespace: the checkpoint dir.
    program = (
        "import sys, torch\n"
        "from trainers import checkpoint\n"
        "d = '/root/small'\n"
        "checkpoint.save(d, 1, {'w': torch.zeros(10), 'step': 1})\n"
        "try:\n"
        "    checkpoint.save(d, 2, {'w': torch.zeros(200_000), 'step': 2})\n"
        "    sys.exit('the disk did not fill up')\n"
        "except OSError as e:\n"
        "    print('ENOSPC', e.errno)\n"
        "print('loaded step', checkpoint.load_latest(d)['step'])\n")
    command = (f"mkdir -p /root/small && mount -t tmpfs -o size=256k tmpfs /root/small && "
               f"cd {node.workdir}/code && {node.workdir}/venv/bin/python -c \"$(cat)\"")
    ran = subprocess.run([*_ssh(inv, node), command], input=program, capture_output=True,
                         text=True, timeout=120)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "ENOSPC 28" in ran.stdout and "loaded step 1" in ran.stdout


def _ssh(inv, node) -> list[str]:
    from bootstrap.ssh import openssh_command

    return [*openssh_command(inv, node), node.ssh_host]


def test_a_lock_held_by_a_live_process_is_named_and_one_left_by_a_killed_process_is_not_stale(
        trainctl_home):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time; from infra.providers.stack_home import stack_lock\n"
         "with stack_lock('stale', 'up'):\n    print('locked', flush=True); time.sleep(120)"],
        cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        busy = trainctl("down", "--stack", "stale")
        assert busy.returncode == 2
        assert f"stack 'stale' is busy: pid {holder.pid} is running 'up'" in busy.stderr
    finally:
        holder.kill()
        holder.wait()
    lock = trainctl_home / "stacks" / ".stale.lock"
    assert f"pid {holder.pid}" in lock.read_text()  # its holder is dead; the file is still there
    after = trainctl("down", "--stack", "stale")
    assert after.returncode == 0, after.stderr
    assert "does not exist: nothing to do" in after.stderr
    assert leftovers("stale") == []  # the lock file went with it
