"""Deleting and refreshing recorded resources, as the engine does without the program.

Deletes run in reverse dependency order: a resource goes only once everything that depends on
it (through dependencies, parent or provider) is gone; independent ones go in parallel, as the
engine's step executor runs them. A resource marked retainOnDelete leaves the state and stays
in the cloud; a protected one is refused. The first failure stops new deletes; those in flight
finish, and what was not deleted stays in the state.

A refresh reads every resource through its provider: one the cloud no longer has leaves the
state (so the next `up` creates it again), the others take the outputs the cloud reports.
"""

from __future__ import annotations

import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Callable

from gcpsim.pulumi.display import Display
from gcpsim.pulumi.properties import is_secret, plain, secret
from gcpsim.pulumi.providers import ProviderRegistry, is_provider_type
from gcpsim.pulumi.snapshot import Journal, refs

PARALLEL = 32  # the engine runs independent steps at once; Pulumi's default is unbounded


def delete_one(state: dict[str, Any], providers: ProviderRegistry, display: Display,
               op: str = "delete", journal: Journal | None = None) -> bool:
    name = state["urn"].rsplit("::", 1)[-1]
    op = "delete-replaced" if state.get("delete") else op
    if not state.get("custom") or is_provider_type(state["type"]):
        return True  # components and providers have nothing in the cloud
    if state.get("protect"):
        display.failed(op, state["type"], name, f"unable to delete resource {state['urn']!r}\nas it is "
                       "currently marked for protection. To unprotect the resource, remove the "
                       "`protect` flag from the resource in your Pulumi program and run `pulumi up`")
        return False
    if state.get("retainOnDelete"):
        display.step(op, state["type"], name, done=True, detail="retained: left in the cloud")
        return True
    display.step(op, state["type"], name)
    try:
        with (journal or Journal()).operation("deleting", state):
            providers.resource_type(state).delete(state["id"], plain(state["outputs"]))
    except Exception as exc:  # noqa: BLE001 - a provider failure fails this delete only
        display.failed(op, state["type"], name, f"deleting {state['urn']}: {exc}")
        return False
    display.step(op, state["type"], name, done=True)
    return True


def delete_all(states: list[dict[str, Any]], providers: ProviderRegistry, display: Display,
               on_deleted: Callable[[dict[str, Any]], None], journal: Journal | None = None) -> bool:
    """Delete `states` dependents-first; True when every one went."""
    by_urn = {s["urn"]: s for s in states}
    # how many of the states still to go depend on each one
    dependents = {urn: 0 for urn in by_urn}
    for state in states:
        for ref in refs(state) & by_urn.keys() - {state["urn"]}:
            dependents[ref] += 1
    ok = True
    lock = threading.Lock()
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        running: dict[Future[bool], dict[str, Any]] = {}
        ready = [s for s in states if dependents[s["urn"]] == 0]
        while ready or running:
            while ready and ok:
                state = ready.pop(0)
                running[pool.submit(delete_one, state, providers, display, "delete", journal)] = state
            if not running:
                break
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                state = running.pop(future)
                if not future.result():
                    ok = False
                    continue
                on_deleted(state)
                with lock:
                    for ref in refs(state) & by_urn.keys() - {state["urn"]}:
                        dependents[ref] -= 1
                        if dependents[ref] == 0:
                            ready.append(by_urn[ref])
    return ok


def refresh_all(states: list[dict[str, Any]], providers: ProviderRegistry, display: Display
                ) -> tuple[list[dict[str, Any]], bool]:
    """The states as the cloud has them now; False where a read failed."""
    def read(state: dict[str, Any]) -> dict[str, Any] | None:
        if not state.get("custom") or is_provider_type(state["type"]) or state.get("delete"):
            return state
        name = state["urn"].rsplit("::", 1)[-1]
        display.step("refresh", state["type"], name)
        found = providers.resource_type(state).read(state["id"], plain(state["inputs"]), plain(state["outputs"]))
        if found is None:
            display.step("delete", state["type"], name, done=True, detail="gone from the cloud")
            return None
        keep_secret = {k for k, v in state["outputs"].items() if is_secret(v)}
        outputs = {k: secret(v) if k in keep_secret else v for k, v in found.items()}
        display.step("refresh", state["type"], name, done=True)
        return {**state, "outputs": outputs}

    results: list[dict[str, Any] | None] = []
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        futures = [pool.submit(read, s) for s in states]
        ok = True
        for state, future in zip(states, futures):
            try:
                results.append(future.result())
            except Exception as exc:  # noqa: BLE001 - a provider failure fails this read only
                display.failed("refresh", state["type"], state["urn"].rsplit("::", 1)[-1],
                               f"refreshing {state['urn']}: {exc}")
                results.append(state)
                ok = False
    return [s for s in results if s is not None], ok
