"""`trainctl report RUN|SWEEP`: the breakdown by interval kind with goodput on stdout, a sweep's
cost per trial against its metric, the pictures drawn into the run's folder; a run without a
ledger is refused by name (exit 2)."""

from __future__ import annotations

from pathlib import Path

from conftest import trainctl
from infra.spec.ledger import Interval, Ledger, NodeRate, TrialCost

NODES = ("node0", "node1")


def sweep_ledger() -> Ledger:
    return Ledger(
        run_id="digits-sweep-abc123", started=0.0, ended=60.0, metric="test_accuracy",
        nodes=tuple(NodeRate(name=n, capacity="spot", usd_per_hour=0.36, on_demand_usd_per_hour=0.9) for n in NODES),
        intervals=(Interval(kind="provisioning", start=0, end=10, nodes=NODES),
                   Interval(kind="productive_training", start=10, end=40, nodes=("node0",), note="trial 0"),
                   Interval(kind="productive_training", start=10, end=30, nodes=("node1",), note="trial 1"),
                   Interval(kind="idle", start=30, end=40, nodes=("node1",)),
                   Interval(kind="teardown", start=40, end=60, nodes=NODES)),
        trials=(TrialCost(number=0, state="COMPLETE", value=0.971, seconds=30, usd=0.003, goodput=0.8),
                TrialCost(number=1, state="PRUNED", value=None, seconds=20, usd=0.002, goodput=0.5)))


def test_report_on_a_sweep_prints_the_breakdown_and_each_trials_cost_and_draws_the_pictures(tmp_path: Path):
    run = tmp_path / "digits-sweep-abc123"
    run.mkdir()
    (run / "ledger.json").write_text(sweep_ledger().model_dump_json(indent=2))
    done = trainctl("report", "digits-sweep-abc123", "--runs-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    shown = done.stdout
    assert "run digits-sweep-abc123: goodput 41.7%" in shown  # 50 of 120 node-seconds
    assert "sweep digits-sweep-abc123: cost per trial" in shown
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in shown.splitlines() if line.startswith("│")]
    assert ["0", "COMPLETE", "0.9710", "30.0", "0.0030", "80.0%"] in rows
    assert ["1", "PRUNED", "", "20.0", "0.0020", "50.0%"] in rows
    assert "spot saved $" in shown
    assert (run / "timeline.png").read_bytes()[:4] == b"\x89PNG"
    assert (run / "trial_cost.png").read_bytes()[:4] == b"\x89PNG"


def test_report_on_a_run_without_a_ledger_is_refused_naming_it(tmp_path: Path):
    (tmp_path / "old-run").mkdir()
    done = trainctl("report", "old-run", "--runs-dir", str(tmp_path))
    assert done.returncode == 2
    assert f"no ledger.json in {tmp_path / 'old-run'}" in done.stderr


def test_report_on_a_damaged_ledger_is_refused_naming_the_file(tmp_path: Path):
    (tmp_path / "cut-short").mkdir()
    (tmp_path / "cut-short" / "ledger.json").write_text('{"run_id": "cut-short", "started": 0')
    done = trainctl("report", "cut-short", "--runs-dir", str(tmp_path))
    assert done.returncode == 2
    assert f"{tmp_path / 'cut-short' / 'ledger.json'} is not a ledger trainctl wrote" in done.stderr
    assert "Traceback" not in done.stderr


def test_report_on_a_launch_run_reads_the_ledger_launch_wrote(tmp_path: Path):
    """Issue 48: `report` on a `launch` run said "runs made before the ledger existed have none"."""
    import json

    from infra.spec.stack_config import load_stack
    from trainctl.jobs.ledger_record import launch_ledger
    from trainctl.launchers.result import LaunchResult, NodeOutcome

    logs = tmp_path / "local-abc123" / "logs" / "launch"
    logs.mkdir(parents=True)
    (logs / "node0.steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in (
        {"t": 105, "step": 10}, {"t": 110, "step": 20})))
    result = LaunchResult("local-abc123", [NodeOutcome("node0", 0, 0), NodeOutcome("node1", 1, 0)])
    launch_ledger("local-abc123", tmp_path / "local-abc123", load_stack("local"), None, (100, 112), result)
    done = trainctl("report", "local-abc123", "--runs-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "run local-abc123: goodput" in done.stdout and "productive_training" in done.stdout
    missing = trainctl("report", "nope-123", "--runs-dir", str(tmp_path))
    assert missing.returncode == 2 and f"no run nope-123 in {tmp_path}" in missing.stderr
    assert "trainctl launch" in missing.stderr and "before the ledger existed" not in missing.stderr
