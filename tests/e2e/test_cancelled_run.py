"""A run the caller cancels (a sweep's pruned trial) stops on every node at once, is never
rerun from its job-retry budget, and torchrun's shutdown traceback stays in the log instead of
the console."""

from __future__ import annotations

import threading

import pytest

from bootstrap.plan import BootstrapSpec
from bootstrap.runner import bootstrap
from conftest import REPO
from trainctl.launchers.spec import LaunchSpec
from trainctl.launchers.ssh.supervisor import launch

pytestmark = pytest.mark.e2e

TICKS = "for i in $(seq 600); do echo tick $i; sleep 0.5; done"


def test_a_cancelled_run_stops_everywhere_is_not_rerun_and_keeps_the_console_quiet(local_stack, tmp_path):
    inventory = local_stack("cancel", nodes=2)
    bootstrap(inventory, BootstrapSpec(code_dir=str(REPO), requirements="trainers/requirements.txt"),
              tmp_path / "bootstrap")
    cancel = threading.Event()
    shown: list[str] = []

    def echo(line: str) -> None:
        shown.append(line)
        if "tick 2" in line:  # both ranks are training: the sweep decides to prune
            cancel.set()

    spec = LaunchSpec(run_id="cancelled-1", command=("bash", "-c", TICKS), job_retries=3, max_restarts=0)
    result = launch(inventory, spec, tmp_path / "logs", echo, cancel=cancel)

    assert result.cancelled and not result.ok
    assert result.attempts == 1  # three reruns were left: none was spent on a cancelled run
    assert "[trainctl] run cancelled-1 cancelled: stopping it on every node" in shown
    assert not any("Traceback" in line or "SignalException" in line for line in shown), shown
    logs = "".join((tmp_path / "logs" / f"{n.name}.log").read_text() for n in inventory.nodes)
    assert "Received 15 death signal" in logs or "SignalException" in logs  # kept for the curious
    assert result.failures() == []  # every node was stopped by trainctl, none failed by itself
