"""A stockout in the first zone of a simulated project: `trainctl run` goes from the refused zone
straight to the zone the refusal names, trains there on real machines, keeps the attempts in the
run's folder, and leaves nothing in any zone. The same when the stockout comes later: a spot node
preempted in a zone that then has no capacity left brings the whole cluster to the zone the
refusal names, and the run resumes there from its checkpoint."""

from __future__ import annotations

import json
import re
import urllib.request

import pytest

from tests.conftest import REPO, experiment, trainctl
from tests.e2e.test_gcp_stack_on_the_simulator_drains_for_maintenance import started
from tests.reliability.test_spot_recovery import SPOT
from tests.e2e.test_gcp_stack_on_the_simulator import _leftovers, simulated_home  # noqa: F401 (fixture)

pytestmark = pytest.mark.e2e

A, B, C = "us-central1-a", "us-central1-b", "us-central1-c"


def test_a_run_refused_in_zone_a_trains_in_the_zone_the_stockout_names_without_trying_b(simulated_home, tmp_path):  # noqa: F811
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
  command: python -m trainers.digits_ddp --epochs 3 --job-dir {{job_dir}}
  processes_per_node: 1
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
    assert re.search(r"rank 0/2 on", log) and re.search(r"rank 1/2 on", log)
    assert json.loads((tmp_path / "runs" / run_id / "metrics.json").read_text())["steps"] > 0
    assert _leftovers(simulated_home) == []


def sim_admin(simulator: str, verb: str, path: str, body: object) -> dict:
    """The simulator's own endpoints for the --simulate project (preemption, stockouts)."""
    request = urllib.request.Request(f"{simulator}/trainctl-sim/v1/projects/my-project/{path}", method=verb,
                                     data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.load(answer)


def test_a_spot_run_preempted_in_a_zone_then_stocked_out_moves_whole_to_the_zone_the_stockout_names(  # noqa: F811
        simulated_home, tmp_path):
    runs = tmp_path / "runs"
    exp = experiment(tmp_path, "--epochs 4 --epoch-sleep 2", nodes=2, name="moved", extra=SPOT)
    exp.write_text(exp.read_text().replace("stack: local", "stack: gpu-l4-spot").replace(
        "overrides: {nodes: 2}", f"overrides: {{nodes: 2, zones: [{A}, {B}, {C}]}}"))
    run, run_id, node, simulator = started(exp, runs, simulated_home, r"epoch 2/4")
    sim_admin(simulator, "POST", f"zones/{A}/instances/{node}:preempt", {"grace_seconds": 2})
    # the spot capacity is gone from a and b once the node is reclaimed: a's refusal names c
    sim_admin(simulator, "PUT", "stockouts", [{"zone": z, "machine_type": "g2-standard-8"} for z in (A, B)])
    run.wait_for(rf"zone {A}: no capacity .*moving the whole cluster", timeout=300)
    output = run.finish(timeout=600)
    assert run.proc.returncode == 0, output[-4000:]
    assert "the cluster moved: bootstrapping all 2 node(s)" in output
    placement = json.loads((runs / run_id / "placement.json").read_text())
    assert [(p["zone"], p["outcome"], p.get("recovery", False)) for p in placement] == [
        (A, "up", False), (A, "no capacity", True), (C, "up", True)]  # b was not tried
    result = json.loads((runs / run_id / "logs" / "launch" / "result.json").read_text())
    assert [(r["nodes"], r.get("moved_to")) for r in result["recoveries"]] == [([node], C)]
    assert result["recoveries"][0]["resumed_from_step"] is not None  # from the bucket's checkpoint
    assert json.loads((runs / run_id / "metrics.json").read_text())["steps"] > 0
    ledger = json.loads((runs / run_id / "ledger.json").read_text())
    assert any(e["kind"] == "preemption" and f"moved to zone {C}" in e["note"] for e in ledger["events"])
    assert _leftovers(simulated_home) == []
