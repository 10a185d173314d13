"""The network pre-flight on real local nodes: an all-reduce across them (torchrun, gloo) passes
on their veths as they are, and is refused once one node's link is throttled with tc, naming the
figure it measured against the catalog's."""

from __future__ import annotations

import re
import subprocess

import pytest

from conftest import REPO, trainctl

pytestmark = pytest.mark.e2e


def busbw(output: str) -> float:
    match = re.search(r"^busbw_gbps\t([\d.]+)\t", output, re.M)
    assert match, output
    return float(match.group(1))


def test_a_throttled_link_is_refused_and_an_unthrottled_one_passes(local_stack, tmp_path):
    from infra.providers.local.layout import Names

    stack = "netcheck"
    local_stack(stack, nodes=2)
    (tmp_path / "Pulumi.yaml").write_text("name: netcheck\n")  # a project: bootstrap's logs go to its runs/
    (tmp_path / "stacks").mkdir()
    boot = trainctl("bootstrap", "--stack", stack, "--code", str(REPO), "--requirements", "trainers/requirements.txt",
                    cwd=tmp_path)
    assert boot.returncode == 0, boot.stderr[-3000:]
    healthy = trainctl("check-network", "--stack", stack, "--size-mb", "8", "--runs-dir", str(tmp_path))
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr[-3000:]
    assert "TCP (gloo)" in healthy.stdout and busbw(healthy.stdout) > 0
    veth = Names(stack).veth(1)  # node1's link, its bridge end
    subprocess.run(["tc", "qdisc", "add", "dev", veth, "root", "tbf", "rate", "40mbit", "burst", "32kbit",
                    "latency", "100ms"], check=True)
    try:
        slow = trainctl("check-network", "--stack", stack, "--size-mb", "8", "--runs-dir", str(tmp_path))
    finally:
        subprocess.run(["tc", "qdisc", "del", "dev", veth, "root"], check=True)
    assert slow.returncode == 1, slow.stdout + slow.stderr[-3000:]
    assert re.search(r"all-reduce bus bandwidth [\d.]+ GB/s across 2 nodes over TCP \(gloo\): \d+% of the "
                     r"[\d.]+ GB/s expected, below the 50% this run requires", slow.stderr), slow.stderr[-3000:]
