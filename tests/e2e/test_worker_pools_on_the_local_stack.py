"""Jobs with worker pools on the local stack, as AI Platform / Vertex AI run them, each replica a
real node that learns its role from TF_CONFIG / CLUSTER_SPEC:
- parameter-server training (chief + 2 workers + 1 ps + 1 evaluator): the chief trains to the
  accuracy bar, the evaluator's results land in the job dir, the servers are stopped when the
  chief is done and the run counts as a success;
- a PyTorch job whose evaluator pool runs its own program beside the DDP group.
That Vertex AI job specs (vertex-tf-ps.yaml, vertex-hptuning.yaml) run as written is proved on
their plans, which are those of the native experiments run here and in test_sweep_on_the_local_stack.py
(tests/unit/jobs/test_job_specs_plan_as_their_native_experiments.py)."""

from __future__ import annotations

import json

import pytest

from conftest import REPO, leftovers, run_id_of, trainctl

pytestmark = pytest.mark.e2e


# Parameter-server updates are asynchronous, so the result varies from run to run (0.944 in one
# CI run after the example's 12 epochs, >= 0.95 in the others); the bar proves the model learned (chance: 0.1).
PS_ACCURACY_BAR = 0.9


def test_parameter_server_training_with_an_evaluator_reaches_the_bar(tmp_path, trainctl_home):
    result = trainctl("run", str(REPO / "examples" / "digits-ps.yaml"), "--runs-dir", str(tmp_path / "runs"))
    assert result.returncode == 0, result.stdout + result.stderr
    run_id = run_id_of(result.stdout)
    run_dir = tmp_path / "runs" / run_id
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["strategy"] == "ParameterServerStrategy" and metrics["workers"] == 2
    assert metrics["test_accuracy"] >= PS_ACCURACY_BAR
    evaluated = json.loads((run_dir / "eval" / "results.json").read_text())
    assert evaluated[-1]["epoch"] == 12  # the evaluator saw the final checkpoint (the example trains 12 epochs)
    assert evaluated[-1]["test_accuracy"] == pytest.approx(metrics["test_accuracy"])
    assert "the chief finished: stopping the servers (node3, node1, node2)" in result.stdout
    outcome = json.loads((run_dir / "logs" / "launch" / "result.json").read_text())
    assert outcome["ok"] and outcome["failures"] == [] and outcome["attempts"] == 1
    assert leftovers(run_id) == []


TORCH_WITH_EVALUATOR = """
name: ddp-eval
stack: local
overrides:
  pools: [{{role: chief}}, {{role: worker}}, {{role: evaluator}}]
code: {repo}
requirements: trainers/requirements.txt
run:
  command: python -m trainers.digits_ddp --epochs 4 --job-dir {{job_dir}}
  commands:
    evaluator: python -m trainers.digits_eval --job-dir {{job_dir}}
restart: {{max_restarts: 0, job_retries: 0}}
artifacts: [metrics.json, eval/]
ttl_hours: 1
"""


def test_a_torch_job_with_an_evaluator_pool_trains_on_chief_and_worker_and_evaluates_aside(
        tmp_path, trainctl_home):
    path = tmp_path / "ddp-eval.yaml"
    path.write_text(TORCH_WITH_EVALUATOR.format(repo=REPO))
    result = trainctl("run", str(path), "--runs-dir", str(tmp_path / "runs"))
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = tmp_path / "runs" / run_id_of(result.stdout)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["world_size"] == 2  # torchrun joined the chief and the worker only
    evaluated = json.loads((run_dir / "eval" / "results.json").read_text())
    assert evaluated[-1]["step"] == metrics["steps"]  # the final checkpoint was evaluated
    assert evaluated[-1]["test_accuracy"] == pytest.approx(metrics["test_accuracy"])
    assert "[node2 r2]:evaluator: step" in result.stdout
