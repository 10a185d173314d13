"""Verbs on experiments and their runs: run one from nothing to nothing (run; a sweep, an AI
Platform or Vertex AI job spec too), build its image (build), read a run's logs (logs)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from infra.errors import ConfigError
from infra.providers import realizers
from trainctl.cli import gcloud_options as gcloud
from trainctl.cli.options import (BudgetOpt, RunsDirOpt, SimulatedProjectOpt, SimulateOpt, budget_option,
                                  live_stack_argument, run_id_argument, runs_root, simulate_if_asked, stack_argument,
                                  validated)
from trainctl.cli.output import out, say

if TYPE_CHECKING:
    from infra.providers.inventory import Inventory
    from infra.spec.cluster import ClusterSpec
    from trainctl.cli.progress import NodeBoard
    from trainctl.jobs.experiment_spec import Experiment

verbs = typer.Typer()

ExperimentArg = Annotated[Path, typer.Argument(help="experiment YAML, or an AI Platform "
                                                    "config.yaml / Vertex AI CustomJob spec")]
KeepOpt = Annotated[bool, typer.Option(help="keep the stack after the run (TTL still applies)")]
ResumeOpt = Annotated[Optional[str], typer.Option(callback=run_id_argument,
                                                  help="continue an interrupted sweep by its id")]
RunStackOpt = Annotated[Optional[str], typer.Option(
    help="the stack to run on (an experiment file: instead of its own; a job spec: default local)")]
CodeOpt = Annotated[Optional[Path], typer.Option(help="job specs: the trainer's source folder, synced "
                                                      "as it is (default: the job's packages -- packageUris, "
                                                      "--package-path, --packages -- fetched and built into "
                                                      "wheels; without any, the spec's folder)")]
RequirementsOpt = Annotated[Optional[str], typer.Option(help="job specs: requirements file, relative to "
                                                             "the code (default: its requirements.txt)")]
FrameworkOpt = Annotated[Optional[str], typer.Option(help="job specs: torch, tensorflow or jax "
                                                          "(default: from the training image)")]
DetachOpt = Annotated[bool, typer.Option("--detach", help="hand the run to a controller that is not this "
                                                        "process (docs/how-to/detached-runs.md); prints its id")]
RunPlanOpt = Annotated[bool, typer.Option("--plan", help="print the experiment (a job spec's "
                                                         "mapping) and run nothing")]


@verbs.command(context_settings={"allow_extra_args": True})
def run(ctx: typer.Context, experiment: ExperimentArg, keep: KeepOpt = False, runs_dir: RunsDirOpt = None,
        resume: ResumeOpt = None, stack: RunStackOpt = None, code: CodeOpt = None,
        requirements: RequirementsOpt = None, framework: FrameworkOpt = None, show_plan: RunPlanOpt = False,
        module_name: gcloud.ModuleName = None, package_path: gcloud.PackagePath = None,
        packages: gcloud.Packages = None, job_dir: gcloud.JobDir = None,
        runtime_version: gcloud.RuntimeVersion = None, python_version: gcloud.PythonVersion = None,
        scale_tier: gcloud.ScaleTier = None, master_machine_type: gcloud.MasterMachineType = None,
        worker_machine_type: gcloud.WorkerMachineType = None, worker_count: gcloud.WorkerCount = None,
        parameter_server_machine_type: gcloud.ParameterServerMachineType = None,
        parameter_server_count: gcloud.ParameterServerCount = None,
        master_image_uri: gcloud.MasterImageUri = None, region: gcloud.Region = None,
        worker_pool_spec: gcloud.WorkerPoolSpec = None, args_: gcloud.Args = None,
        python_package_uris: gcloud.PythonPackageUris = None, display_name: gcloud.DisplayName = None,
        budget: BudgetOpt = None, detach: DetachOpt = False,
        simulate: SimulateOpt = False, simulated_project: SimulatedProjectOpt = None) -> None:
    """Run an experiment from nothing to nothing: up, bootstrap, launch, collect, down."""
    from trainctl.cli.run_output import show_report
    from trainctl.jobs.experiment import run_experiment
    from trainctl.jobs.experiment_file import load_experiment
    from trainctl.jobs.gcloud_flags import GcloudFlags

    given = {k: v for k, v in locals().items() if k in GcloudFlags.model_fields and v is not None}
    flags = validated(GcloudFlags, **given, args=args_ or (), user_args=tuple(ctx.args))
    notes: list[str] = []
    exp = load_experiment(experiment, stack=stack, code=code, requirements=requirements,
                          framework=framework, notes=notes, flags=flags, plan=show_plan)
    flagged = budget_option(budget)
    if flagged is not None:
        exp = exp.with_budget(flagged, "--budget")
    if show_plan:
        _show_plan(exp, notes)
        return
    for note in notes:
        say(f"note: {note}")
    if simulate or simulated_project is not None:
        simulate_if_asked(_cluster(exp), simulate, simulated_project)
    runs_dir = runs_dir or runs_root()
    if detach:
        from trainctl.cli.detached_verbs import detach as detach_run

        _detachable(experiment, exp, given, keep, resume, simulate or simulated_project is not None)
        detach_run(experiment, exp, stack, budget, runs_dir)
        return
    if resume and not (runs_dir / resume / "optuna.db").exists():
        raise ConfigError(f"--resume {resume}: no sweep study at {runs_dir / resume / 'optuna.db'}")
    report = run_experiment(exp, runs_dir=runs_dir, keep=keep, echo=out, board=functools.partial(_board, exp),
                            resume=resume, data_board=_data_board)
    show_report(exp, report)


def _detachable(experiment: Path, exp: Experiment, given: dict, keep: bool, resume: str | None,
                simulated: bool) -> None:
    """What --detach carries to the controller: an experiment file, --stack and --budget."""
    from infra.spec.stack_config import read_yaml_mapping
    from trainctl.jobs.job_spec import is_job_spec

    refused = [name for name, on in (("--keep", keep), ("--resume", resume), ("--simulate", simulated),
                                     ("job-spec flags", bool(given)),
                                     ("a job spec", is_job_spec(read_yaml_mapping(experiment, "experiment file")))) if on]
    if refused:
        raise ConfigError(f"--detach takes an experiment file with --stack and --budget; not with "
                          f"{', '.join(refused)} (run those attached)")


def _cluster(exp: Experiment) -> ClusterSpec:
    """The cluster `run` would get, validated as `run` validates it before anything exists."""
    from infra.spec.stack_config import load_stack

    return load_stack(exp.stack, name=exp.name, overrides={**exp.overrides, "ephemeral": True},
                      overrides_from=exp.overrides_from)


def _show_plan(exp: Experiment, notes: list[str]) -> None:
    from trainctl.cli.run_output import print_cluster, print_experiment, print_jax_launch
    from trainctl.jobs.experiment import keras_notes, refuse_framework_mismatch

    spec = _cluster(exp)
    refuse_framework_mismatch(spec, exp.run.framework)
    print_experiment(exp, notes)
    for note in keras_notes(exp, spec):
        out(f"# note: {note}")
    print_cluster(spec, realizers.for_spec(spec).estimate(spec))
    if exp.run.framework == "jax":
        print_jax_launch(spec, exp)


def _board(exp: Experiment, inventory: Inventory) -> NodeBoard:
    """The bootstrap board of the stack `run` brought up: its nodes are known once it is up."""
    from trainctl.cli.progress import bootstrap_board

    return bootstrap_board(inventory.stack, [n.name for n in inventory.nodes], setup=bool(exp.setup),
                           image=exp.container is not None)


def _data_board(inventory: Inventory) -> NodeBoard:
    from trainctl.cli.progress import data_board

    return data_board(inventory.stack, [n.name for n in inventory.nodes])


@verbs.command()
def stage(experiment: Annotated[Path, typer.Argument(help="experiment YAML: its data: inputs")],
          stack: Annotated[str, typer.Option("--stack", "-s", callback=live_stack_argument,
                                             help="a stack that is up (and bootstrapped)")],
          runs_dir: RunsDirOpt = None) -> None:
    """Copy the experiment's data: inputs to every node of a live stack, as `run` does before
    training; what a node already holds (same object generation) is not copied again."""
    from trainctl.jobs.data_phase import refuse_unobtainable, stage_inputs
    from trainctl.jobs.experiment_file import load_experiment

    exp = load_experiment(experiment)
    if not exp.data:
        raise ConfigError(f"{experiment}: no data: inputs to stage")
    inventory = realizers.inventory(stack)
    capabilities = realizers.capabilities(realizers.spec(stack))
    reaches_google = capabilities.reaches_google
    if not capabilities.needs_bootstrap:
        raise ConfigError(f"stack {stack} runs jobs as GKE pods, which mount the data: inputs when they "
                          "start (Cloud Storage FUSE); there are no nodes to stage onto")
    refuse_unobtainable(exp.data, over_ssh=capabilities.needs_bootstrap, reaches_google=reaches_google,
                        image=False)
    log_dir = (runs_dir or runs_root()) / f"stage-{stack}"
    with _data_board(inventory) as board:
        results = stage_inputs(inventory, exp.data, log_dir, reaches_google=reaches_google, echo=say, report=board)
    for result in results:
        out(f"{result.node}\tcopied {result.copied}\t{result.copied_bytes}\tkept {result.kept}")


@verbs.command("check-network")
def check_network(stack: Annotated[str, typer.Option("--stack", "-s", callback=live_stack_argument,
                                                     help="a stack that is up and bootstrapped with torch")],
                  min_fraction: Annotated[float, typer.Option(min=0.01, max=1.0, help="of the catalog's "
                                                              "expected bus bandwidth")] = 0.5,
                  warn: Annotated[bool, typer.Option("--warn", help="only warn when below")] = False,
                  size_mb: Annotated[int, typer.Option(min=1, max=4096, help="MiB per all-reduce")] = 32,
                  runs_dir: RunsDirOpt = None) -> None:
    """The network pre-flight alone: an all-reduce across every node, its bus bandwidth against
    what the catalog expects of the stack's network; exit 1 below --min-fraction of it."""
    import secrets

    from trainctl.jobs.network_check import preflight
    from trainctl.launchers.registry import launcher_for_cluster

    cluster = realizers.spec(stack)
    run_id = f"netcheck-{secrets.token_hex(3)}"
    figure = preflight(launcher_for_cluster(cluster), cluster, realizers.inventory(stack), run_id,
                       (runs_dir or runs_root()) / run_id, say, min_fraction=min_fraction,
                       below="warn" if warn else "refuse", size_mb=size_mb)
    if figure is not None:
        out(f"busbw_gbps\t{figure.gbps}\texpected\t{figure.expected_gbps}\ttransport\t{figure.transport}")


