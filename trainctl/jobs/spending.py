"""A run's spending against its budget's max_usd, from the moment its stack starts coming up.

When the money left only covers the stop (infra/spec/budget.py: STOP_RESERVE_SECONDS, and what
collecting the artifacts would take: collect_reserve.py), the run stops: while the job runs,
through the launcher's cancel, so every node's program gets SIGTERM and saves its checkpoint,
and what was trained is collected; before that (up, bootstrap), as an interrupt at the next
phase boundary, since nothing was trained yet. A sweep asks before each
trial whether another one, as long as its trials took so far, still fits.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Callable, Iterator

from infra.errors import BudgetReached, ConfigError, RunCancelled, TrainctlError
from infra.providers import realizers
from infra.spec.budget import STOP_RESERVE_SECONDS, Budget, affordable, refuse_over_hourly, spend_seconds, spent
from infra.spec.cluster import ClusterSpec
from trainctl.jobs.experiment_spec import Experiment
from trainctl.launchers.interrupts import interrupt_main


class Spending:
    """The clock of one stack's cost; `reached` is set once the budget only covers the stop."""

    def __init__(self, budget: Budget | None, per_hour: float, echo: Callable[[str], None]) -> None:
        self.budget, self.per_hour, self.echo = budget, per_hour, echo
        self.limit = spend_seconds(budget, per_hour)
        self.reached = threading.Event()
        self._started = time.monotonic()
        self._launching = 0
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self.declined: list[str] = []  # what was not started because the budget could not pay for it
        self.usd_at_stop: float | None = None  # what was spent when the stop began
        self.collect_reserve = 0.0  # seconds kept back for collecting the artifacts (collect_reserve.py)
        self.collect_said = ""
        self.stop_reason: str | None = None  # a stop asked for (`stop`), not the budget's

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._started

    @property
    def usd(self) -> float:
        return spent(self.per_hour, self.elapsed)

    def describe(self) -> str:
        assert self.budget is not None and self.budget.max_usd is not None  # only said with a limit
        collecting = f", {self.collect_said}" if self.collect_said else ", collect"
        return (f"${self.usd:.4f} spent of max_usd ${self.budget.max_usd:g} at ${self.per_hour:.4f}/hour; "
                f"the rest pays for the stop (checkpoint, teardown{collecting})")

    @property
    def stops_at(self) -> float | None:
        """Seconds after the stack started coming up when the stop begins."""
        return None if self.limit is None else self.limit - self.collect_reserve

    def reserve_for_collect(self, seconds: float, said: str = "") -> None:
        """Keep `seconds` more back for collecting the artifacts: the stop begins that much
        before the checkpoint and teardown reserve (at once, where that moment has passed)."""
        with self._lock:
            self.collect_reserve, self.collect_said = seconds, said
            if self.limit is None or self.reached.is_set() or self._timer is None:
                return
            self._timer.cancel()
            self._timer = threading.Timer(max(0.0, self.limit - seconds - self.elapsed), self._reach)
            self._timer.daemon = True
            self._timer.start()

    @contextlib.contextmanager
    def watching(self) -> Iterator[Spending]:
        """Start the clock now (the stack is about to come up) until the block ends."""
        self._started = time.monotonic()
        if self.limit is not None:
            self._timer = threading.Timer(max(0.0, self.limit - self.collect_reserve), self._reach)
            self._timer.daemon = True
            self._timer.start()
        try:
            yield self
        finally:
            with self._lock:  # and no collect estimate arriving later starts another
                if self._timer is not None:
                    self._timer.cancel()
                self._timer = None

    @contextlib.contextmanager
    def launching(self) -> Iterator[threading.Event]:
        """While a job runs it is stopped through the cancel this yields, not interrupted."""
        with self._lock:
            self._launching += 1
        try:
            yield self.reached
        finally:
            with self._lock:
                self._launching -= 1

    def affords(self, seconds: float) -> bool:
        """Whether `seconds` more of the stack still end within max_usd, stop included."""
        return not self.reached.is_set() and affordable(self.budget, self.per_hour, self.elapsed,
                                                        seconds + self.collect_reserve)

    def _reach(self) -> None:
        with self._lock:
            self.usd_at_stop = self.usd
            self.reached.set()
            launching = self._launching > 0
        self.echo(f"[trainctl] budget reached: {self.describe()}: "
                  + ("checkpointing and stopping the job" if launching else "stopping before the job starts"))
        if not launching:
            interrupt_main("budget reached")

    def stop(self, reason: str) -> None:
        """Stop the run as its budget's end stops it, for `reason` (a detached run's cancel):
        a running job through the launcher's cancel, then collected; before that, interrupted."""
        with self._lock:
            self.stop_reason = reason
            self.usd_at_stop = self.usd
            self.reached.set()
            launching = self._launching > 0
        self.echo(f"[trainctl] {reason}: " + ("stopping the job, then collecting" if launching else "stopping"))
        if not launching:
            interrupt_main(reason)

    def decline(self, what: str, seconds: float) -> None:
        """Say that `what`, expected to take `seconds`, is not started: it would overspend."""
        self.declined.append(what)
        assert self.budget is not None and self.budget.max_usd is not None  # nothing is declined without
        self.echo(f"[trainctl] budget: not starting {what}: another {seconds:.0f} s at ${self.per_hour:.4f}/hour "
                  f"after ${self.usd:.4f} spent would leave max_usd ${self.budget.max_usd:g} too little for the stop")

    def stopped(self, run_id: str) -> TrainctlError:
        """What is said at the end: when the stop began, and what the stack cost by the end."""
        if self.stop_reason is not None:
            return RunCancelled(f"{run_id} {self.stop_reason}: ${self.usd:.4f} spent with the teardown")
        assert self.budget is not None and self.budget.max_usd is not None  # only stopped with a limit
        began = "" if self.usd_at_stop is None else f"stopping at ${self.usd_at_stop:.4f}, "
        held = f"; not started: {', '.join(self.declined)}" if self.declined else ""
        return BudgetReached(f"{run_id} stopped so as not to exceed its budget's max_usd ${self.budget.max_usd:g}: "
                             f"{began}${self.usd:.4f} spent with the teardown at ${self.per_hour:.4f}/hour{held}")


