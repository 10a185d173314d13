"""A job over SSH until it is done: attempts, reruns from the checkpoint (job_retries), and the
recovery of preempted nodes, which is not a rerun."""

from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Mapping

from infra.providers.inventory import Inventory
from infra.providers.stack_home import stack_still_up
from trainctl.launchers.protocol import Recovery
from trainctl.launchers.result import LaunchResult, RecoveryRecord, write_interrupted, write_result
from trainctl.launchers.spec import LaunchSpec
from trainctl.launchers.ssh.attempt import launch_once
from trainctl.launchers.ssh.commands import program_nodes, uses_torchrun
from trainctl.launchers.cluster_env import torch_group
from trainctl.launchers.ssh.recovery import Recovered, find_reclaimed, interruptible_sleep, once_joined, recreate_with_backoff
from trainctl.launchers.ssh.session import stop_run


def launch(inventory: Inventory, spec: LaunchSpec, log_dir: Path,
           echo: Callable[[str], None] = print, cancel: threading.Event | None = None,
           recovery: Recovery | None = None,
           sleep: Callable[[float], None] = interruptible_sleep,
           first: Mapping[str, str] | None = None) -> LaunchResult:
    """Run the job; rerun it (resuming from its checkpoints) up to job_retries times unless
    it failed for good. torchrun itself restarts failed workers up to max_restarts times.
    Setting `cancel` stops the job on every node, without a rerun (a sweep's pruned trial).
    Preempted nodes are recreated through `recovery` and the job resumes: a recovery (up to
    max_recoveries, waiting out capacity shortages), not one of the job's reruns. Recreating
    starts as soon as the loss is seen, while the survivors are still being stopped; the
    survivors start again once stopped where the recreated nodes keep their addresses
    (otherwise once those are known), and wait in torchrun's rendezvous for them. `first`: the
    first attempt's command lines, as the launch plan has them (default: made here)."""
    recoveries: list[RecoveryRecord] = []
    recreating: dict[tuple[str, ...], Future[Recovered]] = {}
    background = ThreadPoolExecutor(max_workers=2, thread_name_prefix="recreate")

    def recover(lost: list[str]) -> Recovered:
        """Recreate, then start the nodes' bootstrap at once (the survivors may still be
        stopping); it runs on while the job starts again on the others."""
        assert recovery is not None  # asked for only when there is one
        inventory, tries = recreate_with_backoff(recovery, lost, echo, sleep)
        return inventory, tries, background.submit(recovery.bootstrap, inventory, lost)

    def on_lost(lost: list[str]) -> None:
        if recovery is None or (spec.max_recoveries is not None and len(recoveries) >= spec.max_recoveries):
            return
        echo(f"[trainctl] recovery {len(recoveries) + 1}: recreating {', '.join(lost)} while the others "
             "stop, then resuming from the latest checkpoint")
        recreating[tuple(lost)] = background.submit(recover, lost)

    try:
        return _launch_until_done(inventory, spec, log_dir, echo, cancel, recovery, recoveries,
                                  recreating, on_lost, recover, first)
    except KeyboardInterrupt as exc:  # stopped everywhere (launch_once): say so, not "running"
        write_interrupted(log_dir, spec.run_id, str(exc) or "interrupted")
        raise
    finally:
        background.shutdown(wait=True, cancel_futures=True)


def _launch_until_done(inventory: Inventory, spec: LaunchSpec, log_dir: Path, echo: Callable[[str], None],
                       cancel: threading.Event | None, recovery: Recovery | None,
                       recoveries: list[RecoveryRecord],
                       recreating: dict[tuple[str, ...], Future[Recovered]],
                       on_lost: Callable[[list[str]], None],
                       recover: Callable[[list[str]], Recovered],
                       first: Mapping[str, str] | None = None) -> LaunchResult:
    result = launch_once(inventory, spec, log_dir, echo, 0, cancel, on_lost=on_lost, commands=first)
    attempt = reruns = 0
    while not result.ok and not result.cancelled:
        joining: dict[str, Future[Inventory]] = {}
        pending: tuple[RecoveryRecord, Future[Recovered]] | None = None  # this attempt's recovery
        find_reclaimed(result, recovery, echo)
        lost = result.preempted()
        if lost:
            if recovery is None:
                echo(f"[trainctl] {', '.join(lost)} preempted; nothing recreates nodes for this "
                     "run (`trainctl run` of an experiment does): stopping")
                break
            if spec.max_recoveries is not None and len(recoveries) >= spec.max_recoveries:
                echo(f"[trainctl] {', '.join(lost)} preempted again: max_recoveries "
                     f"({spec.max_recoveries}) reached")
                break
            lost_at, furthest = result.lost_at(), result.last_step()
            # the survivors were stopped when the loss was seen (launch_once); recreating began then
            started = recreating.pop(tuple(lost), None)
            for other in list(recreating.values()):  # a subset, before more nodes went too
                with contextlib.suppress(Exception):
                    other.result()
            recreating.clear()
            if started is None:
                echo(f"[trainctl] recovery {len(recoveries) + 1}: recreating {', '.join(lost)}, then "
                     "resuming from the latest checkpoint")
                started = Future()
                started.set_result(recover(lost))
            rendezvous = all(uses_torchrun(n, spec, inventory) for n in program_nodes(inventory, spec))
            if rendezvous and torch_group(inventory)[0].name not in lost:
                if not recovery.keeps_addresses:
                    inventory = started.result()[0]  # the others' commands name the new addresses
                # The others start now: their agents (torch's import, the rendezvous) get ready
                # while the lost nodes are recreated and bootstrapped, then those join them.
                joining = dict.fromkeys(lost, once_joined(started))
            else:
                # Programs without torchrun's rendezvous to wait in, or a lost rendezvous host
                # (the others' agents would give up on its store after torch's 60 s): all start
                # together.
                inventory = started.result()[0]
                started.result()[2].result()
            record = RecoveryRecord(lost, lost_at, time.time(), 0, furthest)
            recoveries.append(record)
            pending = record, started
            for joined in set(joining.values()):  # every node runs again once they have joined
                joined.add_done_callback(record.joined)
        elif reruns >= spec.job_retries or rerun_refused(result, spec, inventory.stack, echo):
            break
        else:
            reruns += 1
            echo(f"[trainctl] job failed; rerun {reruns}/{spec.job_retries} from the latest checkpoint")
            stop_run(inventory, spec.run_id)
        attempt += 1
        result = launch_once(inventory, spec, log_dir, echo, attempt, cancel, on_lost=on_lost, joining=joining)
        for joined in set(joining.values()):
            joined.result()  # a node that could not be recreated or bootstrapped ends the run
        if pending is not None:
            record, recovered = pending
            inventory, record.tries, _ = recovered.result()
            record.resumed_from_step = result.resumed_step()
    result.attempts = attempt + 1
    result.recoveries = recoveries
    write_result(log_dir, result)
    return result


def rerun_refused(result: LaunchResult, spec: LaunchSpec, stack: str, echo: Callable[[str], None]) -> bool:
    """Whether a failed job must not be rerun (said why): a permanent exit code, a failure no
    retry can fix, or a stack that is gone."""
    failure = result.failure()
    if result.permanent(spec.permanent_exit_codes):
        echo(f"[trainctl] exit code {result.permanent_failure or sorted(result.worker_exit_codes())} "
             "is permanent: no retry")
    elif failure is not None and failure.unfixable:
        echo(f"[trainctl] no retry can fix {failure.error}: no rerun")
    elif not stack_still_up(stack):
        echo(f"[trainctl] stack {stack} was taken down: no retry")
    else:
        return False
    return True
