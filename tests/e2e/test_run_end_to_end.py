"""`trainctl run` and the step-by-step commands on the real local stack: training happens,
artifacts arrive, failures are named, nodes that fail are restarted and resume, and nothing is
left behind (interrupts in every phase: tests/reliability/test_interrupt_every_phase.py)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from infra.spec.ledger import Ledger

from conftest import REPO, Streamed, experiment, kill_on_node1, leftovers, run_id_of, trainctl
from quick_runs import quick_experiment

pytestmark = pytest.mark.e2e


def test_run_trains_collects_and_tears_down(tmp_path, trainctl_home):
    runs = tmp_path / "runs"
    result = trainctl("run", str(REPO / "examples" / "digits-ddp.yaml"), "--runs-dir", str(runs))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    run_id = run_id_of(result.stdout)
    out = runs / run_id
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["test_accuracy"] >= 0.95
    assert metrics["world_size"] == 2
    assert (out / "model" / "model.pt").stat().st_size > 1000
    assert (out / "loss.png").read_bytes()[:4] == b"\x89PNG"
    assert set(json.loads((out / "timings.json").read_text())) == {"up", "bootstrap", "train", "collect", "down"}
    assert re.search(r"^\[node\d r0\]:epoch 10/10", result.stdout, re.M)  # streamed, prefixed
    # no c10d stack trace from an agent that lost the rendezvous store at the end
    assert not re.search(r"failed to shutdown the rendezvous|TCPStore\.cpp", result.stdout + result.stderr)
    assert {p.name for p in (out / "logs" / "launch").glob("*.log")} == {"node0.log", "node1.log"}
    assert json.loads((out / "logs" / "launch" / "result.json").read_text())["ok"] is True
    assert leftovers(run_id) == []
    the_ledger_accounts_for_the_whole_run(out, metrics)


def the_ledger_accounts_for_the_whole_run(out: Path, metrics: dict) -> None:
    """Every node's lane covers the wall time, the wall time is the phases' (nothing counted
    twice, nothing left out), and the training is cut by the program's own step reports."""
    ledger = Ledger.from_json((out / "ledger.json").read_text())
    wall = ledger.wall_seconds
    assert [n.name for n in ledger.nodes] == ["node0", "node1"]
    for node in ("node0", "node1"):
        assert abs(ledger.lane_seconds(node) - wall) <= 0.02 * wall, (node, ledger.lane_seconds(node), wall)
    phases = json.loads((out / "timings.json").read_text())
    assert abs(sum(phases.values()) - wall) <= 0.02 * wall, (phases, wall)
    assert ledger.steps == metrics["steps"]
    assert 0 < ledger.node_seconds("productive_training") < ledger.node_seconds()
    assert {"provisioning", "bootstrap", "program_startup", "productive_training", "collect",
            "teardown"} <= set(ledger.kinds())
    # the trainer's checkpoint each epoch, as it reported its time, is not productive time
    assert 0 < ledger.node_seconds("unproductive_checkpoint_save_time") < ledger.node_seconds("productive_training")
    assert ledger.goodput is not None and 0 < ledger.goodput < 1
    assert ledger.steps_redone is None  # nothing failed, nothing was trained twice
    assert (out / "timeline.png").read_bytes()[:4] == b"\x89PNG"


def test_permanent_error_fails_fast_naming_the_node_and_still_tears_down(tmp_path, trainctl_home):
    exp = experiment(tmp_path, "--epochs 3 --fail-at-epoch 1 --fail-rank 1 --fail-code 2")
    result = trainctl("run", str(exp), "--runs-dir", str(tmp_path / "runs"))
    assert result.returncode == 1
    assert re.search(r"node\d \(rank \d\) failed: permanent error: its program exited with code 2",
                     result.stderr), result.stderr[-3000:]
    assert "resumed from epoch" not in result.stdout  # no torchrun restart
    assert "rerun 1/" not in result.stdout  # no job rerun
    assert "failing on purpose at epoch 1" in result.stderr  # the failed node's last lines
    assert leftovers(run_id_of(result.stdout)) == []


