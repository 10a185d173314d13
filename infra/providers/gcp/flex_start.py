"""Waiting for a flex-start grant: while `pulumi up` waits for the stack's flex-start VMs to run,
their state (PENDING: queued at GCE's Dynamic Workload Scheduler) and the time waited are shown,
read from Compute (grant_wait.py, the wait a queued TPU shares); when the deadline
(`flex_start_deadline_minutes`, the VMs' create timeout in the program) passes with VMs still
PENDING, `up` fails with FlexStartNotGranted and the realizer removes what the stack made, once
it has let go of the stack's lock."""

from __future__ import annotations

from typing import Callable, TypeVar

from infra.errors import CapacityUnavailable
from infra.providers.capacity_wait import CapacityWait
from infra.providers.gcp.grant_wait import GrantWait, duration
from infra.providers.gcp.node_kinds import node_kind
from infra.providers.gcp.program.compute import node_name
from infra.providers.protocol import Progress
from infra.spec.cluster import ClusterSpec

T = TypeVar("T")
POLL_SECONDS = 2.0
REMIND_SECONDS = 30.0  # a line at least this often while nothing changes


class FlexStartNotGranted(CapacityUnavailable):
    """The deadline passed before GCE granted every flex-start VM."""


def node_names(spec: ClusterSpec) -> list[str]:
    return [node_name(spec, i) for i in range(spec.node_count)]


def await_grant(spec: ClusterSpec, run_up: Callable[[], T], progress: Progress) -> T:
    """`run_up()` (the stack's `pulumi up`), watched while its flex-start VMs wait for capacity.
    Raises FlexStartNotGranted when it failed with VMs still PENDING: the deadline passed."""
    if not (spec.flex_start and spec.runs_on_vms):
        return run_up()
    wait = GrantWait("flex-start", spec.flex_start_deadline_minutes * 60,
                     lambda: node_kind(spec).status(node_names(spec)), lambda state: state == "PENDING",
                     progress, remind_s=REMIND_SECONDS)
    progress(f"flex-start: GCE's Dynamic Workload Scheduler grants the VMs when it has capacity; "
             f"waiting at most {spec.flex_start_deadline_minutes:g}m")
    try:
        with wait.watching(POLL_SECONDS):
            try:
                return run_up()
            except Exception:
                pending = wait.still_waiting()
                if not pending:
                    raise
    finally:
        waited_for = wait.capacity_wait()
        if waited_for is not None:  # granted, or given up at the deadline
            progress(CapacityWait(f"flex-start: the VMs waited {duration(waited_for[1] - waited_for[0])} "
                                  "in PENDING for GCE's grant", *waited_for))
    # removed by realizer.up once `up` has let go of the stack (`down` takes the stack's lock)
    wait.give_up(f"stack {spec.name}: GCE granted no flex-start capacity for {', '.join(pending)} "
                 f"({spec.machine_type} in {spec.zone}) within flex_start_deadline_minutes "
                 f"{spec.flex_start_deadline_minutes:g}; try again later, in another zone, or with a longer "
                 "flex_start_deadline_minutes (at most 120)", remove=None, error=FlexStartNotGranted)
