"""Where a run's ledger is kept: `runs/<run>/ledger.json` with its timeline picture, written
however the run ends, and a copy in the job dir beside the checkpoints (written before teardown,
so it holds everything but the teardown; an experiment's own stack takes its bucket with it,
a named stack keeps it)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Sequence

from infra.errors import ConfigError
from infra.providers import realizers
from infra.providers.capacity_wait import CapacityWait
from infra.providers.inventory import Inventory
from infra.spec.cluster import ClusterSpec
from infra.spec.ledger import Ledger
from infra.spec.ledger_prices import fixed_per_hour, node_rates
from trainctl.jobs.collect import bucket_fs
from trainctl.jobs.ledger_build import TrialWindow, build_ledger
from trainctl.jobs.ledger_plot import draw_ledger
from trainctl.jobs.sweep import TrialResult, recorded_trials
from trainctl.launchers.cluster_env import job_dir
from trainctl.launchers.result import LaunchResult

LEDGER = "ledger.json"


def node_names(spec: ClusterSpec, inventory: Inventory | None) -> list[str]:
    """The nodes by rank; before the stack was up, as the local stack would name them."""
    if inventory is not None and inventory.nodes:
        return [n.name for n in sorted(inventory.nodes, key=lambda n: n.rank)]
    return [f"node{i}" for i in range(spec.node_count)]


def trial_windows(run_dir: Path, trials: Sequence[TrialResult]) -> list[TrialWindow]:
    return [TrialWindow(t.number, t.state, t.value, t.started, t.ended, run_dir / f"trial-{t.number}" / "logs")
            for t in trials if t.started is not None and t.ended is not None]


def run_ledger(run_id: str, run_dir: Path, spec: ClusterSpec, inventory: Inventory | None,
               windows: dict[str, tuple[float, float]], result: LaunchResult | None,
               metric: str | None = None, bootstrapped: dict[str, float] | None = None,
               waits: Sequence[CapacityWait] = ()) -> Ledger | None:
    """`metric`: a sweep's (its trials, of every run of it, are read from its study)."""
    if not windows:
        return None
    priced = realizers.capabilities(spec).machine_types
    names = node_names(spec, inventory)
    trials = trial_windows(run_dir, recorded_trials(run_id, run_dir)) if metric else []
    ledger = build_ledger(run_id, node_rates(spec, names, priced), fixed_per_hour(spec, priced), windows,
                          run_dir / "logs" / "launch", names[0], result.recoveries if result else (),
                          trials, bootstrapped or {}, waits)
    return ledger.model_copy(update={"metric": metric})


def launch_ledger(run_id: str, run_dir: Path, spec: ClusterSpec, inventory: Inventory | None,
                  window: tuple[float, float], result: LaunchResult) -> Path | None:
    """`trainctl launch`'s ledger, for `trainctl report`: its one phase is the training (the
    stack was up before it and stays up after); the pictures are drawn when it is reported. One
    that cannot be made only warns: the launch's outcome is what its caller is owed."""
    try:
        ledger = run_ledger(run_id, run_dir, spec, inventory, {"train": window}, result)
        assert ledger is not None  # a window was given
        return save(ledger, run_dir)
    except Exception as exc:  # noqa: BLE001 - the run's logs and result.json stand without it
        warnings.warn(f"no ledger for run {run_id}: {type(exc).__name__}: {exc}", stacklevel=2)
        return None


def save(ledger: Ledger, run_dir: Path) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    partial = run_dir / f".{LEDGER}.partial"  # a kill mid-write leaves the last whole ledger
    partial.write_text(ledger.model_dump_json(indent=2))
    partial.replace(run_dir / LEDGER)
    return run_dir / LEDGER


def keep(ledger: Ledger, run_dir: Path) -> list[Path]:
    """ledger.json and the pictures in the run's folder."""
    save(ledger, run_dir)
    return draw_ledger(ledger, run_dir)


def upload(ledger: Ledger, inventory: Inventory) -> str | None:
    """The ledger beside the run's checkpoints; a bucket that refuses it only warns."""
    target = f"{job_dir(inventory, ledger.run_id)}/{LEDGER}"
    try:
        bucket_fs(inventory).pipe(target, ledger.model_dump_json(indent=2).encode())
    except Exception as exc:  # noqa: BLE001 - the local copy is the record; the bucket's is a convenience
        warnings.warn(f"could not write {target}: {type(exc).__name__}: {exc}", stacklevel=2)
        return None
    return target


def load(run_dir: Path) -> Ledger:
    path = run_dir / LEDGER
    try:
        return Ledger.from_json(path.read_text())
    except ValueError as exc:  # not JSON, or not a ledger's fields
        first = str(exc).splitlines()[0]
        raise ConfigError(f"{path} is not a ledger trainctl wrote ({first}); `trainctl run` writes "
                          "a new one with every run") from None
