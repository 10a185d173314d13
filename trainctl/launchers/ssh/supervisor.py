"""A job over SSH until it is done: attempts, reruns from the checkpoint (job_retries), and the
recovery of preempted nodes, which is not a rerun."""

from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable, Mapping

from infra.providers.inventory import Inventory
from infra.providers.stack_home import stack_still_up
from trainctl.launchers.protocol import Recovery
from trainctl.launchers.result import LaunchResult, RecoveryRecord, write_interrupted, write_result
from trainctl.launchers.spec import LaunchSpec
from trainctl.launchers.ssh.attempt import launch_once
from trainctl.launchers.ssh.commands import program_nodes, uses_torchrun
from trainctl.launchers.cluster_env import torch_group
from trainctl.launchers.ssh.recovery import (Recovered, await_maintenance_stop, find_reclaimed, interruptible_sleep,
                                             once_joined, recreate_with_backoff, replaced_nodes, zone_moved_to)
from trainctl.launchers.ssh.session import stop_run


@dataclass
class Job:
    """A job under supervision: where it runs (recreated nodes replace the inventory), how
    lost nodes come back, and the recoveries so far with the recreations under way."""
    inventory: Inventory
    spec: LaunchSpec
    log_dir: Path
    echo: Callable[[str], None]
    cancel: threading.Event | None
    recovery: Recovery | None
    sleep: Callable[[float], None]
    background: ThreadPoolExecutor
    recoveries: list[RecoveryRecord] = field(default_factory=list)
    recreating: dict[tuple[str, ...], Future[Recovered]] = field(default_factory=dict)
    draining: set[str] = field(default_factory=set)  # lost to host maintenance, still up
    maintenance: list[dict[str, Any]] = field(default_factory=list)  # every attempt's notices


# this attempt's recovery: its record, and the recreated nodes with their bootstrap
Pending = tuple[RecoveryRecord, Future[Recovered]]


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
    background = ThreadPoolExecutor(max_workers=2, thread_name_prefix="recreate")
    job = Job(inventory, spec, log_dir, echo, cancel, recovery, sleep, background)
    try:
        return _launch_until_done(job, first)
    except KeyboardInterrupt as exc:  # stopped everywhere (launch_once): say so, not "running"
        write_interrupted(log_dir, spec.run_id, str(exc) or "interrupted")
        raise
    finally:
        background.shutdown(wait=True, cancel_futures=True)


def recover(job: Job, lost: list[str]) -> Recovered:
    """Recreate, then start the nodes' bootstrap at once (the survivors may still be
    stopping); it runs on while the job starts again on the others. Drained nodes are first
    left to their host maintenance, which stops them. A recovery that moved the whole cluster
    (another zone) bootstraps every node it replaced."""
    assert job.recovery is not None  # asked for only when there is one
    before = job.inventory
    drained = [n for n in lost if n in job.draining]
    if drained:
        await_maintenance_stop(job.recovery, drained, job.echo, job.sleep)
        job.draining.difference_update(drained)
    inventory, tries = recreate_with_backoff(job.recovery, lost, job.echo, job.sleep)
    fresh = replaced_nodes(before, inventory, lost)
    if len(fresh) > len(lost):
        job.echo(f"[trainctl] the cluster moved: bootstrapping all {len(fresh)} node(s), the job resumes on them "
                 "from its checkpoint in the bucket")
    return inventory, tries, job.background.submit(job.recovery.bootstrap, inventory, fresh)


def on_lost(job: Job, lost: list[str], drained: frozenset[str] = frozenset()) -> None:
    """Nodes were preempted (or drained for host maintenance) while the attempt runs:
    recreating them starts now."""
    job.draining.update(drained)
    if job.recovery is None or (job.spec.max_recoveries is not None
                                and len(job.recoveries) >= job.spec.max_recoveries):
        return
    job.echo(f"[trainctl] recovery {len(job.recoveries) + 1}: recreating {', '.join(lost)} while the others "
             "stop, then resuming from the latest checkpoint")
    job.recreating[tuple(lost)] = job.background.submit(recover, job, lost)


