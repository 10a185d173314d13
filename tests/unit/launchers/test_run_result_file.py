"""The result file `trainctl status --run` prints: a failure's exit_code is the program's, the one
its error message names (issue 48: `exit_code: -1` beside "exit code 1")."""

from __future__ import annotations

import json
from pathlib import Path

from trainctl.launchers.result import LaunchResult, NodeOutcome, write_result
from trainctl.launchers.run_logs import outcome


def test_a_failures_exit_code_is_the_programs_not_the_stopped_sessions(tmp_path: Path):
    log_dir = tmp_path / "r1" / "logs" / "launch"
    log_dir.mkdir(parents=True)
    stranded = NodeOutcome("node1", 1, exit_code=-1, worker_exit_code=1,
                           error="its worker ended (exit code 1) after node0 finished: torchrun cannot restart "
                                 "a group whose other members have left")
    lost = NodeOutcome("node2", 2, exit_code=-1, error="node lost: no SSH heartbeat for about 30 s")
    direct = NodeOutcome("node3", 3, exit_code=3)
    direct.worker_tail.append("[node3 r3]:ValueError: bad value")
    write_result(log_dir, LaunchResult("r1", [NodeOutcome("node0", 0, 0), stranded, lost, direct]))
    failures = {f["node"]: f for f in json.loads(outcome(tmp_path, "r1"))["failures"]}
    assert failures["node1"]["exit_code"] == 1 and "exit code 1" in failures["node1"]["error"]
    assert failures["node2"]["exit_code"] is None  # its command ended with no status
    assert failures["node3"]["exit_code"] == 3 and "ValueError: bad value" in failures["node3"]["error"]
