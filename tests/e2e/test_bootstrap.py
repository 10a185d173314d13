"""Bootstrap on real sshd nodes: parallel, idempotent, and honest about each node's failure."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest

from bootstrap.plan import BootstrapSpec
from bootstrap.runner import FAILED_FILE, BootstrapFailed, bootstrap
from bootstrap.synced_nodes import SyncedNodes
from namespace_nodes import netns

pytestmark = pytest.mark.e2e


@pytest.fixture
def code(tmp_path: Path) -> Path:
    src = tmp_path / "code"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "main.py").write_text("print('hi')\n")
    (src / "requirements.txt").write_text("# nothing beyond the standard library\n")
    (src / ".gitignore").write_text("*.tmp\n")
    (src / "junk.tmp").write_text("ignored")
    return src


def last_run(logs: Path, node: str) -> str:
    return (logs / f"{node}.log").read_text().rsplit("=== bootstrap", 1)[-1]


def statuses(results):
    return {r.node: r.statuses for r in results}


def test_second_run_skips_and_changed_inputs_rerun(local_stack, code, tmp_path):
    inv = local_stack("idem", nodes=2)
    spec = BootstrapSpec(code_dir=code, requirements="requirements.txt", setup=("echo set up > ~/marker",))
    first = statuses(bootstrap(inv, spec, tmp_path / "logs"))
    assert all(s == {"ready": "done", "drivers": "not needed", "sync": "done", "env": "done",
                     "setup": "done"} for s in first.values())
    # Fresh nodes: rsync ran alongside `ready`, without waiting for its answer.
    assert all("started alongside `ready`" in last_run(tmp_path / "logs", n.name) for n in inv.nodes)
    second = statuses(bootstrap(inv, spec, tmp_path / "logs"))
    assert all(s["sync"] == s["env"] == s["setup"] == "skipped" for s in second.values())
    synced = SyncedNodes(inv.stack)
    before = synced.last("node0")
    (code / "pkg" / "main.py").write_text("print('changed')\n")
    third = statuses(bootstrap(inv, spec, tmp_path / "logs"))
    assert all(s["sync"] == "done" and s["env"] == s["setup"] == "skipped" for s in third.values())
    # Synced before by this controller: only the change was sent, alongside `ready`.
    assert all("delta archive applied alongside `ready`" in last_run(tmp_path / "logs", n.name)
               for n in inv.nodes)
    # node0 now holds another tree than this controller remembers (as after another controller's
    # sync): the early delta is refused there, untouched, and `ready`'s fingerprint decides.
    synced.mark("node0", before)
    (code / "pkg" / "main.py").write_text("print('again')\n")
    fourth = statuses(bootstrap(inv, spec, tmp_path / "logs"))
    assert all(s["sync"] == "done" for s in fourth.values())
    assert "delta archive of" in last_run(tmp_path / "logs", "node0")
    assert "applied alongside" in last_run(tmp_path / "logs", "node1")
    for n in inv.nodes:
        main = subprocess.run(["ip", "netns", "exec", f"tc-idem-n{n.rank}", "cat", f"{n.workdir}/code/pkg/main.py"],
                              capture_output=True, text=True).stdout
        assert main == "print('again')\n"
    forced = statuses(bootstrap(inv, spec.model_copy(update={"force": ("env",)}), tmp_path / "logs"))
    assert all(s["env"] == "done" for s in forced.values())
    # .gitignore'd files never reach the nodes; code arrived intact.
    out = subprocess.run(["ip", "netns", "exec", "tc-idem-n1", "ls", f"{inv.nodes[1].workdir}/code"],
                         capture_output=True, text=True).stdout
    assert "pkg" in out and "junk.tmp" not in out


def test_a_step_failing_on_one_of_three_nodes_is_reported_and_retried_alone(local_stack, code, tmp_path):
    inv = local_stack("onefail", nodes=3)
    flag = "/root/allow"
    spec = BootstrapSpec(code_dir=code, setup=(f"[ $TRAINCTL_NODE_RANK != 1 ] || [ -f {flag} ] || exit 7",))
    logs = tmp_path / "logs"
    with pytest.raises(BootstrapFailed) as info:
        bootstrap(inv, spec, logs)
    (failure,) = info.value.failures
    assert (failure.node, failure.failed_step, failure.exit_code) == ("node1", "setup", 7)
    assert "node1: step setup failed (exit 7)" in str(info.value)
    assert json.loads((logs / FAILED_FILE).read_text()) == ["node1"]
    # The other nodes finished every step.
    assert (logs / "node0.log").read_text().count("--- setup") == 1
    # Fix the cause on node1, then rerun only the failed node.
    from bootstrap.ssh import open_connection

    with open_connection(inv, inv.nodes[1], deadline=time.monotonic() + 10) as conn:
        conn.run(f"touch {flag}", in_stream=False)
    (result,) = bootstrap(inv, spec, logs, nodes=json.loads((logs / FAILED_FILE).read_text()))
    assert result.node == "node1" and result.ok
    assert (logs / "node0.log").read_text().count("--- setup") == 1  # node0 untouched


def test_an_sshd_that_starts_late_is_waited_for(local_stack, code, tmp_path):
    inv = local_stack("late", nodes=2)
    block = ["-I", "INPUT", "1", "-p", "tcp", "--dport", "22", "-j", "DROP"]
    netns.run(["iptables", *block], netns="tc-late-n0")
    timer = threading.Timer(3.0, lambda: netns.run(["iptables", "-D", "INPUT", "1"], netns="tc-late-n0"))
    timer.start()
    start = time.monotonic()
    try:
        results = bootstrap(inv, BootstrapSpec(code_dir=code, ready_timeout=60), tmp_path / "logs")
    finally:
        timer.cancel()
    assert time.monotonic() - start >= 3.0
    assert all(r.ok for r in results)


def test_a_node_whose_sshd_dies_mid_step_fails_by_name(local_stack, code, tmp_path):
    inv = local_stack("dies", nodes=2)
    spec = BootstrapSpec(code_dir=code, setup=("sleep 8",))

    def kill_node1():
        time.sleep(2)
        netns.kill_netns_processes("tc-dies-n1")

    killer = threading.Thread(target=kill_node1)
    killer.start()
    with pytest.raises(BootstrapFailed) as info:
        bootstrap(inv, spec, tmp_path / "logs")
    killer.join()
    assert [f.node for f in info.value.failures] == ["node1"]
