"""The end of a torchrun job that succeeded, on the real local stack: no agent loses the c10d
rendezvous store while it leaves.

torchrun's own store host (node 0's agent) used to leave as soon as its exit barrier returned;
an agent slower to leave (a loaded machine) then found the store gone and printed c10d's stack
traces ("failed to shutdown the rendezvous", "Broken pipe") under a run that succeeded
(pytorch/pytorch#69520). The script freezes the other agent for seconds after its worker exits,
which made that happen on every run; the store now outlives every agent."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bootstrap.plan import BootstrapSpec
from bootstrap.runner import bootstrap
from conftest import REPO
from trainctl.launchers.spec import LaunchSpec
from trainctl.launchers.ssh.supervisor import launch

pytestmark = pytest.mark.e2e

CODE = REPO / "tests" / "data" / "torchrun-exit"
RENDEZVOUS_ERRORS = re.compile(r"failed to shutdown the rendezvous|Error waiting on exit barrier|TCPStore\.cpp|"
                               r"DistNetworkError|RendezvousConnectionError|Broken pipe")


def test_an_agent_slow_to_leave_a_run_that_succeeded_still_finds_the_rendezvous_store(local_stack, tmp_path: Path):
    inventory = local_stack("tcexit", nodes=2)
    bootstrap(inventory, BootstrapSpec(code_dir=str(CODE), requirements="requirements.txt"), tmp_path / "boot")
    lines: list[str] = []
    result = launch(inventory, LaunchSpec(run_id="slow-exit", command=("python", "slow_agent_at_exit.py")),
                    tmp_path / "logs", lines.append)
    assert result.ok, lines
    assert {"[node0 r0]:rank 0 leaving", "[node1 r1]:rank 1 leaving"} <= set(lines)
    assert [line for line in lines if RENDEZVOUS_ERRORS.search(line)] == []
    on_file = "".join(p.read_text() for p in (tmp_path / "logs").glob("node*.log"))  # the INFO lines too
    assert RENDEZVOUS_ERRORS.search(on_file) is None
