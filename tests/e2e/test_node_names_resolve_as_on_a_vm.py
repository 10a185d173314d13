"""Local nodes resolve names as a VM does: their own hostname forward, and every cluster
address reverse, also in the ::ffff: form under which dual-stack servers see IPv4 peers."""

from __future__ import annotations

import pytest

from conftest import REPO, trainctl

pytestmark = pytest.mark.e2e

RESOLVE = ("python3 -c 'import socket,sys; h=socket.gethostname(); "
           "print(h, socket.gethostbyname(h), *(socket.getnameinfo((a, 0), socket.NI_NAMEREQD)[0] "
           "for a in sys.argv[1:]))'")


def _node_lines(output: str, node: str) -> list[str]:
    return [line.split("] ", 1)[1] for line in output.splitlines() if line.startswith(f"[{node}]")]


def test_each_node_resolves_its_hostname_to_its_address_and_peers_by_address(local_stack, tmp_path):
    inv = local_stack("names", nodes=2)
    peers = [a for n in inv.nodes for a in (n.internal_ip, f"::ffff:{n.internal_ip}")]
    ran = trainctl("exec", "--stack", "names", "--", RESOLVE, *peers, cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    names_by_address = [n.name for n in inv.nodes for _ in range(2)]
    for node in inv.nodes:
        (line,) = _node_lines(ran.stdout, node.name)
        assert line.split() == [node.name, node.internal_ip, *names_by_address], ran.stdout


def test_a_torchrun_launch_prints_no_hostname_warning(local_stack, tmp_path):
    local_stack("quiet", nodes=2)
    boot = trainctl("bootstrap", "--stack", "quiet", "--code", str(REPO),
                    "--requirements", "trainers/requirements.txt", cwd=tmp_path)
    assert boot.returncode == 0, boot.stderr
    launch = trainctl("launch", "--stack", "quiet", "--max-restarts", "0", "--job-retries", "0",
                      "--", "python", "-m", "trainers.digits_ddp", "--epochs", "1",
                      "--job-dir", "{job_dir}", cwd=tmp_path)
    output = launch.stdout + launch.stderr
    assert launch.returncode == 0, output[-3000:]
    assert "final test_accuracy" in output, output[-3000:]
    assert "cannot be retrieved" not in output, output[-3000:]