def _launch_until_done(job: Job, first: Mapping[str, str] | None) -> LaunchResult:
    spec, heard = job.spec, partial(on_lost, job)
    result = launch_once(job.inventory, spec, job.log_dir, job.echo, 0, job.cancel, on_lost=heard, commands=first)
    job.maintenance.extend(result.maintenance_notices())
    attempt = reruns = 0
    while not result.ok and not result.cancelled:
        joining: dict[str, Future[Inventory]] = {}
        pending: Pending | None = None
        find_reclaimed(result, job.recovery, job.echo)
        lost = result.preempted()
        if lost:
            resumed = resume_after_loss(job, result, lost)
            if resumed is None:
                break
            joining, pending = resumed
        elif reruns >= spec.job_retries or rerun_refused(result, spec, job.inventory.stack, job.echo):
            break
        else:
            reruns += 1
            job.echo(f"[trainctl] job failed; rerun {reruns}/{spec.job_retries} from the latest checkpoint")
            stop_run(job.inventory, spec.run_id)
        attempt += 1
        result = launch_once(job.inventory, spec, job.log_dir, job.echo, attempt, job.cancel, on_lost=heard,
                             joining=joining)
        job.maintenance.extend(result.maintenance_notices())
        for joined in set(joining.values()):
            joined.result()  # a node that could not be recreated or bootstrapped ends the run
        if pending is not None:
            record, recovered = pending
            job.inventory, record.tries, _ = recovered.result()
            record.resumed_from_step = result.resumed_step()
    result.attempts = attempt + 1
    result.recoveries = job.recoveries
    result.maintenance_events = job.maintenance
    write_result(job.log_dir, result)
    return result


def resume_after_loss(job: Job, result: LaunchResult,
                      lost: list[str]) -> tuple[dict[str, Future[Inventory]], Pending] | None:
    """Bring the preempted nodes back for the next attempt: the nodes that join it once they
    are back, and the recovery under way; None (said why) when no recovery may follow."""
    if job.recovery is None:
        job.echo(f"[trainctl] {', '.join(lost)} preempted; nothing recreates nodes for this "
                 "run (`trainctl run` of an experiment does): stopping")
        return None
    if job.spec.max_recoveries is not None and len(job.recoveries) >= job.spec.max_recoveries:
        job.echo(f"[trainctl] {', '.join(lost)} preempted again: max_recoveries "
                 f"({job.spec.max_recoveries}) reached")
        return None
    lost_at, furthest, before = result.lost_at(), result.last_step(), job.inventory
    started = recreation(job, lost)
    joining: dict[str, Future[Inventory]] = {}
    rendezvous = all(uses_torchrun(n, job.spec, job.inventory) for n in program_nodes(job.inventory, job.spec))
    early = rendezvous and torch_group(job.inventory)[0].name not in lost
    if early and not job.recovery.keeps_addresses:
        job.inventory = started.result()[0]  # the others' commands name the new addresses
        early = set(replaced_nodes(before, job.inventory, lost)) == set(lost)  # else the cluster moved
    if early:
        # The others start now: their agents (torch's import, the rendezvous) get ready
        # while the lost nodes are recreated and bootstrapped, then those join them.
        joining = dict.fromkeys(lost, once_joined(started))
    else:
        # Programs without torchrun's rendezvous to wait in, a lost rendezvous host (the
        # others' agents would give up on its store after torch's 60 s), or a cluster moved
        # whole (no node of it is the old one): all start together.
        job.inventory = started.result()[0]
        started.result()[2].result()
    record = RecoveryRecord(lost, lost_at, time.time(), 0, furthest, moved_to=zone_moved_to(before, job.inventory))
    job.recoveries.append(record)
    for joined in set(joining.values()):  # every node runs again once they have joined
        joined.add_done_callback(record.joined)
    return joining, (record, started)


def recreation(job: Job, lost: list[str]) -> Future[Recovered]:
    """The lost nodes' recreation: begun when the loss was seen (launch_once stopped the
    survivors then), else begun now and waited for."""
    started = job.recreating.pop(tuple(lost), None)
    for other in list(job.recreating.values()):  # a subset, before more nodes went too
        with contextlib.suppress(Exception):
            other.result()
    job.recreating.clear()
    if started is None:
        job.echo(f"[trainctl] recovery {len(job.recoveries) + 1}: recreating {', '.join(lost)}, then "
                 "resuming from the latest checkpoint")
        started = Future()
        started.set_result(recover(job, lost))
    return started


def rerun_refused(result: LaunchResult, spec: LaunchSpec, stack: str, echo: Callable[[str], None]) -> bool:
    """Whether a failed job must not be rerun (said why): what LaunchResult.why_no_rerun names,
    or a stack that is gone."""
    why = result.why_no_rerun(spec.permanent_exit_codes)
    if why is not None:
        echo(f"[trainctl] {why}")
    elif not stack_still_up(stack):
        echo(f"[trainctl] stack {stack} was taken down: no retry")
    else:
        return False
    return True
