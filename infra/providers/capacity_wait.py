"""A wait for capacity, told through a realizer's `progress` (or a launcher's echo) like any
other line: a flex-start VM PENDING until GCE's Dynamic Workload Scheduler grants it, a queued
TPU until Cloud TPU grants it, a zone that refused the cluster for capacity, preempted nodes
waiting for capacity to be recreated. It prints as its message; a run keeps it for its ledger
(kind `waiting_for_capacity`), where it costs nothing: nodes not granted yet are not billed."""

from __future__ import annotations

from typing import Callable


class CapacityWait(str):
    """The message, and the wait: from `started` to `ended` (unix seconds), for `nodes` (none
    named: every node of the stack, which is being created)."""

    started: float
    ended: float
    nodes: tuple[str, ...]

    def __new__(cls, message: str, started: float, ended: float, nodes: tuple[str, ...] = ()) -> CapacityWait:
        wait = super().__new__(cls, message)
        wait.started, wait.ended, wait.nodes = started, max(started, ended), tuple(nodes)
        return wait

    def __reduce__(self) -> tuple[Callable[..., CapacityWait], tuple[str, float, float, tuple[str, ...]]]:
        return CapacityWait, (str(self), self.started, self.ended, self.nodes)

    @property
    def seconds(self) -> float:
        return self.ended - self.started
