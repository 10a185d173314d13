"""Checkpoint writes and reads, as the reference trainers report them on the channel their steps
use, are cut out of training as Google's unproductive checkpoint save and restore time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainctl.jobs.ledger_training import training
from trainctl.launchers.lines import LinePrinter
from trainctl.launchers.result import NodeOutcome
from trainers import checkpoint

NODES = ("node0", "node1")
SAVE, RESTORE = "unproductive_checkpoint_save_time", "unproductive_checkpoint_restore_time"


def kinds(intervals) -> list[tuple[str, float, float]]:
    return [(i.kind, i.start, i.end) for i in intervals]


def test_the_launcher_journals_the_trainers_checkpoint_times_and_not_as_steps(tmp_path: Path):
    printer = LinePrinter("node0", tmp_path / "node0.log", lambda line: None, NodeOutcome("node0", 0))
    printer.write(f"[node0 r0]:rank 0: resumed from epoch 2 batch 0 (step 30); {checkpoint.restored_line(0.25)}\n"
                  "[node0 r0]:epoch 3/3 loss 0.1 test_acc 0.9 step 45\n"
                  f"[node0 r0]:rank 0: {checkpoint.saved_line(1.5)}\n")
    printer.close()
    records = [json.loads(line) for line in (tmp_path / "node0.steps.jsonl").read_text().splitlines()]
    assert [{k: v for k, v in r.items() if k != "t"} for r in records] == [
        {"checkpoint_restore": 0.25}, {"resumed": 30}, {"step": 45}, {"checkpoint_save": 1.5}]


def test_checkpoint_writes_are_cut_out_of_productive_time():
    records = [{"t": 110, "step": 10}, {"t": 112, "checkpoint_save": 2.0},
               {"t": 120, "step": 20}, {"t": 121, "checkpoint_save": 1.0}]
    done = training(records, 100, 125, NODES)
    assert kinds(done.intervals) == [("productive_training", 100, 110), (SAVE, 110, 112),
                                     ("productive_training", 112, 120), (SAVE, 120, 121), ("other", 121, 125)]
    assert all(i.nodes == NODES for i in done.intervals if i.kind == SAVE)  # the others wait for it


def test_reading_the_checkpoint_after_a_failure_is_cut_out_of_the_recovery():
    records = [{"t": 110, "step": 10}, {"t": 110.5, "failed": 1},
               {"t": 119.6, "checkpoint_restore": 0.6}, {"t": 119.6, "resumed": 10}, {"t": 125, "step": 20}]
    done = training(records, 100, 126, NODES)
    assert (RESTORE, 119.0, 119.6) in kinds(done.intervals)
    assert ("infrastructure_recovery_from_disruption", 110.5, 119.0) in kinds(done.intervals)
    assert sum(i.seconds for i in done.intervals) == pytest.approx(26)
