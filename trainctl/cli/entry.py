"""trainctl: plan, up, bootstrap, launch, run, exec, status, logs, ssh, down.

Each verb imports what it uses when it runs: `--help` and `ls` start in a fraction of the time
the models, Pulumi, fabric and rich's tables take to load (bench/cli_start.py)."""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from infra.providers import realizers
from infra.errors import ConfigError, TrainctlError
from trainctl.launchers import DEFAULT_JOB_RETRIES, DEFAULT_MAX_RESTARTS


def _help_style() -> dict:
    """Boxed rich help on a terminal; plain help on one line per option in a pipe or CI log,
    where rich would draw 80-column boxes and cut option help to fragments."""
    if sys.stdout.isatty():
        return {}
    return {"rich_markup_mode": None,
            "context_settings": {"terminal_width": PIPE_HELP_WIDTH, "max_content_width": PIPE_HELP_WIDTH}}


# Wide enough that the longest option help stays on the option's line.
PIPE_HELP_WIDTH = 160

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Provision, bootstrap, launch and tear down distributed training clusters.",
                  **_help_style())

def _stack_argument(value: str) -> str:
    """A stack name (it names folders and interfaces) or the path of a stack file."""
    if Path(value).suffix in (".yaml", ".yml"):
        return value
    from infra.spec.cluster import validate_name

    try:
        return validate_name(value, "--stack")
    except ValueError as exc:
        raise ConfigError(f"{exc}; or give the path of a stack file (*.yaml)") from None


def _run_id_argument(value: str | None) -> str | None:
    from trainctl.launchers.spec import check_run_id

    try:
        return None if value is None else check_run_id(value)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


StackOpt = Annotated[str, typer.Option("--stack", "-s", callback=_stack_argument,
                                       help="stack name (stacks/Pulumi.<stack>.yaml) or stack file")]
NodesOpt = Annotated[Optional[str], typer.Option("--nodes", help="comma-separated node names or ranks")]
SimulateOpt = Annotated[bool, typer.Option(
    "--simulate", help="gcp stacks: stand the stack up in a simulated project on this machine "
                       "(no Google account; the GCP realizer runs end to end against it)")]
SimulatedProjectOpt = Annotated[Optional[Path], typer.Option(
    "--simulated-project", help="YAML describing the simulated project (APIs off, quotas, "
                                "stockouts); implies --simulate")]


def _simulate_if_asked(spec, simulate: bool, project_file: Path | None) -> None:
    if simulate or project_file is not None:
        realizers.for_spec(spec).simulate(spec, project_file)


RunsDirOpt = Annotated[Optional[Path], typer.Option(help="where runs/<run-id>/ are (default: runs/ in the project root)")]


def runs_root() -> Path:
    """Runs are kept in the project (trainctl init, or trainctl's own checkout), wherever a
    command is started from, as its stacks are read from there."""
    from infra.spec.stack_config import project_root

    return project_root() / "runs"


def console():
    from trainctl.cli.progress import console

    return console


def say(message: str) -> None:
    console().print(message, soft_wrap=True)


def fail(title: str, details: str) -> None:
    """Failure details quote program output: never read them as rich markup."""
    console().print(title, style="bold red", markup=False)
    console().print(details, markup=False, highlight=False, soft_wrap=True)


def table(title: str, columns: tuple[str, ...]):
    from rich.table import Table

    shown = Table(title=title, title_justify="left")
    for column in columns:
        shown.add_column(column)
    return shown


_OUT = threading.Lock()


def out(line: str) -> None:
    """One whole line at a time: every node's stream is echoed from its own thread, and print()
    writes the text and its newline separately, so two nodes' lines could run into one."""
    with _OUT:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _nodes_over_ssh(stack: str, verb: str):
    """The inventory of a stack whose nodes answer over SSH; a GKE stack's work runs in pods."""
    inventory = realizers.inventory(stack)
    if not inventory.nodes:
        raise ConfigError(
            f"`trainctl {verb}` reaches nodes over SSH, and stack {stack} has none: its work runs "
            f"as GKE pods. `trainctl launch --stack {stack} -- CMD` runs a Job and streams its "
            f"logs; for pods use kubectl with KUBECONFIG={inventory.kubeconfig}")
    return inventory


