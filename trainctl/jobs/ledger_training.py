"""A training window cut into the ledger's kinds from the program's own progress lines (their
times, from the launcher's step journal), as `ml-goodput-measurement` reads a job's steps:

- launch → first step report: the steps it reports are productive at the segment's own pace;
  the rest is program startup (Google: the first step's time less an ordinary step's);
- between step reports: productive training;
- a `resumed from … step N` line starts a new segment. Every step trained beyond N before it is
  wasted progress (trained again), and so is the training between the last report and the
  disruption (a worker's failure as torchrun reported it, a preemption) unless the program
  reported after it (it stopped and saved there), at the segment's pace;
  from the disruption to the resumed line is recovery (noticing it, restarting, restoring);
- after the last report: other (the final evaluation, saving, exiting);
- a checkpoint's write or read, where the program says how long it took, is cut out of whatever
  it fell in (Google's unproductive checkpoint save and restore time).

A program that prints no steps leaves its whole window as program startup (less the recoveries
the caller cuts out of it): nothing shows that it trained, so its goodput is unknown, not 0."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from infra.spec.ledger import PRODUCTIVE, Event, Interval
from trainctl.jobs.ledger_cuts import carve_all, checkpoint_cuts

STARTUP, WASTED, RECOVERY, OTHER = ("program_startup", "wasted_progress_from_disruption",
                                    "infrastructure_recovery_from_disruption", "other")


@dataclass
class Segment:
    """One start of the program: when, from which step, and its step reports."""
    begin: float
    from_step: int
    reports: list[tuple[float, int]] = field(default_factory=list)


@dataclass
class Training:
    intervals: list[Interval]
    events: list[Event]
    steps: int | None
    steps_redone: int | None  # reported steps trained again, and those lost since the last report
    reported: bool = True  # the program printed a step: False leaves its productive time unknown


def read_journal(path: Path) -> list[dict]:
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut short by a kill: the others stand
            continue
    return sorted(records, key=lambda r: r["t"])


def _disrupted(failures: list[float], seg: Segment, before: float) -> float:
    """When the training between two starts was lost: the first failure after the last report.
    A last report that repeats its step, or that came after a failure (`stopping at step N;
    checkpoint saved`: the program answering it), lost nothing since; nor does a failure nobody
    saw. Lines from different nodes reach trainctl in their own time: a stop line seen before
    the failed node's line leaves the moments between them counted as lost."""
    last, step = seg.reports[-1]
    earlier, before_step = seg.reports[-2] if len(seg.reports) > 1 else (seg.begin, None)
    if step == before_step or any(earlier <= t <= last for t in failures):  # it stopped there
        return last
    return min((t for t in failures if last <= t <= before), default=last)


def segments(records: list[dict], start: float, end: float, failures: Sequence[float] = ()) -> list[Segment]:
    found = [Segment(start, 0)]
    for r in records:
        if not ("step" in r or "resumed" in r) or not start <= r["t"] <= end:
            continue  # a failure (the caller's), a checkpoint's time (ledger_cuts)
        current = found[-1]
        if "resumed" in r:
            if current.reports:
                found.append(Segment(r["t"], int(r["resumed"])))
            else:  # the first start restoring a checkpoint, or another local rank saying so
                current.from_step = int(r["resumed"])
        elif current.reports and r["step"] < current.reports[-1][1]:
            # After a failure: the program started again from scratch. Otherwise another rank's
            # count, behind this one's: not news.
            if any(current.reports[-1][0] <= t <= r["t"] for t in failures):
                found.append(Segment(r["t"], 0, [(r["t"], int(r["step"]))]))
        else:
            current.reports.append((r["t"], int(r["step"])))
    return found


def _pace(seg: Segment) -> float | None:
    """Steps per second between the segment's reports (the first one includes startup)."""
    t1, s1 = seg.reports[0]
    sn = max(step for _, step in seg.reports)
    tn = next(t for t, step in seg.reports if step == sn)  # not a later line repeating the step
    return (sn - s1) / (tn - t1) if sn > s1 and tn > t1 else None


def _chunks(seg: Segment, pace: float | None) -> list[tuple[str, float, float, int, int]]:
    """(kind, start, end, first step, last step) from the segment's begin to its last report."""
    t1, s1 = seg.reports[0]
    trained = t1 - seg.begin if pace is None else min(t1 - seg.begin, (s1 - seg.from_step) / pace)
    out = [(STARTUP, seg.begin, t1 - trained, seg.from_step, seg.from_step),
           (PRODUCTIVE, t1 - trained, t1, seg.from_step, s1)]
    for (ta, sa), (tb, sb) in zip(seg.reports, seg.reports[1:]):
        out.append((PRODUCTIVE if sb > sa else OTHER, ta, tb, sa, sb))
    return [c for c in out if c[2] > c[1]]


def _waste(chunks: list[list], to_step: int) -> None:
    """Steps beyond `to_step` trained before a restart: their time is wasted progress."""
    for chunk in list(chunks):
        kind, a, b, sa, sb = chunk
        at = next(i for i, c in enumerate(chunks) if c is chunk)
        if kind != PRODUCTIVE or sb <= to_step:
            continue
        if sa >= to_step:
            chunk[0] = WASTED
            continue
        cut = a + (b - a) * (to_step - sa) / (sb - sa)
        chunk[2], chunk[4] = cut, to_step
        chunks.insert(at + 1, [WASTED, cut, b, to_step, sb])


def training(records: list[dict], start: float, end: float, nodes: tuple[str, ...],
             failures: Sequence[float] = ()) -> Training:
    """`failures`: when workers failed or nodes were lost (unix seconds), seen on any node."""
    moments = sorted([*failures, *(r["t"] for r in records if "failed" in r)])
    segs = segments(records, start, end, moments)
    known = [p for p in map(_pace, (s for s in segs if s.reports)) if p]
    fallback = sum(known) / len(known) if known else None
    chunks: list[list] = []
    events: list[Event] = []
    furthest, redone, reached = None, 0, None  # reached: the step the previous start got to
    for i, seg in enumerate(segs):
        following = segs[i + 1].begin if i + 1 < len(segs) else end
        if i:
            events.append(Event(kind="restart", time=seg.begin, nodes=nodes,
                                note=f"resumed from step {seg.from_step}"))
            if reached is not None:  # what this restart trains again (twice over if it must)
                redone += max(0, reached - seg.from_step)
            _waste(chunks, seg.from_step)
        if not seg.reports:
            chunks.append([STARTUP, seg.begin, following, seg.from_step, seg.from_step])
            continue
        pace = _pace(seg) or fallback
        chunks += [list(c) for c in _chunks(seg, pace)]
        last_t, last_step = seg.reports[-1]
        furthest, reached = max(furthest or 0, last_step), last_step
        if i + 1 == len(segs):
            chunks.append([OTHER, last_t, following, last_step, last_step])
            continue
        lost_at = _disrupted(moments, seg, following)
        chunks += [[WASTED, last_t, lost_at, last_step, last_step],
                   [RECOVERY, lost_at, following, last_step, last_step]]
        redone += round((lost_at - last_t) * (pace or 0))
    intervals = [Interval(kind=k, start=a, end=b, nodes=nodes) for k, a, b, _, _ in chunks if b > a]
    intervals = carve_all(intervals, checkpoint_cuts(records, start, end, nodes))
    return Training(intervals, events, furthest, redone if len(segs) > 1 else None,
                    reported=any(s.reports for s in segs))
