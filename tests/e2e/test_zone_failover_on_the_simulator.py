"""A stockout in the first zone of a simulated project: `trainctl run` goes from the refused zone
straight to the zone the refusal names, trains there on real machines, keeps the attempts in the
run's folder, and leaves nothing in any zone."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import REPO, trainctl
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
