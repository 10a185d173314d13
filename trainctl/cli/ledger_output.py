"""A run's ledger as `trainctl report` prints it (stdout): where the time and the money went,
kind by kind, with goodput; for a sweep, each trial's cost against its metric. After `run`, a
two-line summary of the same on stderr."""

from __future__ import annotations

from typing import TYPE_CHECKING

from infra.spec.cost import PRICE_SOURCE
from trainctl.cli.output import say, show, table, usd

if TYPE_CHECKING:
    from infra.spec.ledger import Ledger


def _percent(share: float | None) -> str:
    return "" if share is None else f"{share:.1%}"


def _goodput(ledger: Ledger) -> str:
    if not ledger.steps_reported:
        return "unknown (the program printed no \"step N\" lines)"
    return _percent(ledger.goodput) or "n/a"


def show_breakdown(ledger: Ledger) -> None:
    rows = table("interval kind", "seconds", "share", "USD")
    whole = ledger.wall_seconds or 1.0
    seconds = ledger.seconds_by_kind()
    usd = ledger.usd_by_kind
    for kind in ledger.kinds():
        rows.add_row(kind, f"{seconds[kind]:.1f}", _percent(seconds[kind] / whole), f"{usd[kind]:.4f}")
    rows.add_row("wall time", f"{ledger.wall_seconds:.1f}", _percent(sum(seconds.values()) / whole),
                 f"{ledger.total_usd:.4f}")
    show(f"run {ledger.run_id}: goodput {_goodput(ledger)}", rows)
    show_nodes(ledger)


def show_nodes(ledger: Ledger) -> None:
    rows = table("node", "capacity", "USD/hour", "on demand USD/hour")
    for n in ledger.nodes:
        rows.add_row(n.name, n.capacity, f"{n.usd_per_hour:.4f}", f"{n.on_demand_usd_per_hour:.4f}")
    show("nodes (catalog list prices)", rows)


def show_trials(ledger: Ledger) -> None:
    rows = table("trial", "state", ledger.metric or "value", "seconds", "USD", "goodput")
    for t in ledger.trials:
        rows.add_row(str(t.number), t.state, "" if t.value is None else f"{t.value:.4f}", f"{t.seconds:.1f}",
                     f"{t.usd:.4f}", _percent(t.goodput))
    show(f"sweep {ledger.run_id}: cost per trial", rows)


def summary_lines(ledger: Ledger) -> list[str]:
    lines = [f"goodput {_goodput(ledger)} of {ledger.wall_seconds:.0f} s; "
             f"{usd(ledger.total_usd)} at list prices"]
    if ledger.steps_redone is not None:  # something failed and the program resumed
        lines.append(f"lost work: {ledger.steps_redone} step(s) trained again after failures (at the program's pace)")
    if ledger.spot_saving_usd is not None:
        lines.append(f"spot saved {usd(ledger.spot_saving_usd)} over the whole run against the same nodes on "
                     f"demand, at {PRICE_SOURCE}")
    return lines


def say_summary(ledger: Ledger) -> None:
    for line in summary_lines(ledger):
        say(line)
