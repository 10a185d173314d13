"""The stack's state as Pulumi's checkpoint records it (apitype.DeploymentV3): resources in an
order where everything a resource depends on (dependencies, parent, provider) comes first,
which is the order the engine deletes in reverse."""

from __future__ import annotations

from typing import Any, Iterable


def refs(state: dict[str, Any]) -> set[str]:
    """URNs this resource needs to exist: its dependencies, its parent and its provider."""
    out = set(state.get("dependencies") or [])
    if state.get("parent"):
        out.add(state["parent"])
    if state.get("provider"):
        out.add(state["provider"].rsplit("::", 1)[0])
    return out


def ordered(states: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """A stable topological order (the given order wherever the dependencies allow it)."""
    pending = list(states)
    present = {s["urn"] for s in pending}
    placed: set[str] = set()
    out: list[dict[str, Any]] = []
    while pending:
        ready = [s for s in pending if not (refs(s) & present) - placed - {s["urn"]}]
        if not ready:  # a cycle cannot come from a program; keep what is left as it is
            ready = pending[:1]
        for state in ready:
            out.append(state)
            placed.add(state["urn"])
        chosen = {id(s) for s in ready}
        pending = [s for s in pending if id(s) not in chosen]
    return out


def deployment(resources: list[dict[str, Any]], version: str, pending: list[dict[str, Any]]) -> dict[str, Any]:
    from infra.gcp.simulator.pulumi.engine import now_iso

    out: dict[str, Any] = {"manifest": {"time": now_iso(), "magic": "", "version": version},
                           "resources": resources}
    if pending:
        out["pending_operations"] = pending
    return out
