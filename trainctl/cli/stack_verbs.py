"""Verbs on one stack's cluster: what it would be (plan), create it (up), remove it (down), see
its nodes answer (status), and reclaim a spot node by hand (preempt, hidden)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from infra.providers import realizers
from trainctl.cli.options import (BudgetOpt, LiveStackOpt, RunsDirOpt, SimulatedProjectOpt, SimulateOpt, StackOpt,
                                  budget_option, nodes_over_ssh, run_id_argument, runs_root, simulate_if_asked)
from trainctl.cli.output import out, result, say, show, table
from trainctl.cli.placement_output import show_placement

if TYPE_CHECKING:
    from infra.spec.budget import Budget
    from infra.spec.cluster import ClusterSpec
    from infra.providers.protocol import Capabilities
    from infra.spec.cost import Estimate

verbs = typer.Typer()

NodeCountOpt = Annotated[Optional[int], typer.Option(help="override the node count")]


def _load(stack: str, nodes: int | None, budget: Budget | None = None) -> ClusterSpec:
    from infra.spec.stack_config import load_stack

    overrides = {**({} if nodes is None else {"nodes": nodes}), **({} if budget is None else {"budget": budget})}
    return load_stack(stack, overrides=overrides or None, overrides_from="--nodes")


def _within_budget(spec: ClusterSpec, cost: Estimate, flag: str | None, stack: str) -> None:
    """Refuse (exit 2) a cluster over its budget's hourly cap, naming where the budget was set."""
    from infra.spec.budget import refuse_over_hourly
    from infra.spec.stack_config import stack_path

    source = "--budget" if flag else f"trainctl:budget in {stack_path(stack)}"
    refuse_over_hourly(spec.budget, cost, spec.name, source)


@verbs.command()
def plan(stack: StackOpt = "local",
         nodes: NodeCountOpt = None,
         as_json: Annotated[bool, typer.Option("--json", help="the plan as one JSON document on stdout "
                                                             "(docs/plan-json.md), for policies in CI")] = False,
         budget: BudgetOpt = None,
         simulate: SimulateOpt = False, simulated_project: SimulatedProjectOpt = None) -> None:
    """Show what `up` would create, without creating anything."""
    spec = _load(stack, nodes, budget_option(budget))
    simulate_if_asked(spec, simulate, simulated_project)  # a named reservation is read from the project
    realizer = realizers.for_spec(spec)
    cost = realizer.estimate(spec)
    _within_budget(spec, cost, budget, stack)
    rows = realizer.plan(spec)
    notes = [f"bucket gs://{r.name} is kept by `trainctl down` (a named stack's checkpoints outlive "
             f"it) and adopted by the next `up` of this stack; delete it with "
             f"`gcloud storage rm -r gs://{r.name}`" for r in rows if r.kept_on_down]
    if as_json:
        from trainctl.cli.plan_document import plan_document

        out(plan_document(spec, rows, cost, notes, realizer.capabilities(spec)).model_dump_json(indent=2))
        return
    from trainctl.cli.plan_capacity import capacity_note, capacity_table

    resources = table("resource", "name", "details")
    for r in rows:
        if not r.is_capacity:
            resources.add_row(r.kind, r.name, ", ".join(f"{k}={v}" for k, v in r.values.items()))
    show(f"stack {spec.name} ({spec.provider}): {spec.node_count} node(s), {spec.accelerator}", resources)
    capacity = capacity_table(rows)
    if capacity is not None:
        show("capacity per pool (the quota each pool needs, and what the project has free)", capacity)
    notes = [note for note in [capacity_note(rows)] if note] + notes
    for note in notes:
        result(note)
    for what, per_hour in cost.lines:
        result(f"  {what}: ${per_hour:.2f}/hour")
    result(f"estimated ${cost.per_hour:.2f}/hour; ${cost.for_hours(spec.ttl_hours):.2f} for the "
           f"{spec.ttl_hours:g} h TTL (list prices, before discounts and egress)")
    if spec.budget and spec.budget.max_usd and cost.per_hour > 0:
        result(f"budget max_usd ${spec.budget.max_usd:g} pays for {spec.budget.max_usd / cost.per_hour:.2f} h "
               "of this stack; `trainctl run` stops, checkpointed, before it is spent")
    result(_detached_line(realizer.capabilities(spec)))


