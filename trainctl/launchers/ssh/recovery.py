"""Preempted nodes brought back while the others wait: recreated through the stack's owner
(`Recovery`), waiting out capacity shortages, and bootstrapped while the job starts again."""

from __future__ import annotations

import time
from concurrent.futures import Future
from typing import Callable

from infra.errors import CapacityUnavailable, RemoteError
from infra.providers.capacity_wait import CapacityWait
from infra.providers.inventory import Inventory
from trainctl.launchers.interrupts import raise_if_pending
from trainctl.launchers.protocol import Recovery
from trainctl.launchers.result import LaunchResult
from trainctl.launchers.ssh.session import mark_preempted


# Waits between tries to recreate preempted nodes while the provider has no capacity.
CAPACITY_BACKOFF_SECONDS = (5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 300.0)


# GCE stops a VM at most an hour after announcing its host maintenance (GPU VMs; 60 s otherwise),
# then within its shutdown's ~30 s: a drained node is waited for that long.
MAINTENANCE_STOP_TIMEOUT_SECONDS = 3600.0 + 120.0
MAINTENANCE_POLL_SECONDS = 0.5


# recreated nodes' inventory, the tries it took, and their bootstrap under way
Recovered = tuple[Inventory, int, Future[None]]


def once_joined(recovered: Future[Recovered]) -> Future[Inventory]:
    """The recreated nodes' inventory, once they are recreated and bootstrapped (chained by
    callbacks: no thread waits for it)."""
    joined: Future[Inventory] = Future()

    def recreated(f: Future[Recovered]) -> None:
        try:
            inventory, _tries, bootstrapped = f.result()
        except BaseException as exc:
            joined.set_exception(exc)
            return

        def bootstrap_done(b: Future[None]) -> None:
            try:
                b.result()
            except BaseException as exc:
                joined.set_exception(exc)
            else:
                joined.set_result(inventory)

        bootstrapped.add_done_callback(bootstrap_done)

    recovered.add_done_callback(recreated)
    return joined


def recreate_with_backoff(recovery: Recovery, lost: list[str], echo: Callable[[str], None],
                          sleep: Callable[[float], None]) -> tuple[Inventory, int]:
    """Recreate lost nodes; while the provider has no capacity, try again after growing waits
    (the run's TTL bounds it all). Returns the inventory and the number of tries."""
    tries, began = 0, time.time()
    while True:
        tries += 1
        tried_at = time.time()
        try:
            inventory = recovery.recreate(lost)
        except CapacityUnavailable as exc:
            wait = CAPACITY_BACKOFF_SECONDS[min(tries, len(CAPACITY_BACKOFF_SECONDS)) - 1]
            echo(f"[trainctl] no capacity for {', '.join(lost)} ({exc}): trying again in {wait:g} s")
            sleep(wait)
            continue
        if tries > 1:  # the lost nodes did not exist meanwhile: the ledger's wait, at no cost
            echo(CapacityWait(f"[trainctl] {', '.join(lost)}: {tries - 1} tries refused for capacity over "
                              f"{tried_at - began:.0f} s", began, tried_at, tuple(lost)))
        return inventory, tries


def await_maintenance_stop(recovery: Recovery, drained: list[str], echo: Callable[[str], None],
                           sleep: Callable[[float], None],
                           timeout: float = MAINTENANCE_STOP_TIMEOUT_SECONDS) -> None:
    """Nodes drained for host maintenance are still up until the host stops them: their
    recreation (a start on another host) begins once the provider reports them stopped."""
    echo(f"[trainctl] {', '.join(drained)}: waiting for the host maintenance to stop "
         f"{'it' if len(drained) == 1 else 'them'} (GCE: within 60 s of the notice, an hour on GPU VMs)")
    deadline = time.monotonic() + timeout
    while not set(drained) <= set(recovery.reclaimed(drained)):
        if time.monotonic() > deadline:
            raise RemoteError(f"{', '.join(drained)} still running {timeout:.0f} s after its host maintenance "
                              "notice; the provider has not stopped it")
        sleep(MAINTENANCE_POLL_SECONDS)


def replaced_nodes(before: Inventory, after: Inventory, lost: list[str]) -> list[str]:
    """The lost nodes and every other node the recovery replaced: one whose address or host keys
    changed is a new machine with nothing of the run on it (its cluster moved to another zone)."""
    was = {n.name: (n.ssh_host, n.host_keys) for n in before.nodes}
    return [n.name for n in after.nodes if n.name in lost or was.get(n.name) != (n.ssh_host, n.host_keys)]


def zone_moved_to(before: Inventory, after: Inventory) -> str | None:
    """The zone the cluster is in after a recovery, where that is another than before."""
    def zone(inventory: Inventory) -> str | None:
        landed = [p["zone"] for p in inventory.placement if p.get("outcome") == "up"]
        return landed[-1] if landed else None

    return zone(after) if zone(after) != zone(before) else None


def interruptible_sleep(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        raise_if_pending()
        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))


def find_reclaimed(result: LaunchResult, recovery: Recovery | None, echo: Callable[[str], None]) -> None:
    """Nodes lost without a preemption notice (no heartbeat, no connection): ask the provider
    whether it stopped or deleted them, which makes the loss a preemption to recover from."""
    silent = [o for o in result.failures() if not o.preempted and o.exit_code == -1]
    if recovery is None or not silent:
        return
    try:
        reclaimed = set(recovery.reclaimed([o.node for o in silent]))
    except Exception as exc:  # the provider cannot say: it stays a node failure
        echo(f"[trainctl] could not ask the provider about {', '.join(o.node for o in silent)}: {exc}")
        return
    for o in silent:
        if o.node in reclaimed and mark_preempted(o, "reclaimed: the provider stopped or deleted its VM"):
            echo(f"[trainctl] {o.node}: {o.error}")
