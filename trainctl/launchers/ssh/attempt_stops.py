"""When an attempt of a job ends at once, instead of when its nodes' commands end, and why.

Decided as the nodes' lines come in, for three reasons: a worker exit code the restart policy
calls permanent; a failure no retry can fix (trainctl/launchers/failures.py); a failed worker that
torchrun cannot restart because other nodes' worker groups have finished
(trainctl/launchers/torchrun_agents.py). Each cuts torchrun's own restarts short; the first two also rule
out a rerun of the job, the third leaves that to the restart policy.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable, Mapping

from trainctl.launchers.failures import Failure, classify, exit_description
from trainctl.launchers.torchrun_agents import stranded

if TYPE_CHECKING:
    from trainctl.launchers.result import NodeOutcome


class AttemptStops:
    """`end()` is called (once per node at most) when a node's failure must end the attempt;
    `causes` keeps why, by node. Once `stopping` is set nothing more is judged: workers then end
    because of the stop, and must not be blamed for it."""

    def __init__(self, outcomes: Mapping[str, NodeOutcome], permanent_codes: tuple[int, ...],
                 end: Callable[[], None], stopping: threading.Event | None = None) -> None:
        self.outcomes = outcomes
        self.permanent_codes = permanent_codes
        self.end = end
        self.stopping = stopping or threading.Event()
        self.causes: dict[str, str] = {}
        self.permanent: tuple[str, int] | None = None  # the first node with a permanent exit code
        self.unfixable: Failure | None = None
        self.final: str | None = None  # why no recovery or rerun may follow (node: cause)
        self._lock = threading.Lock()

    def worker_exited(self, node: str, code: int) -> None:
        """A worker of `node` exited with `code`: torchrun's line (before the agent's "failed"
        state is set, which calls agents_changed), or a direct program's end."""
        if self.stopping.is_set():
            return
        outcome = self.outcomes[node]
        outcome.worker_exit_code = code
        if code in self.permanent_codes:
            self._stop(node, f"permanent error: its program exited with code {code}", permanent=code)
            return
        failure = classify(outcome.worker_tail, code)
        if failure.unfixable:
            self._stop(node, failure.describe(), unfixable=failure)

    def agents_changed(self) -> None:
        """An agent's state changed: a failure may have become one torchrun cannot restart."""
        if self.stopping.is_set():
            return
        failed, finished = stranded({n: o.agent_state for n, o in self.outcomes.items() if o.agent_state})
        for node in failed:
            ended = exit_description(self.outcomes[node].worker_exit_code)
            self._stop(node, f"its worker ended ({ended}) after {', '.join(finished)} finished: torchrun "
                             "cannot restart a group whose other members have left")

    def _stop(self, node: str, why: str, permanent: int | None = None,
              unfixable: Failure | None = None) -> None:
        with self._lock:
            if node in self.causes:
                return
            self.causes[node] = why
            if permanent is not None and self.permanent is None:
                self.permanent = (node, permanent)
                self.final = self.final or f"permanent exit code {permanent} on {node}"
            if unfixable is not None and self.unfixable is None:
                self.unfixable = unfixable
                self.final = self.final or f"{node}: {why}"
        self.end()

    def why(self, preempted: list[str]) -> str:
        """What trainctl says as it stops the others: a failure nothing may follow, else a
        preemption (a recovery follows), else a failure torchrun could not restart."""
        if self.final:
            return self.final
        if preempted:
            return f"{', '.join(preempted)} preempted"
        with self._lock:
            first = next(iter(self.causes.items()), None)
        return "a node failed" if first is None else f"{first[0]}: {first[1]}"
