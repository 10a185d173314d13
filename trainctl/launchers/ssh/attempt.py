"""One attempt of a job on the nodes: every node's command over its own pinned SSH session,
live prefixed logs, and the first failure (or a cancel, an interrupt, the chief's end with
parameter servers) stopping the others."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Callable, Mapping

from bootstrap.ssh import open_connection
from infra.providers.inventory import Inventory, Node
from trainctl.launchers.cluster_env import members
from trainctl.launchers.interrupts import raise_if_pending
from trainctl.launchers.lines import LinePrinter
from trainctl.launchers.result import LaunchResult, NodeOutcome
from trainctl.launchers.spec import LaunchSpec
from trainctl.launchers.ssh.attempt_stops import AttemptStops
from trainctl.launchers.ssh.commands import node_command, plan, servers, uses_torchrun
from trainctl.launchers.ssh.maintenance_watch import watch_maintenance
from trainctl.launchers.ssh.session import (_stop_until_ended, heartbeat, is_preempted, mark_preempted, stop_run,
                                            watch_preemption)


NOT_STARTED = "not started: the run was stopping"


# hears the nodes lost (preempted, or drained for host maintenance), and which were drained
OnLost = Callable[[list[str], frozenset[str]], None]


@dataclass
class Attempt:
    """What the nodes' sessions and the watch over them share while the attempt runs."""
    inventory: Inventory
    spec: LaunchSpec
    log_dir: Path
    echo: Callable[[str], None]
    number: int
    commands: Mapping[str, str]
    joining: Mapping[str, Future[Inventory]]
    nodes: list[Node]
    outcomes: dict[str, NodeOutcome]
    stops: AttemptStops
    first_failure: threading.Event
    chief: str | None
    serving: list[Node]
    stopping: threading.Event  # shared with stops: nothing is judged once it is set
    chief_done: threading.Event = field(default_factory=threading.Event)


def prepare(inventory: Inventory, spec: LaunchSpec, log_dir: Path, echo: Callable[[str], None], number: int,
            joining: Mapping[str, Future[Inventory]], commands: Mapping[str, str]) -> Attempt:
    nodes = [n for n in inventory.nodes if n.name in commands]
    outcomes = {n.name: NodeOutcome(n.name, n.rank) for n in nodes}
    first_failure = threading.Event()
    chief = members(inventory, "chief")[0].name if members(inventory, "chief") else None
    serving = [n for n in servers(inventory) if n.name in commands]
    # torchrun would restart the group: not after a permanent error, one no retry can fix, or
    # once other nodes' groups have finished (their agents never join its new rendezvous)
    stopping = threading.Event()
    stops = AttemptStops(outcomes, spec.permanent_exit_codes, first_failure.set, stopping)
    return Attempt(inventory, spec, log_dir, echo, number, commands, joining, nodes, outcomes, stops,
                   first_failure, chief, serving, stopping)


def wait_to_join(ready: Future[Inventory], stopping: threading.Event) -> Inventory | None:
    """Wait for a joining node to be recreated and bootstrapped (a failure raises): the inventory
    that has it; None if the run stops first."""
    while not stopping.is_set():
        try:
            return ready.result(timeout=0.2)
        except FutureTimeout:
            continue
    return None


def reach(attempt: Attempt, node: Node) -> tuple[Inventory | None, Node, str]:
    """The inventory that has the node (None: the run stopped before a joining node was back),
    the node as it has it, and its command line."""
    if node.name not in attempt.joining:
        return attempt.inventory, node, attempt.commands[node.name]
    reached = wait_to_join(attempt.joining[node.name], attempt.stopping)
    if reached is None:
        return None, node, attempt.commands[node.name]
    node = reached.node(node.name)
    return reached, node, node_command(reached, node, attempt.spec, attempt.number, joiners=True)


def run_command(attempt: Attempt, conn, node: Node, command: str, printer: LinePrinter,
                done: threading.Event, direct: bool) -> None:
    """The node's command on its session, watched by a heartbeat and for a preemption or host
    maintenance notice."""
    outcome, echo = attempt.outcomes[node.name], attempt.echo
    threading.Thread(target=heartbeat, args=(conn, node, outcome, done, echo), daemon=True).start()
    for watch in (watch_preemption, watch_maintenance):
        threading.Thread(target=watch, args=(conn, node, outcome, done, attempt.first_failure.set, echo),
                         daemon=True).start()
    result = conn.run(command, warn=True, hide=False, pty=False,
                      out_stream=printer, err_stream=printer, in_stream=False)
    outcome.exit_code = result.exited
    if result.exited and not outcome.preempted and is_preempted(conn):
        # its processes (the watch among them) died of the VM's shutdown first
        if mark_preempted(outcome):
            echo(f"[trainctl] {node.name}: {outcome.error}")
    if direct and result.exited and not outcome.preempted and not outcome.released:
        attempt.stops.worker_exited(node.name, result.exited)  # the program's own exit code