@verbs.command()
def build(experiment: Annotated[Path, typer.Argument(help="experiment YAML: its code and requirements "
                                                       "become the image")],
          stack: Annotated[Optional[str], typer.Option("--stack", "-s", callback=lambda v: v and stack_argument(v),
                                                       help="push to this stack's registry")] = None,
          show_plan: Annotated[bool, typer.Option("--plan", help="print the Containerfile; build nothing")] = False,
          ) -> None:
    """Build the experiment's container image (base from Debian's packages, then the requirements,
    then the code); with --stack, push it to the stack's registry and print it by digest."""
    from trainctl.jobs.experiment import bootstrap_spec
    from trainctl.jobs.experiment_file import load_experiment
    from trainctl.jobs.image import ImageSpec, base_tar, build as build_image, containerfile, push

    exp = load_experiment(experiment)
    spec = ImageSpec(name=exp.name, code=bootstrap_spec(exp, "python3"))
    if show_plan:
        out(containerfile(spec, f"localhost/trainctl/base (from {base_tar()})"))
        return
    log = runs_root() / f"image-{exp.name}" / "build.log"
    built = build_image(spec, log, say)
    out(built.local)
    if stack is None:
        return
    inventory = realizers.inventory(stack)
    if inventory.registry is None:
        raise ConfigError(f"stack {stack} has no container registry")
    out(push(built, inventory.registry, log, say))


