"""Detached runs: the whole lifecycle of `trainctl run` carried out by a controller that is not
the user's process.

`submit` (the user's side) makes a controller (infra/providers/controllers.py), starts trainctl
on it over SSH (host key pinned) and returns once the controller has taken the run. `serve` (the
controller's side) is `run_experiment`, the attached run's own code: up, bootstrap, launch,
supervise with the same restart, recovery and budget rules, collect, down; then it records how
the run ended and removes its controller. Both sides meet in the run's record
(detached_record.py). `observe` is what `status` and `ls` see: a run whose controller is gone
before the run ended is lost, and is torn down there and then, so nothing bills unwatched (a new
controller taking it over from its checkpoint is not built yet).
"""

from __future__ import annotations

import os
import shlex
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from infra.errors import ConfigError, ProvisionError, RunCancelled, TrainctlError
from infra.providers import controllers, realizers
from infra.providers.inventory import Inventory
from infra.providers.stack_home import state_dir
from infra.spec.cluster import ClusterSpec
from trainctl.jobs import detached_record as records
from trainctl.jobs.detached_record import DetachedRecord

if TYPE_CHECKING:
    from trainctl.jobs.experiment_spec import Experiment

ACCEPT_SECONDS = 120.0  # python, pydantic and the stack file read on the controller's first start
CANCEL_POLL_SECONDS = 0.5
SSH_SECONDS = 30.0
# Past this a submission nobody took is abandoned: its submitter gave up by then (or was killed).
SUBMIT_SECONDS = 20.0 + SSH_SECONDS + ACCEPT_SECONDS  # the controller's start, the SSH, the taking
PROBE_SECONDS = 5.0  # as `trainctl status` probes nodes: a machine that went away is not waited on


def controller_name(run_id: str) -> str:
    return f"ctl-{run_id}"


def submit(experiment: Path, spec: ClusterSpec, run_id: str, runs_dir: Path, serve_args: list[str],
           echo: Callable[[str], None]) -> DetachedRecord:
    """Hand the run to a controller of its own; returns once the controller has taken it."""
    ctl = controllers.for_spec(spec)  # a target without one refuses here, before anything is made
    now = time.time()
    record = DetachedRecord(run_id=run_id, provider=spec.provider, controller=controller_name(run_id),
                            state="submitted", submitted=now, updated=now).write(runs_dir)
    records.remember(runs_dir, run_id)
    try:
        inventory = ctl.start(record.controller, lambda m: echo(f"[trainctl] {m}"))
        serve = [sys.executable, "-m", "trainctl.cli", "controller-serve", str(experiment.resolve()),
                 "--run-id", run_id, "--runs-dir", str(runs_dir.resolve()), *serve_args]
        _on_controller(inventory, ctl.on_target(_serving(serve, runs_dir / run_id), os.getcwd()))
        return _accepted(runs_dir, run_id, ctl, record.controller)
    except BaseException as exc:
        ctl.remove(record.controller, lambda m: echo(f"[trainctl] {m}"))
        record.moved(runs_dir, "failed", detail=f"not accepted: {exc}")
        raise


def _serving(argv: list[str], run_dir: Path) -> str:
    """The controller process's line: this trainctl's code, home and cache, its output kept with
    the run; in a session of its own, so the SSH session that started it may end."""
    code = Path(__file__).resolve().parents[2]
    keep = {k: v for k, v in os.environ.items() if k.startswith("TRAINCTL_") or k == "PATH"}
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in {**keep, "PYTHONPATH": str(code)}.items())
    log = shlex.quote(str((run_dir / "controller.out").resolve()))
    return f"exec env {env} {shlex.join(argv)} >>{log} 2>&1 </dev/null"


def _on_controller(inventory: Inventory, line: str, *, detach: bool = True, seconds: float = SSH_SECONDS) -> int:
    """Run `line` on the controller over SSH (its pinned host key); detached: started in a
    session of its own, the call returning at once."""
    from bootstrap.ssh import open_connection

    command = f"setsid -f {line} </dev/null >/dev/null 2>&1" if detach else line
    with open_connection(inventory, inventory.rank0, deadline=time.monotonic() + seconds) as conn:
        return conn.run(command, hide=True, warn=True, in_stream=False).exited


def _accepted(runs_dir: Path, run_id: str, ctl: controllers.ControllerRealizer, name: str) -> DetachedRecord:
    """The record once the controller has taken the run (or said why not)."""
    deadline = time.monotonic() + ACCEPT_SECONDS
    while time.monotonic() < deadline:
        record = records.read(runs_dir, run_id)
        if record and record.state != "submitted":
            if record.state == "failed":
                raise ProvisionError(f"controller {name} refused run {run_id}: {record.detail}")
            return record
        if not ctl.exists(name):
            break
        time.sleep(CANCEL_POLL_SECONDS)
    raise ProvisionError(f"controller {name} did not take run {run_id} "
                         f"(its output: {runs_dir / run_id / 'controller.out'})")


def serve(load: Callable[[], Experiment], run_id: str, runs_dir: Path) -> None:
    """The controller's side: the run, start to end, how it ended recorded, then the controller's
    own removal, whatever happened."""
    record = records.read(runs_dir, run_id)
    if record is None:
        raise ConfigError(f"no detached run {run_id} under {runs_dir}")
    try:
        _serve(load, record, runs_dir)
    finally:
        controllers.controller(record.provider).remove(record.controller, lambda _: None)  # ends this process


