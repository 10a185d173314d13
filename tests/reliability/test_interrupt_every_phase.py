"""Ctrl-C, SIGTERM and kill -9 of `trainctl run` in each of its phases.

The signal is sent the moment the run prints the line that opens the phase, so it lands inside
that phase (each lasts at least a second here: `up` builds 12 nodes, `launch` connects to the
nodes and starts the program, `collect` downloads a 24 MiB model). SIGINT and SIGTERM must tear
the stack down on their own (during `down` they are only acknowledged: teardown finishes
first); after kill -9, `trainctl down` must. Either way nothing of the stack may remain: no
namespace, veth, bridge, iptables rule, process, emulator, state, lock or partial download.

What is tested is trainctl's, so the program is the quick trainer (tests/data/quick_trainer: no
torch, started directly on each node), except where torchrun's processes are what a signal must
not leave behind: while its ranks train (every signal), and Ctrl-C while torchrun starts, which
reaches the ssh sessions of its agents and of the rendezvous store that outlives them. kill -9
and SIGTERM during `launch` reach trainctl alone, and its stop of the nodes is the one that the
`training` cases prove against torchrun's processes.
`python tests/reliability/loop.py` runs this file over and over and tallies the outcomes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import Streamed, experiment, leftovers, trainctl
from quick_runs import QUICK_TRAINER, quick_experiment, quick_model_is_whole
from trainctl.jobs.experiment import ttl_guard
from trainctl.jobs.stack_run import PhaseClock, RunReport
from trainctl.launchers.interrupts import signals_as_interrupt

MODEL_MB = 24  # over collect's SMALL_FILE: streamed to disk, where half a file could be left

# phase: (the line that opens it, nodes, trainer arguments)
PHASES = {
    "up": (r"\[trainctl\] bridge tcb", 12, "--epochs 1"),
    "bootstrap": (r"\[trainctl\] bootstrap …", 2, "--epochs 1"),
    "launch": (r"\[trainctl\] train …", 2, "--epochs 1"),
    "training": (r"\[node\d r0\]:epoch 1/", 2, "--epochs 30 --epoch-sleep 1"),
    "collect": (r"\[trainctl\] collect …", 2, f"--epochs 1 --model-mb {MODEL_MB}"),
    "down": (r"\[trainctl\] down …", 2, "--epochs 1"),
}
SIGNALS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM, "SIGKILL": signal.SIGKILL}


# SIGINT and SIGTERM reach the same handler (signals_as_interrupt); they differ only in that
# Ctrl-C also hits the run's children (ssh, rsync, torchrun's sessions). Phases without such
# children in flight (up, collect, down) are tried with Ctrl-C and kill -9 only.
SAME_HANDLER = {("up", "SIGTERM"), ("collect", "SIGTERM"), ("down", "SIGTERM")}
# The cases run with the digits trainer under torchrun (see the module's docstring).
UNDER_TORCHRUN = {("training", "SIGINT"), ("training", "SIGTERM"), ("training", "SIGKILL"), ("launch", "SIGINT")}


@pytest.mark.e2e
@pytest.mark.parametrize("phase, sig", [(p, s) for p in PHASES for s in SIGNALS if (p, s) not in SAME_HANDLER])
def test_signal_in_phase_leaves_nothing(phase, sig, tmp_path, trainctl_home):
    opens, nodes, args = PHASES[phase]
    make = experiment if (phase, sig) in UNDER_TORCHRUN else quick_experiment
    exp = make(tmp_path, args, nodes=nodes, name=f"sig-{phase}")
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
    assert leftovers(run_id) == [], output[-2000:]
    if phase == "collect":  # an interrupted download leaves no half a model among the artifacts
        run_dir = tmp_path / "runs" / run_id
        assert list(run_dir.glob(".collecting-*")) == []
        model = run_dir / "model" / "model.bin"
        if model.exists():  # the signal came once it had landed: it must be whole
            assert quick_model_is_whole(model, MODEL_MB), f"{model}: {model.stat().st_size} bytes, not whole"


def test_the_collect_cases_tell_a_whole_model_from_half_of_one(tmp_path):
    made = subprocess.run([sys.executable, str(QUICK_TRAINER / "quick_trainer.py"), "--job-dir", str(tmp_path),
                           "--epochs", "1", "--model-mb", "2"], capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stdout + made.stderr
    model = tmp_path / "model" / "model.bin"
    assert quick_model_is_whole(model, 2)
    whole = model.read_bytes()
    model.write_bytes(whole[: len(whole) // 2])
    assert not quick_model_is_whole(model, 2)
    model.write_bytes(whole[:-1] + bytes([whole[-1] ^ 1]))  # all of it there, one byte wrong
    assert not quick_model_is_whole(model, 2)


class _SignalsWhileFinalized:
    """Sends SIGTERM to this process from its finalizer, where Python cannot raise."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(10_000):  # the handler runs between these bytecodes, inside __del__
            pass


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_signal_swallowed_by_a_finalizer_still_ends_the_phase_and_never_teardown(tmp_path):
    # The loop caught this: SIGTERM during `collect` landed in a weakref callback, Python printed
    # "Exception ignored" and the run went on to succeed as if never interrupted.
    phase = PhaseClock(RunReport("r", tmp_path), echo=lambda _: None)
    went_on = False
    with signals_as_interrupt():
        with pytest.raises(KeyboardInterrupt, match="signal SIGTERM"):
            with phase("collect"):
                _SignalsWhileFinalized()  # dropped at once
                went_on = True
        with phase("down", interruptible=False):
            pass
    assert went_on, "the signal was not swallowed, so this test proved nothing"


class _SignalsWhileNamed:
    """Sends SIGTERM to this process while its owner class is being created: Python 3.11 wraps
    what the handler raises there in a RuntimeError ("Error calling __set_name__")."""

    def __set_name__(self, owner: type, name: str) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(10_000):
            pass


def test_a_signal_turned_into_another_error_by_what_it_interrupted_still_ends_the_phase_as_an_interrupt(tmp_path):
    # The loop caught this too: SIGTERM during an import in `collect` surfaced as
    # "RuntimeError: Error calling __set_name__ on 'Field' instance" and the run exited 1.
    phase = PhaseClock(RunReport("r", tmp_path), echo=lambda _: None)
    with signals_as_interrupt():
        with pytest.raises(KeyboardInterrupt, match="signal SIGTERM") as raised:
            with phase("collect"):
                type("Imported", (), {"field": _SignalsWhileNamed()})
    if sys.version_info < (3, 12):  # 3.12 no longer wraps it: the KeyboardInterrupt comes out as it is
        assert isinstance(raised.value.__cause__, RuntimeError), "not wrapped: this test proved nothing"


def test_a_signal_the_parent_ignores_stays_ignored_as_nohup_expects():
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with signals_as_interrupt():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            assert callable(signal.getsignal(signal.SIGTERM))  # the others are caught
    finally:
        signal.signal(signal.SIGHUP, before)


def test_the_ttl_ends_a_run_whose_sigint_is_ignored_as_a_scripts_background_job_has():
    # The TTL timer interrupts the main thread. A simulated SIGINT (`_thread.interrupt_main`)
    # would do nothing here, and even where SIGINT is handled would wait out the sleep.
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with (signals_as_interrupt(),
              pytest.raises(KeyboardInterrupt, match="TTL of 0.0002 h reached"),
              ttl_guard(0.0002, echo=lambda _: None)):  # 0.72 s
            time.sleep(60)
    finally:
        signal.signal(signal.SIGINT, before)
