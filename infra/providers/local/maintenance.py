"""Host maintenance on a local node as GCE carries it out: the node's `instance/maintenance-event`
announces it, and after the notice the VM either goes on where it was (a live migration:
MIGRATE_ON_HOST_MAINTENANCE, the value then back to NONE) or is stopped
(TERMINATE_ON_HOST_MAINTENANCE: its programs get the shutdown's SIGTERM, then it is TERMINATED
with its disk kept, as GCE stops a VM whose on_host_maintenance is TERMINATE). A stopped node
stays stopped until `repair` starts it again, as `instances.start` would on GCE.

GCE's notice is 60 s, an hour on GPU VMs
(https://cloud.google.com/compute/docs/gpus/gpu-host-maintenance); tests give a shorter one."""

from __future__ import annotations

import time

from namespace_nodes import metadata_admin
from infra.providers.local.instance_metadata import metadata_admin_for
from namespace_nodes.metadata import MAINTENANCE_EVENTS
from infra.providers.local.spot import running_node, shut_down
from infra.providers.protocol import Progress
from infra.spec.stack_config import ConfigError

MIGRATE, TERMINATE = MAINTENANCE_EVENTS[1:]
NOTICE_SECONDS = 60.0  # GCE's notice for a VM without GPUs
SHUTDOWN_GRACE_SECONDS = 30.0  # what a stopping VM's programs get between SIGTERM and the stop


def host_maintenance(stack: str, node: str, event: str, *, notice: float = NOTICE_SECONDS,
                     grace: float = SHUTDOWN_GRACE_SECONDS, progress: Progress = lambda _: None) -> str:
    """Announce `event` on the node, wait out the notice, then migrate it (it keeps running) or
    stop it. Returns what became of the node: MIGRATED or TERMINATED."""
    if event not in (MIGRATE, TERMINATE):
        raise ConfigError(f"maintenance event {event!r}: {MIGRATE} or {TERMINATE}")
    state, _cluster, _names, index = running_node(stack, node)
    admin = metadata_admin_for(stack)
    metadata_admin.announce_maintenance(admin, node, event)
    progress(f"{node}: {event} announced; the maintenance starts in {notice:g} s")
    time.sleep(notice)
    if event == MIGRATE:
        metadata_admin.announce_maintenance(admin, node, "NONE")
        progress(f"{node}: live-migrated; it kept running")
        return "MIGRATED"
    shut_down(stack, state, node, index, "STOP", grace)
    progress(f"{node}: stopped for host maintenance")
    return "TERMINATED"
