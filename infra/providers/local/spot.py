"""Spot nodes of a local stack as GCE treats them: preempted (stopped or deleted after a grace
period, the zone short of capacity for a while), their status as Compute reports it, and their
repair under the same names and addresses, as a managed instance group recreates them."""

from __future__ import annotations

import ipaddress
import time
from pathlib import Path

from infra.errors import CapacityUnavailable
from infra.providers.inventory import Inventory
from namespace_nodes import metadata_admin, netns, sshd
from infra.providers.local.create import inventory, start_node
from infra.providers.local.instance_metadata import (metadata_admin_for, metadata_admin_url, metadata_record,
                                                     published_host_keys)
from infra.providers.local.layout import Addresses, LocalStackError, Names
from infra.providers.local.state import StackState, load_state
from infra.providers.protocol import Progress
from infra.providers.stack_home import discard, stack_lock
from infra.spec.cluster import ClusterSpec
from infra.spec.stack_config import ConfigError

# GCE gives a reclaimed spot VM about 30 s between the ACPI shutdown and the stop.
PREEMPT_GRACE_SECONDS = 30.0
def preempt(stack: str, node: str, *, grace: float = PREEMPT_GRACE_SECONDS,
            progress: Progress = lambda _: None, action: str | None = None,
            unavailable_for: float = 0.0) -> str:
    """Reclaim a spot node as GCE does: its `instance/preempted` turns TRUE, its processes get
    the shutdown's SIGTERM, and after the grace period (or once they are gone) the node is
    stopped (STOP: its disk stays) or deleted (DELETE), as the stack's instance_termination_action
    says. `unavailable_for` seconds the zone then has no spot capacity for it (a stockout):
    repair refuses until then. Returns the action taken."""
    state, cluster, names, index = running_node(stack, node)
    if not cluster.node_is_spot(index):
        raise ConfigError(f"{node} of stack {stack} is not a spot VM: only spot VMs are preempted "
                          f"(set spot: true)")
    # `action` overrides the stack's choice (a test preempting once each way)
    action = action or cluster.instance_termination_action or "DELETE"
    if action not in ("STOP", "DELETE"):
        raise ConfigError(f"termination action {action!r}: STOP or DELETE")
    metadata_admin.preempt(metadata_admin_for(stack), node)
    progress(f"{node}: preempted; shutting down (grace {grace:g} s), then {action}")
    shut_down(stack, state, node, index, action, grace, unavailable_for)
    progress(f"{node}: {'stopped' if action == 'STOP' else 'deleted'}")
    return action


def running_node(stack: str, node: str) -> tuple[StackState, ClusterSpec, Names, int]:
    """The stack's state, spec, names and the node's index; refused unless the node is running."""
    state = load_state(stack)
    if state is None:
        raise ConfigError(f"stack {stack!r} is not up")
    cluster = ClusterSpec.model_validate(state.data["spec"])
    names = Names(stack)
    index = next((i for i in range(cluster.node_count) if names.node(i) == node), None)
    if index is None:
        raise ConfigError(f"stack {stack} has no node {node!r}")
    if state.data.get("node_status", {}).get(node, "RUNNING") != "RUNNING":
        raise ConfigError(f"node {node} of stack {stack} is not running")
    return state, cluster, names, index


def shut_down(stack: str, state: StackState, node: str, index: int, action: str, grace: float,
              unavailable_for: float = 0.0) -> None:
    """The VM goes as GCE takes one away: its programs get the shutdown's SIGTERM, after `grace`
    seconds (or once they are gone) it is stopped (STOP: its disk stays) or deleted (DELETE)."""
    names = Names(stack)
    ns = names.node_netns(index)
    netns.terminate_workload(ns)  # ACPI shutdown: every program gets SIGTERM; sshd (PID 1) stays
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(inner != 1 for inner in netns.guest_pids(ns).values()):
        time.sleep(0.1)
    with stack_lock(stack, "preempt"):
        netns.kill_netns_processes(ns)  # the VM stops: the supervisor too, so it never reboots
        if action == "DELETE":
            netns.delete_netns(ns)
            netns.delete_link(names.veth(index))
            discard(state.path.parent / "nodes" / node)
        state = load_state(stack) or state
        state.data.setdefault("node_status", {})[node] = "TERMINATED" if action == "STOP" else "DELETED"
        if unavailable_for > 0:
            state.data.setdefault("capacity_back_at", {})[node] = time.time() + unavailable_for
        state.save()


def instance_status(stack: str, nodes: list[str]) -> dict[str, str | None]:
    """Per node, as Compute's instances.get would say: RUNNING, TERMINATED (stopped), or None
    (no such instance: deleted)."""
    state = load_state(stack)
    recorded = (state.data.get("node_status", {}) if state else {})
    result: dict[str, str | None] = {}
    for node in nodes:
        status = recorded.get(node, "RUNNING") if state else None
        result[node] = None if status == "DELETED" else status
    return result


# A repaired node has its old name and address: the others' commands stay right.


def repair(stack: str, nodes: list[str], progress: Progress) -> Inventory:
    """Bring preempted nodes back under their names and addresses, as a managed instance group
    recreates a spot VM: a stopped node starts again on its disk, a deleted one gets a new disk
    and host key (pinned from its guest attributes, as at `up`). Returns the inventory to go on
    with; nodes still running are left alone."""
    with stack_lock(stack, "repair"):
        state = load_state(stack)
        if state is None:
            raise ConfigError(f"stack {stack!r} is not up")
        cluster = ClusterSpec.model_validate(state.data["spec"])
        names = Names(stack)
        addr = Addresses(ipaddress.IPv4Network(state.data["subnet"]))
        by_name = {names.node(i): i for i in range(cluster.node_count)}
        unknown = [n for n in nodes if n not in by_name]
        if unknown:
            raise ConfigError(f"stack {stack} has no node(s) {', '.join(unknown)}")
        status = state.data.setdefault("node_status", {})
        lost = [n for n in nodes if status.get(n, "RUNNING") != "RUNNING"]
        short = {n: at - time.time() for n, at in state.data.get("capacity_back_at", {}).items()
                 if n in lost and at > time.time()}
        if short:
            raise CapacityUnavailable(", ".join(f"{n}: no spot capacity in the zone for another {s:.0f} s"
                                                for n, s in sorted(short.items())))
        admin = metadata_admin_url(addr)
        node_ips = [addr.node(i) for i in range(cluster.node_count)]
        for node in lost:
            record = metadata_record(cluster, names, addr, by_name[node])
            if status[node] == "TERMINATED":  # the same instance, started again
                record["id"] = metadata_admin.instance(admin, node)["id"]
            metadata_admin.boot(admin, record)
            progress(f"{node}: {'starting again' if status[node] == 'TERMINATED' else 'recreating'}")
            start_node(names, addr, state.path.parent, by_name[node], node_ips)
        for node in lost:
            if not sshd.wait_for_port(addr.node(by_name[node]), 22, 20.0):
                raise LocalStackError(f"{node} not answering on :22 20 s after its repair")
        keys_ = published_host_keys(addr, lost, progress)
        current = inventory(stack)
        updated = current.model_copy(update={"nodes": tuple(
            n.model_copy(update={"host_keys": tuple(keys_[n.name])}) if n.name in keys_ else n
            for n in current.nodes)})
        Path(updated.known_hosts).write_text("\n".join(updated.known_hosts_lines()) + "\n")
        updated.write(state.path.parent / "inventory.json")
        for node in lost:
            status[node] = "RUNNING"
        state.save()
        return updated
