"""Hyperparameter sweeps on one cluster, backed by optuna.

Each trial is a launch with its own run id and job dir (gs://bucket/<sweep>/<trial>), its
hyperparameters appended as `--name=value` (as AI Platform passes them), and its metric read from
the job dir where trainers.hypertune writes it. Parallel trials split the cluster between them
through the stack's launcher (disjoint nodes over SSH; on GKE one Job per trial on its share).
The study lives in runs/<sweep-id>/optuna.db: an interrupted sweep resumes where it stopped,
and trials that crashed are recorded as failed while the sweep goes on. A trial that did not end
by itself (Ctrl-C stopped it, or the controller died under it) is recorded as interrupted and its
hyperparameters are queued to run again, so a resumed sweep neither redoes nor loses a trial.
When the first trials a sweep runs all fail the same way, it starts no more: the others would too.
"""

from __future__ import annotations

import csv
import json
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import optuna

from infra.errors import RemoteError
from infra.providers.inventory import Inventory
from infra.spec.cluster import ClusterSpec
from trainctl.jobs.collect import (bucket_fs, collect, draw_safely, new_figure, save_figure,
                              takes_turns)
from trainctl.jobs.experiment_spec import Parameter, SweepSection
from trainctl.jobs.spending import Spending, TrialClock
from trainctl.launchers.failures import Failure, shared
from trainctl.launchers.interrupts import raise_if_pending
from trainctl.launchers.cluster_env import job_dir
from trainctl.launchers.spec import LaunchSpec
from trainctl.launchers.protocol import Launcher, Slot

POLL_SECONDS = 2.0
RETRY_OF = "retry_of"  # user attribute of a queued trial: the number of the one it replaces
# A sweep whose first trials (in this run of it) all failed the same way starts no more.
FIRST_TRIALS = 3


class SweepStopped(RemoteError):
    title = "sweep stopped"


class FirstTrials:
    """How the trials of this run of a sweep end (a resumed sweep may have been fixed): once
    FIRST_TRIALS have failed the same way and none of the sweep's trials ever succeeded (or was
    pruned, which needs its reports), `halted` is that failure: no further trial starts. A
    failure that depends on the parameters lets some trial succeed, which keeps the sweep going."""

    def __init__(self, succeeded_before: bool) -> None:
        self.failures: list[Failure] = []
        self.succeeded = succeeded_before
        self.stopped: Failure | None = None

    @property
    def halted(self) -> Failure | None:
        return None if self.succeeded else self.stopped

    def record(self, failure: Failure | None) -> bool:
        """A trial ended (`failure` None: it did not fail); True when that halts the sweep."""
        if failure is None:
            self.succeeded = True
            return False
        if self.succeeded or len(self.failures) == FIRST_TRIALS:
            return False
        self.failures.append(failure)
        if len(self.failures) == FIRST_TRIALS:
            self.stopped = shared(self.failures)
        return self.halted is not None


@dataclass
class TrialResult:
    number: int
    params: dict[str, Any]
    value: float | None
    state: str  # COMPLETE, FAIL, PRUNED, INTERRUPTED (queued to run again)
    run_id: str
    started: float | None = None  # unix seconds (the ledger prices the trial's nodes over them)
    ended: float | None = None


def suggest(trial: optuna.Trial, p: Parameter) -> Any:
    if p.type == "CATEGORICAL":
        return trial.suggest_categorical(p.name, list(p.values))
    assert p.min is not None and p.max is not None
    if p.type == "INTEGER":
        return trial.suggest_int(p.name, int(p.min), int(p.max), log=p.scale == "LOG")
    return trial.suggest_float(p.name, p.min, p.max, log=p.scale == "LOG")


def study_for(sweep: SweepSection, sweep_id: str, run_dir: Path) -> optuna.Study:
    sampler: optuna.samplers.BaseSampler = (optuna.samplers.TPESampler(seed=0) if sweep.algorithm == "tpe"
                                            else optuna.samplers.RandomSampler(seed=0))
    pruner: optuna.pruners.BasePruner = (optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=1)
                                         if sweep.pruner == "median" else optuna.pruners.NopPruner())
    return optuna.create_study(study_name=sweep_id, storage=f"sqlite:///{run_dir / 'optuna.db'}",
                               direction="maximize" if sweep.goal == "MAXIMIZE" else "minimize", sampler=sampler, pruner=pruner,
                               load_if_exists=True)


