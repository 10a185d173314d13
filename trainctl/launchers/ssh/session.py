"""One node's SSH session while its command runs: a heartbeat that notices a cut link in
seconds, a watch on the metadata server's preemption notice, and the stop that ends the run's
processes on the nodes."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for_futures
from typing import Callable

from bootstrap.ssh import open_connection
from infra.providers.inventory import Inventory, Node
from trainctl.launchers.result import NodeOutcome
from trainctl.launchers.ssh.commands import stop_command


HEARTBEAT_SECONDS = 3.0


HEARTBEAT_MISSES = 2


# A node whose command was still starting when the stop went out starts anyway: stop it again.
RESTOP_SECONDS = 2.0


# Held open on every node for the run: GCE's metadata server answers `instance/preempted` as
# soon as the VM is being reclaimed (the local stack's does too); a host without a metadata
# server ends the watch at once. The node's shutdown then takes its processes within ~30 s:
# knowing why they died decides between a recovery and a failed run. Each wait is bounded and
# followed by a write, so the watch dies of SIGPIPE within 30 s of its session closing.
PREEMPTED_MARK = "TRAINCTL_PREEMPTED"


WATCH_PREEMPTION = (
    "u=http://metadata.google.internal/computeMetadata/v1/instance/preempted; h='Metadata-Flavor: Google'; "
    "v=$(curl -sf -H \"$h\" $u) || exit 0; "
    "while [ \"$v\" != TRUE ]; do printf . || exit 0; "
    "v=$(curl -sf -H \"$h\" \"$u?wait_for_change=true&timeout_sec=30\") || sleep 5; done; "
    f"echo {PREEMPTED_MARK}")


def watch_preemption(conn, node: Node, outcome: NodeOutcome, done: threading.Event,
                     on_preempted: Callable[[], None], echo: Callable[[str], None]) -> None:
    try:
        channel = conn.transport.open_session()
        channel.exec_command(WATCH_PREEMPTION)
        answer = b""
        while not done.is_set() and not channel.exit_status_ready():
            if channel.recv_ready():
                answer += channel.recv(1024)
            done.wait(0.2)
        answer += channel.recv(1024) if channel.recv_ready() else b""
        channel.close()
    except Exception:
        return  # the session ended with the run, or the node is gone: the heartbeat says so
    if PREEMPTED_MARK.encode() in answer and not done.is_set():
        if mark_preempted(outcome):
            echo(f"[trainctl] {node.name}: {outcome.error}")
        on_preempted()


_MARKING = threading.Lock()


def mark_preempted(outcome: NodeOutcome, why: str = "preempted: its spot VM is being reclaimed") -> bool:
    """Mark the node lost to a preemption; False if the watch or the session's end already did."""
    with _MARKING:
        if outcome.preempted:
            return False
        outcome.preempted, outcome.error = True, why
        outcome.lost_at = outcome.lost_at or time.time()
        return True


def is_preempted(conn) -> bool:
    try:
        answer = conn.run("curl -sf -H 'Metadata-Flavor: Google' http://metadata.google.internal/"
                          "computeMetadata/v1/instance/preempted", hide=True, warn=True, in_stream=False)
        return answer.stdout.strip() == "TRUE"
    except Exception:
        return False


def heartbeat(conn, node: Node, outcome: NodeOutcome, done: threading.Event,
              echo: Callable[[str], None]) -> None:
    """A node whose link is cut never closes its SSH session: TCP would notice after ~15 min.
    A tiny command every few seconds on the same connection notices in seconds; a node that
    misses HEARTBEAT_MISSES in a row is declared lost and its session is closed."""
    misses = 0
    while not done.wait(HEARTBEAT_SECONDS):
        try:
            channel = conn.transport.open_session(timeout=HEARTBEAT_SECONDS)
            try:
                channel.settimeout(HEARTBEAT_SECONDS)
                channel.exec_command("true")
                deadline = time.monotonic() + HEARTBEAT_SECONDS
                while not channel.exit_status_ready():
                    if time.monotonic() > deadline:
                        raise TimeoutError("no answer")
                    time.sleep(0.05)
                misses = 0
            finally:
                channel.close()
        except Exception:
            if done.is_set():
                return
            misses += 1
            if misses >= HEARTBEAT_MISSES:
                lost_for = HEARTBEAT_SECONDS * 2 * HEARTBEAT_MISSES
                outcome.error = f"node lost: no SSH heartbeat for about {lost_for:.0f} s (link cut or node down)"
                echo(f"[trainctl] {node.name}: {outcome.error}")
                conn.close()
                return


def stop_run(inventory: Inventory, run_id: str, nodes: list[Node] | None = None) -> None:
    """Stop the run's processes on the given nodes (all by default), in parallel."""
    targets = list(inventory.nodes) if nodes is None else nodes
    if not targets:
        return

    def stop(node: Node) -> None:
        try:
            conn = open_connection(inventory, node, deadline=time.monotonic() + 10)
            with conn:
                conn.run(stop_command(run_id), hide=True, warn=True, in_stream=False)
        except Exception:
            pass  # an unreachable node is torn down or reported elsewhere

    with ThreadPoolExecutor(max_workers=max(1, min(32, len(targets)))) as pool:
        list(pool.map(stop, targets))


def _stop_until_ended(inventory: Inventory, run_id: str, nodes: list[Node],
                      sessions: list[Future], reclaimed: frozenset[str] = frozenset()) -> None:
    """Stop the run everywhere, then again on each node whose session is still open (its command
    may have been starting while the first stop went out), until every session has ended.
    Nodes the provider is reclaiming are left to their shutdown, which sends their programs
    SIGTERM itself: connecting to a VM on its way out waits until it is gone (or until a new one
    answers at its address), and the survivors' restart would wait on that."""
    stop_run(inventory, run_id, [n for n in inventory.nodes if n.name not in reclaimed])
    while True:
        _, pending = wait_for_futures(sessions, timeout=RESTOP_SECONDS)
        if not pending:
            return
        stop_run(inventory, run_id, [n for n, f in zip(nodes, sessions)
                                     if not f.done() and n.name not in reclaimed])
