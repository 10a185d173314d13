"""The stack's state as Pulumi's checkpoint records it (apitype.DeploymentV3), what each resource
needs to exist (its dependency edges), and the journal of provider calls in flight."""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from contextlib import contextmanager
from typing import Any, Callable, Iterator


def refs(state: dict[str, Any]) -> set[str]:
    """URNs this resource needs to exist: its dependencies, its parent and its provider."""
    out = set(state.get("dependencies") or [])
    if state.get("parent"):
        out.add(state["parent"])
    if state.get("provider"):
        out.add(state["provider"].rsplit("::", 1)[0])
    return out




def now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def deployment(resources: list[dict[str, Any]], version: str, pending: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"manifest": {"time": now_iso(), "magic": "", "version": version},
                           "resources": resources}
    if pending:
        out["pending_operations"] = pending
    return out


class Journal:
    """Provider operations in flight, written to the checkpoint before they start (as the
    engine's journal does), so a CLI killed mid-call leaves them listed as pending operations,
    which the next update reports."""

    def __init__(self, save: Callable[[], None] | None = None) -> None:
        self._save = save
        self._ops: dict[int, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._next = 0

    @contextmanager
    def operation(self, kind: str, state: dict[str, Any]) -> Iterator[None]:
        with self._lock:
            self._next += 1
            key = self._next
            self._ops[key] = {"resource": {k: state.get(k) for k in ("urn", "custom", "id", "type", "inputs",
                                                                      "parent", "provider")},
                              "type": kind}
        if self._save is not None:
            self._save()
        try:
            yield
        finally:
            with self._lock:
                self._ops.pop(key, None)

    def entries(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._ops.values())


def pending_warning(pending: list[dict[str, Any]]) -> str:
    """printPendingOperationsWarning (pkg/resource/deploy/deployment_executor.go), shortened."""
    listed = "".join(f"  * {p['resource']['urn']}, interrupted while {p['type']}\n" for p in pending)
    return (f"Attempting to deploy or update resources with {len(pending)} pending operations from previous "
            f"deployment.\n{listed}These resources are in an unknown state because the Pulumi CLI was "
            "interrupted while waiting for changes to these resources to complete. You should confirm whether "
            "or not the operations listed completed successfully by checking the state of the appropriate "
            "provider.")
