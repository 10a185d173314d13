"""What a run hands its launcher for preempted nodes (a `Recovery`, which the SSH launcher's
recovery loop calls): which nodes the provider reclaimed, the same nodes recreated under their
names once the provider has finished reclaiming them, and those nodes bootstrapped alone (and
the experiment's data staged onto them: a recreated node may have a new disk). Where the
provider moved the whole cluster instead (its zone had no capacity left), every node is new, and
the zones it tried join the run's placement.json."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

from bootstrap.data_inputs import DataInput
from bootstrap.data_staging import stage_data
from bootstrap.plan import BootstrapSpec
from bootstrap.runner import bootstrap
from bootstrap.synced_nodes import SyncedNodes
from infra.errors import RemoteError
from infra.providers import realizers
from infra.providers.inventory import Inventory
from trainctl.launchers.interrupts import raise_if_pending
from trainctl.launchers.protocol import Recovery
from trainctl.launchers.ssh.recovery import replaced_nodes

PLACEMENT_FILE = "placement.json"


def keep_placement(run_dir: Path, inventory: Inventory) -> None:
    """The zones tried before one held the cluster (at `up`, and at a recovery that moved it):
    kept with the run."""
    if inventory.placement:
        (run_dir / PLACEMENT_FILE).write_text(json.dumps(list(inventory.placement), indent=2))


def recovery(stack: str, bspec: BootstrapSpec, run_dir: Path, echo: Callable[[str], None],
             data: tuple[DataInput, ...] = ()) -> Recovery:
    """Preempted nodes come back under their names through the stack's realizer and are
    bootstrapped alone; the launcher resumes the job from its checkpoint on the others meanwhile,
    and on them once they are ready."""
    def progress(message: str) -> None:
        echo(f"[trainctl] {message}")

    def reclaimed(nodes: list[str]) -> list[str]:
        status = realizers.for_stack(stack).instance_status(stack, nodes)
        return [n for n in nodes if status.get(n) != "RUNNING"]

    def recreate(lost: list[str]) -> Inventory:
        wait_until_reclaimed(stack, lost, progress)
        realizer = realizers.for_stack(stack)
        before = realizer.inventory(stack)
        repaired = realizer.repair(stack, lost, progress)
        SyncedNodes(stack).forget(replaced_nodes(before, repaired, lost))  # new disks: their rsync need not wait
        if repaired.placement != before.placement:
            keep_placement(run_dir, repaired)
        return repaired

    def bootstrap_lost(repaired: Inventory, lost: list[str]) -> None:
        bootstrap(repaired, bspec, run_dir / "logs" / "bootstrap", nodes=lost)
        if data:  # a node started again on its disk copies only what changed meanwhile
            stage_data(repaired, data, run_dir / "logs" / "data", nodes=lost)

    return Recovery(reclaimed=reclaimed, recreate=recreate, bootstrap=bootstrap_lost,
                    keeps_addresses=realizers.capabilities(realizers.spec(stack)).repair_keeps_addresses)


# GCE gives a reclaimed VM about 30 s of shutdown before it is stopped or deleted.
RECLAIM_TIMEOUT_SECONDS = 120.0
RECLAIMED = (None, "TERMINATED", "STOPPED", "SUSPENDED")  # gone, or stopped for good
RECLAIM_FIRST_POLL_SECONDS, RECLAIM_POLL_CAP_SECONDS = 0.05, 1.0


def wait_until_reclaimed(stack: str, nodes: list[str], progress: Callable[[str], None],
                         timeout: float = RECLAIM_TIMEOUT_SECONDS) -> None:
    """A preempted node runs its shutdown before the provider stops or deletes it; recreating it
    earlier would find it still there (STOPPING on GCE). Asked often at first, where a short
    shutdown ends (the replacement waits on every poll's lag), then every second."""
    deadline = time.monotonic() + timeout
    said = False
    pause = RECLAIM_FIRST_POLL_SECONDS
    while True:
        status = realizers.for_stack(stack).instance_status(stack, nodes)
        busy = [n for n in nodes if status.get(n) not in RECLAIMED]
        if not busy:
            return
        if time.monotonic() > deadline:
            raise RemoteError(f"{', '.join(busy)} still {status[busy[0]]} {timeout:.0f} s after the "
                              "preemption notice; the provider has not finished reclaiming it")
        if not said:
            progress(f"waiting for {', '.join(busy)} to finish shutting down ({status[busy[0]]})")
            said = True
        raise_if_pending()
        time.sleep(pause)
        pause = min(1.25 * pause, RECLAIM_POLL_CAP_SECONDS)
