"""A stockout in the first zone of a simulated project: `trainctl run` goes from the refused zone
straight to the zone the refusal names, runs the program there on both real machines, keeps the
attempts in the run's folder, and leaves nothing in any zone. Where the cluster goes is what is
asserted, so its program is a one-liner (TensorFlow's launch: no torchrun) that says where it runs
and writes the metrics the run collects; training is proved by the runs that train. The same when
the stockout comes later: a spot node preempted (`trainctl preempt`) in a zone that then has no
capacity left brings the whole cluster to the zone the refusal names, and the run resumes there
from its checkpoint."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

import pytest

from conftest import Streamed, run_id_of
from tests.conftest import REPO, experiment, trainctl
from tests.fakes.sim_machines_fixtures import wait_for
from tests.reliability.test_spot_recovery import SPOT
from tests.e2e.test_gcp_stack_on_the_simulator import _leftovers, simulated_home  # noqa: F401 (fixture)

pytestmark = pytest.mark.e2e

A, B, C = "us-central1-a", "us-central1-b", "us-central1-c"
# Each node prints its TF_CONFIG task; the chief writes metrics.json where the run collects it.
PLACED = ("""python -c 'import json, os, sys; from trainers import storage; """
          """task = json.loads(os.environ["TF_CONFIG"])["task"]; print("task", task["type"], task["index"], """
          """"runs in its zone", flush=True); task["type"] == "chief" and storage.write_bytes("""
          """storage.join(sys.argv[1], "metrics.json"), json.dumps(dict(steps=1)).encode())' {job_dir}""")


def test_a_run_refused_in_zone_a_runs_in_the_zone_the_stockout_names_without_trying_b(simulated_home, tmp_path):  # noqa: F811
    project = tmp_path / "project.yaml"
    project.write_text(json.dumps({"project": "my-project", "stockouts": [
        {"zone": A, "machine_type": "n1-standard-8"}, {"zone": B, "machine_type": "n1-standard-8"}]}))
    exp = tmp_path / "failover.yaml"
    exp.write_text(f"""
name: failover
stack: gpu-t4x2
overrides: {{nodes: 2, zones: [{A}, {B}, {C}]}}
code: {REPO}
requirements: trainers/requirements.txt
run:
  framework: tensorflow
  command: {PLACED}
ttl_hours: 1
artifacts: [metrics.json]
""")
    done = trainctl("run", str(exp), "--simulated-project", str(project), "--runs-dir", str(tmp_path / "runs"),
                    timeout=900)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-4000:]
    run_id = re.search(r"\[trainctl\] run (\S+):", log)[1]
    placement = json.loads((tmp_path / "runs" / run_id / "placement.json").read_text())
    assert [(p["zone"], p["outcome"]) for p in placement] == [(A, "no capacity"), (C, "up")]
    assert C in placement[0]["capacity_in"]
    assert re.search(r"task chief 0 runs in its zone", log) and re.search(r"task worker 0 runs in its zone", log), \
        log[-4000:]
    assert json.loads((tmp_path / "runs" / run_id / "metrics.json").read_text())["steps"] > 0
    assert _leftovers(simulated_home) == []


def started(experiment_file, runs, simulated_home, point: str) -> tuple[Streamed, str, str, str]:  # noqa: F811
    """`trainctl run --simulate` of the file once its output reached `point`: the run, its id,
    its second node and the simulator's address."""
    from infra.providers import realizers
    from gcpsim import daemon

    run = Streamed("run", str(experiment_file), "--simulate", "--runs-dir", str(runs))
    run.wait_for(r"\[trainctl\] run ")
    run_id = run_id_of("".join(run.seen))
    run.wait_for(point)
    simulator = daemon.url_of(simulated_home / "simulator")
    assert simulator is not None
    return run, run_id, realizers.inventory(run_id).nodes[1].name, simulator


def sim_admin(simulator: str, verb: str, path: str, body: object) -> dict:
    """The simulator's own endpoints for the --simulate project (preemption, stockouts)."""
    request = urllib.request.Request(f"{simulator}/trainctl-sim/v1/projects/my-project/{path}", method=verb,
                                     data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.load(answer)


def test_a_spot_node_preempted_by_trainctl_in_a_zone_then_stocked_out_moves_the_cluster_whole(  # noqa: F811
        simulated_home, tmp_path):
    """`trainctl preempt` reaches the simulator through the stack's endpoints record; the node's
    programs end on the shutdown's SIGTERM, so its VM is reclaimed then, and the recovery does not
    sit out the grace period (GCE's is at most that long: 32 of a recovery's 34 s went to waiting
    it out, before: issue 48). The grace is longer than any bound below, so no clock decides the
    outcome: a VM that waited it out fails the wait for its reclaim. The spot capacity is gone
    from a and b by then, so the recovery finds a's refusal naming c and moves the cluster whole."""
    runs = tmp_path / "runs"
    exp = experiment(tmp_path, "--epochs 4 --epoch-sleep 2", nodes=2, name="moved", extra=SPOT)
    exp.write_text(exp.read_text().replace("stack: local", "stack: gpu-l4-spot").replace(
        "overrides: {nodes: 2}", f"overrides: {{nodes: 2, zones: [{A}, {B}, {C}]}}"))
    run, run_id, node, simulator = started(exp, runs, simulated_home, r"epoch 2/4")
    instance = f"{simulator}/compute/v1/projects/my-project/zones/{A}/instances/{node}"
    before = _instance(instance)
    assert before is not None
    sim_admin(simulator, "PUT", "stockouts", [{"zone": z, "machine_type": "g2-standard-8"} for z in (A, B)])
    grace = 1800
    done = trainctl("preempt", node, "--stack", run_id, "--grace", str(grace), timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(rf"{node} preempted \((STOP|DELETE)\)", done.stdout + done.stderr), done.stderr

    def reclaimed() -> bool:
        now = _instance(instance)
        return now is None or now["status"] != "RUNNING" or now["id"] != before["id"]

    wait_for(reclaimed, timeout=grace / 3, what="the VM reclaimed once its programs ended (not after its grace period)")
    run.wait_for(rf"zone {A}: no capacity .*moving the whole cluster", timeout=grace / 3)
    output = run.finish(timeout=grace / 3)
    assert run.proc.returncode == 0, output[-4000:]
    assert "the cluster moved: bootstrapping all 2 node(s)" in output
    assert "recovered from 1 preemption(s):" in output
    placement = json.loads((runs / run_id / "placement.json").read_text())
    assert [(p["zone"], p["outcome"], p.get("recovery", False)) for p in placement] == [
        (A, "up", False), (A, "no capacity", True), (C, "up", True)]  # b was not tried
    result = json.loads((runs / run_id / "logs" / "launch" / "result.json").read_text())
    (recovery,) = result["recoveries"]
    assert (recovery["nodes"], recovery.get("moved_to")) == ([node], C)
    assert recovery["resumed_from_step"] is not None  # from the bucket's checkpoint
    assert recovery["seconds"] < grace, (recovery, output[-4000:])
    assert json.loads((runs / run_id / "metrics.json").read_text())["steps"] > 0
    ledger = json.loads((runs / run_id / "ledger.json").read_text())
    assert any(e["kind"] == "preemption" and f"moved to zone {C}" in e["note"] for e in ledger["events"])
    assert _leftovers(simulated_home) == []


def _instance(url: str) -> dict | None:
    """Compute's instances.get (None: 404), asked of the simulator as a client would."""
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return json.load(answer)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise
