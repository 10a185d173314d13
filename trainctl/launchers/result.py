"""A launch's outcome, whatever launched it: each node's (or pod's) exit, what its program and
its launcher last said, the recoveries, and the result file `trainctl logs` and `status --run`
read."""

from __future__ import annotations

import json
import re
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainctl.launchers import torchrun_agents
from trainctl.launchers.failures import Failure, classify
from trainctl.launchers.run_logs import RESULT_FILE


EXITCODE_RE = re.compile(r"exitcode\s*:\s*(-?\d+)")


@dataclass
class NodeOutcome:
    node: str
    rank: int
    exit_code: int | None = None
    error: str = ""
    collateral: bool = False  # stopped by trainctl because another node failed first
    released: bool = False  # a server stopped because the chief finished the job: not a failure
    preempted: bool = False  # its VM was reclaimed (spot): not the program's fault
    lost_at: float | None = None  # when trainctl learnt it was preempted (time.time())
    drained: bool = False  # lost to host maintenance ahead: still up, so trainctl stops its programs
    maintenance: list[dict[str, Any]] = field(default_factory=list)  # its maintenance-event changes
    last_step: int | None = None  # the furthest step its program printed
    agent_state: torchrun_agents.AgentState | None = None  # its torchrun agent's, as it logged it
    worker_exit_code: int | None = None  # its program's last exit code (torchrun's agent: a worker's)
    resumed_step: int | None = None  # the step its program said it resumed from
    # Where its program said its current worker group started: (epoch or step, number, whether
    # the line said it resumed), from its first progress or resume line (lines.START_RE).
    start: tuple[str, int, bool] | None = None
    worker_tail: deque[str] = field(default_factory=lambda: deque(maxlen=10))  # the program's
    agent_tail: deque[str] = field(default_factory=lambda: deque(maxlen=25))  # torchrun's


@dataclass
class LaunchResult:
    run_id: str
    outcomes: list[NodeOutcome]
    attempts: int = 1
    permanent_failure: int | None = None  # a worker exit code from the permanent set
    cancelled: bool = False  # stopped on the caller's request (a pruned trial): never rerun
    recoveries: list[RecoveryRecord] = field(default_factory=list)  # preempted nodes brought back
    maintenance_events: list[dict[str, Any]] = field(default_factory=list)  # every attempt's, in order

    def worker_exit_codes(self) -> set[int]:
        """Exit codes of the failed programs, as torchrun's error summary reports them."""
        codes = set()
        for o in self.failures():
            for line in o.agent_tail:
                match = EXITCODE_RE.search(line)
                if match:
                    codes.add(int(match.group(1)))
        return codes

    def permanent(self, codes: tuple[int, ...]) -> bool:
        return self.permanent_failure is not None or bool(self.worker_exit_codes() & set(codes))

    def why_no_rerun(self, permanent_codes: tuple[int, ...]) -> str | None:
        """Why a rerun of this failed job would fail as it did (what trainctl says), or None."""
        failure = self.failure()
        if self.permanent(permanent_codes):
            return f"exit code {self.permanent_failure or sorted(self.worker_exit_codes())} is permanent: no retry"
        if failure is not None and failure.unfixable:
            return f"no retry can fix {failure.error}: no rerun"
        return self.diverged_starts()

    def diverged_starts(self) -> str | None:
        """The nodes' programs resumed from different points (one found a checkpoint the others
        did not: PyTorch's DDP tutorial keeps its snapshot in a relative file only rank 0
        writes), so their ranks train different epochs until one leaves the others waiting:
        every rerun resumes them apart again."""
        starts = {o.node: o.start for o in self.outcomes if o.start is not None}
        if not any(resumed for _unit, _n, resumed in starts.values()):
            return None
        for unit in sorted({unit for unit, _n, _r in starts.values()}):
            points: dict[int, list[str]] = {}
            for node, (u, n, _r) in sorted(starts.items()):
                if u == unit:
                    points.setdefault(n, []).append(node)
            if len(points) > 1:
                where = "; ".join(f"{', '.join(nodes)} at {unit} {n}" for n, nodes in sorted(points.items()))
                return (f"the nodes' programs resumed from different points ({where}): each read the "
                        "checkpoint it found on its own disk; keep it where every node reads it: the "
                        "experiment's `shared_dir:` gives every node the run's folder, and its `links` "
                        "put a relative file there (`shared_dir: {links: [snapshot.pt]}` for PyTorch's "
                        "DDP tutorial), or write it to the job dir ({job_dir}) through fsspec/gcsfs: no rerun")
        return None

    @property
    def ok(self) -> bool:
        return all(o.exit_code == 0 or o.released for o in self.outcomes)

    def preempted(self) -> list[str]:
        return [o.node for o in self.outcomes if o.preempted]

    def maintenance_notices(self) -> list[dict[str, Any]]:
        """This attempt's host maintenance announcements, in the order they came."""
        return sorted((n for o in self.outcomes for n in o.maintenance), key=lambda n: n["at"])

    def lost_at(self) -> float:
        return min((o.lost_at for o in self.outcomes if o.lost_at), default=time.time())

    def last_step(self) -> int | None:
        return max((o.last_step for o in self.outcomes if o.last_step is not None), default=None)

    def resumed_step(self) -> int | None:
        return min((o.resumed_step for o in self.outcomes if o.resumed_step is not None), default=None)

    def failures(self) -> list[NodeOutcome]:
        """The nodes that caused the failure (not those stopped because of it)."""
        return [o for o in self.outcomes if o.exit_code != 0 and not o.collateral and not o.released]

    def failure(self) -> Failure | None:
        """What failed, as the programs showed it: the first failure no retry can fix, else the
        first failed node's (None: nothing failed)."""
        found = [failure_of(o) for o in self.failures()]
        return next((f for f in found if f.unfixable), found[0] if found else None)

    def describe_failures(self) -> str:
        lines = []
        for o in self.failures():
            why = o.error or failure_of(o).describe()
            lines.append(f"{o.node} (rank {o.rank}) failed: {why}; last lines of its program:")
            lines.extend(f"    {line}" for line in o.worker_tail)
            if o.agent_tail:
                lines.append("  and of its launcher:")
                lines.extend(f"    {line}" for line in list(o.agent_tail)[-8:])
        return "\n".join(lines)


