"""Verbs that work on an up stack's nodes: make them ready (bootstrap), run a distributed job on
them (launch), run a shell command on each (exec), open a shell on one (ssh)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from infra.errors import ConfigError
from infra.providers import realizers
from trainctl.cli.options import (LiveStackOpt, NodesOpt, node_list, nodes_over_ssh, run_id_argument, runs_root,
                                  validated)
from trainctl.cli.output import fail, out, say
from trainctl.launchers import DEFAULT_JOB_RETRIES, DEFAULT_MAX_RESTARTS

if TYPE_CHECKING:
    from bootstrap.plan import BootstrapSpec
    from infra.providers.inventory import Inventory, Node

verbs = typer.Typer()


def _stack_log_dir(stack: str) -> Path:
    return runs_root() / f"stack-{stack}"


@verbs.command()
def bootstrap(
    stack: LiveStackOpt = "local",
    code: Annotated[Path, typer.Option(help="directory synced to every node")] = Path("."),
    requirements: Annotated[Optional[str], typer.Option(help="requirements file inside --code "
                                                        "(default: requirements.txt if present)")] = None,
    setup: Annotated[Optional[list[str]], typer.Option(help="setup command (repeatable)")] = None,
    experiment: Annotated[Optional[Path], typer.Option(help="take code/requirements/setup from "
                                                       "an experiment file")] = None,
    nodes: NodesOpt = None,
    force: Annotated[Optional[list[str]], typer.Option(help="rerun a step despite its fingerprint")] = None,
    show_plan: Annotated[bool, typer.Option("--plan", help="print each node's commands; run nothing")] = False,
    concurrency: Annotated[int, typer.Option(help="nodes worked on at once")] = 32,
    retry_failed: Annotated[bool, typer.Option(help="only the nodes that failed last time")] = False,
    image: Annotated[Optional[str], typer.Option(help="an image by digest (see `trainctl build`) "
                                                 "that holds code and environment: pulled instead")] = None,
) -> None:
    """Make every node ready: SSH + startup, drivers, code sync, Python env, setup commands."""
    spec = _bootstrap_spec(code, requirements, tuple(setup or ()), experiment, tuple(force or ()), image)
    inventory = nodes_over_ssh(stack, "bootstrap")
    log_dir = _stack_log_dir(stack) / "bootstrap"
    if retry_failed:
        from bootstrap.runner import failed_last_time

        nodes = ",".join(failed_last_time(log_dir))
        if not nodes:
            say("no failed nodes recorded: nothing to retry")
            return
    selected = inventory.select(node_list(nodes))
    if show_plan:
        _print_bootstrap_plan(inventory, spec, selected)
        return
    from bootstrap.runner import bootstrap as run_bootstrap
    from trainctl.cli.progress import bootstrap_board
    from trainctl.launchers.interrupts import signals_as_interrupt

    names = [n.name for n in selected]
    with signals_as_interrupt(), bootstrap_board(stack, names, setup=bool(spec.setup),
                                                 image=spec.image is not None) as board:
        run_bootstrap(inventory, spec, log_dir, nodes=names, concurrency=concurrency, report=board)
    say(f"[green]bootstrap done[/] (logs: {log_dir})")


def _bootstrap_spec(code: Path, requirements: str | None, setup: tuple[str, ...], experiment: Path | None,
                    force: tuple[str, ...], image: str | None) -> BootstrapSpec:
    """What bootstrap installs, from its options or an experiment file, checked before any node
    is touched."""
    from bootstrap.plan import BootstrapSpec, check_inputs

    if experiment:
        from trainctl.jobs.experiment import bootstrap_spec
        from trainctl.jobs.experiment_file import load_experiment

        spec = bootstrap_spec(load_experiment(experiment), "python3").model_copy(update={"force": force})
    else:
        if requirements is None and (code / "requirements.txt").is_file():
            requirements = "requirements.txt"
        spec = validated(BootstrapSpec, code_dir=code, requirements=requirements, setup=setup, force=force)
    if image:
        spec = validated(BootstrapSpec, **{**spec.model_dump(), "image": image})
    check_inputs(spec)
    return spec


def _print_bootstrap_plan(inventory: Inventory, spec: BootstrapSpec, selected: list[Node]) -> None:
    from bootstrap.cpu_torch import for_nodes
    from bootstrap.plan import plan

    for node_plan in plan(inventory, for_nodes(inventory, spec), selected):
        out(f"# {node_plan.node.name} ({node_plan.node.ssh_host}, {node_plan.node.accelerator!s})")
        for step in node_plan.steps:
            command = step.command if isinstance(step.command, str) else " ".join(step.command)
            skip = f" (skipped if fingerprint {step.fingerprint} is stored)" if step.fingerprint else ""
            out(f"[{step.name}] ({step.where}){skip} {command}")
            if step.instead:
                out(f"[{step.name}] instead, {step.instead}")


@verbs.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def launch(
    ctx: typer.Context,
    stack: LiveStackOpt = "local",
    nproc_per_node: Annotated[int, typer.Option(help="processes per node")] = 1,
    max_restarts: Annotated[int, typer.Option(help="torchrun restarts of the worker group")] = DEFAULT_MAX_RESTARTS,
    framework: Annotated[str, typer.Option(help="torch (torchrun), tensorflow (TF_CONFIG) or jax (jax.distributed)")] = "torch",
    job_retries: Annotated[int, typer.Option(help="reruns of the whole job from its checkpoints")] = DEFAULT_JOB_RETRIES,
    show_plan: Annotated[bool, typer.Option("--plan", help="print each node's command (GKE: the "
                                                           "manifests); run nothing")] = False,
    run_id: Annotated[Optional[str], typer.Option(callback=run_id_argument,
                                                  help="default: <stack>-<random>")] = None,
    image: Annotated[Optional[str], typer.Option(help="an image by digest (see `trainctl build`) "
                                                 "that holds code and environment: run in it")] = None,
) -> None:
    """Run a command under torchrun on every node: trainctl launch -- python train.py [args]."""
    import secrets
    import time

    from trainctl.jobs.experiment import refuse_framework_mismatch
    from trainctl.jobs.ledger_record import launch_ledger
    from trainctl.launchers.interrupts import signals_as_interrupt
    from trainctl.launchers.registry import launcher_for
    from trainctl.launchers.spec import LaunchSpec

    command = list(ctx.args)
    if not command:
        raise ConfigError("nothing to launch: give the command after --, e.g. "
                          "`trainctl launch --stack local -- python train.py`")
    rid = run_id or f"{stack}-{secrets.token_hex(3)}"
    # the options are checked before the stack is read: bad input is named as such
    spec = validated(LaunchSpec, run_id=rid, command=tuple(command), nproc_per_node=nproc_per_node,
                     max_restarts=max_restarts, framework=framework, job_retries=job_retries, image=image)
    inventory = realizers.inventory(stack)
    launcher = launcher_for(inventory)
    cluster = realizers.spec(stack)
    # A GKE stack's Kueue queue and priority class (docs/how-to/kueue-and-jobset.md).
    spec = spec.model_copy(update={"queue": cluster.queue, "priority_class": cluster.priority_class})
    refuse_framework_mismatch(cluster, framework)
    plan = launcher.dryrun(cluster, inventory, spec)
    if show_plan:  # exactly what `run` executes: each node's command line, or the Job's objects
        out(plan.render())
        return
    log_dir = runs_root() / rid / "logs" / "launch"
    say(f"run {rid} on {cluster.node_count} node(s) of stack {stack} ({inventory.target}); logs in {log_dir}")
    started = time.time()
    with signals_as_interrupt():  # SIGTERM too stops the job on every node
        result = launcher.run(plan, log_dir, out)
    launch_ledger(rid, log_dir.parent.parent, cluster, inventory, (started, time.time()), result)
    if not result.ok:
        fail(f"run {rid} failed", result.describe_failures())
        raise typer.Exit(1)
    say(f"[green]run {rid} finished[/]")


@verbs.command(name="exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def exec_(ctx: typer.Context, stack: LiveStackOpt = "local", nodes: NodesOpt = None) -> None:
    """Run a shell command on every (or some) node in parallel: trainctl exec -- nvidia-smi."""
    from trainctl.launchers.ssh.remote_exec import run_everywhere

    command = " ".join(ctx.args)
    if not command:
        raise ConfigError("nothing to run: give the command after --")
    inventory = nodes_over_ssh(stack, "exec")
    codes = run_everywhere(inventory, inventory.select(node_list(nodes)), command,
                           _stack_log_dir(stack) / "exec", out)
    failed = {n: c for n, c in codes.items() if c != 0}
    for name, code in codes.items():
        say(f"{name}: exit {code}")
    if failed:
        raise typer.Exit(1)


@verbs.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def ssh(ctx: typer.Context, node: Annotated[str, typer.Argument(help="node name or rank")],
        stack: LiveStackOpt = "local") -> None:
    """Open a shell (or run a command) on one node, host key pinned."""
    from bootstrap.ssh import openssh_command

    inventory = nodes_over_ssh(stack, "ssh")
    target = inventory.node(node)
    argv = [*openssh_command(inventory, target), target.ssh_host, *ctx.args]
    os.execvp(argv[0], argv)
