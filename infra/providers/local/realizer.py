"""The local realizer: a ClusterSpec becomes namespaces, sshds and a GCS emulator on this machine.

This is the module the realizer registry loads (infra/providers/protocol.py documents the
interface). It checks, locks and records; the work is beside it: what a stack is made of is
declared in plan.py and made by create.py, its names and addresses are layout.py's, removal is
destroy.py's, spot nodes (preempt, status, repair) are spot.py's, host maintenance is
maintenance.py's.
"""

from __future__ import annotations

import os
import shutil
import time

from infra.providers.inventory import Inventory
from infra.providers.local.create import create, inventory
from infra.providers.local.destroy import destroy, destroy_discovered, discover
from infra.providers.local.idle import idle_hours, start_watch
from infra.providers.local.layout import Names
from infra.providers.local.maintenance import host_maintenance
from infra.providers.local.plan import plan
from infra.providers.local.spot import instance_status, preempt, repair
from infra.providers.local.state import StackState, load_state, new_state
from infra.providers.protocol import Capabilities, Progress, StackInfo
from infra.spec.cluster import ClusterSpec
from infra.spec import cost
from infra.spec.cost import Estimate
from infra.spec.stack_config import ConfigError
from infra.providers.stack_home import (kill_clients, mark_deleting, recorded_provider, stack_lock,
                                        stacks_with_state, state_dir)

# The registry asks this module for every function of the interface; these are made beside it.
__all__ = ["capabilities", "down", "estimate", "host_maintenance", "info", "instance_status", "inventory", "plan",
           "preempt", "reap", "repair", "require_root", "spec", "up"]


def require_root() -> None:
    if os.geteuid() != 0:
        raise ConfigError(
            "the local stack needs root (or CAP_NET_ADMIN + CAP_SYS_ADMIN): it creates network "
            "namespaces, veth pairs, a bridge and iptables rules, and starts one sshd per node "
            "in its own mount/PID namespace. Run it with sudo, or use a gcp stack.")


def capabilities(spec: ClusterSpec) -> Capabilities:
    """Local nodes are namespaces of this machine, reached over SSH, with no route off it; a
    repaired node comes back at its address."""
    return Capabilities(target="ssh", needs_bootstrap=True, repair_keeps_addresses=True,
                        reaches_google=False, machine_types=False, shared_folder="host",
                        unbilled="local stack: its nodes are namespaces of this machine, nothing is billed",
                        controller="a namespace node of its own on this machine")


def up(spec: ClusterSpec, progress: Progress = lambda _: None) -> Inventory:
    """Create the stack; an existing one made from the same spec is returned as it is (`up` is
    idempotent, as the protocol says), one made from another spec or not finished is refused,
    since nothing here can change a live stack. On failure removes what it created."""
    require_root()
    if spec.provider != "local":
        raise ConfigError(f"stack {spec.name!r} has provider {spec.provider!r}, not local")
    with stack_lock(spec.name, "up") as remove_lock:
        existing = load_state(spec.name)
        if existing is not None:
            return _existing(spec, existing)
        state = new_state(spec.name, spec.model_dump(mode="json"))
        try:
            inventory = create(spec, state, progress)
        except BaseException:
            progress("creation failed: removing what was created")
            destroy(state, Names(spec.name), progress)
            remove_lock()
            raise
        state.data["status"] = "ready"
        state.save()
        if spec.idle_minutes is not None and not spec.ephemeral:  # a run's own stack goes with the run
            start_watch(spec.name, spec.node_count, spec.idle_minutes)
        return inventory


def _existing(spec: ClusterSpec, state: StackState) -> Inventory:
    """The inventory of a ready stack realized from `spec`; anything else is refused, naming
    what differs (a local stack is never changed in place: `down` first)."""
    recorded = state.data.get("spec") or {}
    wanted = spec.model_dump(mode="json")
    changed = sorted(k for k in {*recorded, *wanted} if recorded.get(k) != wanted.get(k))
    status = state.data.get("status")
    if status != "ready" or changed:
        why = (f"its {', '.join(changed)} differ from the spec's" if changed
               else f"it is not ready (status {status!r})")
        raise ConfigError(
            f"stack {spec.name!r} already exists (state {state.path}) and {why}; "
            f"use it, or remove it first with `trainctl down --stack {spec.name}`")
    return inventory(spec.name)


def down(stack: str, *, force: bool = False,
         progress: Progress = lambda _: None) -> bool:
    """Remove everything of the stack. Idempotent; returns whether anything was there."""
    require_root()
    names = Names(stack)
    with stack_lock(stack, "down") as remove_lock:
        try:
            state = load_state(stack)
        except ConfigError:
            if not force:
                raise
            state = None
        if state is None and not force:
            leftovers = discover(names)
            if leftovers:
                raise ConfigError(
                    f"stack {stack!r} has no state, but these exist: {', '.join(leftovers)}; "
                    f"`trainctl down --stack {stack} --force` removes them")
            remove_lock()
            return False
        kill_clients(stack)  # before the nodes go: clients still talking to them would hang on
        if state is None:
            destroy_discovered(names, progress)
            shutil.rmtree(state_dir(stack), ignore_errors=True)
        else:
            mark_deleting(stack)
            state.data["status"] = "deleting"
            state.save()
            destroy(state, names, progress)
        remove_lock()
        return True


def estimate(spec: ClusterSpec) -> Estimate:
    """Nothing is billed here. A stack that names the GCE machine type its nodes stand in for is
    priced as GCP lists that machine, so that budgets and `ls`'s cost can be tried locally."""
    machines = [view.machine_type or spec.machine_type for _, _, view in spec.groups()]
    if not all(machines):
        return Estimate([("local stack (this machine)", 0.0)])
    priced = spec.model_copy(update={"pools": tuple(p.model_copy(update={"machine_type": m})
                                                    for p, m in zip(spec.pools, machines))})
    return Estimate([(f"{what} (GCP list price; stood in for here)", usd)
                     for what, usd in cost.estimate(priced).lines])


def spec(stack: str) -> ClusterSpec:
    state = load_state(stack)
    if state is None:
        raise ConfigError(f"stack {stack!r} is not up; run `trainctl up --stack {stack}`")
    return ClusterSpec.model_validate(state.data["spec"])


def info(stack: str) -> StackInfo:
    try:
        state = load_state(stack)
        if state is None:
            raise ConfigError("no state file")
        spec = ClusterSpec.model_validate(state.data["spec"])
        age_h = (time.time() - float(state.data["created_at"])) / 3600
    except (ConfigError, KeyError, TypeError, ValueError):
        return StackInfo(stack, "local", 0, 0.0, 0.0, 0.0, broken=True)
    return StackInfo(stack, "local", spec.node_count, age_h, spec.ttl_hours - age_h,
                     estimate(spec).per_hour * age_h, idle_h=idle_hours(stack))


def reap(*, project: str | None, dry_run: bool, progress: Progress) -> list[str]:
    """Local stacks past their TTL; a GCP project sweep is not this realizer's reach."""
    if project is not None:
        return []
    found = []
    for stack in stacks_with_state():
        if recorded_provider(stack) != "local":
            continue
        item = info(stack)
        if item.broken or item.ttl_left_h > 0:
            continue
        found.append(stack)
        progress(f"stack {stack} expired {-item.ttl_left_h:.2f} h ago" + ("" if dry_run else ": removing"))
        if not dry_run:
            down(stack, force=False, progress=progress)
    return found

