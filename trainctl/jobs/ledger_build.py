"""A run's ledger from what the run already records: its phases' windows (PhaseClock), the
program's step journal (the launcher's), the recoveries (LaunchResult), a sweep's trials, and the
nodes' list prices. Every node's lane covers the run's wall time: the time between phases, and a
sweep node's time between its trials, is idle."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from infra.providers.capacity_wait import CapacityWait
from infra.spec.ledger import PRODUCTIVE, UNBILLED, Event, Interval, Ledger, NodeRate, TrialCost
from trainctl.jobs.ledger_cuts import carve_all, wait_cuts
from trainctl.jobs.ledger_training import RECOVERY, read_journal, training
from trainctl.launchers.lines import journal_path
from trainctl.launchers.result import RecoveryRecord

# A phase named in neither map nor TRAINING_PHASES is an interval kind of its own name.
PHASE_KINDS = {"up": "provisioning", "image": "image", "bootstrap": "bootstrap", "data staging": "data_staging",
               "collect": "collect", "down": "teardown"}
TRAINING_PHASES = ("train", "sweep")


@dataclass(frozen=True)
class TrialWindow:
    number: int
    state: str
    value: float | None
    started: float
    ended: float
    log_dir: Path  # the trial's launch logs: one per node, and their step journals


def chief_journal(log_dir: Path, chief: str) -> list[dict]:
    """The rank-0 node's journal (any node's where it printed none)."""
    mine = journal_path(log_dir / f"{chief}.log")
    found = [mine] if mine.exists() else sorted(log_dir.glob("*.steps.jsonl"))
    return read_journal(found[0]) if found else []


def failure_times(log_dir: Path) -> list[float]:
    """When torchrun reported a worker's failure, on any node."""
    return [r["t"] for path in sorted(log_dir.glob("*.steps.jsonl")) for r in read_journal(path) if "failed" in r]


def fill_idle(intervals: list[Interval], nodes: Sequence[str], start: float, end: float) -> list[Interval]:
    """Each node's lane made whole over [start, end]: its uncovered stretches are idle."""
    idle: list[Interval] = []
    for node in nodes:
        at = start
        for i in sorted((i for i in intervals if node in i.nodes), key=lambda i: i.start):
            if i.start > at:
                idle.append(Interval(kind="idle", start=at, end=i.start, nodes=(node,)))
            at = max(at, i.end)
        if end > at:
            idle.append(Interval(kind="idle", start=at, end=end, nodes=(node,)))
    return sorted(intervals + idle, key=lambda i: (i.start, i.nodes))


def trial_nodes(log_dir: Path) -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in log_dir.glob("*.log")))


POD_LANE = re.compile(r"pod(\d+)")  # a GKE trial's lanes: its pods, by completion index


def pods_on_nodes(trials: Sequence[TrialWindow], nodes: Sequence[str]) -> dict[int, dict[str, str]]:
    """Each GKE trial's pods onto the pool's nodes, which pods run on but trainctl does not see:
    a trial takes the first block of nodes (as many as its pods) that no trial overlapping it in
    time holds, pod i the block's i-th node. So a pod is priced as a node of its pool (the
    catalog's price of its machine type and accelerators) and no node is counted twice."""
    held: list[tuple[float, float, int]] = []  # (started, ended, the block's first node)
    placed: dict[int, dict[str, str]] = {}
    for t in sorted(trials, key=lambda t: t.started):
        pods = {lane: int(m.group(1)) for lane in trial_nodes(t.log_dir)
                if lane not in nodes and (m := POD_LANE.fullmatch(lane))}
        if not pods or not nodes:
            continue
        size = max(pods.values()) + 1
        busy = {first for a, b, first in held if a < t.ended and t.started < b}
        first = next((f for f in range(0, max(1, len(nodes) - size + 1), size) if f not in busy), 0)
        held.append((t.started, t.ended, first))
        placed[t.number] = {lane: nodes[min(first + index, len(nodes) - 1)] for lane, index in pods.items()}
    return placed


def priced(rates: Iterable[NodeRate], intervals: list[Interval]) -> float:
    by_name = {r.name: r.usd_per_hour for r in rates}
    return sum(i.seconds / 3600 * sum(by_name.get(n, 0.0) for n in i.nodes)
               for i in intervals if i.kind not in UNBILLED)


