"""An experiment from nothing to nothing: up → bootstrap → launch → collect → down.

`down` runs in a `finally`, and SIGTERM/SIGHUP are turned into the same interrupt as Ctrl-C
(trainctl/launchers/interrupts.py), so every way out of the run tears the stack down. The local realizer
records intent before it creates anything, so even a `kill -9` leaves only what `trainctl down`
removes.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator

from bootstrap.plan import BootstrapSpec
from bootstrap.runner import bootstrap, no_report
from infra.errors import ConfigError, RemoteError
from infra.providers.inventory import Inventory
from infra.spec.cluster import ClusterSpec
from infra.spec.stack_config import load_stack
from infra.providers import realizers
from trainctl.jobs.collect import Collector, draw_loss
from trainctl.jobs.data_phase import readable_by_nodes, refuse_unobtainable
from trainctl.jobs.experiment_spec import Experiment, SweepSection, from_workdir
from trainctl.jobs.legacy_keras import (keras_3_warning, legacy_keras_env, legacy_keras_note,
                                        legacy_keras_packages, read_requirements)
from trainctl.jobs.node_recovery import keep_placement, recovery
from trainctl.jobs.before_training import check_network, stage_data_inputs
from trainctl.jobs.run_ledger import keep_ledger, share_ledger
from trainctl.jobs.spending import budgeted
from trainctl.jobs.collect_reserve import reserving_collect
from trainctl.jobs.stack_run import PhaseClock, RunReport, StackRun, keeping_waits
from trainctl.launchers.interrupts import (
    interrupt_main,
    signals_as_interrupt,
    uninterruptible,
)
from trainctl.launchers.cluster_env import job_dir
from trainctl.launchers.shared_dir import refuse_unshareable
from trainctl.launchers.spec import LaunchSpec
from trainctl.launchers.run_logs import RESULT_FILE
from trainctl.launchers.registry import launcher_for_cluster
from trainctl.jobs.sweep import best, parallelism, run_sweep


class RunFailed(RemoteError):
    title = "run failed"


@contextlib.contextmanager
def ttl_guard(hours: float, echo: Callable[[str], None]) -> Iterator[None]:
    """The CLI's half of TTL enforcement: interrupt the run when its time is up."""
    def expire() -> None:
        echo(f"[trainctl] TTL of {hours} h reached: stopping and tearing down")
        interrupt_main(f"TTL of {hours} h reached")

    timer = threading.Timer(hours * 3600, expire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def new_run_id(name: str) -> str:
    return f"{name}-{secrets.token_hex(3)}"


def bootstrap_spec(exp: Experiment, python: str) -> BootstrapSpec:
    packages = legacy_keras_packages(exp.run.legacy_keras, read_requirements(exp.code_dir, exp.requirements))
    return BootstrapSpec(code_dir=exp.code_dir, excludes=exp.excludes, requirements=exp.requirements,
                         packages=packages, setup=exp.setup, python=python)


def keras_notes(exp: Experiment, spec: ClusterSpec) -> list[str]:
    """What the plan says of Keras: what run.legacy_keras sets up, or the warning where the
    requirements show Keras 3's model.fit failing across the nodes (trainctl/jobs/legacy_keras.py)."""
    if exp.run.framework != "tensorflow" or (exp.container and exp.container.image):
        return []  # an image's own environment is not known here
    requirements = read_requirements(exp.code_dir, exp.requirements)
    if exp.run.legacy_keras:
        return [legacy_keras_note(legacy_keras_packages(True, requirements), requirements)]
    warning = keras_3_warning(requirements, exp.run.env, spec.node_count)
    return [warning] if warning else []


def start_image(exp: Experiment, spec: ClusterSpec, bspec: BootstrapSpec, log: Path,
                pool: ThreadPoolExecutor, echo: Callable[[str], None]) -> Future | None:
    """The experiment's image, built while the stack comes up (it needs nothing from it); an
    image in Artifact Registry is used as it is. Where pods run images (GKE), an experiment
    without `container:` gets one of its code, as `container: {}` would: the framework's stock
    image holds neither the code nor its requirements."""
    can = realizers.capabilities(spec)
    if exp.container is None and can.needs_bootstrap:
        return None
    from trainctl.jobs.experiment_spec import in_artifact_registry
    from trainctl.jobs.image import BuiltImage, ImageSpec, build

    image = exp.container.image if exp.container else None
    if exp.container is None and can.stands_in_images:
        echo("[trainctl] simulated cluster: its pods run the code and an environment of its "
             "requirements in place of an image (none is built)")
        from trainctl.jobs.image import stand_in

        return pool.submit(stand_in, exp.name, bspec, log)
    if image and in_artifact_registry(image):
        if not can.reaches_google:
            raise ConfigError(f"container.image {image} is in Artifact Registry, which local nodes cannot "
                              "reach; build the image with trainctl (container: {} or `trainctl build`)")
        return pool.submit(lambda: image)
    if image:
        return pool.submit(BuiltImage.from_ref, image)
    return pool.submit(build, ImageSpec(name=exp.name, code=bspec), log, lambda m: echo(f"[trainctl] {m}"))


def push_image(built: Future, inventory: Inventory, log: Path, echo: Callable[[str], None]) -> str:
    """The image by digest in the stack's registry, where every node can pull it."""
    from trainctl.jobs.image import push

    image = built.result()
    if isinstance(image, str):
        return image
    if inventory.registry is None:
        raise ConfigError(f"stack {inventory.stack} has no container registry (the local stack starts "
                          "one where Debian's docker-registry is installed: run scripts/install.sh)")
    return push(image, inventory.registry, log, lambda m: echo(f"[trainctl] {m}"))


def missing_artifacts(exp: Experiment, missing: list[str]) -> str | None:
    """What the job did not write of the artifacts the experiment names; the default set
    (metrics.json, model/: trainctl's trainers' and AIP_MODEL_DIR's) is collected where present
    and not asked for, so a job spec that never named it hears nothing of it."""
    if not missing or "artifacts" not in exp.model_fields_set:
        return None
    return f"artifacts not found: {', '.join(missing)}"


def launch_spec(exp: Experiment, run_id: str, procs_per_node: int, stack: ClusterSpec | None = None) -> LaunchSpec:
    """The experiment's launch; a GKE stack's queue and priority class apply where it names none."""
    return LaunchSpec(queue=exp.queue or (stack.queue if stack else None),
                      priority_class=exp.priority_class or (stack.priority_class if stack else None),run_id=run_id, command=exp.run.command, framework=exp.run.framework,
                      nproc_per_node=exp.run.processes_per_node or procs_per_node,
                      max_restarts=exp.restart.max_restarts, job_retries=exp.restart.job_retries,
                      permanent_exit_codes=exp.restart.permanent_exit_codes,
                      env={**legacy_keras_env(exp.run.legacy_keras), **exp.run.env},
                      max_recoveries=exp.restart.max_recoveries, role_commands=exp.run.commands,
                      data=exp.data, shared_dir=exp.shared_dir)


def spot_saving(spec: ClusterSpec, train_seconds: float) -> float:
    """What the run's spot nodes saved against the same nodes on demand (catalog list prices)."""
    realizer = realizers.for_spec(spec)
    on_demand = realizer.estimate(spec.on_demand())
    # the estimates' own lines, not their per_hour (rounded to the cent, which a short run's saving is under)
    hourly = sum(v for _, v in on_demand.lines) - sum(v for _, v in realizer.estimate(spec).lines)
    return round(hourly * train_seconds / 3600, 6)


def record_spot_saving(result_file: Path, saving: float) -> None:
    """`trainctl status --run` shows it with the run's outcome."""
    if result_file.exists():
        data = json.loads(result_file.read_text())
        result_file.write_text(json.dumps({**data, "spot_saving_usd": saving}, indent=2))


def refuse_workdir_artifacts_in_pods(exp: Experiment, over_ssh: bool) -> None:
    """`workdir:` artifacts are copied from the chief node over SSH; a pod's working directory
    goes with the pod."""
    on_chief = [a for a in exp.artifacts if from_workdir(a) is not None]
    if on_chief and not over_ssh:
        raise ConfigError(f"artifacts {', '.join(on_chief)}: stack {exp.stack} runs the job as GKE pods, whose "
                          "working directories go with them; save these files under the job dir "
                          "($AIP_MODEL_DIR, or the --job-dir argument) and name them without workdir:")


def refuse_framework_mismatch(spec: ClusterSpec, framework: str) -> None:
    """Refuses, before anything exists, a framework the cluster's nodes or its target cannot run."""
    problem = spec.framework_problem(framework)
    if problem:
        raise ConfigError(problem)
    refused = realizers.capabilities(spec).refused_frameworks.get(framework)
    if refused:
        raise ConfigError(f"stack {spec.name}: framework {framework} cannot run on a {spec.kind} stack: {refused}")


def prepare_run(exp: Experiment, run_id: str, runs_dir: Path, echo: Callable[[str], None]) -> StackRun:
    """Validate everything before anything exists; then the run's folder."""
    budget = {"budget": exp.budget} if exp.budget else {}
    # The experiment's queue and priority override the stack's; the stack's checks refuse them off GKE.
    kueue = {k: v for k, v in (("queue", exp.queue), ("priority_class", exp.priority_class)) if v}
    spec = load_stack(exp.stack, name=run_id, overrides_from=exp.overrides_from,
                      overrides={**exp.overrides, **budget, **kueue, "ephemeral": True, "ttl_hours": exp.ttl_hours})
    spec = readable_by_nodes(spec, exp.data)
    spending = budgeted(exp, spec, echo)
    bspec = bootstrap_spec(exp, spec.python)
    lspec = launch_spec(exp, run_id, spec.procs_per_node, spec)
    refuse_framework_mismatch(spec, lspec.framework)
    if lspec.queue:
        # The run's cluster is its own, new one: no admin installed Kueue on it.
        raise ConfigError(f"experiment {exp.name}: queue {lspec.queue!r} names a Kueue LocalQueue, and `trainctl run` "
                          "stands up a cluster of its own, which has no Kueue (trainctl does not install it yet): "
                          "on a live GKE stack whose cluster has Kueue and JobSet, name the queue in the stack file "
                          "and run `trainctl launch --stack <stack> -- <command>`")
    for note in keras_notes(exp, spec):
        echo(f"[trainctl] note: {note}")
    launcher = launcher_for_cluster(spec)
    needs_bootstrap = realizers.capabilities(spec).needs_bootstrap
    refuse_workdir_artifacts_in_pods(exp, needs_bootstrap)
    if exp.shared_dir is not None:
        refuse_unshareable(exp.stack, realizers.capabilities(spec))
    refuse_unobtainable(exp.data, over_ssh=needs_bootstrap, reaches_google=realizers.capabilities(spec).reaches_google,
                        image=exp.container is not None)
    if exp.sweep:
        launcher.check_slots(spec, parallelism(exp.sweep))
    report = RunReport(run_id, runs_dir / run_id)
    report.run_dir.mkdir(parents=True, exist_ok=True)
    return StackRun(exp, run_id, spec, bspec, lspec, launcher, needs_bootstrap, report,
                    PhaseClock(report, echo), keeping_waits(report, echo), spending)


def up_with_image(run: StackRun, builder: ThreadPoolExecutor, image_log: Path) -> Inventory:
    """The stack up, the experiment's image built meanwhile and then pushed to it."""
    built = start_image(run.exp, run.spec, run.bspec, image_log, builder, run.echo)
    with run.phase("up"):
        inventory = realizers.for_spec(run.spec).up(run.spec, keeping_waits(run.report, run.echo, "[trainctl] "))
    run.inventory = inventory
    keep_placement(run.report.run_dir, inventory)
    if built is not None:
        with run.phase("image"):
            image = push_image(built, inventory, image_log, run.echo)
        run.echo(f"[trainctl] image {image}")
        run.bspec = run.bspec.model_copy(update={"image": image})
        run.lspec = run.lspec.model_copy(update={"image": image})
    return inventory


def bootstrap_nodes(run: StackRun, inventory: Inventory, board: Callable[[Inventory], Any] | None) -> None:
    if not run.needs_bootstrap:
        run.echo("[trainctl] nothing to bootstrap: the job's image holds code and environment")
        return
    finished = run.report.bootstrapped

    def timed(node: str, step: str, status: str, detail: str = "") -> None:
        finished[node] = time.time()  # its last word: when the node was done (the ledger's lane)
        (reporter or no_report)(node, step, status, detail)

    with run.phase("bootstrap"):
        reporter = board(inventory) if board else None
        with reporter or contextlib.nullcontext():
            bootstrap(inventory, run.bspec, run.report.run_dir / "logs" / "bootstrap", report=timed)


def sweep_trials(run: StackRun, inventory: Inventory, sweep: SweepSection) -> None:
    """The sweep's trials; the best one's artifacts are in runs/<run>/best (sweep.write_results)."""
    report = run.report
    with run.phase("sweep"):
        report.trials = run_sweep(run.spec, inventory, run.launcher, sweep, run.lspec, run.run_id,
                                  report.run_dir, run.echo, run.exp.artifacts, run.spending)
    share_ledger(run)
    top = best(report.trials, sweep)
    over_budget = run.spending.reached.is_set() or run.spending.declined
    if top is None and not over_budget:
        raise RunFailed(f"sweep {run.run_id}: no trial completed")
    if over_budget:
        raise run.spending.stopped(f"sweep {run.run_id}")


def train_and_collect(run: StackRun, inventory: Inventory, drawer: ThreadPoolExecutor) -> None:
    report, echo = run.report, run.echo
    collector = Collector(inventory)
    # Once the job runs, the budget's end stops it (cancel); a job that ended by itself is
    # collected whatever the clock says: interrupting that would only lose what was paid for.
    with run.spending.launching() as over_budget:
        with run.phase("train"), reserving_collect(run.spending, collector.fs, job_dir(inventory, run.run_id),
                                                   run.exp.artifacts):
            report.result = run.launcher.run(run.launcher.dryrun(run.spec, inventory, run.lspec),
                                             report.run_dir / "logs" / "launch", echo, cancel=over_budget,
                                             recovery=recovery(run.run_id, run.bspec, report.run_dir, echo,
                                                               data=run.exp.data))
        if run.spec.has_spot:
            report.spot_saving_usd = spot_saving(run.spec, report.phases["train"])
            report.unbilled = realizers.capabilities(run.spec).unbilled
            record_spot_saving(report.run_dir / "logs" / "launch" / RESULT_FILE, report.spot_saving_usd)
        with run.phase("collect"):
            missing = collector.collect(job_dir(inventory, run.run_id), run.exp.artifacts, report.run_dir,
                                        run_id=run.run_id, image=run.lspec.image)
            said = missing_artifacts(run.exp, missing)
            if said:
                echo(f"[trainctl] {said}")
    share_ledger(run)
    # The picture is drawn while the stack comes down; the numbers are already here.
    drawer.submit(draw_loss, report.run_dir)
    metrics_path = report.run_dir / "metrics.json"
    if metrics_path.exists():
        report.metrics = json.loads(metrics_path.read_text())
    if report.result.cancelled and run.spending.reached.is_set():
        raise run.spending.stopped(f"run {run.run_id}")
    if not report.result.ok:
        raise RunFailed(report.result.describe_failures())


def tear_down(run: StackRun, keep: bool) -> None:
    """The stack removed, never cut short by a signal; or, with --keep, how to remove it."""
    if keep:
        run.echo(f"[trainctl] --keep: stack {run.run_id} stays up; "
                 f"`trainctl down --stack {run.run_id}` removes it")
        return
    with uninterruptible(), run.phase("down", interruptible=False):
        if realizers.for_stack(run.run_id).down(run.run_id, force=False,
                                                progress=lambda m: run.echo(f"[trainctl] {m}")):
            run.echo(f"[trainctl] stack {run.run_id} removed")


def run_experiment(exp: Experiment, *, runs_dir: Path = Path("runs"), keep: bool = False,
                   echo: Callable[[str], None] = print, board: Callable[[Inventory], Any] | None = None,
                   resume: str | None = None, data_board: Callable[[Inventory], Any] | None = None,
                   run_id: str | None = None, controls: Callable[[StackRun], Any] | None = None) -> RunReport:
    """Run one experiment on a fresh stack and remove the stack afterwards, whatever happens.
    `resume` reuses a sweep's id: its study continues without redoing finished trials; `run_id`
    is the id a detached run was given when submitted. `controls` is handed the prepared run
    (a detached run's controller stops it through its spending clock)."""
    run_id = resume or run_id or new_run_id(exp.name)
    run = prepare_run(exp, run_id, runs_dir, echo)
    if controls is not None:
        controls(run)
    drawer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="draw")
    builder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="image")
    echo(f"[trainctl] run {run_id}: {run.spec.node_count} node(s) on stack {exp.stack} "
         f"({run.spec.provider}), artifacts → {run.report.run_dir}")
    try:
        with signals_as_interrupt(), ttl_guard(exp.ttl_hours, echo), run.spending.watching():
            try:
                inventory = up_with_image(run, builder, run.report.run_dir / "logs" / "image" / "build.log")
                bootstrap_nodes(run, inventory, board)
                stage_data_inputs(run, inventory, data_board)
                check_network(run, inventory)
                if exp.sweep:
                    sweep_trials(run, inventory, exp.sweep)
                else:
                    train_and_collect(run, inventory, drawer)
            finally:
                tear_down(run, keep)
    except KeyboardInterrupt:
        if run.spending.reached.is_set():  # the budget ran out before the job started
            raise run.spending.stopped(f"run {run_id}") from None
        raise
    finally:
        drawer.shutdown(wait=True)  # draw_loss never raises: a failed picture only warns
        builder.shutdown(wait=True, cancel_futures=True)
        (run.report.run_dir / "timings.json").write_text(json.dumps(run.report.phases, indent=2))
        keep_ledger(run)
    return run.report