def run_on(attempt: Attempt, node: Node) -> None:
    """One node's session, from connecting (after its recreation, for a joining node) to its
    command's end."""
    outcome = attempt.outcomes[node.name]
    direct = not uses_torchrun(node, attempt.spec, attempt.inventory)
    printer = LinePrinter(node.name, attempt.log_dir / f"{node.name}.log", attempt.echo, outcome,
                          partial(attempt.stops.worker_exited, node.name),
                          direct_rank=node.rank if direct else None, quiet=attempt.stopping,
                          on_agent_change=None if direct else attempt.stops.agents_changed)
    done = threading.Event()
    try:
        reached, node, command = reach(attempt, node)
        if reached is None:
            outcome.exit_code, outcome.error = -1, NOT_STARTED
        else:
            conn = open_connection(reached, node, deadline=time.monotonic() + 60)
            with conn:
                if attempt.stopping.is_set():  # connected after the stop: never start
                    outcome.exit_code, outcome.error = -1, NOT_STARTED
                else:
                    run_command(attempt, conn, node, command, printer, done, direct)
    except Exception as exc:
        outcome.exit_code = -1
        outcome.error = outcome.error or f"{type(exc).__name__}: {exc}"
    finally:
        done.set()
        printer.close()
    judge_end(attempt, node.name, outcome)


def judge_end(attempt: Attempt, node: str, outcome: NodeOutcome) -> None:
    """Whether the node's end stops the others: a failure does, unless the stop caused it."""
    if node == attempt.chief and outcome.exit_code == 0:
        attempt.chief_done.set()
    if outcome.exit_code != 0 and not outcome.released:
        if outcome.preempted:
            attempt.first_failure.set()
        elif attempt.stopping.is_set() and node not in attempt.stops.causes:
            outcome.collateral = True
        else:
            attempt.first_failure.set()


def release_servers(attempt: Attempt) -> None:
    """The job is done: its servers go (marked first, so their end is no failure)."""
    for n in attempt.serving:
        attempt.outcomes[n.name].released = True
    attempt.echo(f"[trainctl] the chief finished: stopping the servers ({', '.join(n.name for n in attempt.serving)})")
    stop_run(attempt.inventory, attempt.spec.run_id, attempt.serving)


def stop_after_failure(attempt: Attempt, sessions: list[Future], on_lost: OnLost) -> None:
    """Stop the others; preempted nodes are left to their shutdown, and `on_lost` hears of them
    first (their recreation starts while the others stop) unless nothing may follow. Nodes
    drained for host maintenance are still up: the run is stopped on them too."""
    attempt.stopping.set()
    lost = [o.node for o in attempt.outcomes.values() if o.preempted]
    drained = frozenset(o.node for o in attempt.outcomes.values() if o.drained)
    why = attempt.stops.why(lost)
    if drained and not attempt.stops.final:
        why = f"host maintenance ahead on {', '.join(sorted(drained))}"
    attempt.echo(f"[trainctl] {why}: stopping run {attempt.spec.run_id} on {'every node' if drained else 'the others'}")
    if lost and not attempt.stops.final:
        on_lost(sorted(lost), drained)
    _stop_until_ended(attempt.inventory, attempt.spec.run_id, attempt.nodes, sessions, frozenset(lost) - drained)


def stop_everywhere(attempt: Attempt, sessions: list[Future], said: str) -> None:
    attempt.stopping.set()
    try:
        attempt.echo(said)
    finally:  # the stop happens whatever became of the output
        _stop_until_ended(attempt.inventory, attempt.spec.run_id, attempt.nodes, sessions)


def watch(attempt: Attempt, sessions: list[Future], cancel: threading.Event | None, on_lost: OnLost) -> None:
    """Until every session has ended: stop them all on a cancel or the first failure, the
    servers once the chief is done."""
    while not all(f.done() for f in sessions):
        raise_if_pending()
        if cancel is not None and cancel.is_set():
            stop_everywhere(attempt, sessions,
                            f"[trainctl] run {attempt.spec.run_id} cancelled: stopping it on every node")
            return
        if (attempt.serving and attempt.chief_done.is_set()
                and not any(attempt.outcomes[n.name].released for n in attempt.serving)):
            release_servers(attempt)
        if attempt.first_failure.wait(0.2):
            stop_after_failure(attempt, sessions, on_lost)
            return


def launch_once(inventory: Inventory, spec: LaunchSpec, log_dir: Path,
                echo: Callable[[str], None], attempt: int,
                cancel: threading.Event | None = None,
                on_lost: OnLost = lambda _lost, _drained: None,
                joining: Mapping[str, Future[Inventory]] | None = None,
                commands: Mapping[str, str] | None = None) -> LaunchResult:
    """Run the plan on every node; on the first failure stop the rest. Blocks until done.
    `on_lost` hears of preempted nodes (and which of them are drained for host maintenance)
    before the others are stopped. A node in `joining`
    starts when its future gives the inventory that has it recreated and bootstrapped (its
    host keys, its address), the others at once. `commands`: each node's command line as a
    launch plan has it (default: this attempt's, made here)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    joining = joining or {}
    commands = commands if commands is not None else plan(inventory, spec, attempt, joiners=bool(joining))
    state = prepare(inventory, spec, log_dir, echo, attempt, joining, commands)
    pool = ThreadPoolExecutor(max_workers=len(state.nodes))
    sessions = [pool.submit(run_on, state, n) for n in state.nodes]
    try:
        watch(state, sessions, cancel, on_lost)
    except BaseException:
        stop_everywhere(state, sessions, f"[trainctl] interrupted: stopping run {spec.run_id} on every node")
        raise
    finally:
        pool.shutdown(wait=True)
    result = LaunchResult(spec.run_id, sorted(state.outcomes.values(), key=lambda o: o.rank),
                          permanent_failure=state.stops.permanent[1] if state.stops.permanent else None,
                          cancelled=cancel is not None and cancel.is_set())
    for name, why in state.stops.causes.items():
        state.outcomes[name].error = why
    return result
