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
import shutil
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from bootstrap.plan import BootstrapSpec
from bootstrap.runner import bootstrap, no_report
from bootstrap.synced_nodes import SyncedNodes
from infra.errors import ConfigError, RemoteError
from infra.providers.inventory import Inventory
from infra.spec.cluster import ClusterSpec
from infra.spec.stack_config import load_stack
from infra.providers import realizers
from trainctl.jobs.collect import Collector, draw_loss
from trainctl.jobs.experiment_spec import Experiment, from_workdir
from trainctl.launchers.interrupts import (
    interrupt_main,
    raise_if_pending,
    signals_as_interrupt,
    uninterruptible,
)
from trainctl.launchers.cluster_env import job_dir
from trainctl.launchers.protocol import Recovery
from trainctl.launchers.result import LaunchResult
from trainctl.launchers.spec import LaunchSpec
from trainctl.launchers.run_logs import RESULT_FILE
from trainctl.launchers.registry import launcher_for_cluster
from trainctl.jobs.sweep import TrialResult, best, parallelism, run_sweep


class RunFailed(RemoteError):
    title = "run failed"


@dataclass
class RunReport:
    run_id: str
    run_dir: Path
    phases: dict[str, float] = field(default_factory=dict)
    result: LaunchResult | None = None
    metrics: dict | None = None
    error: str | None = None
    trials: list[TrialResult] = field(default_factory=list)
    spot_saving_usd: float | None = None  # against on-demand prices, for the training's duration


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
    return BootstrapSpec(code_dir=exp.code_dir, excludes=exp.excludes,
                         requirements=exp.requirements, setup=exp.setup, python=python)


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
        return pool.submit(realizers.for_spec(spec).stand_in_image, exp.name, bspec.code_dir,
                           bspec.requirements, bspec.excludes)
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


def launch_spec(exp: Experiment, run_id: str, procs_per_node: int) -> LaunchSpec:
    return LaunchSpec(run_id=run_id, command=exp.run.command, framework=exp.run.framework,
                      nproc_per_node=exp.run.processes_per_node or procs_per_node,
                      max_restarts=exp.restart.max_restarts, job_retries=exp.restart.job_retries,
                      permanent_exit_codes=exp.restart.permanent_exit_codes, env=exp.run.env,
                      max_recoveries=exp.restart.max_recoveries, role_commands=exp.run.commands)


class PhaseClock:
    def __init__(self, report: RunReport, echo: Callable[[str], None]) -> None:
        self.report, self.echo = report, echo

    @contextlib.contextmanager
    def __call__(self, name: str, interruptible: bool = True) -> Iterator[None]:
        """Time one phase; an interruptible one starts and ends with a look at the signal latch."""
        if interruptible:
            raise_if_pending()
        self.echo(f"[trainctl] {name} …")
        start = time.monotonic()
        try:
            yield
        finally:
            self.report.phases[name] = round(time.monotonic() - start, 2)
        if interruptible:
            raise_if_pending()


def recovery(stack: str, bspec: BootstrapSpec, run_dir: Path, echo: Callable[[str], None]) -> Recovery:
    """Preempted nodes come back under their names through the stack's realizer and are
    bootstrapped alone; the launcher resumes the job from its checkpoint on the others meanwhile,
    and on them once they are ready."""
    def progress(message: str) -> None:
        echo(f"[trainctl] {message}")

    def reclaimed(nodes: list[str]) -> list[str]:
        status = realizers.for_stack(stack).instance_status(stack, nodes)
        return [n for n in nodes if status.get(n) != "RUNNING"]

    def recreate(lost: list[str]) -> Inventory:
        wait_until_reclaimed(stack, lost, progress)
        repaired = realizers.for_stack(stack).repair(stack, lost, progress)
        SyncedNodes(stack).forget(lost)  # new disks: their rsync need not wait
        return repaired

    def bootstrap_lost(repaired: Inventory, lost: list[str]) -> None:
        bootstrap(repaired, bspec, run_dir / "logs" / "bootstrap", nodes=lost)

    return Recovery(reclaimed=reclaimed, recreate=recreate, bootstrap=bootstrap_lost,
                    keeps_addresses=realizers.capabilities(realizers.spec(stack)).repair_keeps_addresses)


# GCE gives a reclaimed VM about 30 s of shutdown before it is stopped or deleted.
RECLAIM_TIMEOUT_SECONDS = 120.0
RECLAIMED = (None, "TERMINATED", "STOPPED", "SUSPENDED")  # gone, or stopped for good
RECLAIM_FIRST_POLL_SECONDS, RECLAIM_POLL_CAP_SECONDS = 0.05, 1.0


def wait_until_reclaimed(stack: str, nodes: list[str], progress: Callable[[str], None],
                         timeout: float = RECLAIM_TIMEOUT_SECONDS) -> None:
    """A preempted node runs its shutdown before the provider stops or deletes it; recreating it
    earlier would find it still there (STOPPING on GCE). Asked often at first, where a short
    shutdown ends (the replacement waits on every poll's lag), then every second."""
    deadline = time.monotonic() + timeout
    said = False
    pause = RECLAIM_FIRST_POLL_SECONDS
    while True:
        status = realizers.for_stack(stack).instance_status(stack, nodes)
        busy = [n for n in nodes if status.get(n) not in RECLAIMED]
        if not busy:
            return
        if time.monotonic() > deadline:
            raise RemoteError(f"{', '.join(busy)} still {status[busy[0]]} {timeout:.0f} s after the "
                              "preemption notice; the provider has not finished reclaiming it")
        if not said:
            progress(f"waiting for {', '.join(busy)} to finish shutting down ({status[busy[0]]})")
            said = True
        raise_if_pending()
        time.sleep(pause)
        pause = min(1.25 * pause, RECLAIM_POLL_CAP_SECONDS)