def _detached_line(can: Capabilities) -> str:
    """What `run --detach` would cost beside the stack: its controller (docs/how-to/detached-runs.md)."""
    if can.controller is None:
        return "run --detach: not available on this target (it has no controller yet)"
    billed = " (nothing billed)" if can.unbilled else ""
    return f"run --detach: its controller is {can.controller}{billed}, one per run, removed when the run ends"


@verbs.command()
def up(stack: StackOpt = "local",
       nodes: NodeCountOpt = None,
       budget: BudgetOpt = None,
       simulate: SimulateOpt = False, simulated_project: SimulatedProjectOpt = None) -> None:
    """Create the stack's cluster."""
    spec = _load(stack, nodes, budget_option(budget))
    simulate_if_asked(spec, simulate, simulated_project)
    _within_budget(spec, realizers.for_spec(spec).estimate(spec), budget, stack)
    start = time.monotonic()
    inventory = realizers.for_spec(spec).up(spec, say)
    show_placement(inventory.placement)
    say(f"[green]stack {spec.name} is up[/] in {time.monotonic() - start:.1f}s: "
        + ", ".join(f"{n.name}={n.internal_ip}" for n in inventory.nodes))


@verbs.command()
def down(stack: LiveStackOpt = "local",
         force: Annotated[bool, typer.Option(help="remove what exists by name even without "
                                                  "(or with a corrupt) state file")] = False) -> None:
    """Remove everything the stack created. Safe to repeat."""
    existed = realizers.for_stack(stack).down(stack, force=force, progress=say)
    say(f"[green]stack {stack} removed[/]" if existed else f"stack {stack} does not exist: nothing to do")


@verbs.command()
def status(stack: LiveStackOpt = "local",
           run: Annotated[Optional[str], typer.Option(callback=run_id_argument,
                                                      help="a run id: its outcome instead")] = None,
           runs_dir: RunsDirOpt = None) -> None:
    """Show the stack's nodes and whether each answers over SSH (host key verified), or a run's state."""
    if run:
        from trainctl.cli.detached_verbs import run_status
        from trainctl.launchers.run_logs import outcome

        runs_dir = runs_dir or runs_root()
        out(run_status(runs_dir, run) or outcome(runs_dir, run))
        return
    from rich.text import Text

    from trainctl.launchers.ssh.remote_exec import probe

    inventory = nodes_over_ssh(stack, "status")
    nodes = table("node", "rank", "address", "accelerator", "ssh")
    for node, seconds, error in sorted(probe(inventory), key=lambda probed: probed[0].rank):
        state = Text(error, style="red") if seconds is None else Text(f"ok ({seconds * 1000:.0f} ms)", style="green")
        nodes.add_row(node.name, str(node.rank), node.internal_ip, str(node.accelerator), state)
    show(f"stack {stack} ({inventory.provider}), bucket {inventory.bucket_uri}", nodes)


@verbs.command(hidden=True)
def preempt(node: Annotated[str, typer.Argument(help="node name")], stack: LiveStackOpt = "local",
            grace: Annotated[float, typer.Option(help="seconds between the shutdown's SIGTERM and "
                                                      "the stop (GCE: about 30)")] = 30.0,
            unavailable_for: Annotated[float, typer.Option(
                min=0, help="seconds the zone then has no capacity for it (a stockout)")] = 0.0) -> None:
    """Reclaim a spot node as GCE does, for trying recovery by hand: on local stacks, and on GCP
    stacks brought up with --simulate (through the simulator their endpoints record names). On a
    stack that reaches Google, refused: Google has no API that preempts a VM."""
    action = realizers.for_stack(stack).preempt(stack, node, grace=grace, progress=say,
                                                unavailable_for=unavailable_for)
    say(f"{node} preempted ({action})")