def test_step_by_step_commands(tmp_path, trainctl_home):
    stack = "steps"
    (tmp_path / "Pulumi.yaml").write_text("name: steps\n")  # a project: launch keeps its runs here
    stack_file = tmp_path / "stacks" / f"Pulumi.{stack}.yaml"
    stack_file.parent.mkdir()
    stack_file.write_text("config:\n  trainctl:provider: local\n  trainctl:nodes: 2\n")
    try:
        up = trainctl("up", "--stack", str(stack_file))
        assert up.returncode == 0, up.stderr
        again = trainctl("up", "--stack", str(stack_file))  # the stack as it is: `up` is idempotent
        assert again.returncode == 0 and "stack steps is up" in again.stdout + again.stderr, again.stderr
        status = trainctl("status", "--stack", stack)
        assert status.returncode == 0 and status.stdout.count(" ok ") == 2, status.stdout + status.stderr
        plan = trainctl("bootstrap", "--stack", stack, "--code", str(REPO),
                        "--requirements", "trainers/requirements.txt", "--plan")
        assert re.search(r"^\[sync\] \(controller\) \(skipped if fingerprint \w+ is stored\) rsync ", plan.stdout, re.M)
        assert "[env] (node)" in plan.stdout
        boot = trainctl("bootstrap", "--stack", stack, "--code", str(REPO),
                        "--requirements", "trainers/requirements.txt")
        assert boot.returncode == 0, boot.stderr
        again = trainctl("bootstrap", "--stack", stack, "--code", str(REPO),
                         "--requirements", "trainers/requirements.txt")
        assert again.stderr.count("env      skipped") == 2, again.stderr
        assert again.stderr.count("sync     skipped") == 2, again.stderr
        ran = trainctl("exec", "--stack", stack, "--", "hostname")
        assert ran.returncode == 0 and "[node0] node0" in ran.stdout and "[node1] node1" in ran.stdout
        launch = trainctl("launch", "--stack", stack, "--run-id", "steps-1", "--",
                          "python", "-m", "trainers.digits_ddp", "--epochs", "2",
                          "--job-dir", "{job_dir}", cwd=tmp_path)
        assert launch.returncode == 0, launch.stdout[-2000:] + launch.stderr[-2000:]
        assert "final test_accuracy" in launch.stdout
        logs = trainctl("logs", "steps-1", "--node", "node0", "--runs-dir", str(tmp_path / "runs"))
        assert "[node0" in logs.stdout
        state = trainctl("status", "--run", "steps-1", "--runs-dir", str(tmp_path / "runs"))
        assert json.loads(state.stdout)["ok"] is True
    finally:
        down = trainctl("down", "--stack", stack)
        assert down.returncode == 0, down.stderr
    assert leftovers(stack) == []


def test_non_root_is_told_why_root_is_needed(tmp_path):
    # CAP_DAC_READ_SEARCH only so that a checkout in a folder only root may enter can be imported:
    # what is refused is the missing CAP_NET_ADMIN.
    result = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                             "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search",
                             sys.executable, "-m", "trainctl.cli", "up", "--stack", "local"],
                            cwd=REPO, capture_output=True, text=True,
                            env={**os.environ, "TRAINCTL_HOME": "/var/lib/trainctl-tests/nobody"})
    assert result.returncode == 2
    assert "needs root (or CAP_NET_ADMIN" in result.stderr