def spot_saving(spec: ClusterSpec, train_seconds: float) -> float:
    """What the run's spot nodes saved against the same nodes on demand (catalog list prices)."""
    realizer = realizers.for_spec(spec)
    on_demand = realizer.estimate(spec.on_demand())
    return round((on_demand.per_hour - realizer.estimate(spec).per_hour) * train_seconds / 3600, 2)


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
    problem = spec.framework_problem(framework)
    if problem:
        raise ConfigError(problem)


def run_experiment(exp: Experiment, *, runs_dir: Path = Path("runs"), keep: bool = False,
                   echo: Callable[[str], None] = print, board=None,
                   resume: str | None = None) -> RunReport:
    """Run one experiment on a fresh stack and remove the stack afterwards, whatever happens.
    `resume` reuses a sweep's id: its study continues without redoing finished trials."""
    run_id = resume or new_run_id(exp.name)
    # Validate everything before anything exists.
    spec = load_stack(exp.stack, name=run_id, overrides_from=exp.overrides_from,
                      overrides={**exp.overrides, "ephemeral": True, "ttl_hours": exp.ttl_hours})
    bspec = bootstrap_spec(exp, spec.python)
    lspec = launch_spec(exp, run_id, spec.procs_per_node)
    refuse_framework_mismatch(spec, lspec.framework)
    launcher = launcher_for_cluster(spec)
    needs_bootstrap = realizers.capabilities(spec).needs_bootstrap
    refuse_workdir_artifacts_in_pods(exp, needs_bootstrap)
    if exp.sweep:
        launcher.check_slots(spec, parallelism(exp.sweep))
    report = RunReport(run_id, runs_dir / run_id)
    report.run_dir.mkdir(parents=True, exist_ok=True)
    phase = PhaseClock(report, echo)
    inventory: Inventory | None = None
    drawer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="draw")
    builder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="image")
    image_log = report.run_dir / "logs" / "image" / "build.log"
    echo(f"[trainctl] run {run_id}: {spec.node_count} node(s) on stack {exp.stack} "
         f"({spec.provider}), artifacts → {report.run_dir}")
    try:
        with signals_as_interrupt(), ttl_guard(exp.ttl_hours, echo):
            try:
                built = start_image(exp, spec, bspec, image_log, builder, echo)
                with phase("up"):
                    inventory = realizers.for_spec(spec).up(spec, lambda m: echo(f"[trainctl] {m}"))
                if built is not None:
                    with phase("image"):
                        image = push_image(built, inventory, image_log, echo)
                    echo(f"[trainctl] image {image}")
                    bspec = bspec.model_copy(update={"image": image})
                    lspec = lspec.model_copy(update={"image": image})
                if needs_bootstrap:
                    with phase("bootstrap"):
                        reporter = board(inventory) if board else None
                        with reporter or contextlib.nullcontext():
                            bootstrap(inventory, bspec, report.run_dir / "logs" / "bootstrap",
                                      report=reporter or no_report)
                else:
                    echo("[trainctl] nothing to bootstrap: the job's image holds code and environment")
                if exp.sweep:
                    with phase("sweep"):
                        report.trials = run_sweep(spec, inventory, launcher, exp.sweep, lspec, run_id,
                                                  report.run_dir, echo, exp.artifacts)
                    top = best(report.trials, exp.sweep)
                    if top is None:
                        raise RunFailed(f"sweep {run_id}: no trial completed")
                    shutil.copytree(report.run_dir / f"trial-{top.number}", report.run_dir / "best",
                                    ignore=shutil.ignore_patterns("logs"), dirs_exist_ok=True)
                    return report
                collector = Collector(inventory)

                with phase("train"):
                    report.result = launcher.run(launcher.dryrun(spec, inventory, lspec),
                                                 report.run_dir / "logs" / "launch", echo,
                                                 recovery=recovery(run_id, bspec, report.run_dir, echo))
                if spec.has_spot:
                    report.spot_saving_usd = spot_saving(spec, report.phases["train"])
                    record_spot_saving(report.run_dir / "logs" / "launch" / RESULT_FILE, report.spot_saving_usd)
                with phase("collect"):
                    missing = collector.collect(job_dir(inventory, run_id), exp.artifacts, report.run_dir,
                                                run_id=run_id, image=lspec.image)
                    said = missing_artifacts(exp, missing)
                    if said:
                        echo(f"[trainctl] {said}")
                # The picture is drawn while the stack comes down; the numbers are already here.
                drawer.submit(draw_loss, report.run_dir)
                metrics_path = report.run_dir / "metrics.json"
                if metrics_path.exists():
                    report.metrics = json.loads(metrics_path.read_text())
                if not report.result.ok:
                    raise RunFailed(report.result.describe_failures())
            finally:
                if not keep:
                    with uninterruptible(), phase("down", interruptible=False):
                        if realizers.for_stack(run_id).down(run_id, force=False,
                                                            progress=lambda m: echo(f"[trainctl] {m}")):
                            echo(f"[trainctl] stack {run_id} removed")
                else:
                    echo(f"[trainctl] --keep: stack {run_id} stays up; "
                         f"`trainctl down --stack {run_id}` removes it")
    finally:
        drawer.shutdown(wait=True)  # draw_loss never raises: a failed picture only warns
        builder.shutdown(wait=True, cancel_futures=True)
        (report.run_dir / "timings.json").write_text(json.dumps(report.phases, indent=2))
    return report
