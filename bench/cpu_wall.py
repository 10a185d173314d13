"""What the CPU-and-wall benchmarks print: each side's median CPU-s and wall-s over its rounds,
and the baseline's ratio to the other side (run in the same script, alternating)."""

from __future__ import annotations

import statistics
from typing import Callable

Round = Callable[[], tuple[float, float]]  # one measurement: (CPU-s, wall-s)


def report(results: dict[str, list[tuple[float, float]]], baseline: str, other: str) -> None:
    """`results`: side -> [(CPU-s, wall-s) per round]."""
    medians = {side: (statistics.median(c for c, _ in rows), statistics.median(w for _, w in rows))
               for side, rows in results.items()}
    for side, (cpu, wall) in medians.items():
        print(f"{side:10s} median CPU {cpu:6.2f} s   wall {wall:6.2f} s   ({len(results[side])} rounds)")
    print(f"ratio {baseline}/{other}: CPU {medians[baseline][0] / medians[other][0]:.2f}x, "
          f"wall {medians[baseline][1] / medians[other][1]:.2f}x")


def compare(rounds: int, baseline: tuple[str, Round], other: tuple[str, Round]) -> None:
    """Both sides measured `rounds` times, alternating so that a slower spell of the machine hits
    both alike, then reported."""
    results: dict[str, list[tuple[float, float]]] = {baseline[0]: [], other[0]: []}
    for _ in range(rounds):
        for name, measure in (baseline, other):
            results[name].append(measure())
    report(results, baseline[0], other[0])
