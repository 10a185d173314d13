"""What trainctl learns from a torchrun agent's own lines, read from a real torchrun on this
machine (one node, `--standalone`): its group's start, success and failure set the agent's
state, its INFO lines stay in the node's log, and nobody else's INFO lines are hidden."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainctl.launchers.lines import LinePrinter

from trainctl.launchers.result import NodeOutcome
from trainctl.launchers.torchrun_agents import AGENT_LOG_LEVEL


def torchrun_lines(python: Path, tmp_path: Path, code: str) -> list[str]:
    script = tmp_path / "train.py"
    script.write_text(code)
    env = {**os.environ, "LOGLEVEL": AGENT_LOG_LEVEL, "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": "[node0 r${rank}]:"}
    done = subprocess.run([str(python), "-m", "torch.distributed.run", "--nnodes=1", "--nproc-per-node=1",
                           "--standalone", "--max-restarts=0",
                           "--monitor-interval=0.2", "--tee=3", str(script)],
                          capture_output=True, text=True, env=env, timeout=180)
    return (done.stdout + done.stderr).splitlines()


def printed(lines: list[str], tmp_path: Path, agent: bool = True) -> tuple[NodeOutcome, list[str], list[int]]:
    outcome, shown, exits, changes = NodeOutcome("node0", 0), [], [], []
    printer = LinePrinter("node0", tmp_path / "node0.log", shown.append, outcome, exits.append,
                          on_agent_change=(lambda: changes.append(outcome.agent_state)) if agent else None)
    printer.write("".join(f"{line}\n" for line in lines))
    printer.close()
    return outcome, shown, exits


def test_a_finished_group_is_seen_and_the_agents_info_lines_stay_in_the_log(trainer_python, tmp_path):
    lines = torchrun_lines(trainer_python, tmp_path, "print('trained', flush=True)\n")
    outcome, shown, exits = printed(lines, tmp_path)
    assert outcome.agent_state == "finished" and exits == []
    assert "[node0 r0]:trained" in shown
    assert not any("Starting worker group" in line or "successfully finished" in line for line in shown)
    log = (tmp_path / "node0.log").read_text()
    assert "worker group successfully finished" in log and "Starting worker group" in log


def test_a_failed_worker_is_seen_with_its_exit_code(trainer_python, tmp_path):
    lines = torchrun_lines(trainer_python, tmp_path, "import sys\nsys.exit(3)\n")
    outcome, shown, exits = printed(lines, tmp_path)
    assert outcome.agent_state == "failed" and exits == [3]
    assert any("failed (exitcode: 3)" in line for line in shown)  # torchrun's error is news


def test_another_programs_glog_info_lines_are_shown_as_they_are(tmp_path):
    absl = subprocess.run([sys.executable, "-c", "import logging, sys; logging.basicConfig(stream=sys.stdout, "
                           "format='I1125 01:11:16.540000 %(process)d x.py:1] %(message)s', level='INFO'); "
                           "logging.info('loaded 5 shards')"], capture_output=True, text=True).stdout
    _, shown, _ = printed(absl.splitlines(), tmp_path, agent=False)  # `trainctl exec`'s printer
    assert any(line.endswith("loaded 5 shards") for line in shown)
