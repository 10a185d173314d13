"""What `trainctl run` prints: with --plan, the experiment as it was read and the cluster it
would get (stdout); after a run, its phases, sweep trials, recoveries and savings (stderr)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainctl.cli.output import console, out, say

if TYPE_CHECKING:
    from rich.table import Table

    from infra.spec.cluster import ClusterSpec
    from infra.spec.cost import Estimate
    from trainctl.jobs.stack_run import RunReport
    from trainctl.jobs.experiment_spec import Experiment
    from trainctl.launchers.result import RecoveryRecord


def print_experiment(exp: Experiment, notes: list[str]) -> None:
    """The experiment as YAML (a job spec: what it maps onto) and what the mapping changed."""
    import yaml

    out(yaml.safe_dump(exp.model_dump(mode="json", exclude_defaults=True), sort_keys=False).rstrip())
    for note in notes:
        out(f"# note: {note}")


def print_cluster(spec: ClusterSpec, cost: Estimate) -> None:
    for role, _, group in spec.groups():
        shape = group.machine_type or "local node"
        gpu = f" + {group.accelerator}" if group.gpu else ""
        out(f"# {role or 'nodes'}: {group.node_count} x {shape}{gpu}{' (spot)' if group.spot else ''}")
    out(f"# estimated ${cost.per_hour:.2f}/hour")


def print_jax_launch(spec: ClusterSpec, exp: Experiment) -> None:
    """What each JAX process will be told once the nodes exist (`launch --plan` on the live stack
    prints the exact commands)."""
    from bootstrap.ssh import shell_env
    from trainctl.launchers.jax_env import BOOT_SHOWN, planned

    group = sum(p.count for p in spec.pools if p.role in ("chief", "worker")) if spec.pools else spec.node_count
    program = " ".join(exp.run.command)
    if exp.run.command[0] in ("python", "python3"):
        program = f"python -c {BOOT_SHOWN} {' '.join(exp.run.command[1:])}"
    for rank, env in enumerate(planned(group)):
        out(f"# rank {rank}: {shell_env(env)}{program}")


def show_report(exp: Experiment, report: RunReport) -> None:
    _show_phases(report)
    if report.trials:
        _show_trials(exp, report)
    if report.result and report.result.recoveries:
        _show_recoveries(report.result.recoveries)
    if report.result and report.result.maintenance_events:
        _show_maintenance(report.result.maintenance_events)
    if report.network is not None:
        say(f"network check: {report.network.describe()}")
    if report.spot_saving_usd is not None:
        say(spot_saving_line(report))
    if report.ledger is not None:
        from trainctl.cli.ledger_output import say_summary

        say_summary(report.ledger)
        say(f"where the time and money went: `trainctl report {report.run_id}` "
            f"(ledger.json, timeline.png in {report.run_dir})")
    if report.metrics:
        say(f"test accuracy {report.metrics.get('test_accuracy', float('nan')):.4f}; "
            f"artifacts in {report.run_dir}")


def spot_saving_line(report: RunReport) -> str:
    """The spot saving over the training, and whether anyone bills it (the stack says)."""
    from infra.spec.cost import PRICE_SOURCE
    from trainctl.cli.output import usd

    saving = report.spot_saving_usd or 0.0
    if report.unbilled and not saving:  # nodes without a price (the local stack's)
        priced = f"({report.unbilled})"
    else:
        priced = f"(at {PRICE_SOURCE}{f'; {report.unbilled}' if report.unbilled else ''})"
    return f"spot saving against on-demand for {report.phases.get('train', 0):.0f} s of training: {usd(saving)} {priced}"


def _titled_table(title: str, columns: tuple[str, ...]) -> Table:
    from rich.table import Table

    shown = Table(title=title, title_justify="left")
    for column in columns:
        shown.add_column(column)
    return shown


def _show_phases(report: RunReport) -> None:
    phases = _titled_table(f"run {report.run_id}", ("phase",))
    phases.add_column("seconds", justify="right")
    for name, seconds in report.phases.items():
        phases.add_row(name, f"{seconds:.1f}")
    phases.add_row("total", f"{sum(report.phases.values()):.1f}")
    console().print(phases)


def _show_trials(exp: Experiment, report: RunReport) -> None:
    names = [p.name for p in exp.sweep.parameters] if exp.sweep else []
    trials = _titled_table(f"sweep {report.run_id}",
                           ("trial", "state", exp.sweep.metric if exp.sweep else "value", *names))
    for t in report.trials:
        trials.add_row(str(t.number), t.state, "" if t.value is None else f"{t.value:.4f}",
                       *(str(t.params.get(n)) for n in names))
    console().print(trials)
    say(f"best: {(report.run_dir / 'best.json').read_text()}; plot: {report.run_dir / 'sweep.png'}")


def _show_maintenance(events: list[dict[str, Any]]) -> None:
    say(f"host maintenance announced {len(events)} time(s):")
    for e in events:
        say(f"  {e['node']}: {e['event']}: {e['action']}")


def _show_recoveries(recoveries: list[RecoveryRecord]) -> None:
    say(f"recovered from {len(recoveries)} preemption(s):")
    for i, r in enumerate(recoveries, 1):
        say(recovery_line(i, r))


def recovery_line(i: int, r: RecoveryRecord) -> str:
    """One recovery as the summary tells it: the steps only where the program printed them."""
    tries = f" after {r.tries} tries (no capacity)" if r.tries > 1 else ""
    tries += f", the cluster moved to zone {r.moved_to}" if r.moved_to else ""
    if r.resumed_from_step is None:
        steps = ("the program printed no step it resumed from, so the steps redone are unknown"
                 if r.furthest_step is not None else "the program printed no steps, so the steps redone are unknown")
    else:
        redone = "unknown steps" if r.steps_redone is None else f"{r.steps_redone} step(s)"
        steps = f"resumed from step {r.resumed_from_step}, {redone} redone"
    return f"  {i}. {', '.join(r.nodes)} back and the job resumed in {r.seconds:.1f} s{tries}; {steps}"
