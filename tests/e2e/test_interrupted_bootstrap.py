"""An interrupted bootstrap stops the remote step in flight at once, process tree and all, and
reports it as interrupted: the step never goes on to finish (or to be called done), whether the
interrupt is Ctrl-C at a terminal or a supervisor's SIGTERM to trainctl alone."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid

import pytest

from conftest import Streamed, trainctl

pytestmark = pytest.mark.e2e


def running(args: str) -> bool:
    ps = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True).stdout
    return any(line.strip() == args for line in ps.splitlines())


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupt_stops_the_remote_step_in_flight_and_calls_it_interrupted(sig, local_stack, tmp_path):
    local_stack("bootsig", nodes=1)
    assert trainctl("init", str(tmp_path)).returncode == 0  # the user's project: its runs/ are kept there
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('hello')\n")
    # a setup step as a user writes one: its own children do the waiting
    seconds = f"61.{uuid.uuid4().int % 1000:03d}"  # names this test's sleep among the machine's
    boot = Streamed("bootstrap", "--stack", "bootsig", "--code", str(code),
                    "--setup", f"echo preparing; sleep {seconds}; echo prepared", cwd=tmp_path)
    deadline = time.monotonic() + 120
    while not running(f"sleep {seconds}"):
        assert boot.proc.poll() is None and time.monotonic() < deadline, "".join(boot.seen)
        time.sleep(0.2)
    if sig == signal.SIGINT:  # Ctrl-C: the terminal signals trainctl's whole process group
        os.killpg(boot.proc.pid, sig)
    else:
        os.kill(boot.proc.pid, sig)
    output = boot.finish(timeout=120)
    assert boot.proc.returncode == 130, output[-2000:]
    assert "setup    interrupted" in output and "setup    done" not in output, output[-2000:]
    assert not running(f"sleep {seconds}")  # stopped on the node, not left to run out
    log = (tmp_path / "runs" / "stack-bootsig" / "bootstrap" / "node0.log").read_text()
    assert "preparing" in log and "prepared\n" not in log  # nothing after the sleep ran either
