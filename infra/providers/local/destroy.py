"""Removing a local stack: what its state records (also what a crashed `up` only intended), and
what is left of it on this machine found by its names when there is no state to go by."""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from namespace_nodes import netns

from infra.providers.local import registry
from infra.providers.local.layout import LocalStackError, Names
from infra.providers.local.state import StackState
from infra.providers.protocol import Progress
from infra.providers.stack_home import cache_dir, discard, state_dir


def discover(names: Names) -> list[str]:
    """Things on this machine that belong to the stack by name, with or without a state file."""
    found = [ns for ns in netns.list_netns() if ns.startswith(names.netns_prefix)]
    found += [str(p) for p in Path("/etc/netns").glob(f"{names.netns_prefix}*")]
    if netns.link_exists(names.bridge):
        found.append(names.bridge)
    if state_dir(names.stack).exists():
        found.append(str(state_dir(names.stack)))
    return found


def destroy(state: StackState, names: Names, progress: Progress) -> None:
    errors: list[str] = []
    node_records = [r for r in state.resources if r["kind"] == "netns"]

    def remove_ns(record: dict[str, Any]) -> None:
        netns.delete_netns(record["name"])
        netns.delete_link(record["veth"])

    def remove_shared(record: dict[str, Any]) -> None:
        if record["kind"] == "host_rule":
            netns.delete_host_rule(record["rule"])
        elif record["kind"] == "bridge":  # detaches whatever veths are still attached
            netns.delete_link(record["name"])

    # All at once: each is a few `ip`/`iptables` calls that wait on the kernel, none needs another.
    shared = [r for r in state.resources if r["kind"] in ("host_rule", "bridge")]
    with ThreadPoolExecutor(max_workers=16) as pool:
        kept = pool.submit(_capture(lambda _: registry.keep(state.path.parent / "registry" / "data",
                                                           cache_dir() / "registry")), None)
        removed = pool.map(_capture(remove_ns), node_records)
        rules = pool.map(_capture(remove_shared), shared)
        for record, exc in [*zip(node_records, removed), *zip(shared, rules), ({"name": "registry cache"}, kept.result())]:
            if exc:  # keep removing the rest; report at the end
                errors.append(f"{record['name'] if 'name' in record else record['kind']}: {exc}")
    for record in reversed(state.resources):  # their processes are gone with the namespaces
        if record["kind"] == "dir":
            shutil.rmtree(record["name"], ignore_errors=True)
    leftovers = [x for x in discover(names) if not x.startswith(str(state_dir(names.stack)))]
    if leftovers:
        destroy_discovered(names, progress)
    if errors:
        raise LocalStackError("teardown incomplete: " + "; ".join(errors))
    discard(state.path.parent)  # that it is gone is the caller's to say (`down`, `run`)


def destroy_discovered(names: Names, progress: Progress) -> None:
    for ns in [n for n in netns.list_netns() if n.startswith(names.netns_prefix)]:
        netns.delete_netns(ns)
    for etc in Path("/etc/netns").glob(f"{names.netns_prefix}*"):
        shutil.rmtree(etc, ignore_errors=True)
    for link in os.listdir("/sys/class/net"):
        if link.startswith(f"tcv{names.digest[:6]}"):
            netns.delete_link(link)
    netns.delete_host_rule(netns.host_forward_rule(names.bridge))
    netns.delete_link(names.bridge)
    progress(f"removed leftovers of stack {names.stack}")


def _capture(fn: Callable[[Any], None]) -> Callable[[Any], Exception | None]:
    def wrapped(arg: Any) -> Exception | None:
        try:
            fn(arg)
            return None
        except Exception as exc:
            return exc
    return wrapped