def failure_of(outcome: NodeOutcome) -> Failure:
    if outcome.worker_exit_code is None and outcome.error:  # lost, or never ran its program
        return Failure(outcome.error)
    code = outcome.exit_code if outcome.worker_exit_code is None else outcome.worker_exit_code
    return classify(outcome.worker_tail, code)


@dataclass
class RecoveryRecord:
    nodes: list[str]
    lost_at: float  # when the first loss was noticed
    resumed_at: float  # when the job was started again on every node
    tries: int  # recreate attempts (more than 1: the provider had no capacity for a while)
    furthest_step: int | None  # the furthest step the program printed before the loss
    resumed_from_step: int | None = None  # the step it said it resumed from
    moved_to: str | None = None  # the zone the whole cluster moved to (its own had no capacity left)

    def joined(self, _recreated: Future) -> None:
        self.resumed_at = time.time()

    @property
    def seconds(self) -> float:
        return round(self.resumed_at - self.lost_at, 1)

    @property
    def steps_redone(self) -> int | None:
        if self.furthest_step is None or self.resumed_from_step is None:
            return None
        return max(0, self.furthest_step - self.resumed_from_step)


def write_interrupted(log_dir: Path, run_id: str, why: str) -> None:
    log_dir.mkdir(parents=True, exist_ok=True)
    (log_dir / RESULT_FILE).write_text(json.dumps({"run_id": run_id, "ok": False, "interrupted": why},
                                                  indent=2))


def write_result(log_dir: Path, result: LaunchResult) -> None:
    """Marks the run finished for `trainctl logs --follow` and `trainctl status --run`; host
    maintenance announced during the run is kept there too (only where there was some)."""
    events = {"maintenance_events": result.maintenance_events} if result.maintenance_events else {}
    (log_dir / RESULT_FILE).write_text(json.dumps({
        "run_id": result.run_id, "ok": result.ok, "attempts": result.attempts,
        "recoveries": [{"nodes": r.nodes, "seconds": r.seconds, "tries": r.tries,
                        "resumed_from_step": r.resumed_from_step, "steps_redone": r.steps_redone,
                        **({"moved_to": r.moved_to} if r.moved_to else {})}
                       for r in result.recoveries],
        "failures": [{"node": o.node, "rank": o.rank, "exit_code": program_exit_code(o),
                      "error": o.error or failure_of(o).describe()}
                     for o in result.failures()], **events}, indent=2))


def program_exit_code(outcome: NodeOutcome) -> int | None:
    """The program's own exit code, as its failure is described: torchrun's worker's where it
    reported one, else the node's command's; None where that ended with no status (-1: a
    session trainctl stopped or lost, a node that never started its command)."""
    if outcome.worker_exit_code is not None:
        return outcome.worker_exit_code
    return None if outcome.exit_code == -1 else outcome.exit_code
