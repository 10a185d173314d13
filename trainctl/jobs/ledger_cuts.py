"""Intervals laid over a timeline that is already cut: what a program reported doing inside its
training (writing or reading a checkpoint) and what a realizer reported waiting for (capacity)
take their time away from whatever the lane held then (productive training, startup, recovery,
provisioning), on their own nodes only, so every lane still covers its wall time once."""

from __future__ import annotations

from typing import Iterable, Sequence

from infra.providers.capacity_wait import CapacityWait
from infra.spec.ledger import WAITING, Interval

SAVE, RESTORE = "unproductive_checkpoint_save_time", "unproductive_checkpoint_restore_time"
CHECKPOINT_KEYS = {"checkpoint_save": SAVE, "checkpoint_restore": RESTORE}


def carve(intervals: Iterable[Interval], cut: Interval) -> list[Interval]:
    """`cut` in place of what its nodes held during it: those intervals split around it."""
    out: list[Interval] = []
    for i in intervals:
        shared = tuple(n for n in i.nodes if n in cut.nodes)
        if not shared or i.end <= cut.start or cut.end <= i.start:
            out.append(i)
            continue
        rest = tuple(n for n in i.nodes if n not in cut.nodes)
        if rest:
            out.append(i.model_copy(update={"nodes": rest}))
        if i.start < cut.start:
            out.append(i.model_copy(update={"end": cut.start, "nodes": shared}))
        if cut.end < i.end:
            out.append(i.model_copy(update={"start": cut.end, "nodes": shared}))
    return sorted([*out, cut], key=lambda i: (i.start, i.nodes))


def carve_all(intervals: Iterable[Interval], cuts: Iterable[Interval]) -> list[Interval]:
    result = list(intervals)
    for cut in cuts:
        result = carve(result, cut)
    return result


def checkpoint_cuts(records: Sequence[dict], start: float, end: float, nodes: tuple[str, ...]) -> list[Interval]:
    """A program's checkpoint writes and reads ({"t", "checkpoint_save": seconds} ending at t),
    on every node: the others wait for the writer at the next collective. Clipped to the window."""
    cuts = []
    for r in records:
        key = next((k for k in CHECKPOINT_KEYS if k in r), None)
        if key is None:
            continue
        a, b = max(start, r["t"] - float(r[key])), min(end, r["t"])
        if b > a:
            cuts.append(Interval(kind=CHECKPOINT_KEYS[key], start=a, end=b, nodes=nodes))
    return cuts


def wait_cuts(waits: Iterable[CapacityWait], nodes: tuple[str, ...], start: float, end: float) -> list[Interval]:
    """Waits for capacity on the nodes they name (every node where they name none), clipped
    to the run's wall time."""
    cuts = []
    for w in waits:
        on = tuple(n for n in (w.nodes or nodes) if n in nodes)
        a, b = max(start, w.started), min(end, w.ended)
        if on and b > a:
            cuts.append(Interval(kind=WAITING, start=a, end=b, nodes=on, note=str(w).removeprefix("[trainctl] ")))
    return cuts
