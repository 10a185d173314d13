"""One experiment's run as its phases share it: what was validated before anything existed
(the stack's spec, bootstrap and launch specs, the launcher, the spending clock), the report the
phases fill in, and the clock that times each phase."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from bootstrap.plan import BootstrapSpec
from infra.providers.capacity_wait import CapacityWait
from infra.providers.inventory import Inventory
from infra.spec.cluster import ClusterSpec
from infra.spec.ledger import Ledger
from trainctl.jobs.experiment_spec import Experiment
from trainctl.jobs.spending import Spending
from trainctl.jobs.sweep import TrialResult
from trainctl.launchers.interrupts import raise_if_pending
from trainctl.launchers.protocol import Launcher
from trainctl.launchers.result import LaunchResult
from trainctl.launchers.spec import LaunchSpec


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
    unbilled: str | None = None  # why no one bills the nodes (the stack's Capabilities say)
    windows: dict[str, tuple[float, float]] = field(default_factory=dict)  # each phase's, unix seconds
    bootstrapped: dict[str, float] = field(default_factory=dict)  # when each node's bootstrap ended
    ledger: Ledger | None = None
    staged: list[Any] = field(default_factory=list)  # each node's data staging (NodeStaging)
    network: Any = None  # the network pre-flight's figure (NetworkFigure), where one was measured
    capacity_waits: list[CapacityWait] = field(default_factory=list)  # as the realizer and launcher told them


def keeping_waits(report: RunReport, echo: Callable[[str], None], prefix: str = "") -> Callable[[str], None]:
    """A progress callback (or echo) that says each line and keeps the waits for capacity among
    them for the run's ledger."""
    def say(line: str) -> None:
        if isinstance(line, CapacityWait):
            report.capacity_waits.append(line)
        echo(f"{prefix}{line}")
    return say


class PhaseClock:
    def __init__(self, report: RunReport, echo: Callable[[str], None]) -> None:
        self.report, self.echo = report, echo

    @contextlib.contextmanager
    def __call__(self, name: str, interruptible: bool = True) -> Iterator[None]:
        """Time one phase; an interruptible one starts and ends with a look at the signal latch."""
        if interruptible:
            raise_if_pending()
        self.echo(f"[trainctl] {name} …")
        start, began = time.monotonic(), time.time()
        try:
            yield
        except Exception as exc:
            if interruptible:
                raise_if_pending(cause=exc)  # the error is how the signal's raise came out
            raise
        finally:
            self.report.phases[name] = round(time.monotonic() - start, 2)
            self.report.windows[name] = (began, began + time.monotonic() - start)
        if interruptible:
            raise_if_pending()



@dataclass
class StackRun:
    """One experiment's run on its own stack, from what was validated before anything exists;
    the image, once pushed, is written into the bootstrap and launch specs."""
    exp: Experiment
    run_id: str
    spec: ClusterSpec
    bspec: BootstrapSpec
    lspec: LaunchSpec
    launcher: Launcher
    needs_bootstrap: bool
    report: RunReport
    phase: PhaseClock
    echo: Callable[[str], None]
    spending: Spending
    inventory: Inventory | None = None  # once the stack is up
