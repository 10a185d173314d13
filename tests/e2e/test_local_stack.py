"""The local realizer for real: namespaces, sshd per node, emulator, firewall, teardown."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import paramiko
import pytest

from bootstrap.ssh import open_connection
from conftest import REPO, leftovers, listening, reach, trainctl
from namespace_nodes import keys
from infra.providers.inventory import Inventory
from namespace_nodes import sshd
from infra.providers.local import realizer
from infra.providers.local.plan import plan, record_of
from infra.providers.local.state import load_state
from infra.spec.stack_config import ConfigError, load_stack

pytestmark = pytest.mark.e2e


def ssh_run(inventory: Inventory, index: int, command: str) -> str:
    with open_connection(inventory, inventory.nodes[index], deadline=time.monotonic() + 10) as conn:
        return conn.run(command, hide=True, in_stream=False).stdout


def test_nodes_are_separate_machines_reachable_only_with_pinned_keys(local_stack):
    inv = local_stack("iso", nodes=3)
    hostnames = {ssh_run(inv, i, "hostname").strip() for i in range(3)}
    assert hostnames == {"node0", "node1", "node2"}
    # Private /tmp and PID namespace: a file and a process on node0 are invisible on node1.
    ssh_run(inv, 0, "touch /tmp/only-on-node0; sleep 300 >/dev/null 2>&1 &")
    assert "only-on-node0" not in ssh_run(inv, 1, "ls /tmp")
    assert "sleep 300" not in ssh_run(inv, 1, "ps -eo args")
    ssh_run(inv, 1, "pkill sleep || true")
    assert "sleep 300" in ssh_run(inv, 0, "ps -eo args")
    # Nodes resolve each other by name, as GCE's internal DNS lets VMs do.
    assert inv.nodes[2].internal_ip in ssh_run(inv, 0, "getent hosts node2")


def test_up_records_the_rows_of_its_plan_in_its_state_in_order(local_stack):
    """The rows `trainctl plan` shows are what `up` records (what `down` reads), in order. That
    the machine then holds exactly these is the realizer contract's
    (tests/contracts/test_realizer_contract.py::test_up_creates_exactly_what_its_plan_listed)."""
    spec = load_stack("local", name="planned", overrides={"nodes": 2})
    stack_dir, *rows = plan(spec)
    local_stack("planned", nodes=2)
    state = load_state("planned")
    assert state is not None and str(state.path.parent) == stack_dir.name
    records = [{k: v for k, v in r.items() if k != "status"} for r in state.resources]
    assert records == [{"kind": row.kind, **record_of(row)} for row in rows]


def test_a_node_presenting_another_host_key_is_refused(local_stack, tmp_path):
    inv = local_stack("mitm", nodes=1)
    raw = keys.write_ed25519_keypair(tmp_path / "impostor", "impostor")
    wrong = inv.model_copy(update={"nodes": (inv.nodes[0].model_copy(update={"host_keys": (raw,)}),)})
    with pytest.raises(paramiko.BadHostKeyException):
        open_connection(wrong, wrong.nodes[0], deadline=time.monotonic() + 30)
    from bootstrap.ssh import is_transient

    assert not is_transient(paramiko.BadHostKeyException("h", paramiko.Ed25519Key.from_path(
        inv.ssh_private_key), paramiko.Ed25519Key.from_path(inv.ssh_private_key))), \
        "a wrong host key is permanent: never retried"
    unknown = inv.model_copy(update={"nodes": (inv.nodes[0].model_copy(update={"host_keys": ()}),)})
    with pytest.raises(paramiko.SSHException, match="not found in known_hosts"):
        open_connection(unknown, unknown.nodes[0], deadline=time.monotonic() + 30)
    # OpenSSH (rsync's transport) refuses a known_hosts that pins another key, too.
    kh = inv.known_hosts + ".wrong"
    with open(kh, "w") as fh:
        fh.write(f"{inv.nodes[0].ssh_host} {raw}\n")
    proc = subprocess.run(["ssh", "-i", inv.ssh_private_key, "-o", f"UserKnownHostsFile={kh}",
                           "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
                           f"root@{inv.nodes[0].ssh_host}", "touch /tmp/should-not-exist"],
                          capture_output=True, text=True)
    assert proc.returncode == 255 and "REMOTE HOST IDENTIFICATION HAS CHANGED" in proc.stderr
    assert "should-not-exist" not in ssh_run(inv, 0, "ls /tmp")


def test_firewall_admits_cluster_peers_and_ssh_only_from_the_controller(local_stack):
    inv = local_stack("fw", nodes=2)
    other = local_stack("fwother", nodes=1)
    port = 29400
    assert other.nodes
    with listening("tc-fw-n0", inv.nodes[0].internal_ip, port):
        assert reach("tc-fw-n1", inv.nodes[0].internal_ip, port).startswith("open")
        assert reach(None, inv.nodes[0].internal_ip, port).startswith("blocked")  # controller: SSH only
        assert reach(None, inv.nodes[0].internal_ip, 22).startswith("open")
        # Another stack's node cannot reach this cluster at all (different bridge, no route).
        assert reach("tc-fwother-n0", inv.nodes[0].internal_ip, 22).startswith("blocked")
        # The bucket answers the cluster, not strangers on its port.
        emu_host = inv.storage_emulator_host.split("//")[1].split(":")[0]
        assert reach("tc-fw-n1", emu_host, 9023).startswith("open")


def test_two_stacks_coexist_and_an_up_of_a_live_stack_with_another_spec_is_refused(local_stack):
    """A second `up` of the same spec is the realizer contract's (it changes nothing); one that
    asks for another spec is refused: nothing here changes a live local stack."""
    a = local_stack("twin-a", nodes=1)
    b = local_stack("twin-b", nodes=1)
    assert a.nodes[0].internal_ip.rsplit(".", 1)[0] != b.nodes[0].internal_ip.rsplit(".", 1)[0]
    with pytest.raises(ConfigError, match="stack 'twin-a' already exists .* and its nodes differ from the spec's"):
        realizer.up(load_stack("local", name="twin-a", overrides={"nodes": 2}))
    assert ssh_run(a, 0, "echo ok").strip() == "ok"  # the refused up touched nothing
    assert realizer.inventory("twin-a") == a


def test_down_is_idempotent_and_up_failure_rolls_back(trainctl_home, monkeypatch):
    spec = load_stack("local", name="rollback", overrides={"nodes": 2})

    def broken(*args, **kwargs):
        raise RuntimeError("sshd failed to start")

    monkeypatch.setattr(sshd, "boot_node", broken)
    with pytest.raises(RuntimeError, match="sshd failed"):
        realizer.up(spec)
    assert leftovers("rollback") == []
    assert realizer.down("rollback") is False


def test_down_after_kill_9_of_up_removes_everything(trainctl_home):
    """intent is on disk before creation: kill -9 mid-`up`, then `down` finds everything."""
    proc = subprocess.Popen(
        [sys.executable, "-c",
         "from infra.spec.stack_config import load_stack; from infra.providers.local import realizer;"
         "import time, namespace_nodes.sshd as s; orig = s.boot_node\n"
         "def slow(*a, **k):\n    orig(*a, **k); time.sleep(30)\n"
         "s.boot_node = slow; realizer.up(load_stack('local', name='crash', overrides={'nodes': 2}))"],
        cwd=str(REPO))
    deadline = time.monotonic() + 30
    while not any(ns.startswith("tc-crash-n") for ns in os.listdir("/run/netns") if os.path.isdir("/run/netns")):
        assert time.monotonic() < deadline, "up never created a node"
        time.sleep(0.1)
    time.sleep(0.5)
    proc.kill()
    proc.wait()
    assert leftovers("crash"), "the crash should have left something to clean"
    result = trainctl("down", "--stack", "crash")
    assert result.returncode == 0, result.stderr
    assert leftovers("crash") == []


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_corrupt_state_needs_force_and_force_removes_what_exists(local_stack, trainctl_home, damage):
    local_stack("corrupt", nodes=1)
    state = trainctl_home / "stacks" / "corrupt" / "state.json"
    text = state.read_text()
    state.write_text("{not json" if damage == "garbage" else text[:len(text) // 2])
    result = trainctl("down", "--stack", "corrupt")
    assert result.returncode == 2 and "is unreadable" in result.stderr and "--force" in result.stderr
    result = trainctl("down", "--stack", "corrupt", "--force")
    assert result.returncode == 0, result.stderr
    assert leftovers("corrupt") == []


def test_ls_shows_live_stacks_and_reap_removes_expired_local_ones(local_stack, trainctl_home):
    import json

    local_stack("fresh", nodes=1)
    local_stack("stale", nodes=1)
    state = trainctl_home / "stacks" / "stale" / "state.json"
    data = json.loads(state.read_text())
    data["created_at"] -= data["spec"]["ttl_hours"] * 3600 + 60  # its TTL ran out a minute ago
    state.write_text(json.dumps(data))
    listing = trainctl("ls")
    assert listing.returncode == 0 and "fresh" in listing.stdout and "expired" in listing.stdout
    reaped = trainctl("reap")
    assert reaped.returncode == 0 and "stack stale expired" in reaped.stderr and reaped.stdout == "stale removed\n"
    assert leftovers("stale") == []
    assert trainctl("status", "--stack", "fresh").returncode == 0