def trial_costs(rates: tuple[NodeRate, ...], trials: Sequence[TrialWindow],
                window: tuple[float, float]) -> tuple[list[Interval], list[Event], list[TrialCost]]:
    """Every trial's cost; the timeline's intervals and restarts of those that ran in `window`
    (this run of the sweep: a resumed sweep's earlier trials keep their cost, not their place)."""
    intervals: list[Interval] = []
    events: list[Event] = []
    costs: list[TrialCost] = []
    placed = pods_on_nodes(trials, [r.name for r in rates])
    for t in trials:
        lanes = trial_nodes(t.log_dir)
        nodes = tuple(placed.get(t.number, {}).get(lane, lane) for lane in lanes)
        done = training(chief_journal(t.log_dir, lanes[0]) if lanes else [], t.started, t.ended, nodes,
                        failure_times(t.log_dir))
        ran = [i.model_copy(update={"note": f"trial {t.number}"}) for i in done.intervals]
        if window[0] <= t.started <= window[1]:
            intervals += ran
            events += [e.model_copy(update={"note": f"trial {t.number} {e.note}"}) for e in done.events]
        wall = t.ended - t.started
        productive = sum(i.seconds for i in ran if i.kind == PRODUCTIVE)
        costs.append(TrialCost(number=t.number, state=t.state, value=t.value, seconds=round(wall, 2),
                               usd=round(priced(rates, ran), 6),
                               goodput=round(productive / wall, 4) if wall > 0 and done.reported else None))
    return intervals, events, costs


def build_ledger(run_id: str, rates: tuple[NodeRate, ...], fixed_usd_per_hour: float,
                 windows: dict[str, tuple[float, float]], launch_logs: Path, chief: str,
                 recoveries: Sequence[RecoveryRecord] = (), trials: Sequence[TrialWindow] = (),
                 bootstrapped: dict[str, float] | None = None, waits: Sequence[CapacityWait] = ()) -> Ledger:
    """`bootstrapped`: when each node's bootstrap ended (its lane is idle until the phase's end);
    `waits`: for capacity, as the realizer and the launcher told them."""
    nodes = tuple(r.name for r in rates)
    started = min(a for a, _ in windows.values())
    ended = max(b for _, b in windows.values())
    intervals: list[Interval] = []
    events: list[Event] = [Event(kind="preemption", time=r.lost_at, nodes=tuple(r.nodes),
                                 note=f"back in {r.seconds:.1f} s"
                                 + (f", cluster moved to zone {r.moved_to}" if r.moved_to else ""))
                           for r in recoveries]
    steps = redone = None
    reported = True
    costs: list[TrialCost] = []
    for name, (a, b) in windows.items():
        if name == "bootstrap" and bootstrapped:  # each node's own; then it waits for the others
            intervals += [Interval(kind="bootstrap", start=a, end=min(b, bootstrapped.get(n, b)), nodes=(n,))
                          for n in nodes]
        elif name not in TRAINING_PHASES:
            intervals.append(Interval(kind=PHASE_KINDS.get(name, name), start=a, end=b, nodes=nodes))
        elif name == "train":
            done = training(chief_journal(launch_logs, chief), a, b, nodes,
                            [*failure_times(launch_logs), *(r.lost_at for r in recoveries)])
            intervals += done.intervals if done.reported else carve_all(done.intervals, [
                Interval(kind=RECOVERY, start=max(a, r.lost_at), end=min(b, r.resumed_at), nodes=nodes)
                for r in recoveries if min(b, r.resumed_at) > max(a, r.lost_at)])  # not startup: known
            events += done.events
            steps, redone, reported = done.steps, done.steps_redone, done.reported
        elif name == "sweep":
            ran, restarts, costs = trial_costs(rates, trials, (a, b))
            intervals += ran
            events += restarts
            reported = not costs or any(c.goodput is not None for c in costs)
    intervals = carve_all(intervals, wait_cuts(waits, nodes, started, ended))
    return Ledger(run_id=run_id, started=started, ended=ended, nodes=rates,
                  intervals=tuple(fill_idle(intervals, nodes, started, ended)),
                  events=tuple(sorted(events, key=lambda e: e.time)),
                  fixed_usd_per_hour=fixed_usd_per_hour, steps=steps, steps_redone=redone,
                  steps_reported=reported, trials=tuple(costs))