def requeue(study: optuna.Study, number: int, params: dict[str, Any]) -> None:
    """End a trial that did not end by itself and queue its hyperparameters to run again."""
    study.tell(number, state=optuna.trial.TrialState.FAIL)
    study.enqueue_trial(params, user_attrs={RETRY_OF: number}, skip_if_exists=False)


class OverBudget(Exception):
    """A trial was stopped because the sweep's budget ran out."""


def requeue_stopped(study: optuna.Study, lock: threading.Lock, number: int, params: dict[str, Any],
                    stopped: BaseException, echo: Callable[[str], None]) -> None:
    """A trial stopped from outside (Ctrl-C, the budget) runs again with the same parameters."""
    with lock:
        requeue(study, number, params)
    how = "stopped at the budget" if isinstance(stopped, OverBudget) else "interrupted"
    echo(f"[sweep] trial {number} {how}: {params} → queued to run again")


def interrupted_numbers(study: optuna.Study) -> set[int]:
    return {t.user_attrs[RETRY_OF] for t in study.trials if RETRY_OF in t.user_attrs}


def requeue_orphans(study: optuna.Study) -> None:
    """Requeue the trials a dead controller left RUNNING: nothing will ever finish them."""
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        requeue(study, t.number, t.params)


def finished_trials(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """The trials that ended by themselves."""
    interrupted = interrupted_numbers(study)
    return [t for t in study.trials if t.state.is_finished() and t.number not in interrupted]


def parallelism(sweep: SweepSection) -> int:
    """Jobs at once: split mode shares the cluster between max_parallel_trials trials."""
    return 1 if sweep.parallel_mode == "sequential" else sweep.max_parallel_trials


def read_reports(launcher: Launcher, inventory: Inventory, trial_job_dir: str,
                 run_id: str) -> list[dict[str, Any]]:
    """A trial's metric reports, oldest first, each with a `seq` that orders them: from
    trainers.hypertune in the job dir, else from the file an unchanged cloudml-hypertune (AI
    Platform's library) wrote on the chief."""
    fs = bucket_fs(inventory)
    path = f"{trial_job_dir}/hypertune/metrics.json"
    try:
        with fs.open(path, "rb") as fh:
            history = json.loads(fh.read())
    except (FileNotFoundError, ValueError):
        written = launcher.hypertune_file(inventory, run_id)
        return parse_hypertune_file(written) if written is not None else []
    return [{**r, "seq": i} for i, r in enumerate(history)]  # the file only grows


# What cloudml-hypertune 0.1.0.dev6 (hypertune/hypertune.py, report_hyperparameter_tuning_metric)
# writes on each line beside the metric, whose key is the tag: the report's time, the trial id,
# the step and a checkpoint path (empty unless given), all but the time as strings.
HYPERTUNE_FIELDS = {"timestamp", "trial", "global_step", "checkpoint_path"}


def parse_hypertune_file(text: str) -> list[dict[str, Any]]:
    """cloudml-hypertune's file: one JSON object per report, rewritten whole at each report
    (github.com/GoogleCloudPlatform/cloudml-hypertune). Its `timestamp` orders the reports: the
    library keeps only the last 100, so a line's position changes once there are more."""
    reports = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
            tags = [k for k in entry if k not in HYPERTUNE_FIELDS]
            value = float(entry[tags[0]])
        except (ValueError, TypeError, IndexError, AttributeError):
            continue  # a line being rewritten while read
        step = int(float(entry.get("global_step") or 0))
        reports.append({"tag": tags[0], "value": value, "step": step,
                        "seq": float(entry.get("timestamp") or 0)})
    return reports


def new_reports(reports: list[dict[str, Any]], last: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The reports after `last` (the newest one already handled)."""
    return reports if last is None else [r for r in reports if r["seq"] > last["seq"]]


def run_sweep(cluster: ClusterSpec, inventory: Inventory, launcher: Launcher, sweep: SweepSection,
              base: LaunchSpec, sweep_id: str, run_dir: Path, echo: Callable[[str], None],
              artifacts: tuple[str, ...] = ("metrics.json",), spending: Spending | None = None) -> list[TrialResult]:
    """The sweep's trials; with `spending`, within its budget (TrialClock)."""
    study = study_for(sweep, sweep_id, run_dir)
    requeue_orphans(study)
    done = finished_trials(study)
    remaining = sweep.max_trials - len(done)
    if done:
        echo(f"[sweep] resuming {sweep_id}: {len(done)} trial(s) already finished, {max(0, remaining)} to go")
    groups = launcher.slots(cluster, inventory, parallelism(sweep))
    slots: list[Slot] = list(groups)
    slot_lock = threading.Lock()
    tell_lock = threading.Lock()
    first = FirstTrials(succeeded_before=any(t.state != optuna.trial.TrialState.FAIL for t in done))
    clock = TrialClock(spending)

    def one_trial(n: int) -> None:
        raise_if_pending()  # Ctrl-C came while this trial waited for a slot: never start it
        if first.halted or not clock.affords_next(f"trial {n + 1} of the {remaining} to go"):
            return
        with tell_lock:
            trial = study.ask()
            params = {p.name: suggest(trial, p) for p in sweep.parameters}
        with slot_lock:
            slot = slots.pop()
        group = slot[1]
        try:
            with clock.timed():
                state, value, failure = _run_trial(launcher, slot, sweep, base, sweep_id, trial, params, run_dir,
                                                   echo, clock.over_budget)
                if state == optuna.trial.TrialState.COMPLETE:
                    # Kept locally at once: a resumed sweep runs on a new stack with a new bucket.
                    collect(group, job_dir(group, f"{sweep_id}-t{trial.number}"), artifacts, run_dir / f"trial-{trial.number}",
                            run_id=f"{sweep_id}-t{trial.number}", image=base.image)
        except (KeyboardInterrupt, OverBudget) as stopped:  # as interrupted: runs again on --resume
            requeue_stopped(study, tell_lock, trial.number, params, stopped, echo)
            if not isinstance(stopped, OverBudget):
                raise
            return
        finally:
            with slot_lock:
                slots.append(slot)
        with tell_lock:
            study.tell(trial, value if state == optuna.trial.TrialState.COMPLETE else None, state=state)
            stops = first.record(failure)
        echo(f"[sweep] trial {trial.number} {state.name.lower()}: {params} → {value}"
             + (f" ({failure.error})" if failure else ""))
        if stops:
            echo(f"[sweep] its first {FIRST_TRIALS} trials failed the same way: starting no more")

    with clock.running():
        with ThreadPoolExecutor(max_workers=len(groups)) as pool:
            list(pool.map(one_trial, range(max(0, remaining))))
        results = results_of(study, sweep_id)
        write_results(results, sweep, run_dir)
    if first.halted:
        raise SweepStopped(f"sweep {sweep_id}: its first {FIRST_TRIALS} trials all failed with "
                           f"{first.halted.describe()}; the others would too (results in {run_dir})")
    return results


def results_of(study: optuna.Study, sweep_id: str) -> list[TrialResult]:
    interrupted = interrupted_numbers(study)
    return [TrialResult(t.number, t.params, t.value, "INTERRUPTED" if t.number in interrupted else t.state.name,
                        f"{sweep_id}-t{t.number}", _unix(t.datetime_start), _unix(t.datetime_complete))
            for t in study.trials]


def recorded_trials(sweep_id: str, run_dir: Path) -> list[TrialResult]:
    """Every trial of the sweep's study, from all its runs (an interrupted one's too); none
    without a study."""
    db = run_dir / "optuna.db"
    if not db.exists():
        return []
    return results_of(optuna.load_study(study_name=sweep_id, storage=f"sqlite:///{db}"), sweep_id)


def _unix(moment: Any) -> float | None:
    return None if moment is None else moment.timestamp()


def _run_trial(launcher: Launcher, slot: Slot, sweep: SweepSection, base: LaunchSpec, sweep_id: str,
               trial: optuna.Trial, params: dict[str, Any], run_dir: Path, echo: Callable[[str], None],
               over_budget: threading.Event | None = None,
               ) -> tuple[optuna.trial.TrialState, float | None, Failure | None]:
    """The trial's end: its state, value and failure; OverBudget when the budget stopped it."""
    cluster, group = slot
    run_id = f"{sweep_id}-t{trial.number}"
    spec = base.model_copy(update={
        "run_id": run_id,
        "command": (*base.command, *(f"--{k}={v}" for k, v in params.items())),
        "env": {**base.env, "CLOUD_ML_TRIAL_ID": str(trial.number)},  # as AI Platform sets it
    })
    trial_dir = job_dir(group, run_id)
    pruned = threading.Event()
    stop = threading.Event()  # pruned, or over budget: launch stops the run and does not rerun it
    finished = threading.Event()

    def watch() -> None:
        last: dict[str, Any] | None = None
        while not finished.wait(POLL_SECONDS):
            if over_budget is not None and over_budget.is_set():
                stop.set()
                return
            reports = [r for r in read_reports(launcher, group, trial_dir, run_id) if r["tag"] == sweep.metric]
            for r in new_reports(reports, last):
                last = r
                trial.report(r["value"], r["step"])
                if trial.should_prune():
                    echo(f"[sweep] pruning trial {trial.number} at step {r['step']}")
                    pruned.set()
                    stop.set()
                    return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        result = launcher.run(launcher.dryrun(cluster, group, spec), run_dir / f"trial-{trial.number}" / "logs",
                              echo, cancel=stop)
    finally:
        finished.set()
        watcher.join()
    if pruned.is_set():
        return optuna.trial.TrialState.PRUNED, None, None
    if stop.is_set():
        raise OverBudget()
    reports = [r for r in read_reports(launcher, group, trial_dir, run_id) if r["tag"] == sweep.metric]
    if not result.ok:
        return optuna.trial.TrialState.FAIL, None, result.failure() or Failure("failed")
    if not reports:
        return optuna.trial.TrialState.FAIL, None, Failure(f"finished without reporting {sweep.metric}")
    return optuna.trial.TrialState.COMPLETE, reports[-1]["value"], None


def best(results: list[TrialResult], sweep: SweepSection) -> TrialResult | None:
    complete = [r for r in results if r.state == "COMPLETE" and r.value is not None]
    if not complete:
        return None
    key = (lambda r: r.value) if sweep.goal == "MAXIMIZE" else (lambda r: -r.value)  # type: ignore[operator]
    return max(complete, key=key)


def write_results(results: list[TrialResult], sweep: SweepSection, run_dir: Path) -> None:
    names = [p.name for p in sweep.parameters]
    with open(run_dir / "trials.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["trial", "state", sweep.metric, *names, "run_id"])
        for r in results:
            writer.writerow([r.number, r.state, r.value, *(r.params.get(n) for n in names), r.run_id])
    top = best(results, sweep)
    (run_dir / "best.json").write_text(json.dumps(
        None if top is None else {"trial": top.number, "value": top.value, "params": top.params,
                                  "run_id": top.run_id}, indent=2))
    if top is not None:  # its collected artifacts, as runs/<sweep>/best
        shutil.copytree(run_dir / f"trial-{top.number}", run_dir / "best", ignore=shutil.ignore_patterns("logs"),
                        dirs_exist_ok=True)
    draw_safely(plot, results, sweep, run_dir / "sweep.png")


@takes_turns
def plot(results: list[TrialResult], sweep: SweepSection, out: Path) -> bool:
    done = [r for r in results if r.value is not None]
    panels = 1 + len(sweep.parameters)
    fig = new_figure(figsize=(4 * panels, 3.5))
    axes = fig.subplots(1, panels, squeeze=False)
    ax = axes[0][0]
    ax.plot([r.number for r in done], [r.value for r in done], "o-")
    ax.set_xlabel("trial")
    ax.set_ylabel(sweep.metric)
    for ax, p in zip(axes[0][1:], sweep.parameters):
        ax.scatter([str(r.params.get(p.name)) if p.type == "CATEGORICAL" else r.params.get(p.name)
                    for r in done], [r.value for r in done])
        ax.set_xlabel(p.name)
        if p.scale == "LOG":
            ax.set_xscale("log")
    fig.suptitle(f"{sweep.metric} ({sweep.goal.lower()}), {len(done)}/{len(results)} trials with a value")
    save_figure(fig, out, dpi=90)
    return True
