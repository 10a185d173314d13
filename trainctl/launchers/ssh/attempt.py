"""One attempt of a job on the nodes: every node's command over its own pinned SSH session,
live prefixed logs, and the first failure (or a cancel, an interrupt, the chief's end with
parameter servers) stopping the others."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
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
from trainctl.launchers.ssh.session import (_stop_until_ended, heartbeat, is_preempted, mark_preempted, stop_run,
                                            watch_preemption)


NOT_STARTED = "not started: the run was stopping"


def wait_to_join(ready: Future[Inventory], stopping: threading.Event) -> Inventory | None:
    """Wait for a joining node to be recreated and bootstrapped (a failure raises): the inventory
    that has it; None if the run stops first."""
    while not stopping.is_set():
        try:
            return ready.result(timeout=0.2)
        except FutureTimeout:
            continue
    return None


def launch_once(inventory: Inventory, spec: LaunchSpec, log_dir: Path,
                echo: Callable[[str], None], attempt: int,
                cancel: threading.Event | None = None,
                on_lost: Callable[[list[str]], None] = lambda _: None,
                joining: Mapping[str, Future[Inventory]] | None = None,
                commands: Mapping[str, str] | None = None) -> LaunchResult:
    """Run the plan on every node; on the first failure stop the rest. Blocks until done.
    `on_lost` hears of preempted nodes before the others are stopped. A node in `joining`
    starts when its future gives the inventory that has it recreated and bootstrapped (its
    host keys, its address), the others at once. `commands`: each node's command line as a
    launch plan has it (default: this attempt's, made here)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    joining = joining or {}
    commands = commands if commands is not None else plan(inventory, spec, attempt, joiners=bool(joining))
    nodes = [n for n in inventory.nodes if n.name in commands]
    outcomes = {n.name: NodeOutcome(n.name, n.rank) for n in nodes}
    first_failure = threading.Event()
    stopping = threading.Event()
    chief_done = threading.Event()
    chief = members(inventory, "chief")[0].name if members(inventory, "chief") else None
    serving = [n for n in servers(inventory) if n.name in commands]
    # torchrun would restart the group: not after a permanent error, one no retry can fix, or
    # once other nodes' groups have finished (their agents never join its new rendezvous)
    stops = AttemptStops(outcomes, spec.permanent_exit_codes, first_failure.set)

    def run_on(node: Node) -> None:
        outcome = outcomes[node.name]

        def worker_exit(code: int) -> None:
            if not stopping.is_set():
                stops.worker_exited(node.name, code)

        direct = not uses_torchrun(node, spec, inventory)
        printer = LinePrinter(node.name, log_dir / f"{node.name}.log", echo, outcome, worker_exit,
                              direct_rank=node.rank if direct else None, quiet=stopping,
                              on_agent_change=None if direct else stops.agents_changed)
        done = threading.Event()
        try:
            reached: Inventory | None = inventory
            command = commands[node.name]
            if node.name in joining:
                reached = wait_to_join(joining[node.name], stopping)
                if reached is not None:
                    node = reached.node(node.name)
                    command = node_command(reached, node, spec, attempt, joiners=True)
            if reached is None:
                outcome.exit_code, outcome.error = -1, NOT_STARTED
            else:
                conn = open_connection(reached, node, deadline=time.monotonic() + 60)
                with conn:
                    if stopping.is_set():  # connected after the stop: never start
                        outcome.exit_code, outcome.error = -1, NOT_STARTED
                    else:
                        threading.Thread(target=heartbeat, args=(conn, node, outcome, done, echo),
                                         daemon=True).start()
                        threading.Thread(target=watch_preemption,
                                         args=(conn, node, outcome, done, first_failure.set, echo),
                                         daemon=True).start()
                        result = conn.run(command, warn=True, hide=False, pty=False,
                                          out_stream=printer, err_stream=printer, in_stream=False)
                        outcome.exit_code = result.exited
                        if result.exited and not outcome.preempted and is_preempted(conn):
                            # its processes (the watch among them) died of the VM's shutdown first
                            if mark_preempted(outcome):
                                echo(f"[trainctl] {node.name}: {outcome.error}")
                        if direct and result.exited and not outcome.preempted and not outcome.released:
                            worker_exit(result.exited)  # the program's own exit code
        except Exception as exc:
            outcome.exit_code = -1
            outcome.error = outcome.error or f"{type(exc).__name__}: {exc}"
        finally:
            done.set()
            printer.close()
        if node.name == chief and outcome.exit_code == 0:
            chief_done.set()
        if outcome.exit_code != 0 and not outcome.released:
            if outcome.preempted:
                first_failure.set()
            elif stopping.is_set() and node.name not in stops.causes:
                outcome.collateral = True
            else:
                first_failure.set()

    pool = ThreadPoolExecutor(max_workers=len(nodes))
    futures = [pool.submit(run_on, n) for n in nodes]
    try:
        while not all(f.done() for f in futures):
            raise_if_pending()
            if cancel is not None and cancel.is_set():
                stopping.set()
                echo(f"[trainctl] run {spec.run_id} cancelled: stopping it on every node")
                _stop_until_ended(inventory, spec.run_id, nodes, futures)
                break
            if serving and chief_done.is_set() and not any(outcomes[n.name].released for n in serving):
                # the job is done: its servers go (marked first, so their end is no failure)
                for n in serving:
                    outcomes[n.name].released = True
                echo(f"[trainctl] the chief finished: stopping the servers ({', '.join(n.name for n in serving)})")
                stop_run(inventory, spec.run_id, serving)
            if first_failure.wait(0.2):
                stopping.set()
                lost = [o.node for o in outcomes.values() if o.preempted]
                echo(f"[trainctl] {stops.why(lost)}: stopping run {spec.run_id} on the others")
                if lost and not stops.final:
                    on_lost(sorted(lost))
                _stop_until_ended(inventory, spec.run_id, nodes, futures, frozenset(lost))
                break
    except BaseException:
        stopping.set()
        echo(f"[trainctl] interrupted: stopping run {spec.run_id} on every node")
        _stop_until_ended(inventory, spec.run_id, nodes, futures)
        raise
    finally:
        pool.shutdown(wait=True)
    result = LaunchResult(spec.run_id, sorted(outcomes.values(), key=lambda o: o.rank),
                          permanent_failure=stops.permanent[1] if stops.permanent else None,
                          cancelled=cancel is not None and cancel.is_set())
    for name, why in stops.causes.items():
        outcomes[name].error = why
    return result
