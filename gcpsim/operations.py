"""Long-running operations: started by a mutating call, done some time later.

One record per operation in the world document; each API renders it in its own shape
(compute#operation, GKE's Operation, google.longrunning.Operation for TPU, Service Usage,
Artifact Registry, Cloud Functions and Run). What happens when an operation finishes is a named
completion (a function registered by the API module, with JSON arguments), so the world stays a
plain document and the effect lands when time has passed, whichever process looks first.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any, Callable

from gcpsim.errors import ApiError
from gcpsim.state import World, ticker

# A completion gets the world, the operation record and the time it finished; it may raise
# ApiError to fail the operation (its resource is then left as the completion decided).
Completion = Callable[[World, dict[str, Any], float], "dict[str, Any] | None"]
COMPLETIONS: dict[str, Completion] = {}

DEFAULT_DELAY_SECONDS = 0.3


def completion(name: str) -> Callable[[Completion], Completion]:
    def register(fn: Completion) -> Completion:
        COMPLETIONS[name] = fn
        return fn
    return register


def rfc3339(at: float) -> str:
    return datetime.fromtimestamp(at, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def delay(world: World, project: str, kind: str) -> float:
    """Seconds an operation of this kind takes in the project (its file's `delays`)."""
    p = world.project(project) or {}
    return float(p.get("delays", {}).get(kind, p.get("default_delay", DEFAULT_DELAY_SECONDS)))


def start(world: World, *, api: str, project: str, kind: str, target: str, scope: str = "global",
          after: float | None = None, then: str | None = None, args: dict[str, Any] | None = None,
          metadata: dict[str, Any] | None = None, now: float | None = None) -> dict[str, Any]:
    """Record an operation that is done `after` seconds from now (default: the project's delay
    for `kind`), running completion `then` with `args` when it is."""
    at = time.time() if now is None else now
    wait = delay(world, project, kind) if after is None else after
    name = f"operation-{int(at * 1000)}-{world.next_id():06d}-{api.split('.')[0]}"
    op = {"name": name, "api": api, "project": project, "scope": scope, "kind": kind,
          "target": target, "created_at": at, "done_at": at + wait, "done": False,
          "error": None, "response": None, "metadata": metadata or {},
          "then": then, "args": args or {}}
    world.operations()[name] = op
    if wait <= 0:
        finish(world, op, at)
    return op


def fail_now(world: World, op: dict[str, Any], error: ApiError, at: float) -> None:
    op.update(done=True, done_at=at, error={"code": error.code, "message": error.message,
                                             "status": error.status, "reason": error.reason,
                                             "details": error.details})


def finish(world: World, op: dict[str, Any], at: float) -> None:
    if op["done"]:
        return
    try:
        if op["then"]:
            response = COMPLETIONS[op["then"]](world, op, at)
            if response is not None:
                op["response"] = response
        op.update(done=True, done_at=min(op["done_at"], at))
    except ApiError as exc:
        fail_now(world, op, exc, at)


@ticker
def finish_due(world: World, now: float) -> None:
    for op in sorted(world.operations().values(), key=lambda o: o["done_at"]):
        if not op["done"] and op["done_at"] <= now:
            finish(world, op, now)


def find(world: World, name: str) -> dict[str, Any] | None:
    """By its short name or its full path (projects/p/locations/l/operations/<name>)."""
    return world.operations().get(name.rsplit("/", 1)[-1])


def as_longrunning(op: dict[str, Any], full_name: str) -> dict[str, Any]:
    """google.longrunning.Operation."""
    out: dict[str, Any] = {"name": full_name, "metadata": op["metadata"], "done": op["done"]}
    if op["done"] and op["error"]:
        e = op["error"]
        out["error"] = {"code": _rpc_code(e["status"]), "message": e["message"],
                        **({"details": e["details"]} if e.get("details") else {})}
    elif op["done"] and op["response"] is not None:
        out["response"] = op["response"]
    return out


# google.rpc.Code numbers (code.proto): an Operation's error carries the number, not the name.
RPC_CODES = {"OK": 0, "CANCELLED": 1, "UNKNOWN": 2, "INVALID_ARGUMENT": 3, "DEADLINE_EXCEEDED": 4,
             "NOT_FOUND": 5, "ALREADY_EXISTS": 6, "PERMISSION_DENIED": 7, "RESOURCE_EXHAUSTED": 8,
             "FAILED_PRECONDITION": 9, "ABORTED": 10, "OUT_OF_RANGE": 11, "UNIMPLEMENTED": 12,
             "INTERNAL": 13, "UNAVAILABLE": 14, "DATA_LOSS": 15, "UNAUTHENTICATED": 16}


def _rpc_code(status: str) -> int:
    return RPC_CODES.get(status, 2)
