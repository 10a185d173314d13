"""Budgets: how much a stack may cost an hour, and how much a run or sweep may spend in all.

Pure arithmetic on the catalog's list prices (infra/spec/cost.py): what a stack costs an hour is
decided before anything exists (`plan`, `up`, `run` refuse a cluster over `max_usd_per_hour`),
and how long `max_usd` lasts at that price is decided from the moment the stack starts coming up,
since that is when billing starts. The stop keeps back STOP_RESERVE_SECONDS of the budget: the
nodes are still billed while the trainers save their checkpoints and while the stack is removed.
What collecting the artifacts takes grows while the run trains: a run keeps that back as well
(trainctl/jobs/collect_reserve.py), on top of this.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field, ValidationError, model_validator

from infra.errors import ConfigError
from infra.spec.model import SpecModel

if TYPE_CHECKING:  # cost.py reads ClusterSpec, which holds a Budget
    from infra.spec.cost import Estimate

# What stopping costs in time, still billed: trainctl's stop grace for a checkpoint
# (STOP_GRACE_SECONDS, 30 s as GCE's preemption notice) plus removing the stack.
STOP_RESERVE_SECONDS = 60.0


class Budget(SpecModel):
    """`budget: {max_usd, max_usd_per_hour}` of a stack file (`trainctl:budget`), an experiment or
    `--budget`; either limit may be left out."""

    max_usd: float | None = Field(None, gt=0)
    """What a run or sweep may spend in all (list prices): it stops, checkpointed, before that."""
    max_usd_per_hour: float | None = Field(None, gt=0)
    """An hourly cap: `plan`, `up` and `run` refuse a cluster that costs more."""

    @model_validator(mode="after")
    def some_limit(self) -> Budget:
        if self.max_usd is None and self.max_usd_per_hour is None:
            raise ValueError("a budget needs max_usd, max_usd_per_hour or both")
        return self

    def describe(self) -> str:
        parts = [f"max_usd ${self.max_usd:g}" if self.max_usd is not None else "",
                 f"max_usd_per_hour ${self.max_usd_per_hour:g}" if self.max_usd_per_hour is not None else ""]
        return ", ".join(p for p in parts if p)


def parse_budget_option(value: str) -> Budget:
    """`--budget max_usd=5,max_usd_per_hour=2` (gcloud's key=value lists); a bare number is max_usd."""
    fields: dict[str, str] = {}
    for item in (v.strip() for v in value.split(",") if v.strip()):
        key, eq, number = item.partition("=")
        if not eq:
            key, number = "max_usd", item
        fields[key.strip()] = number.strip()
    try:
        return Budget.model_validate(fields)
    except ValidationError as exc:
        wrong = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'budget'}: "
                          f"{e['msg'].removeprefix('Value error, ')}" for e in exc.errors())
        raise ConfigError(f"--budget {value!r}: {wrong}; write it as max_usd=USD,max_usd_per_hour=USD "
                          "(either may be left out)") from None


def refuse_over_hourly(budget: Budget | None, cost: Estimate, stack: str, source: str) -> None:
    """ConfigError (exit 2) when the stack's list price an hour is over the budget's hourly cap."""
    if budget is None or budget.max_usd_per_hour is None or cost.per_hour <= budget.max_usd_per_hour:
        return
    lines = "; ".join(f"{what} ${usd:.2f}" for what, usd in cost.lines if usd)
    raise ConfigError(
        f"stack {stack} costs ${cost.per_hour:.2f}/hour at list prices ({lines}), over its budget's "
        f"max_usd_per_hour ${budget.max_usd_per_hour:g} ({source}); use fewer or smaller nodes or spot "
        "capacity, or raise max_usd_per_hour")


def spend_seconds(budget: Budget | None, per_hour: float) -> float | None:
    """Seconds the stack may exist before it must start stopping to stay within max_usd; None
    where nothing limits it (no max_usd, or a stack that costs nothing)."""
    if budget is None or budget.max_usd is None or per_hour <= 0:
        return None
    return budget.max_usd / per_hour * 3600 - STOP_RESERVE_SECONDS


def spent(per_hour: float, seconds: float) -> float:
    return per_hour * seconds / 3600


def affordable(budget: Budget | None, per_hour: float, elapsed: float, next_seconds: float) -> bool:
    """Whether `next_seconds` more of the stack (a sweep's next trial, as long as the trials
    before it took) still end within max_usd, stop included, after `elapsed` seconds of it."""
    limit = spend_seconds(budget, per_hour)
    return limit is None or elapsed + next_seconds <= limit