def test_killed_trainer_is_restarted_and_resumes_to_the_same_step_count(tmp_path, trainctl_home):
    exp = experiment(tmp_path, "--epochs 6 --epoch-sleep 1", nodes=3, name="resume")
    runs = tmp_path / "runs"
    run, run_id = Streamed.run(exp, runs)
    run.wait_for(r"\[node\d r0\]:epoch 2/")
    # Only the worker (python -m …), not its torchrun agent (--module …), on node1 alone.
    kill_on_node1(run_id, "-m [t]rainers.digits_ddp")
    output = run.finish(timeout=300)
    assert run.proc.returncode == 0, output[-3000:]
    assert re.search(r"\[node1\] .*failed \(exitcode: -9\)", output)  # torchrun saw the kill…
    assert re.search(r"\[node0 r\d\]:rank \d: resumed from epoch [2-5]", output)  # …and both resumed
    # …in place, in torchrun's first restart: no worker read an address its predecessor had
    # published (pytorch/pytorch#135712), so the job never failed into a rerun.
    agent = (runs / run_id / "logs" / "launch" / "node1.log").read_text()
    assert agent.count("Worker group FAILED") == 1, agent[-3000:]
    assert "job failed; rerun" not in output
    metrics = json.loads((runs / run_id / "metrics.json").read_text())
    # Same number of optimizer steps as an undisturbed run: resumed at the epoch boundary.
    # 3 nodes: 1,437 training images / 3 ranks / batch 32 = 15 steps per epoch.
    assert metrics["world_size"] == 3
    assert metrics["steps"] == metrics["epochs"] * metrics["steps_per_epoch"] == 6 * 15
    assert metrics["test_accuracy"] >= 0.95
    assert leftovers(run_id) == []
    # The ledger counts the kill as badput: the time from the failure until the job ran again.
    # Rank 0 saved the last complete step when its peer was lost, so at most the moments
    # between its stop line and node1's failure line (whichever reached trainctl first) count
    # as lost: never the epoch a checkpoint-per-epoch program would lose.
    ledger = Ledger.from_json((runs / run_id / "ledger.json").read_text())
    assert ledger.badput["infrastructure_recovery_from_disruption"] > 0
    assert ledger.badput["unproductive_checkpoint_restore_time"] > 0  # reading the checkpoint it resumed from
    assert ledger.steps == 6 * 15 and ledger.steps_redone is not None and ledger.steps_redone < 15
    assert [e.kind for e in ledger.events] == ["restart"]
    assert re.search(r"lost work: \d+ step\(s\) trained again after failures", output)


def test_tensorflow_multi_worker_run_reaches_the_accuracy_bar(tmp_path, trainctl_home):
    runs = tmp_path / "runs"
    result = trainctl("run", str(REPO / "examples" / "digits-tf.yaml"), "--runs-dir", str(runs))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    run_id = run_id_of(result.stdout)
    metrics = json.loads((runs / run_id / "metrics.json").read_text())
    assert (metrics["strategy"], metrics["world_size"]) == ("multi-worker", 2)
    assert metrics["test_accuracy"] >= 0.95
    assert "[node1 r1]:worker:0 strategy=multi-worker" in result.stdout
    assert (runs / run_id / "model" / "weights.npz").exists()
    assert leftovers(run_id) == []


def resumes_after(tmp_path: Path, name: str, disturb) -> str:
    """A 6-epoch run on 2 nodes (no torchrun restarts, one job rerun) that `disturb(run_id, runs)`
    hits at epoch 2. It must still succeed: rerun once from its latest checkpoint and make as
    many optimizer steps as an undisturbed run (1,437 images / 2 ranks / batch 32 = 23 a epoch)."""
    exp = experiment(tmp_path, "--epochs 6 --epoch-sleep 1", name=name,
                     extra="restart: {max_restarts: 0, job_retries: 1}\n")
    runs = tmp_path / "runs"
    run, run_id = Streamed.run(exp, runs)
    run.wait_for(r"\[node\d r0\]:epoch 2/")
    disturb(run, run_id, runs)
    output = run.finish(timeout=400)
    assert run.proc.returncode == 0, output[-3000:]
    assert "[trainctl] job failed; rerun 1/1 from the latest checkpoint" in output
    assert re.search(r"rank \d: resumed from epoch [2-5]", output)
    metrics = json.loads((runs / run_id / "metrics.json").read_text())
    assert metrics["steps"] == metrics["epochs"] * metrics["steps_per_epoch"] == 6 * 23
    assert leftovers(run_id) == []
    return output


