"""`pulumi up`, `destroy` and `refresh`: one update of one stack, under its lock, recorded in
the stack's history, exiting 255 with the display's diagnostics when it fails (as the CLI does;
the Automation API then raises a CommandError carrying both streams)."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from gcpsim.pulumi import langhost
from gcpsim.pulumi.backend import Backend
from gcpsim.pulumi.deletes import delete_all, refresh_all
from gcpsim.pulumi.display import Display
from gcpsim.pulumi.engine import STACK_TYPE, Deployment
from gcpsim.pulumi.plugins import PackageFactory
from gcpsim.pulumi.project import Project
from gcpsim.pulumi.providers import ProviderRegistry
from gcpsim.pulumi.snapshot import Journal, deployment, pending_warning

FAILED = 255


@dataclass
class Update:
    project: Project
    backend: Backend
    stack: str
    factories: dict[str, PackageFactory]
    version: str
    message: str = ""
    exec_kind: str = "cli"
    config: dict[str, str] = field(default_factory=dict)
    journal: Journal = field(default_factory=Journal)
    last: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.RLock = field(default_factory=threading.RLock)

    def __post_init__(self) -> None:
        self.resave: Callable[[], None] = lambda: self.save(self.last)
        self.journal = Journal(lambda: self.resave())

    def save(self, states: list[dict[str, Any]]) -> None:
        with self.lock:
            self.last = states
            self.backend.save(self.stack, deployment(states, self.version, self.journal.entries()))

    def begin(self, title: str) -> tuple[Display, list[dict[str, Any]]]:
        """The display and the recorded resources, warning of operations a killed CLI left."""
        display = Display(title)
        self.config = self.project.config(self.stack)
        pending = self.backend.pending(self.stack)
        if pending:
            display.diagnostic(STACK_TYPE, f"{self.project.name}-{self.stack}", pending_warning(pending), "warning")
        self.last = self.backend.resources(self.stack)
        return display, self.last

    def record(self, kind: str, started: float, ok: bool, display: Display) -> None:
        changes = {op: n for op, n in display.counts.items() if op != "errored" and n}
        self.backend.record(self.stack, {
            "kind": kind, "startTime": int(started), "endTime": int(time.time()),
            "message": self.message, "environment": {"exec.kind": self.exec_kind},
            "config": {k: {"value": v, "secret": False, "object": False} for k, v in self.config.items()},
            "result": "succeeded" if ok else "failed", "resourceChanges": changes})


def _failed(display: Display, kind: str) -> int:
    sys.stderr.write(f"error: {kind} failed\n")
    sys.stderr.flush()
    return FAILED


def up(update: Update, *, refresh: bool, policy_packs: list[Path]) -> int:
    started = time.time()
    backend, stack, project = update.backend, update.stack, update.project
    backend.require(stack)
    with backend.lock(stack):
        display, olds = update.begin(f"Updating ({stack}):")
        if refresh:
            providers = ProviderRegistry(project.name, stack, update.factories, update.config,
                                         {s["urn"]: s for s in olds})
            olds, ok = refresh_all(olds, providers, display)
            update.save(olds)
            if not ok:
                display.finish(None)
                update.record("update", started, False, display)
                return _failed(display, "update")
        ok, outputs = _deploy(update, olds, display, policy_packs)
        display.finish(outputs)
        update.record("update", started, ok, display)
    return 0 if ok else _failed(display, "update")


def _deploy(update: Update, olds: list[dict[str, Any]], display: Display,
            policy_packs: list[Path]) -> tuple[bool, dict[str, Any]]:
    from gcpsim.pulumi.monitor import EngineMonitor
    from gcpsim.pulumi.policy import Analyzers

    analyzers = Analyzers(policy_packs, display) if policy_packs else None
    dep = Deployment(project=update.project.name, stack=update.stack, olds=olds,
                     factories=update.factories, config=update.config, display=display,
                     analyze=analyzers, save=update.save, journal=update.journal)
    update.resave = dep.save  # a journalled call writes the deployment's state as it is
    stack_name = f"{update.project.name}-{update.stack}"
    try:
        try:
            langhost.run(update.project, update.stack, update.config, EngineMonitor(dep),
                         lambda severity, text: display.diagnostic(STACK_TYPE, stack_name, text, severity))
        except langhost.ProgramError as exc:
            if not dep.failed:  # a failed step already said why; the program only saw it fail
                display.diagnostic(STACK_TYPE, stack_name, str(exc))
                dep.failed = True
        # A failed program run deletes nothing: it did not get to declare everything.
        ok = dep.finish()
    except BaseException:  # interrupted: keep what was done
        dep.failed = True
        dep.save()
        raise
    finally:
        if analyzers is not None:
            analyzers.close()
    return ok, dep.stack_outputs()


def destroy(update: Update, *, refresh: bool) -> int:
    started = time.time()
    backend, stack = update.backend, update.stack
    backend.require(stack)
    with backend.lock(stack):
        display, remaining = update.begin(f"Destroying ({stack}):")
        providers = ProviderRegistry(update.project.name, stack, update.factories, update.config,
                                     {s["urn"]: s for s in remaining})
        ok = True
        if refresh:
            remaining, ok = refresh_all(remaining, providers, display)
            update.save(remaining)

        def deleted(state: dict[str, Any]) -> None:
            with update.lock:
                remaining.remove(state)
                update.save(remaining)

        ok = ok and delete_all(list(remaining), providers, display, on_deleted=deleted, journal=update.journal)
        display.finish(None)
        update.record("destroy", started, ok, display)
    if not ok:
        return _failed(display, "destroy")
    display.line(f"The resources in the stack have been deleted, but the history and configuration "
                 f"associated with the stack are still maintained.\nIf you want to remove the stack "
                 f"completely, run `pulumi stack rm {stack}`.")
    return 0


def refresh(update: Update) -> int:
    started = time.time()
    backend, stack = update.backend, update.stack
    backend.require(stack)
    with backend.lock(stack):
        display, olds = update.begin(f"Refreshing ({stack}):")
        providers = ProviderRegistry(update.project.name, stack, update.factories, update.config,
                                     {s["urn"]: s for s in olds})
        states, ok = refresh_all(olds, providers, display)
        update.save(states)
        outputs = next((s["outputs"] for s in states if s["type"] == STACK_TYPE), None)
        display.finish(outputs)
        update.record("refresh", started, ok, display)
    return 0 if ok else _failed(display, "refresh")