def budgeted(exp: Experiment, spec: ClusterSpec, echo: Callable[[str], None]) -> Spending:
    """The run's spending clock; a cluster over the budget's hourly cap, or one whose max_usd
    would not even pay for its stop, is refused before anything exists."""
    cost = realizers.for_spec(spec).estimate(spec)
    source = exp.budget_from if exp.budget else f"stack {exp.stack}'s trainctl:budget"
    refuse_over_hourly(spec.budget, cost, exp.stack, source)
    limit = spend_seconds(spec.budget, cost.per_hour)
    if limit is not None and limit <= 0:
        assert spec.budget is not None and spec.budget.max_usd is not None  # a limit needs both
        raise ConfigError(f"budget max_usd ${spec.budget.max_usd:g} ({source}) pays for "
                          f"{limit + STOP_RESERVE_SECONDS:.0f} s of stack {exp.stack} at ${cost.per_hour:.4f}/hour, "
                          f"less than stopping it takes ({STOP_RESERVE_SECONDS:.0f} s): raise max_usd")
    return Spending(spec.budget, cost.per_hour, echo)


class TrialClock:
    """How long this sweep's trials take, for the budget to judge whether another one fits: no
    trial starts that the budget cannot pay for were it as long as the longest so far (before any
    has finished nothing is known, and the first ones start), and those in flight when it runs
    out are stopped and queued to run again, as interrupted ones are."""

    def __init__(self, spending: Spending | None) -> None:
        self.spending = spending
        self.seconds: list[float] = []

    @contextlib.contextmanager
    def timed(self) -> Any:
        start = time.monotonic()
        yield
        self.seconds.append(time.monotonic() - start)

    def running(self) -> contextlib.AbstractContextManager[Any]:
        """While trials run, the budget's end stops them (`over_budget`), not the sweep; nor does
        it interrupt the writing of their results (trials.csv, best.json, best/) that follows."""
        return self.spending.launching() if self.spending else contextlib.nullcontext()

    def affords_next(self, which: str) -> bool:
        expected = max(self.seconds, default=0.0)
        if self.spending is None or self.spending.affords(expected):
            return True
        if not self.spending.reached.is_set():
            self.spending.decline(which, expected)
        return False

    @property
    def over_budget(self) -> threading.Event | None:
        return None if self.spending is None else self.spending.reached
