"""A run's timeline from what it records: the program's step journal cut into startup,
productive training, wasted progress and recovery; phases and the gaps between them; a sweep's
trials on their own nodes; every node's lane covering the wall time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.spec.ledger import NodeRate
from trainctl.jobs.ledger_build import TrialWindow, build_ledger
from trainctl.jobs.ledger_training import training
from trainctl.launchers.lines import LinePrinter
from trainctl.launchers.result import NodeOutcome, RecoveryRecord

NODES = ("node0", "node1")
RATES = tuple(NodeRate(name=n, capacity="spot", usd_per_hour=1.0, on_demand_usd_per_hour=2.5) for n in NODES)


def kinds(intervals) -> list[tuple[str, float, float]]:
    return [(i.kind, i.start, i.end) for i in intervals]


def test_steps_before_the_first_report_are_productive_at_the_segments_pace_and_the_rest_is_startup():
    # 10 steps a second between reports: the first 20 steps took 2 of the first report's 5 s.
    done = training([{"t": 105, "step": 20}, {"t": 106, "step": 30}, {"t": 107, "step": 40}], 100, 110, NODES)
    assert kinds(done.intervals) == [("program_startup", 100, 103), ("productive_training", 103, 105),
                                     ("productive_training", 105, 106), ("productive_training", 106, 107),
                                     ("other", 107, 110)]
    assert done.steps == 40 and done.steps_redone is None and done.events == []


def test_a_failure_turns_the_steps_after_the_checkpoint_into_wasted_progress_and_the_gap_into_recovery():
    records = [{"t": 110, "step": 10}, {"t": 120, "step": 20}, {"t": 130, "step": 30},
               {"t": 133, "failed": -9},  # torchrun saw a worker die, 3 s (3 steps) after step 30
               {"t": 140, "resumed": 20}, {"t": 140.2, "resumed": 20},  # each local rank says so
               {"t": 150, "step": 30}, {"t": 160, "step": 40}]
    done = training(records, 100, 165, NODES)
    assert kinds(done.intervals) == [
        ("productive_training", 100, 110), ("productive_training", 110, 120),
        ("wasted_progress_from_disruption", 120, 130),  # steps 20..30: trained again
        ("wasted_progress_from_disruption", 130, 133),  # after the last report, until the failure
        ("infrastructure_recovery_from_disruption", 133, 140),
        ("productive_training", 140, 150), ("productive_training", 150, 160), ("other", 160, 165)]
    assert done.steps_redone == 10 + 3
    assert [(e.kind, e.time, e.note) for e in done.events] == [("restart", 140, "resumed from step 20")]
    assert sum(i.seconds for i in done.intervals) == 65


def test_a_program_that_reports_no_steps_is_all_startup():
    done = training([], 0, 9, NODES)
    assert kinds(done.intervals) == [("program_startup", 0, 9)] and not done.reported


def test_a_run_whose_program_printed_no_steps_has_unknown_goodput_and_its_recovery_is_recovery(tmp_path: Path):
    """Issue 48: "goodput 0.0%" for a run that succeeded, its 34 s recovery counted as startup."""
    from trainctl.cli.ledger_output import summary_lines

    lost = RecoveryRecord(["node1"], lost_at=20, resumed_at=54, tries=1, furthest_step=None)
    ledger = build_ledger("r", RATES, 0.0, {"up": (0, 5), "train": (10, 80), "down": (80, 85)},
                          tmp_path, "node0", [lost])
    assert ledger.goodput is None and not ledger.steps_reported
    assert ledger.seconds_by_kind()["infrastructure_recovery_from_disruption"] == 34
    assert ledger.seconds_by_kind()["program_startup"] == 70 - 34
    assert "goodput unknown" in summary_lines(ledger)[0] and "0.0%" not in summary_lines(ledger)[0]
    again = type(ledger).from_json(ledger.model_dump_json())
    assert again.goodput is None and again.steps_reported is False


def test_phases_gaps_and_recoveries_make_every_lane_cover_the_wall_time(tmp_path: Path):
    logs = tmp_path / "launch"
    logs.mkdir()
    (logs / "node0.steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in (
        {"t": 15, "step": 10}, {"t": 20, "step": 20}, {"t": 30, "resumed": 20}, {"t": 40, "step": 40})))
    lost = RecoveryRecord(["node1"], lost_at=22, resumed_at=28, tries=1, furthest_step=20, resumed_from_step=20)
    ledger = build_ledger("r", RATES, 0.0, {"up": (0, 5), "bootstrap": (5, 9), "train": (10, 42), "down": (43, 50)},
                          logs, "node0", [lost])
    assert ledger.wall_seconds == 50
    assert all(ledger.lane_seconds(n) == 50 for n in NODES)
    assert ledger.seconds_by_kind()["idle"] == 2  # 9..10 and 42..43
    assert ledger.seconds_by_kind()["wasted_progress_from_disruption"] == 2  # step 20 until the preemption
    assert ledger.seconds_by_kind()["infrastructure_recovery_from_disruption"] == 8
    assert [e.kind for e in ledger.events] == ["preemption", "restart"]
    assert ledger.total_usd == pytest.approx(2 * 50 / 3600, abs=1e-4)
    assert ledger.spot_saving_usd == pytest.approx(2 * 1.5 * 50 / 3600, abs=1e-4)


def test_a_sweeps_trials_are_priced_on_their_own_nodes_and_the_rest_of_the_time_is_idle(tmp_path: Path):
    """Trials of earlier runs of a resumed sweep keep their cost."""
    trials = []
    # Trial 2 ran in an earlier run of the sweep (resumed since): priced, not on this timeline.
    for number, node, (a, b) in ((0, "node0", (10, 30)), (1, "node1", (12, 22)), (2, "node0", (-50, -10))):
        logs = tmp_path / f"trial-{number}" / "logs"
        logs.mkdir(parents=True)
        (logs / f"{node}.log").write_text("")
        (logs / f"{node}.steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in (
            {"t": b - 4, "step": 5}, {"t": b - 3, "resumed": 0}, {"t": b - 1, "step": 5})))
        trials.append(TrialWindow(number, "COMPLETE", 0.9 + number / 100, a, b, logs))
    ledger = build_ledger("s", RATES, 0.0, {"up": (0, 5), "sweep": (5, 35), "down": (35, 40)},
                          tmp_path / "logs" / "launch", "node0", (), trials)
    assert [(t.number, t.seconds) for t in ledger.trials] == [(0, 20), (1, 10), (2, 40)]
    assert [t.usd for t in ledger.trials] == pytest.approx([20 / 3600, 10 / 3600, 40 / 3600], abs=1e-6)
    assert all(ledger.lane_seconds(n) == 40 for n in NODES)
    assert [(e.time, e.note) for e in ledger.events] == [(19, "trial 1 resumed from step 0"),
                                                         (27, "trial 0 resumed from step 0")]
    assert ledger.seconds_by_kind()["idle"] == (5 + 5 + 7 + 13) / 2  # node0: 5..10, 30..35; node1: 5..12, 22..35


def test_the_launcher_journals_each_progress_line_with_its_time(tmp_path: Path):
    outcome = NodeOutcome("node1", 1)
    printer = LinePrinter("node1", tmp_path / "node1.log", lambda line: None, outcome)
    printer.write("[node1 r1]:epoch 1/3 loss 0.5 step 15\n[node1 r1]:rank 1: resumed from epoch 1 (step 15)\n"
                  "[node1] ERROR ... failed (exitcode: -9) local_rank: 0\n")
    printer.close()
    records = [json.loads(line) for line in (tmp_path / "node1.steps.jsonl").read_text().splitlines()]
    assert [{k: v for k, v in r.items() if k != "t"} for r in records] == [
        {"step": 15}, {"resumed": 15}, {"failed": -9}]
    assert all(isinstance(r["t"], float) for r in records)


def test_a_lower_step_count_is_a_restart_from_scratch_only_after_a_failure():
    behind = [{"t": 10, "step": 20}, {"t": 11, "step": 19}, {"t": 12, "step": 30}]  # another rank's count
    assert [e.kind for e in training(behind, 0, 15, NODES).events] == []
    crashed = [{"t": 10, "step": 20}, {"t": 10, "failed": 1}, {"t": 14, "step": 5}, {"t": 15, "step": 25}]
    done = training(crashed, 0, 16, NODES)
    assert [e.note for e in done.events] == ["resumed from step 0"]
    assert done.steps_redone == 20  # no checkpoint: everything again
    # 20 steps a second (the run's pace): its first 20 steps took the last second before step 20
    assert kinds(done.intervals)[:3] == [("program_startup", 0, 9), ("wasted_progress_from_disruption", 9, 10),
                                         ("infrastructure_recovery_from_disruption", 10, 14)]


def test_each_node_bootstraps_in_its_own_lane_and_then_waits_for_the_others(tmp_path: Path):
    ledger = build_ledger("r", RATES, 0.0, {"up": (0, 5), "bootstrap": (5, 9), "down": (9, 10)},
                          tmp_path, "node0", bootstrapped={"node0": 7.5, "node1": 8.9})
    lanes = {n: [(i.kind, i.start, i.end) for i in ledger.intervals if n in i.nodes] for n in NODES}
    assert lanes["node0"] == [("provisioning", 0, 5), ("bootstrap", 5, 7.5), ("idle", 7.5, 9), ("teardown", 9, 10)]
    assert lanes["node1"] == [("provisioning", 0, 5), ("bootstrap", 5, 8.9), ("idle", 8.9, 9), ("teardown", 9, 10)]


def test_a_phase_the_ledger_does_not_know_is_an_interval_of_its_own_name(tmp_path: Path):
    ledger = build_ledger("r", RATES, 0.0, {"up": (0, 5), "data staging": (5, 7), "warm caches": (7, 8),
                                            "down": (8, 9)}, tmp_path, "node0")
    assert ledger.kinds() == ["provisioning", "data_staging", "teardown", "warm caches"]
    assert all(ledger.lane_seconds(n) == 9 for n in NODES)


def test_steps_trained_again_are_counted_at_every_restart():
    # Step 30 reached, back to 20; step 25 reached, back to 20 again: 10 + 5 steps redone.
    records = [{"t": 10, "step": 10}, {"t": 30, "step": 30}, {"t": 30, "failed": 1}, {"t": 35, "resumed": 20},
               {"t": 40, "step": 25}, {"t": 40, "failed": 1}, {"t": 45, "resumed": 20}, {"t": 60, "step": 40}]
    done = training(records, 0, 61, NODES)
    assert done.steps == 40 and done.steps_redone == 15
    assert [e.time for e in done.events] == [35, 45]


def test_a_program_that_saved_its_step_after_the_failure_lost_nothing():
    # As the reference trainer answers a lost peer: `stopping at step 45; checkpoint saved`.
    records = [{"t": 10, "step": 15}, {"t": 12, "step": 30}, {"t": 14, "step": 45}, {"t": 14.9, "failed": -9},
               {"t": 15, "step": 45}, {"t": 19, "failed": 1}, {"t": 29, "resumed": 45}, {"t": 31, "step": 60}]
    done = training(records, 0, 32, NODES)
    assert done.steps_redone == 0
    assert "wasted_progress_from_disruption" not in {i.kind for i in done.intervals}
    assert ("infrastructure_recovery_from_disruption", 15, 29) in kinds(done.intervals)
    assert ("other", 14, 15) in kinds(done.intervals)  # stopping and saving


def test_a_stop_line_repeating_its_step_lost_nothing_even_seen_before_the_failure():
    records = [{"t": 10, "step": 15}, {"t": 12, "step": 30}, {"t": 13, "step": 30}, {"t": 13.2, "failed": -9},
               {"t": 20, "resumed": 30}, {"t": 22, "step": 45}]
    done = training(records, 0, 23, NODES)
    assert done.steps_redone == 0
    assert ("infrastructure_recovery_from_disruption", 13, 20) in kinds(done.intervals)
