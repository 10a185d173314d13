"""`trainctl run --detach` on the real local stack: the run belongs to a controller node, not to
the process that submitted it. It finishes and collects with its submitter killed, `cancel`
stops it mid-run and everything goes, and a controller killed mid-run is found by the next
`status` and the run torn down. The quick trainer: what is tested is trainctl around a program."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from conftest import Streamed, kill_on_node1, leftovers, trainctl
from quick_runs import quick_experiment, quick_model_is_whole

pytestmark = pytest.mark.e2e

GONE_SECONDS = 60  # a controller removes itself after it wrote how the run ended: its machine goes last


@pytest.fixture(autouse=True)
def controllers_removed(trainctl_home):
    """A failed test's controllers go before its home does (the home's sweep knows stacks only)."""
    yield
    from infra.providers.local import controller_node

    for name in controller_node.names():
        controller_node.remove(name, print)


def controller_leftovers(run_id: str) -> list[str]:
    """What is left of the run's controller: its namespaces, links and processes by name (as the
    stack's `leftovers`), and its folder (controllers/, beside the stacks)."""
    from infra.providers.local.controller_node import controller_dir

    found = leftovers(f"ctl-{run_id}")
    if controller_dir(f"ctl-{run_id}").exists():
        found.append(f"folder {controller_dir(f'ctl-{run_id}')}")
    ps = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return found + [f"process {line.strip()}" for line in ps.splitlines() if f"/controllers/ctl-{run_id}/" in line]


def nothing_left(run_id: str) -> list[str]:
    """Nothing of the run nor of its controller, once the controller's machine has ended."""
    deadline = time.monotonic() + GONE_SECONDS
    while (found := leftovers(run_id) + controller_leftovers(run_id)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return found


def submitted(exp, runs) -> str:
    """`run --detach`, killed with its process group as soon as it said the controller took it."""
    submitter = Streamed("run", str(exp), "--detach", "--runs-dir", str(runs))
    submitter.wait_for(r"taken by controller")
    os.killpg(submitter.proc.pid, signal.SIGKILL)
    submitter.proc.wait()
    line = next(s for s in submitter.seen if "taken by controller" in s)
    return line.split("run ", 1)[1].split(":", 1)[0]


def test_a_detached_run_outlives_its_submitter_collects_and_leaves_nothing(tmp_path, trainctl_home):
    runs = tmp_path / "runs"
    run_id = submitted(quick_experiment(tmp_path, "--epochs 3 --epoch-sleep 0.2", name="detached"), runs)
    followed = trainctl("logs", run_id, "--follow", "--runs-dir", str(runs), timeout=300)
    assert followed.returncode == 0, followed.stderr[-2000:]
    assert "epoch 3/3" in followed.stdout, followed.stdout[-3000:]
    status = trainctl("status", "--run", run_id, "--runs-dir", str(runs))
    state = json.loads(status.stdout)
    assert state["state"] == "succeeded" and state["ok"] is True, state
    assert state["detached"]["controller"] == f"ctl-{run_id}"
    assert json.loads((runs / run_id / "metrics.json").read_text())["world_size"] == 2
    assert quick_model_is_whole(runs / run_id / "model" / "model.bin", 1)
    assert set(json.loads((runs / run_id / "timings.json").read_text())) == {"up", "bootstrap", "train",
                                                                              "collect", "down"}
    assert nothing_left(run_id) == []
    listed = trainctl("ls")
    assert run_id in listed.stdout and "succeeded" in listed.stdout, listed.stdout + listed.stderr
    report = trainctl("report", run_id, "--runs-dir", str(runs))  # the controller kept the run's ledger
    assert report.returncode == 0 and "goodput" in report.stdout + report.stderr, report.stderr[-2000:]


def test_a_worker_killed_under_the_controller_is_rerun_as_in_an_attached_run(tmp_path, trainctl_home):
    runs = tmp_path / "runs"
    run_id = submitted(quick_experiment(tmp_path, "--epochs 6 --epoch-sleep 0.5", name="rerun"), runs)
    follow = Streamed("logs", run_id, "--follow", "--runs-dir", str(runs))
    follow.wait_for(r"epoch 2/6")
    kill_on_node1(run_id, "[q]uick_trainer.py")  # the program on node1 dies: the job's retry rule applies
    output = follow.finish(timeout=300)
    state = json.loads(trainctl("status", "--run", run_id, "--runs-dir", str(runs)).stdout)
    assert state["state"] == "succeeded" and state["ok"] is True and state["attempts"] == 2, (state, output[-3000:])
    assert nothing_left(run_id) == []


def test_cancel_mid_run_stops_collects_and_tears_everything_down(tmp_path, trainctl_home):
    runs = tmp_path / "runs"
    exp = quick_experiment(tmp_path, "--epochs 600 --epoch-sleep 0.5 --checkpoint-on-stop", name="cancel")
    run_id = submitted(exp, runs)
    follow = Streamed("logs", run_id, "--follow", "--runs-dir", str(runs))
    follow.wait_for(r"epoch 2/600")
    listed = trainctl("ls")
    assert run_id in listed.stdout and "running" in listed.stdout, listed.stdout + listed.stderr
    cancelled = trainctl("cancel", run_id, "--runs-dir", str(runs))
    assert cancelled.returncode == 0 and cancelled.stdout.strip() == "cancelled", cancelled.stderr[-2000:]
    follow.finish()
    state = json.loads(trainctl("status", "--run", run_id, "--runs-dir", str(runs)).stdout)
    assert state["state"] == "cancelled" and state["ok"] is False, state
    assert "cancelled by `trainctl cancel`" in state["detached"]["detail"]
    assert {"train", "collect", "down"} <= set(json.loads((runs / run_id / "timings.json").read_text()))
    assert nothing_left(run_id) == []


def test_a_killed_controller_is_found_by_status_and_its_run_torn_down(tmp_path, trainctl_home):
    from infra.providers.local.layout import Names
    from namespace_nodes import netns

    runs = tmp_path / "runs"
    run_id = submitted(quick_experiment(tmp_path, "--epochs 600 --epoch-sleep 0.5", name="orphan"), runs)
    follow = Streamed("logs", run_id, "--follow", "--runs-dir", str(runs))
    follow.wait_for(r"epoch 2/600")
    os.killpg(follow.proc.pid, signal.SIGINT)  # `status` alone is to find the loss (a follower would too)
    follow.finish()
    netns.kill_netns_processes(Names(f"ctl-{run_id}").node_netns(0))  # the controller's machine dies
    status = trainctl("status", "--run", run_id, "--runs-dir", str(runs))
    state = json.loads(status.stdout)
    assert state["state"] == "lost" and "was lost" in state["detached"]["detail"], state
    assert "is gone; tearing the run down" in status.stderr and f"stack {run_id}" in status.stderr, status.stderr
    assert nothing_left(run_id) == []
    listed = trainctl("ls")
    assert run_id in listed.stdout and "lost" in listed.stdout, listed.stdout + listed.stderr
