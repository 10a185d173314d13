"""The ledger as pictures: one lane per node, colored by interval kind, restarts and preemptions
marked (timeline.png); for a sweep, each trial's cost against its metric (trial_cost.png).
Drawn outside pyplot, in turns with every other picture of the process (collect.py)."""

from __future__ import annotations

from pathlib import Path

from infra.spec.ledger import PRODUCTIVE, Ledger
from trainctl.jobs.collect import draw_safely, new_figure, save_figure, takes_turns

TIMELINE = "timeline.png"
TRIAL_COST = "trial_cost.png"
# Productive green, the program's own badput warm, trainctl's phases cool, idle grey.
COLORS = {
    "provisioning": "#6baed6", "image": "#9ecae1", "bootstrap": "#4292c6", "data_staging": "#2171b5",
    "program_startup": "#fdae6b", PRODUCTIVE: "#31a354", "wasted_progress_from_disruption": "#de2d26",
    "infrastructure_recovery_from_disruption": "#fb6a4a", "other": "#fdd0a2", "collect": "#807dba",
    "idle": "#d9d9d9", "teardown": "#54278f", "waiting_for_capacity": "#f0f0f0",
    "unproductive_checkpoint_save_time": "#fd8d3c", "unproductive_checkpoint_restore_time": "#e6550d",
}
OTHER_PHASE = "#969696"  # a phase the ledger has no kind for
MARKS = {"restart": ("#000000", "--"), "preemption": ("#de2d26", "-")}


@takes_turns
def plot_timeline(ledger: Ledger, out: Path) -> bool:
    lanes = [n.name for n in ledger.nodes]
    if not lanes or not ledger.intervals:
        return False
    fig = new_figure(figsize=(10, 1.2 + 0.45 * len(lanes)))
    ax = fig.add_subplot()
    t0 = ledger.started
    for row, node in enumerate(lanes):
        for i in (i for i in ledger.intervals if node in i.nodes):
            ax.broken_barh([(i.start - t0, i.seconds)], (row - 0.4, 0.8),
                           facecolors=COLORS.get(i.kind, OTHER_PHASE))
    for e in ledger.events:
        color, style = MARKS[e.kind]
        ax.axvline(e.time - t0, color=color, linestyle=style, linewidth=1)
        ax.annotate(e.kind, (e.time - t0, -0.45), fontsize=7, color=color, rotation=90, va="top", ha="right")
    ax.set_yticks(range(len(lanes)), lanes)
    ax.set_ylim(-0.6, len(lanes) - 0.4)
    ax.invert_yaxis()
    ax.set_xlim(0, ledger.wall_seconds or 1)
    ax.set_xlabel("seconds since the run started")
    from matplotlib.patches import Patch

    present = ledger.kinds()
    # Below the lanes, where it never hides one; the saved picture grows to hold it.
    ax.legend(handles=[Patch(color=COLORS.get(k, OTHER_PHASE), label=k.replace("_", " ")) for k in present],
              loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=min(4, len(present)), fontsize=7,
              frameon=False)
    goodput = "unknown" if ledger.goodput is None else f"{ledger.goodput:.0%}"
    ax.set_title(f"{ledger.run_id}: goodput {goodput}, ${ledger.total_usd:.2f} at list prices",
                 fontsize=9, loc="left")
    fig.savefig(out, dpi=100, bbox_inches="tight")
    return True


@takes_turns
def plot_trial_costs(ledger: Ledger, metric: str, out: Path) -> bool:
    shown = [t for t in ledger.trials if t.value is not None]
    if not shown:
        return False
    fig = new_figure(figsize=(6, 4))
    ax = fig.add_subplot()
    ax.scatter([t.usd for t in shown], [t.value for t in shown])
    for t in shown:
        ax.annotate(str(t.number), (t.usd, t.value or 0.0), fontsize=8, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("trial cost (USD, list prices)")
    ax.set_ylabel(metric)
    ax.set_title(f"sweep {ledger.run_id}: cost per trial against {metric}", fontsize=9)
    save_figure(fig, out, dpi=100)
    return True


def draw_ledger(ledger: Ledger, run_dir: Path) -> list[Path]:
    """The pictures that could be drawn (a failure only warns: the ledger is the result)."""
    drawn = []
    if draw_safely(plot_timeline, ledger, run_dir / TIMELINE):
        drawn.append(run_dir / TIMELINE)
    if ledger.trials and draw_safely(plot_trial_costs, ledger, ledger.metric or "metric",
                                         run_dir / TRIAL_COST):
        drawn.append(run_dir / TRIAL_COST)
    return drawn
