"""Ctrl-C, SIGTERM and kill -9 of `trainctl run` in each of its phases.

The signal is sent the moment the run prints the line that opens the phase, so it lands inside
that phase (each lasts at least a second here: `up` builds 12 nodes, `launch` starts torchrun,
`collect` imports gcsfs and downloads). SIGINT and SIGTERM must tear the stack down on their
own (during `down` they are only acknowledged: teardown finishes first); after kill -9,
`trainctl down` must. Either way nothing of the stack may remain: no namespace, veth, bridge,
iptables rule, process, emulator, state, lock or partial download.
`python tests/reliability/loop.py` runs this file over and over and tallies the outcomes."""

from __future__ import annotations

import os
import signal

import pytest

from conftest import Streamed, experiment, leftovers, trainctl

pytestmark = pytest.mark.e2e

# phase: (the line that opens it, nodes, trainer arguments)
PHASES = {
    "up": (r"\[trainctl\] bridge tcb", 12, "--epochs 1"),
    "bootstrap": (r"\[trainctl\] bootstrap …", 2, "--epochs 1"),
    "launch": (r"\[trainctl\] train …", 2, "--epochs 1"),
    "training": (r"\[node\d r0\]:epoch 1/", 2, "--epochs 30 --epoch-sleep 1"),
    "collect": (r"\[trainctl\] collect …", 2, "--epochs 1"),
    "down": (r"\[trainctl\] down …", 2, "--epochs 1"),
}
SIGNALS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM, "SIGKILL": signal.SIGKILL}


@pytest.mark.parametrize("sig", list(SIGNALS))
@pytest.mark.parametrize("phase", list(PHASES))
def test_signal_in_phase_leaves_nothing(phase, sig, tmp_path, trainctl_home):
    opens, nodes, args = PHASES[phase]
    exp = experiment(tmp_path, args, nodes=nodes, name=f"sig-{phase}")
    run, run_id = Streamed.run(exp, tmp_path / "runs")
    run.wait_for(opens)
    if sig == "SIGINT":  # Ctrl-C: the terminal signals the whole foreground group (ssh, rsync…)
        os.killpg(run.proc.pid, signal.SIGINT)
    else:  # a supervisor's SIGTERM, or kill -9, reaches trainctl alone
        run.proc.send_signal(SIGNALS[sig])
    output = run.finish(timeout=180)
    if sig == "SIGKILL":
        assert run.proc.returncode == -signal.SIGKILL
        down = trainctl("down", "--stack", run_id)
        assert down.returncode == 0, down.stdout + down.stderr
    elif phase == "down":
        assert "teardown in progress: it finishes first" in output, output[-2000:]
        assert run.proc.returncode == 0, output[-2000:]  # the run itself had succeeded
    else:
        assert run.proc.returncode == 130, output[-2000:]
        assert "interrupted" in output
    assert leftovers(run_id) == []
    if phase == "collect":  # an interrupted download leaves no half a model among the artifacts
        assert not (tmp_path / "runs" / run_id / "model").exists()
