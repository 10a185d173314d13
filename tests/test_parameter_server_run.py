"""Parameter-server training on the local stack, as AI Platform runs it: chief + 2 workers + 1 ps
+ 1 evaluator, each a real node with its own TF_CONFIG; the chief trains to the accuracy bar,
the evaluator's results land in the job dir, the servers are stopped when the chief is done and
the run counts as a success."""

from __future__ import annotations

import json

import pytest

from conftest import REPO, leftovers, run_id_of, trainctl

pytestmark = pytest.mark.e2e


def test_parameter_server_training_with_an_evaluator_reaches_the_bar(tmp_path, trainctl_home):
    result = trainctl("run", str(REPO / "examples" / "digits-ps.yaml"), "--runs-dir", str(tmp_path / "runs"))
    assert result.returncode == 0, result.stdout + result.stderr
    run_id = run_id_of(result.stdout)
    run_dir = tmp_path / "runs" / run_id
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["strategy"] == "ParameterServerStrategy" and metrics["workers"] == 2
    assert metrics["test_accuracy"] >= 0.95
    evaluated = json.loads((run_dir / "eval" / "results.json").read_text())
    assert evaluated[-1]["epoch"] == 8  # the evaluator saw the final checkpoint
    assert evaluated[-1]["test_accuracy"] == pytest.approx(metrics["test_accuracy"])
    assert "the chief finished: stopping the servers (node3, node1, node2)" in result.stdout
    outcome = json.loads((run_dir / "logs" / "launch" / "result.json").read_text())
    assert outcome["ok"] and outcome["failures"] == [] and outcome["attempts"] == 1
    assert leftovers(run_id) == []