def _node_list(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


# --------------------------------------------------------------------------------------------


@app.command()
def plan(stack: StackOpt = "local",
         nodes: Annotated[Optional[int], typer.Option(help="override the node count")] = None,
         as_json: Annotated[bool, typer.Option("--json", help="the plan as one JSON document on stdout "
                                                             "(docs/plan-json.md), for policies in CI")] = False) -> None:
    """Show what `up` would create, without creating anything."""
    from infra.spec.stack_config import load_stack
    from trainctl.cli.output import result, show, table as result_table

    spec = load_stack(stack, overrides=None if nodes is None else {"nodes": nodes}, overrides_from="--nodes")
    realizer = realizers.for_spec(spec)
    rows = realizer.plan(spec)
    cost = realizer.estimate(spec)
    notes = [f"bucket gs://{r.name} is kept by `trainctl down` (a named stack's checkpoints outlive "
             f"it); delete it with `gcloud storage rm -r gs://{r.name}`" for r in rows if r.kept_on_down]
    if as_json:
        from trainctl.cli.plan_document import plan_document

        out(plan_document(spec, rows, cost, notes, realizer.capabilities(spec)).model_dump_json(indent=2))
        return
    resources = result_table("resource", "name", "details")
    for r in rows:
        resources.add_row(r.kind, r.name, ", ".join(f"{k}={v}" for k, v in r.values.items()))
    show(f"stack {spec.name} ({spec.provider}): {spec.node_count} node(s), {spec.accelerator}", resources)
    for note in notes:
        result(note)
    for what, per_hour in cost.lines:
        result(f"  {what}: ${per_hour:.2f}/hour")
    result(f"estimated ${cost.per_hour:.2f}/hour; ${cost.for_hours(spec.ttl_hours):.2f} for the "
           f"{spec.ttl_hours:g} h TTL (list prices, before discounts and egress)")


@app.command(name="ls")
def ls_() -> None:
    """Live stacks and experiments: age, TTL left, estimated cost so far."""
    rows = realizers.live()
    if not rows:  # stdout stays empty: no stack
        say("No stack is up. Start one with `trainctl up --stack local`, "
            "or run an experiment: `trainctl run examples/digits-ddp.yaml`.")
        return
    from trainctl.cli.output import show, table as result_table

    stacks = result_table("stack", "provider", "nodes", "age", "TTL left", "cost so far")
    for r in sorted(rows, key=lambda r: r.stack):
        if r.broken:
            stacks.add_row(r.stack, r.provider, "?", "?", "?", "state unreadable: down --force")
            continue
        left = f"{r.ttl_left_h:.2f} h" if r.ttl_left_h > 0 else "[red]expired[/]"
        stacks.add_row(r.stack, r.provider, str(r.nodes), f"{r.age_h:.2f} h", left, f"${r.cost_so_far:.2f}")
    show("stacks", stacks)


@app.command()
def reap(project: Annotated[Optional[str], typer.Option(help="GCP project to sweep (default: "
                                                              "this machine's local stacks)")] = None,
         dry_run: Annotated[bool, typer.Option(help="list, delete nothing")] = False,
         simulate: SimulateOpt = False) -> None:
    """Delete what outlived its TTL: local stacks here, or trainctl's GCP VMs and TPUs."""
    if simulate:
        realizers.simulate_project(project)
    reaped = realizers.reap(project, dry_run, say)
    for name in reaped:  # the result, one name a line; how it went is on stderr
        out(f"{name}{' (expired; --dry-run: kept)' if dry_run else ' removed'}")
    if not reaped:
        say("nothing expired")


@app.command()
def init(directory: Annotated[Path, typer.Argument(help="your repository (default: here)")] = Path(".")) -> None:
    """Make a repository a trainctl project: Pulumi.yaml, stacks/ (local and GCP), an experiment."""
    from trainctl.jobs.init_project import init_project

    for path in init_project(directory):
        say(f"wrote {path}")
    say("next: `trainctl plan --stack local`, then `trainctl run experiment.yaml` "
        "(or `pulumi up --stack gpu-t4x2` after setting its project and ssh.source_ranges)")


@app.command()
def up(stack: StackOpt = "local",
       nodes: Annotated[Optional[int], typer.Option(help="override the node count")] = None,
       simulate: SimulateOpt = False, simulated_project: SimulatedProjectOpt = None) -> None:
    """Create the stack's cluster."""
    from infra.spec.stack_config import load_stack

    spec = load_stack(stack, overrides=None if nodes is None else {"nodes": nodes}, overrides_from="--nodes")
    _simulate_if_asked(spec, simulate, simulated_project)
    start = time.monotonic()
    inventory = realizers.for_spec(spec).up(spec, say)
    say(f"[green]stack {stack} is up[/] in {time.monotonic() - start:.1f}s: "
        + ", ".join(f"{n.name}={n.internal_ip}" for n in inventory.nodes))


@app.command()
def down(stack: StackOpt = "local",
         force: Annotated[bool, typer.Option(help="remove what exists by name even without "
                                                  "(or with a corrupt) state file")] = False) -> None:
    """Remove everything the stack created. Safe to repeat."""
    existed = realizers.for_stack(stack).down(stack, force=force, progress=say)
    say(f"[green]stack {stack} removed[/]" if existed else f"stack {stack} does not exist: nothing to do")


@app.command()
def bootstrap(
    stack: StackOpt = "local",
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
    from bootstrap.plan import BootstrapSpec, check_inputs
    from bootstrap.plan import plan as bootstrap_plan
    from bootstrap.runner import bootstrap as run_bootstrap
    from trainctl.cli.progress import NodeBoard

    if experiment:
        from trainctl.jobs.experiment import bootstrap_spec
        from trainctl.jobs.experiment_file import load_experiment

        exp = load_experiment(experiment)
        spec = bootstrap_spec(exp, "python3").model_copy(update={"force": tuple(force or ())})
    else:
        if requirements is None and (code / "requirements.txt").is_file():
            requirements = "requirements.txt"
        spec = _validated(BootstrapSpec, code_dir=code, requirements=requirements,
                          setup=tuple(setup or ()), force=tuple(force or ()))
    if image:
        spec = _validated(BootstrapSpec, **{**spec.model_dump(), "image": image})
    check_inputs(spec)
    inventory = _nodes_over_ssh(stack, "bootstrap")
    log_dir = _stack_log_dir(stack) / "bootstrap"
    if retry_failed:
        from bootstrap.runner import failed_last_time

        nodes = ",".join(failed_last_time(log_dir))
        if not nodes:
            say("no failed nodes recorded: nothing to retry")
            return
    selected = inventory.select(_node_list(nodes))
    if show_plan:
        for node_plan in bootstrap_plan(inventory, spec, selected):
            out(f"# {node_plan.node.name} ({node_plan.node.ssh_host}, {node_plan.node.accelerator!s})")
            for step in node_plan.steps:
                command = step.command if isinstance(step.command, str) else " ".join(step.command)
                skip = f" (skipped if fingerprint {step.fingerprint} is stored)" if step.fingerprint else ""
                out(f"[{step.name}] ({step.where}){skip} {command}")
                if step.instead:
                    out(f"[{step.name}] instead, {step.instead}")
        return
    from trainctl.launchers.interrupts import signals_as_interrupt

    with signals_as_interrupt(), NodeBoard(f"bootstrap {stack}", [n.name for n in selected],
                                           _steps(bool(spec.setup), spec.image is not None)) as board:
        run_bootstrap(inventory, spec, log_dir, nodes=[n.name for n in selected],
                      concurrency=concurrency, report=board)
    say(f"[green]bootstrap done[/] (logs: {log_dir})")


def _steps(setup: bool, image: bool) -> list[str]:
    """The bootstrap board's columns: the steps that will run."""
    if image:
        return ["ready", "drivers", "runtime", "pull"]
    return ["ready", "drivers", "sync", "env", *(["setup"] if setup else [])]


def _validated(model, **kwargs):
    from pydantic import ValidationError

    from infra.spec.stack_config import format_validation_error

    try:
        return model(**kwargs)
    except ValidationError as exc:
        raise ConfigError(format_validation_error("arguments", exc)) from None


def _stack_log_dir(stack: str) -> Path:
    return runs_root() / f"stack-{stack}"


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def launch(
    ctx: typer.Context,
    stack: StackOpt = "local",
    nproc_per_node: Annotated[int, typer.Option(help="processes per node")] = 1,
    max_restarts: Annotated[int, typer.Option(help="torchrun restarts of the worker group")] = DEFAULT_MAX_RESTARTS,
    framework: Annotated[str, typer.Option(help="torch (torchrun) or tensorflow (TF_CONFIG)")] = "torch",
    job_retries: Annotated[int, typer.Option(help="reruns of the whole job from its checkpoints")] = DEFAULT_JOB_RETRIES,
    show_plan: Annotated[bool, typer.Option("--plan", help="print each node's command (GKE: the "
                                                           "manifests); run nothing")] = False,
    run_id: Annotated[Optional[str], typer.Option(callback=_run_id_argument,
                                                  help="default: <stack>-<random>")] = None,
    image: Annotated[Optional[str], typer.Option(help="an image by digest (see `trainctl build`) "
                                                 "that holds code and environment: run in it")] = None,
) -> None:
    """Run a command under torchrun on every node: trainctl launch -- python train.py [args]."""
    import secrets

    from trainctl.launchers.spec import LaunchSpec
    from trainctl.launchers.registry import launcher_for

    command = list(ctx.args)
    if not command:
        raise ConfigError("nothing to launch: give the command after --, e.g. "
                          "`trainctl launch --stack local -- python train.py`")
    rid = run_id or f"{stack}-{secrets.token_hex(3)}"
    spec = _validated(LaunchSpec, run_id=rid, command=tuple(command), nproc_per_node=nproc_per_node,
                      max_restarts=max_restarts, framework=framework, job_retries=job_retries, image=image)
    inventory = realizers.inventory(stack)
    launcher = launcher_for(inventory)
    cluster = realizers.spec(stack)
    from trainctl.jobs.experiment import refuse_framework_mismatch

    refuse_framework_mismatch(cluster, framework)
    plan = launcher.dryrun(cluster, inventory, spec)
    if show_plan:  # exactly what `run` executes: each node's command line, or the Job's objects
        out(plan.render())
        return
    log_dir = runs_root() / rid / "logs" / "launch"
    say(f"run {rid} on {cluster.node_count} node(s) of stack {stack} ({inventory.target}); logs in {log_dir}")
    from trainctl.launchers.interrupts import signals_as_interrupt

    with signals_as_interrupt():  # SIGTERM too stops the job on every node
        result = launcher.run(plan, log_dir, out)
    if not result.ok:
        fail(f"run {rid} failed", result.describe_failures())
        raise typer.Exit(1)
    say(f"[green]run {rid} finished[/]")


@app.command()
def build(experiment: Annotated[Path, typer.Argument(help="experiment YAML: its code and requirements "
                                                       "become the image")],
          stack: Annotated[Optional[str], typer.Option("--stack", "-s", callback=lambda v: v and _stack_argument(v),
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


@app.command(name="exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def exec_(ctx: typer.Context, stack: StackOpt = "local", nodes: NodesOpt = None) -> None:
    """Run a shell command on every (or some) node in parallel: trainctl exec -- nvidia-smi."""
    from trainctl.launchers.ssh.remote_exec import run_everywhere

    command = " ".join(ctx.args)
    if not command:
        raise ConfigError("nothing to run: give the command after --")
    inventory = _nodes_over_ssh(stack, "exec")
    codes = run_everywhere(inventory, inventory.select(_node_list(nodes)), command,
                           _stack_log_dir(stack) / "exec", out)
    failed = {n: c for n, c in codes.items() if c != 0}
    for name, code in codes.items():
        say(f"{name}: exit {code}")
    if failed:
        raise typer.Exit(1)


def _gcloud(flag: str, help: str):
    """One of gcloud's own job flags, with gcloud's meaning (trainctl/jobs/gcloud_flags.py)."""
    return typer.Option(flag, help=f"job specs, as gcloud: {help}", rich_help_panel="gcloud's flags (job specs)")


@app.command(context_settings={"allow_extra_args": True})
def run(ctx: typer.Context,
        experiment: Annotated[Path, typer.Argument(help="experiment YAML, or an AI Platform "
                                                        "config.yaml / Vertex AI CustomJob spec")],
        keep: Annotated[bool, typer.Option(help="keep the stack after the run (TTL still "
                                                "applies)")] = False,
        runs_dir: RunsDirOpt = None,
        resume: Annotated[Optional[str], typer.Option(callback=_run_id_argument,
                                                      help="continue an interrupted sweep by its id")] = None,
        stack: Annotated[Optional[str], typer.Option(help="the stack to run on (an experiment file: instead of its own; a job spec: default local)")] = None,
        code: Annotated[Optional[Path], typer.Option(help="job specs: the trainer's source folder "
                                                          "(default: the spec's folder)")] = None,
        requirements: Annotated[Optional[str], typer.Option(help="job specs: requirements file, relative to "
                                                                 "the code (default: its requirements.txt)")] = None,
        framework: Annotated[Optional[str], typer.Option(help="job specs: torch or tensorflow "
                                                              "(default: from the training image)")] = None,
        show_plan: Annotated[bool, typer.Option("--plan", help="print the experiment (a job spec's "
                                                               "mapping) and run nothing")] = False,
        module_name: Annotated[Optional[str], _gcloud("--module-name", "the trainer's module (python -m)")] = None,
        package_path: Annotated[Optional[Path], _gcloud(
            "--package-path", "the trainer's package, built from its parent folder (its setup.py) and "
                              "installed with its dependencies")] = None,
        packages: Annotated[Optional[list[str]], _gcloud("--packages", "more package archives (paths or gs://), "
                                                                       "comma-separated")] = None,
        job_dir: Annotated[Optional[str], _gcloud("--job-dir", "passed to the trainer as --job-dir (here: the "
                                                               "stack's bucket)")] = None,
        runtime_version: Annotated[Optional[str], _gcloud("--runtime-version", "AI Platform runtime: its "
                                                                               "TensorFlow is installed")] = None,
        python_version: Annotated[Optional[str], _gcloud("--python-version", "checked against the runtime")] = None,
        scale_tier: Annotated[Optional[str], _gcloud("--scale-tier", "basic, standard-1, premium-1, custom")] = None,
        master_machine_type: Annotated[Optional[str], _gcloud("--master-machine-type", "masterType")] = None,
        worker_machine_type: Annotated[Optional[str], _gcloud("--worker-machine-type", "workerType")] = None,
        worker_count: Annotated[Optional[int], _gcloud("--worker-count", "workerCount")] = None,
        parameter_server_machine_type: Annotated[Optional[str], _gcloud("--parameter-server-machine-type",
                                                                        "parameterServerType")] = None,
        parameter_server_count: Annotated[Optional[int], _gcloud("--parameter-server-count",
                                                                 "parameterServerCount")] = None,
        master_image_uri: Annotated[Optional[str], _gcloud("--master-image-uri", "a custom container")] = None,
        region: Annotated[Optional[str], _gcloud("--region", "noted (the stack decides where)")] = None,
        worker_pool_spec: Annotated[Optional[list[str]], _gcloud(
            "--worker-pool-spec", "Vertex: machine-type=...,replica-count=...,executor-image-uri=...,"
                                  "python-module=...,local-package-path=... (once per pool)")] = None,
        args_: Annotated[Optional[list[str]], _gcloud("--args", "Vertex: the trainer's arguments, "
                                                                "comma-separated")] = None,
        python_package_uris: Annotated[Optional[list[str]], _gcloud("--python-package-uris",
                                                                    "Vertex: package archives in gs://")] = None,
        display_name: Annotated[Optional[str], _gcloud("--display-name", "Vertex: the job's name")] = None,
        simulate: SimulateOpt = False, simulated_project: SimulatedProjectOpt = None) -> None:
    """Run an experiment from nothing to nothing: up, bootstrap, launch, collect, down."""
    from trainctl.jobs.experiment import run_experiment
    from trainctl.jobs.experiment_file import load_experiment
    from trainctl.cli.progress import NodeBoard

    from trainctl.jobs.gcloud_flags import GcloudFlags

    gcloud = {k: v for k, v in locals().items() if k in GcloudFlags.model_fields and v is not None}
    flags = _validated(GcloudFlags, **gcloud, args=args_ or (), user_args=tuple(ctx.args))
    notes: list[str] = []
    exp = load_experiment(experiment, stack=stack, code=code, requirements=requirements,
                          framework=framework, notes=notes, flags=flags)
    if show_plan:
        import yaml

        from infra.spec.stack_config import load_stack

        out(yaml.safe_dump(exp.model_dump(mode="json", exclude_defaults=True), sort_keys=False).rstrip())
        for note in notes:
            out(f"# note: {note}")
        # the cluster it would get, validated as `run` validates it before anything exists
        spec = load_stack(exp.stack, name=exp.name, overrides={**exp.overrides, "ephemeral": True},
                          overrides_from=exp.overrides_from)
        for role, _, group in spec.groups():
            shape = group.machine_type or "local node"
            gpu = f" + {group.accelerator}" if group.gpu else ""
            out(f"# {role or 'nodes'}: {group.node_count} x {shape}{gpu}{' (spot)' if group.spot else ''}")
        out(f"# estimated ${realizers.for_spec(spec).estimate(spec).per_hour:.2f}/hour")
        return
    for note in notes:
        say(f"note: {note}")
    if simulate or simulated_project is not None:
        from infra.spec.stack_config import load_stack

        _simulate_if_asked(load_stack(exp.stack, name=exp.name, overrides={**exp.overrides, "ephemeral": True},
                                      overrides_from=exp.overrides_from), simulate, simulated_project)

    def board(inventory):
        return NodeBoard(f"bootstrap {inventory.stack}", [n.name for n in inventory.nodes],
                         _steps(bool(exp.setup), exp.container is not None))

    runs_dir = runs_dir or runs_root()
    if resume and not (runs_dir / resume / "optuna.db").exists():
        raise ConfigError(f"--resume {resume}: no sweep study at {runs_dir / resume / 'optuna.db'}")
    report = run_experiment(exp, runs_dir=runs_dir, keep=keep, echo=out, board=board, resume=resume)
    phases = table(f"run {report.run_id}", ("phase",))
    phases.add_column("seconds", justify="right")
    for name, seconds in report.phases.items():
        phases.add_row(name, f"{seconds:.1f}")
    phases.add_row("total", f"{sum(report.phases.values()):.1f}")
    console().print(phases)
    if report.trials:
        names = [p.name for p in exp.sweep.parameters] if exp.sweep else []
        trials = table(f"sweep {report.run_id}",
                       ("trial", "state", exp.sweep.metric if exp.sweep else "value", *names))
        for t in report.trials:
            trials.add_row(str(t.number), t.state, "" if t.value is None else f"{t.value:.4f}",
                           *(str(t.params.get(n)) for n in names))
        console().print(trials)
        say(f"best: {(report.run_dir / 'best.json').read_text()}; plot: {report.run_dir / 'sweep.png'}")
    if report.result and report.result.recoveries:
        say(f"recovered from {len(report.result.recoveries)} preemption(s):")
        for i, r in enumerate(report.result.recoveries, 1):
            redone = "unknown steps" if r.steps_redone is None else f"{r.steps_redone} step(s)"
            tries = f" after {r.tries} tries (no capacity)" if r.tries > 1 else ""
            say(f"  {i}. {', '.join(r.nodes)} back and the job resumed in {r.seconds:.1f} s{tries}; "
                f"resumed from step {r.resumed_from_step}, {redone} redone")
    if report.spot_saving_usd is not None:
        say(f"spot saving against on-demand for {report.phases.get('train', 0):.0f} s of training: "
            f"${report.spot_saving_usd:.2f}" + (" (local stack: nothing is billed)"
                                               if report.spot_saving_usd == 0 else ""))
    if report.metrics:
        say(f"test accuracy {report.metrics.get('test_accuracy', float('nan')):.4f}; "
            f"artifacts in {report.run_dir}")


@app.command()
def status(stack: StackOpt = "local",
           run: Annotated[Optional[str], typer.Option(callback=_run_id_argument,
                                                      help="a run id: its outcome instead")] = None,
           runs_dir: RunsDirOpt = None) -> None:
    """Show the stack's nodes and whether each answers over SSH (host key verified), or a run's state."""
    if run:
        from trainctl.launchers.run_logs import outcome

        out(outcome(runs_dir or runs_root(), run))
        return
    from rich.text import Text

    from trainctl.cli.output import show, table as result_table
    from trainctl.launchers.ssh.remote_exec import probe

    inventory = _nodes_over_ssh(stack, "status")
    nodes = result_table("node", "rank", "address", "accelerator", "ssh")
    for node, seconds, error in sorted(probe(inventory), key=lambda probed: probed[0].rank):
        state = Text(error, style="red") if seconds is None else Text(f"ok ({seconds * 1000:.0f} ms)", style="green")
        nodes.add_row(node.name, str(node.rank), node.internal_ip, str(node.accelerator), state)
    show(f"stack {stack} ({inventory.provider}), bucket {inventory.bucket_uri}", nodes)


@app.command()
def logs(run_id: Annotated[str, typer.Argument(callback=_run_id_argument, help="run id (see runs/)")],
         node: Annotated[Optional[str], typer.Option(help="only this node")] = None,
         follow: Annotated[bool, typer.Option("--follow", "-f", help="keep printing until the run ends")] = False,
         runs_dir: RunsDirOpt = None) -> None:
    """Print a run's per-node logs (of a running or finished run)."""
    from trainctl.launchers.run_logs import print_logs

    print_logs(runs_dir or runs_root(), run_id, out, node=node, follow=follow)


@app.command(hidden=True)
def preempt(node: Annotated[str, typer.Argument(help="node name")], stack: StackOpt = "local",
            grace: Annotated[float, typer.Option(help="seconds between the shutdown's SIGTERM and "
                                                      "the stop (GCE: about 30)")] = 30.0,
            unavailable_for: Annotated[float, typer.Option(
                min=0, help="seconds the zone then has no capacity for it (a stockout)")] = 0.0) -> None:
    """Reclaim a spot node as GCE does (local stacks): for trying recovery by hand."""
    action = realizers.for_stack(stack).preempt(stack, node, grace=grace, progress=say,
                                                unavailable_for=unavailable_for)
    say(f"{node} preempted ({action})")


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def ssh(ctx: typer.Context, node: Annotated[str, typer.Argument(help="node name or rank")],
        stack: StackOpt = "local") -> None:
    """Open a shell (or run a command) on one node, host key pinned."""
    from bootstrap.ssh import openssh_command

    inventory = _nodes_over_ssh(stack, "ssh")
    target = inventory.node(node)
    argv = [*openssh_command(inventory, target), target.ssh_host, *ctx.args]
    os.execvp(argv[0], argv)


def main() -> None:
    try:
        _main()
    finally:
        # The command is done: the interpreter's last collections would walk every object of
        # pydantic, rich, paramiko (measured on a one-node `bootstrap`: 56-79 ms from the last
        # atexit handler to the process's end, 11-14 ms frozen). Objects still go by reference
        # counting, and atexit handlers still run.
        gc.freeze()


def _main() -> None:
    try:
        # Without standalone mode click returns typer.Exit's code instead of exiting.
        code = app(standalone_mode=False)
        if code == 130:  # typer's answer to a KeyboardInterrupt (Ctrl-C, SIGTERM, SIGHUP)
            console().print("interrupted", style="yellow")
        sys.exit(code if isinstance(code, int) else 0)
    except ConfigError as exc:
        console().print(f"error: {exc}", style="red", markup=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except TrainctlError as exc:  # what failed is in the message; no traceback
        fail(exc.title, str(exc))
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        console().print("interrupted", style="yellow")
        sys.exit(130)
    except typer.TyperException as exc:  # click's usage errors: a bad option or argument
        show = getattr(exc, "show", None)
        if show:
            show()
        else:
            console().print(f"error: {exc}", style="red", markup=False)
        sys.exit(getattr(exc, "exit_code", 2))


if __name__ == "__main__":
    main()
