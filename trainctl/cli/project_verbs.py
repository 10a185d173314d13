"""Verbs over every stack rather than one: make a project (init), list what is up (ls), delete
what outlived its TTL (reap)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from infra.providers import realizers
from trainctl.cli.options import SimulateOpt
from trainctl.cli.output import out, say, show, table

verbs = typer.Typer()


@verbs.command()
def init(directory: Annotated[Path, typer.Argument(help="your repository (default: here)")] = Path(".")) -> None:
    """Make a repository a trainctl project: Pulumi.yaml, stacks/ (local and GCP), an experiment."""
    from trainctl.jobs.init_project import init_project

    for path in init_project(directory):
        say(f"wrote {path}")
    say("next: `trainctl plan --stack local`, then `trainctl run experiment.yaml` "
        "(or `pulumi up --stack gpu-t4x2` after setting its project and ssh.source_ranges)")


@verbs.command(name="ls")
def ls_() -> None:
    """Live stacks and experiments: age, TTL left, estimated cost so far; detached runs with
    their controller, state and age."""
    from trainctl.cli.detached_verbs import show_detached

    detached = show_detached()
    rows = realizers.live()
    if not rows and detached:
        return
    if not rows:  # stdout stays empty: no stack
        say("No stack is up. Start one with `trainctl up --stack local`, "
            "or run an experiment: `trainctl run examples/digits-ddp.yaml`.")
        return
    stacks = table("stack", "provider", "nodes", "age", "TTL left", "idle", "cost so far")
    for r in sorted(rows, key=lambda r: r.stack):
        if r.broken:
            stacks.add_row(r.stack, r.provider, "?", "?", "?", "?", "state unreadable: down --force")
            continue
        left = f"{r.ttl_left_h:.2f} h" if r.ttl_left_h > 0 else "[red]expired[/]"
        idle = "-" if r.idle_h is None else f"{r.idle_h * 60:.1f} min"  # "-": no idle_minutes watch
        stacks.add_row(r.stack, r.provider, str(r.nodes), f"{r.age_h:.2f} h", left, idle,
                       f"${r.cost_so_far:.4f}" if 0 < r.cost_so_far < 0.01 else f"${r.cost_so_far:.2f}")
    show("stacks", stacks)


@verbs.command()
def reap(project: Annotated[Optional[str], typer.Option(help="GCP project to sweep (default: "
                                                              "this machine's local stacks)")] = None,
         dry_run: Annotated[bool, typer.Option(help="list, delete nothing")] = False,
         simulate: SimulateOpt = False) -> None:
    """Delete what outlived its TTL: local stacks here, or trainctl's GCP VMs and TPUs."""
    if simulate:
        from infra.providers import simulated_project

        simulated_project.start_project(project)
    reaped = realizers.reap(project, dry_run, say)
    for name in reaped:  # the result, one name a line; how it went is on stderr
        out(f"{name}{' (expired; --dry-run: kept)' if dry_run else ' removed'}")
    lost = [] if dry_run or project else _lost_detached_runs()
    for run_id in lost:
        out(f"{run_id} (detached; its controller was lost) torn down")
    if not reaped and not lost:
        say("nothing expired")


def _lost_detached_runs() -> list[str]:
    """Detached runs submitted from here whose controller is gone, torn down (what `status` and
    `ls` do for each run they show)."""
    from trainctl.jobs.detached_record import remembered

    running = [(runs_dir, r.run_id) for runs_dir, r in remembered() if not r.terminal]
    if not running:
        return []
    from trainctl.jobs.detached import observe

    return [run_id for runs_dir, run_id in running
            if (found := observe(runs_dir, run_id, say)) is not None and found.state == "lost"]
