"""Where a run's time and money went: its timeline of intervals, each on some of its nodes, and
what the nodes cost while they lasted (`runs/<run>/ledger.json`; budgets read it as well).

Goodput is productive training time over wall time, as Google's `ml-goodput-measurement`
defines it; its badput causes keep Google's names (lowercase) where trainctl sees the same thing,
and trainctl adds what that library cannot see from inside the program: waiting for capacity,
provisioning, the image, bootstrap, collecting artifacts, idle nodes and teardown. Accounting is
in node-seconds, so a sweep whose trials share the nodes is weighed as fairly as one run on all
of them; for a run,
where every node follows the same timeline, node-seconds over the node count are plain seconds.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import computed_field

from infra.spec.model import SpecModel

PRODUCTIVE = "productive_training"
# In the order a run meets them (tables and pictures list them so).
WAITING = "waiting_for_capacity"
KINDS: tuple[str, ...] = (
    WAITING,  # queued for capacity the provider has not granted yet: nothing billed (trainctl's own)
    "provisioning",  # `up`: the stack's resources created (trainctl's own)
    "image",  # the experiment's image pushed to the stack's registry (trainctl's own)
    "bootstrap",  # code, environment and setup on the nodes (trainctl's own)
    "data_staging",  # the experiment's data copied onto the nodes before training (trainctl's own)
    "program_startup",  # Google's PROGRAM_STARTUP: launch to the first step, less that step's share
    "unproductive_checkpoint_restore_time",  # Google's: reading the checkpoint a start resumes from
    PRODUCTIVE,  # Google's GoodputType.TOTAL: steps that stayed in the model
    "unproductive_checkpoint_save_time",  # Google's: writing checkpoints, the others waiting for it
    "wasted_progress_from_disruption",  # Google's: steps trained again after a failure
    "infrastructure_recovery_from_disruption",  # Google's: failure until the job runs again
    "other",  # Google's OTHER: after the last step (final evaluation, saving, exiting)
    "collect",  # artifacts copied to runs/<run>/ (trainctl's own)
    "idle",  # nodes up, nothing of the run on them (trainctl's own)
    "teardown",  # `down` (trainctl's own)
)
# Kinds no node is billed for: nodes waiting for capacity do not exist yet (a PENDING flex-start
# VM, a queued TPU, a zone that refused them, a preempted node not recreated yet).
UNBILLED = frozenset({WAITING})
Capacity = Literal["on-demand", "spot", "reservation", "local"]


class NodeRate(SpecModel):
    """A node and its list price: what it costs while it exists, and what it would cost on
    demand (the baseline a spot node's saving is measured against)."""
    name: str
    capacity: Capacity
    usd_per_hour: float
    on_demand_usd_per_hour: float


class Interval(SpecModel):
    kind: str
    start: float  # unix seconds
    end: float
    nodes: tuple[str, ...]
    note: str = ""

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)


class Event(SpecModel):
    """A moment the picture marks: a restart of the program, a preemption."""
    kind: Literal["restart", "preemption"]
    time: float
    nodes: tuple[str, ...] = ()
    note: str = ""


class TrialCost(SpecModel):
    number: int
    state: str
    value: float | None
    seconds: float
    usd: float
    goodput: float | None


class Ledger(SpecModel):
    run_id: str
    started: float
    ended: float
    nodes: tuple[NodeRate, ...]
    intervals: tuple[Interval, ...]
    events: tuple[Event, ...] = ()
    fixed_usd_per_hour: float = 0.0  # charged for the stack as a whole (a GKE cluster's fee)
    steps: int | None = None  # the furthest step the program reported
    steps_redone: int | None = None  # steps trained again after failures
    # False: the program printed no "step N" line, so no time of it is known to be productive
    steps_reported: bool = True
    trials: tuple[TrialCost, ...] = ()
    metric: str | None = None  # a sweep's: what its trials' values are

    @classmethod
    def from_json(cls, text: str) -> "Ledger":
        """A ledger as `model_dump_json` wrote it (its derived figures are derived again)."""
        data = json.loads(text)
        for name in cls.model_computed_fields:
            data.pop(name, None)
        return cls.model_validate(data)

    @property
    def wall_seconds(self) -> float:
        return max(0.0, self.ended - self.started)

    def _rates(self, on_demand: bool = False) -> dict[str, float]:
        return {n.name: n.on_demand_usd_per_hour if on_demand else n.usd_per_hour for n in self.nodes}

    def node_seconds(self, kind: str | None = None) -> float:
        return sum(i.seconds * len(i.nodes) for i in self.intervals if kind is None or i.kind == kind)

    def interval_usd(self, interval: Interval, on_demand: bool = False) -> float:
        if interval.kind in UNBILLED:
            return 0.0
        rates = self._rates(on_demand)
        return interval.seconds / 3600 * sum(rates.get(n, 0.0) for n in interval.nodes)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def goodput(self) -> float | None:
        """Productive node-seconds over the nodes' wall time; None (unknown) where the program
        reported no steps, which is not the same as none trained."""
        whole = self.wall_seconds * len(self.nodes)
        return round(self.node_seconds(PRODUCTIVE) / whole, 4) if whole and self.steps_reported else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def badput(self) -> dict[str, float]:
        """Each unproductive kind's share of the nodes' wall time."""
        whole = self.wall_seconds * len(self.nodes)
        if not whole:
            return {}
        return {k: round(self.node_seconds(k) / whole, 4) for k in self.kinds() if k != PRODUCTIVE}

    @computed_field  # type: ignore[prop-decorator]
    @property
    def usd_by_kind(self) -> dict[str, float]:
        return {k: round(sum(self.interval_usd(i) for i in self.intervals if i.kind == k), 4)
                for k in self.kinds()}

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total_usd(self) -> float:
        fixed = self.fixed_usd_per_hour * self.wall_seconds / 3600
        return round(sum(self.interval_usd(i) for i in self.intervals) + fixed, 4)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def spot_saving_usd(self) -> float | None:
        """What the spot nodes saved against the same nodes on demand, over the whole run."""
        if not any(n.capacity == "spot" for n in self.nodes):
            return None
        on_demand = sum(self.interval_usd(i, on_demand=True) for i in self.intervals)
        return round(on_demand - sum(self.interval_usd(i) for i in self.intervals), 4)

    def kinds(self) -> list[str]:
        present = {i.kind for i in self.intervals}
        return [k for k in KINDS if k in present] + sorted(present - set(KINDS))

    def seconds_by_kind(self) -> dict[str, float]:
        """Node-seconds per kind over the node count: a run's plain seconds."""
        count = max(1, len(self.nodes))
        return {k: self.node_seconds(k) / count for k in self.kinds()}

    def lane_seconds(self, node: str) -> float:
        """How much of the wall time the node's intervals cover (all of it, when nothing is
        counted twice or left out)."""
        return sum(i.seconds for i in self.intervals if node in i.nodes)
