"""Detached runs from the command line: `run --detach` hands the run to a controller
(trainctl/jobs/detached.py); `cancel` stops one; `controller-serve` (hidden) is what the
controller runs; `status --run`, `logs --follow` and `ls` read them through the helpers here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Callable, Optional

import typer

from trainctl.cli.options import RunsDirOpt, budget_option, run_id_argument, runs_root
from trainctl.cli.output import out, say, show, table

if TYPE_CHECKING:
    from trainctl.jobs.experiment_spec import Experiment

verbs = typer.Typer()


def detach(experiment: Path, exp: Experiment, stack: str | None, budget: str | None, runs_dir: Path) -> None:
    """Submit the run to a controller; prints its id once the controller has taken it."""
    from infra.spec.stack_config import load_stack
    from trainctl.jobs.detached import submit
    from trainctl.jobs.experiment import new_run_id

    # Validated here as `run` validates it before anything exists: bad input exits 2 now, not
    # in a controller's log.
    spec = load_stack(exp.stack, name=exp.name, overrides={**exp.overrides, "ephemeral": True},
                      overrides_from=exp.overrides_from)
    run_id = new_run_id(exp.name)
    serve_args = ["--stack", stack] if stack else []
    serve_args += ["--budget", budget] if budget else []
    record = submit(experiment, spec, run_id, runs_dir, serve_args, say)
    say(f"[trainctl] run {run_id}: taken by controller {record.controller}; "
        f"`trainctl status --run {run_id}`, `trainctl logs {run_id} --follow`, `trainctl cancel {run_id}`")
    out(run_id)


@verbs.command("controller-serve", hidden=True)
def controller_serve(experiment: Annotated[Path, typer.Argument()],
                     run_id: Annotated[str, typer.Option(callback=run_id_argument)],
                     runs_dir: Annotated[Path, typer.Option()],
                     stack: Annotated[Optional[str], typer.Option()] = None,
                     budget: Annotated[Optional[str], typer.Option()] = None) -> None:
    """The controller's side of a detached run (started by `run --detach`, on the controller)."""
    from trainctl.jobs.detached import serve
    from trainctl.jobs.experiment_file import load_experiment

    def load() -> Experiment:
        exp = load_experiment(experiment, stack=stack)
        flagged = budget_option(budget)
        return exp if flagged is None else exp.with_budget(flagged, "--budget")

    serve(load, run_id, runs_dir)


@verbs.command()
def cancel(run_id: Annotated[str, typer.Argument(callback=run_id_argument, help="a detached run's id")],
           runs_dir: RunsDirOpt = None) -> None:
    """Stop a detached run: its job stops on every node, what it trained is collected, its
    stack and controller are removed; returns once they are."""
    from trainctl.jobs.detached import cancel as cancel_run

    record = cancel_run(runs_dir or runs_root(), run_id, say)
    say(f"run {run_id} {record.state}{': ' + record.detail if record.detail else ''}")
    out(record.state)


def run_status(runs_dir: Path, run_id: str) -> str | None:
    """`status --run` of a detached run: its outcome with the controller's record (a lost
    controller found and the run torn down here); None: not a detached run."""
    from dataclasses import asdict

    from trainctl.jobs.detached import observe
    from trainctl.launchers.run_logs import result_path

    record = observe(runs_dir, run_id, say)
    if record is None:
        return None
    result = result_path(runs_dir, run_id)
    outcome = json.loads(result.read_text()) if result.exists() else {"run_id": run_id}
    return json.dumps({**outcome, "state": record.state, "detached": asdict(record)}, indent=2)


def run_ended(runs_dir: Path, run_id: str) -> Callable[[], bool] | None:
    """For `logs --follow`: whether a detached run has ended; None: not a detached run."""
    from trainctl.jobs.detached import observe
    from trainctl.jobs.detached_record import read

    if read(runs_dir, run_id) is None:
        return None

    def ended() -> bool:
        record = observe(runs_dir, run_id, say)
        return record is None or record.terminal

    return ended


def show_detached() -> bool:
    """`ls`'s table of detached runs submitted from this home; a run not ended has its controller
    asked whether it still runs (a lost one is torn down). Whether there were any."""
    from trainctl.jobs.detached_record import remembered

    found = remembered()
    if not found:
        return False
    if any(not record.terminal for _, record in found):
        from trainctl.jobs.detached import observe

        found = [(d, r if r.terminal else observe(d, r.run_id, say) or r) for d, r in found]
    rows = table("run", "controller", "target", "state", "age")
    for _, r in found:
        rows.add_row(r.run_id, r.controller, r.provider, r.state, f"{r.age_h():.2f} h")
    show("detached runs", rows)
    return True