def test_a_dead_torchrun_agent_is_noticed_at_once_and_the_job_reruns_from_its_checkpoint(
        tmp_path, trainctl_home):
    followers = []

    def kill_the_agent(run, run_id, runs):
        followers.append(subprocess.Popen(
            [sys.executable, "-m", "trainctl.cli", "logs", run_id, "--follow", "--runs-dir", str(runs)],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        # The agent alone (its worker lives on, as after an OOM kill of torchrun): without
        # supervision the healthy agent would wait out torchrun's 300 s exit barrier.
        kill_on_node1(run_id, "--module [t]rainers.digits_ddp")

    output = resumes_after(tmp_path, "agent", kill_the_agent)
    assert "[trainctl] a node failed: stopping run" in output
    followed, _ = followers[0].communicate(timeout=60)  # ends by itself when the run has ended
    assert "final test_accuracy" in followed and "resumed from epoch" in followed


def test_three_experiments_in_parallel_stay_isolated(tmp_path, trainctl_home):
    runs = tmp_path / "runs"
    procs = []
    for name in ("para-a", "para-b", "para-c"):  # isolation is trainctl's: a trainer without torch
        exp = quick_experiment(tmp_path, "--epochs 2", name=name)
        procs.append(subprocess.Popen([sys.executable, "-m", "trainctl.cli", "run", str(exp),
                                       "--runs-dir", str(runs)], cwd=REPO, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    outputs = [p.communicate(timeout=600) for p in procs]
    run_ids, subnets, buckets = [], set(), set()
    for proc, (out, err) in zip(procs, outputs):
        assert proc.returncode == 0, out[-2000:] + err[-2000:]
        run_ids.append(run_id_of(out))
        subnets.add(re.search(r"bridge tcb\w+ (10\.210\.\d+\.0/24)", out).group(1))
        buckets.add(re.search(r"job dir (gs://[^/]+)/", out).group(1))
        metrics = json.loads((runs / run_ids[-1] / "metrics.json").read_text())
        assert metrics["world_size"] == 2 and metrics["epochs"] == 2
    assert len(set(run_ids)) == len(subnets) == len(buckets) == 3
    for run_id in run_ids:
        assert leftovers(run_id) == []


def test_a_cut_link_is_noticed_in_seconds_and_the_job_resumes_once_it_is_back(tmp_path, trainctl_home):
    from infra.providers.local.layout import Names

    def pull_the_cable(run, run_id, runs):
        veth = Names(run_id).veth(1)
        subprocess.run(["ip", "link", "set", veth, "down"], check=True)  # node1's cable, pulled
        # (The guard below only keeps a broken build from hanging; the point is that trainctl
        # names the lost node at all, instead of waiting out the 30-minute collective default.)
        run.wait_for(r"\[trainctl\] node1: node lost: no SSH heartbeat", timeout=120)
        subprocess.run(["ip", "link", "set", veth, "up"], check=True)  # plugged back in

    resumes_after(tmp_path, "cut", pull_the_cable)


def node_init_pid(ns: str) -> int:
    """PID (as the host sees it) of PID 1 of the node's own PID namespace: its sshd."""
    from namespace_nodes import netns

    for pid in netns.netns_pids(ns):
        status = Path(f"/proc/{pid}/status").read_text()
        nspid = next(line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:"))
        if len(nspid) > 1 and nspid[-1] == "1":
            return pid
    raise AssertionError(f"no init process in {ns}")


def test_a_node_whose_sshd_dies_boots_again_and_the_job_resumes_from_its_checkpoint(
        tmp_path, trainctl_home):
    def crash_node1(run, run_id, runs):
        os.kill(node_init_pid(f"tc-{run_id}-n1"), signal.SIGKILL)  # sshd is PID 1: the node dies

    output = resumes_after(tmp_path, "crash", crash_node1)
    assert "[trainctl] a node failed: stopping run" in output