@verbs.command()
def logs(run_id: Annotated[str, typer.Argument(callback=run_id_argument, help="run id (see runs/)")],
         node: Annotated[Optional[str], typer.Option(help="only this node")] = None,
         follow: Annotated[bool, typer.Option("--follow", "-f", help="keep printing until the run ends")] = False,
         runs_dir: RunsDirOpt = None) -> None:
    """Print a run's per-node logs (of a running or finished run)."""
    from trainctl.launchers.run_logs import print_logs

    from trainctl.cli.detached_verbs import run_ended

    runs_dir = runs_dir or runs_root()
    print_logs(runs_dir, run_id, out, node=node, follow=follow, ended=run_ended(runs_dir, run_id))


@verbs.command()
def report(run_id: Annotated[str, typer.Argument(callback=run_id_argument, help="run or sweep id (see runs/)")],
           runs_dir: RunsDirOpt = None) -> None:
    """Where a run's (or a sweep's) time and money went: goodput, badput by cause, cost per interval
    kind and per trial; draws its timeline (timeline.png; a sweep's trial_cost.png too)."""
    from trainctl.cli.ledger_output import show_breakdown, show_trials, summary_lines
    from trainctl.cli.output import result
    from trainctl.jobs.ledger_plot import draw_ledger
    from trainctl.jobs.ledger_record import LEDGER, load

    run_dir = (runs_dir or runs_root()) / run_id
    if not (run_dir / LEDGER).exists():
        what = f"no run {run_id} in {run_dir.parent}" if not run_dir.is_dir() else f"no {LEDGER} in {run_dir}"
        raise ConfigError(f"{what}: `trainctl run` and `trainctl launch` write one as a run ends "
                          "(a run stopped before it ended, or made by a trainctl older than its ledger, has none)")
    ledger = load(run_dir)
    show_breakdown(ledger)
    if ledger.trials:
        show_trials(ledger)
    for line in summary_lines(ledger):
        result(line)
    for picture in draw_ledger(ledger, run_dir):
        result(f"picture: {picture}")
