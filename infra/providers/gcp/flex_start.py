"""Waiting for a flex-start grant. trainctl owns the wait: the provider does not.

terraform-provider-google (which pulumi-gcp wraps; google/services/compute/
resource_compute_instance.go, resourceComputeInstanceCreate) waits for the insert operation
within the create timeout and drops the VM from the state when that wait fails (`d.SetId("")`),
then waits for RUNNING with a retry.StateChangeConf whose pending statuses (computeInstanceStatus
without RUNNING) do not include PENDING, so a flex-start VM queued at GCE's Dynamic Workload
Scheduler fails that wait at once (terraform-plugin-sdk helper/retry/state.go: a state outside
Pending and Target is an UnexpectedStateError), kept in the state. So:
  - while `pulumi up` runs, the VMs' states and the time waited are shown (grant_wait.py);
  - where it failed with VMs still PENDING, trainctl polls them (Compute instances.get) for what
    is left of the deadline, `flex_start_deadline_minutes` from the start of `up`; granted, it
    runs `pulumi up` again, which carries on with the VMs the failed create kept (Pulumi updates
    a resource with init errors);
  - past the deadline, every VM carrying the stack's labels is deleted at once (those the
    provider dropped from the state too: another zone the cluster then moves to must not leave
    them queued for a grant), and `up` fails with FlexStartNotGranted; the realizer removes the
    rest of the stack once it has let go of the stack's lock.
The program also sets the deadline as the VMs' create timeout, so the provider's wait for the
insert operation ends there too. GCE itself is not told the deadline: pulumi-gcp 10.2.0's
InstanceParamsArgs has only resource_manager_tags, not Compute's `params.requestValidForDuration`
(compute v1 discovery document, InstanceParams), so GCE's own window for the request applies."""

from __future__ import annotations

from typing import Callable, TypeVar

from infra.errors import CapacityUnavailable
from infra.providers.capacity_wait import CapacityWait
from infra.providers.gcp.grant_wait import GrantWait, duration
from infra.providers.gcp.leftovers import delete_vms
from infra.providers.gcp.node_kinds import node_kind
from infra.providers.gcp.program.compute import node_name
from infra.providers.protocol import Progress
from infra.spec.cluster import ClusterSpec

T = TypeVar("T")
POLL_SECONDS = 2.0
POLL_CAP_SECONDS = 15.0  # trainctl's own wait: polls grow from POLL_SECONDS to this
REMIND_SECONDS = 30.0  # a line at least this often while nothing changes


class FlexStartNotGranted(CapacityUnavailable):
    """The deadline passed before GCE granted every flex-start VM."""


def node_names(spec: ClusterSpec) -> list[str]:
    return [node_name(spec, i) for i in range(spec.node_count)]


def await_grant(spec: ClusterSpec, run_up: Callable[[], T], progress: Progress) -> T:
    """`run_up()` (the stack's `pulumi up`), watched while its flex-start VMs wait for capacity,
    and run again once trainctl's own wait saw them granted. Raises FlexStartNotGranted when the
    deadline passed with VMs still PENDING."""
    if not (spec.flex_start and spec.runs_on_vms):
        return run_up()
    wait = GrantWait("flex-start", spec.flex_start_deadline_minutes * 60,
                     lambda: node_kind(spec).status(node_names(spec)), lambda state: state == "PENDING",
                     progress, remind_s=REMIND_SECONDS)
    progress(f"flex-start: GCE's Dynamic Workload Scheduler grants the VMs when it has capacity; "
             f"trainctl waits at most {spec.flex_start_deadline_minutes:g}m (flex_start_deadline_minutes)")
    try:
        with wait.watching(POLL_SECONDS):
            try:
                return run_up()
            except Exception:
                if not wait.still_waiting():
                    raise
        progress("flex-start: the provider stopped waiting for the PENDING VMs; trainctl waits for the grant")
        pending = wait.pending(wait.until_granted(POLL_SECONDS, POLL_CAP_SECONDS))
        if not pending:
            return run_up()
    finally:
        waited_for = wait.capacity_wait()
        if waited_for is not None:  # granted, or given up at the deadline
            progress(CapacityWait(f"flex-start: the VMs waited {duration(waited_for[1] - waited_for[0])} "
                                  "in PENDING for GCE's grant", *waited_for))
    # the rest goes in realizer.up once `up` has let go of the stack (`down` takes the stack's lock)
    wait.give_up(f"stack {spec.name}: GCE granted no flex-start capacity for {', '.join(pending)} "
                 f"({spec.machine_type} in {spec.zone}) within flex_start_deadline_minutes "
                 f"{spec.flex_start_deadline_minutes:g} (trainctl's wait); try again later, in another zone, or "
                 "with a longer flex_start_deadline_minutes (at most 120)", remove=lambda: delete_vms(spec, progress),
                 error=FlexStartNotGranted)
