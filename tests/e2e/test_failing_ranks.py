"""Scripts that fail on one rank, as users write them, under real torchrun on the local stack.

A rank that exits 1 (or aborts at exit) after the others finished used to be acted on only when
torchrun's 300 s exit barrier ran out, on every attempt; now the run reacts as soon as it sees
both, and reruns the job. A failure no retry can fix (a missing module) is neither restarted by
torchrun nor rerun. Each test prints the delay from the failed worker's line to trainctl's stop."""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bootstrap.plan import BootstrapSpec
from bootstrap.runner import bootstrap
from conftest import REPO
from trainctl.launchers.result import LaunchResult
from trainctl.launchers.spec import LaunchSpec
from trainctl.launchers.ssh.supervisor import launch

pytestmark = pytest.mark.e2e

# Scripts as users write them, with their requirements.
SCRIPTS = REPO / "examples" / "failing-ranks"
# Only keeps a broken build from hanging: before the fix each attempt took 300 s.
GUARD_SECONDS = 240
WORKER_FAILED = re.compile(r"^\[node\d\] .*failed \(exitcode: -?\d+\)")
STOPPED = re.compile(r"^\[trainctl\] .*: stopping run ")


@pytest.fixture
def stack_with_scripts(local_stack, tmp_path):
    inventory = local_stack("failrank", nodes=2)
    bootstrap(inventory, BootstrapSpec(code_dir=str(SCRIPTS), requirements="requirements.txt"), tmp_path / "boot")
    return inventory


def launched(inventory, tmp_path: Path, script: str, **policy) -> tuple[LaunchResult, list[tuple[float, str]]]:
    seen: list[tuple[float, str]] = []
    lock = threading.Lock()

    def echo(line: str) -> None:
        with lock:
            seen.append((time.monotonic(), line))

    spec = LaunchSpec(run_id=f"fr-{script.split('.')[0].replace('_', '-')}", command=("python", script), **policy)
    pool = ThreadPoolExecutor(1)
    try:
        result = pool.submit(launch, inventory, spec, tmp_path / "logs", echo).result(timeout=GUARD_SECONDS)
    finally:
        pool.shutdown(wait=False)  # a launch past the guard ends with its stack, at teardown
    return result, seen


def reaction_delays(seen: list[tuple[float, str]]) -> list[float]:
    """Per attempt, seconds from the first failed worker's line to trainctl's stop."""
    delays, failed_at = [], None
    for at, line in seen:
        if failed_at is None and WORKER_FAILED.search(line):
            failed_at = at
        elif failed_at is not None and STOPPED.search(line):
            delays.append(round(at - failed_at, 2))
            failed_at = None
    return delays


def node_logs(tmp_path: Path) -> str:
    return "".join(p.read_text() for p in (tmp_path / "logs").glob("node*.log"))


def test_a_rank_that_exits_1_after_the_others_finished_is_acted_on_at_once_on_every_attempt(
        stack_with_scripts, tmp_path):
    result, seen = launched(stack_with_scripts, tmp_path, "exit_on_rank1.py", job_retries=1)
    lines = [line for _, line in seen]
    print("reaction delays per attempt (s):", reaction_delays(seen))
    assert not result.ok and result.attempts == 2
    stops = [line for line in lines if line.startswith("[trainctl] node1: its worker ended (exit code 1) "
                                                       "after node0 finished: torchrun cannot restart")]
    assert len(stops) == 2, lines  # once per attempt, torchrun's restarts left notwithstanding
    assert "[trainctl] job failed; rerun 1/1 from the latest checkpoint" in lines
    assert len(reaction_delays(seen)) == 2
    assert "Error waiting on exit barrier" not in node_logs(tmp_path)
    assert [o.node for o in result.failures()] == ["node1"]  # node0, stopped in its barrier, is not blamed


def test_a_rank_that_aborts_at_exit_after_the_others_finished_is_rerun_at_once(stack_with_scripts, tmp_path):
    result, seen = launched(stack_with_scripts, tmp_path, "abort_at_exit.py", job_retries=1)
    lines = [line for _, line in seen]
    print("reaction delays per attempt (s):", reaction_delays(seen))
    assert not result.ok and result.attempts == 2
    assert sum("[node1 r1]:rank 1 leaving" in line for line in lines) == 2  # its work was done each time
    assert sum(line.startswith("[trainctl] node1: its worker ended (killed by SIGABRT) after node0 finished")
               for line in lines) == 2, lines
    assert "[trainctl] job failed; rerun 1/1 from the latest checkpoint" in lines
    assert "Error waiting on exit barrier" not in node_logs(tmp_path)


def test_a_missing_module_is_neither_restarted_nor_rerun_and_is_named(stack_with_scripts, tmp_path):
    result, seen = launched(stack_with_scripts, tmp_path, "missing_module.py", max_restarts=5, job_retries=3)
    lines = [line for _, line in seen]
    assert not result.ok and result.attempts == 1
    tracebacks = [line for line in lines if line.endswith("ModuleNotFoundError: No module named 'wandb'")]
    assert len(tracebacks) == 2  # one per rank: torchrun restarted nothing
    assert "[trainctl] no retry can fix ModuleNotFoundError: No module named 'wandb': no rerun" in lines
    assert "module wandb is not installed on the nodes" in result.describe_failures()
