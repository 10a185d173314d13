"""The command that stops a run on a node, run for real on this machine's processes: what carries
the run's marker gets SIGTERM and time to save, a torchrun agent is not waited for once its
workers are gone, and whatever is left at the end is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from trainctl.launchers.ssh.commands import stop_command

# Leaves on SIGTERM only after "saving" (a trainer writing its checkpoint).
SAVING_PROGRAM = textwrap.dedent("""
    import signal, sys, time
    def leave(*_):
        time.sleep(0.3)
        open(sys.argv[1], "w").write("saved")
        sys.exit(143)
    signal.signal(signal.SIGTERM, leave)
    print("up", flush=True)
    time.sleep(600)
""")
# Ignores SIGTERM: only SIGKILL ends it.
STUBBORN_PROGRAM = textwrap.dedent("""
    import signal, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("up", flush=True)
    time.sleep(600)
""")


@pytest.fixture
def run_id():
    return f"stop-test-{uuid.uuid4().hex[:8]}"


def start(argv: list[str], run_id: str) -> subprocess.Popen:
    proc = subprocess.Popen(argv, env={**os.environ, "TRAINCTL_RUN_ID": run_id}, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "up\n"  # its handler is in place
    return proc


def stop(run_id: str, grace: float) -> None:
    # The timeout only catches a hang: with `grace` far above it, returning at all proves that
    # nothing was waited for until the grace ran out.
    subprocess.run(["bash", "-c", stop_command(run_id, grace=grace)], check=True, timeout=120)


def test_an_agent_is_killed_once_its_workers_have_saved_and_left(tmp_path: Path, run_id: str):
    agent_script = tmp_path / "torchrun"  # run as torchrun is: `python .../torchrun ...`
    agent_script.write_text(f"#!{sys.executable}\n{STUBBORN_PROGRAM}")
    agent_script.chmod(0o755)
    agent = start([str(agent_script), "--nnodes=3"], run_id)
    saved = tmp_path / "checkpoint"
    worker = start([sys.executable, "-c", SAVING_PROGRAM, str(saved)], run_id)
    try:
        stop(run_id, grace=600)
        assert saved.read_text() == "saved"  # the worker had its time to save
        assert worker.wait(5) == 143
        assert agent.wait(5) == -signal.SIGKILL  # not waited for until the grace ran out
    finally:
        for proc in (agent, worker):
            proc.kill()
            proc.wait()


def test_a_program_that_is_not_an_agent_gets_its_grace_then_is_killed(tmp_path: Path, run_id: str):
    saved = tmp_path / "checkpoint"
    saving = start([sys.executable, "-c", SAVING_PROGRAM, str(saved)], run_id)
    stubborn = start([sys.executable, "-c", STUBBORN_PROGRAM], run_id)
    bystander = start([sys.executable, "-c", STUBBORN_PROGRAM], "another-run")
    try:
        stop(run_id, grace=1.0)
        assert saved.read_text() == "saved" and saving.wait(5) == 143
        assert stubborn.wait(5) == -signal.SIGKILL
        assert bystander.poll() is None  # another run's process is left alone
    finally:
        for proc in (saving, stubborn, bystander):
            proc.kill()
            proc.wait()