def _serve(load: Callable[[], Experiment], record: DetachedRecord, runs_dir: Path) -> None:
    from trainctl.jobs.experiment import run_experiment

    run_id = record.run_id
    log_path = runs_dir / run_id / "logs" / "controller.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a", buffering=1) as log:
        def echo(line: str) -> None:
            log.write(line.rstrip("\n") + "\n")

        state, detail = "failed", ""
        try:
            exp = load()
            record = record.moved(runs_dir, "running", pid=os.getpid())
            run_experiment(exp, runs_dir=runs_dir, run_id=run_id, echo=echo,
                           controls=lambda run: _watch_cancel(runs_dir, run_id, run.spending.stop,
                                                              lambda: _trained(run.report.phases), echo))
            state = "succeeded"
        except RunCancelled as exc:
            state, detail = "cancelled", str(exc)
        except KeyboardInterrupt as exc:
            state = "cancelled" if records.cancel_asked(runs_dir, run_id) else "failed"
            detail = f"interrupted: {exc}"
        except Exception as exc:  # a bug too is said in the record, not only in controller.out
            detail = str(exc) if isinstance(exc, TrainctlError) else f"{type(exc).__name__}: {exc}"
            raise
        finally:
            echo(f"[trainctl] detached run {run_id} {state}{': ' + detail if detail else ''}")
            record.moved(runs_dir, state, detail=detail)


def _trained(phases: dict[str, float]) -> bool:
    """Whether the run's job (or sweep) is over: what is left, collect and down, goes on."""
    return "train" in phases or "sweep" in phases


def _watch_cancel(runs_dir: Path, run_id: str, stop: Callable[[str], None], trained: Callable[[], bool],
                  echo: Callable[[str], None]) -> threading.Thread:
    """Stop the run once a cancel is asked for (`trainctl cancel`, from any machine); once its
    job is over the cancel only waits for the collect and teardown under way, which stopping
    would cut short."""
    def watch() -> None:
        while not records.cancel_asked(runs_dir, run_id):
            time.sleep(CANCEL_POLL_SECONDS)
        if trained():
            echo("[trainctl] cancel asked after the job ended: collecting and tearing down as planned")
        else:
            stop("cancelled by `trainctl cancel`")

    watcher = threading.Thread(target=watch, name="cancel-watch", daemon=True)
    watcher.start()
    return watcher


def observe(runs_dir: Path, run_id: str, echo: Callable[[str], None]) -> DetachedRecord | None:
    """The run's record as it stands; a run whose controller is gone is found lost here, and
    its stack torn down. None: not a detached run."""
    record = records.read(runs_dir, run_id)
    if record is None or record.terminal or _controller_alive(record):
        return record
    with records.locked(runs_dir, run_id):  # one observer tears it down; the others wait and read
        record = records.read(runs_dir, run_id) or record  # it may have ended meanwhile
        if record.terminal:
            return record
        echo(f"[trainctl] run {run_id}: its controller {record.controller} is gone; tearing the run down")
        if state_dir(run_id).is_dir() and realizers.for_stack(run_id).down(  # up, or its `down` cut short
                run_id, force=False, progress=lambda m: echo(f"[trainctl] {m}")):
            echo(f"[trainctl] stack {run_id} removed")
        controllers.controller(record.provider).remove(record.controller, lambda m: echo(f"[trainctl] {m}"))
        return record.moved(runs_dir, "lost", detail=f"controller {record.controller} was lost; the run's "
                                                      "stack was torn down (taking a run over is not built yet)")


def _controller_alive(record: DetachedRecord) -> bool:
    """Whether the controller's machine is up and its trainctl process still runs (asked on the
    controller itself, over SSH)."""
    ctl = controllers.controller(record.provider)
    if record.state == "submitted":  # its submitter is making it, or waiting for it to take the run
        return record.controller in ctl.names() and time.time() - record.submitted < SUBMIT_SECONDS
    inventory = ctl.inventory(record.controller)
    if inventory is None or not ctl.exists(record.controller) or record.pid is None:
        return False
    try:
        return _on_controller(inventory, f"kill -0 {record.pid}", detach=False, seconds=PROBE_SECONDS) == 0
    except Exception:  # paramiko's errors are many: a machine that runs but did not answer is not lost
        return ctl.exists(record.controller)


def cancel(runs_dir: Path, run_id: str, echo: Callable[[str], None]) -> DetachedRecord:
    """Ask the controller to stop the run (it collects and tears down); returns once it ended."""
    record = observe(runs_dir, run_id, echo)
    if record is None:
        raise ConfigError(f"run {run_id} under {runs_dir} is not a detached run (an attached one stops "
                          "with Ctrl-C in its terminal)")
    if record.terminal:
        return record
    records.ask_cancel(runs_dir, run_id)
    echo(f"[trainctl] run {run_id}: cancel asked of controller {record.controller}")
    while not record.terminal:
        time.sleep(CANCEL_POLL_SECONDS)
        record = observe(runs_dir, run_id, echo) or record
    return record
