"""Waiting for a flex-start grant: while `pulumi up` waits for the stack's flex-start VMs to run,
their state (PENDING: queued at GCE's Dynamic Workload Scheduler) and the time waited are shown,
read from Compute; when the deadline (`flex_start_deadline_minutes`, the VMs' create timeout in
the program) passes with VMs still PENDING, `up` fails with FlexStartNotGranted and the realizer
removes what the stack made."""

from __future__ import annotations

import threading
import time
from typing import Callable, TypeVar

from infra.errors import CapacityUnavailable
from infra.providers.capacity_wait import CapacityWait
from infra.providers.gcp.node_kinds import node_kind
from infra.providers.gcp.program.compute import node_name
from infra.providers.protocol import Progress
from infra.spec.cluster import ClusterSpec

T = TypeVar("T")
POLL_SECONDS = 2.0
REMIND_SECONDS = 30.0  # a line at least this often while nothing changes


class FlexStartNotGranted(CapacityUnavailable):
    """The deadline passed before GCE granted every flex-start VM."""


def waited(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def node_names(spec: ClusterSpec) -> list[str]:
    return [node_name(spec, i) for i in range(spec.node_count)]


def states_line(status: dict[str, str | None]) -> str:
    return ", ".join(f"{node} {state or 'not created yet'}" for node, state in status.items())


class GrantWatch:
    """Reports the flex-start VMs' states from a thread of its own until stopped."""

    def __init__(self, spec: ClusterSpec, progress: Progress) -> None:
        self.spec, self.progress = spec, progress
        self.started = time.monotonic()
        self.last: dict[str, str | None] = {}
        self.pending_since: float | None = None  # unix seconds: when a VM was first seen PENDING
        self.granted_at: float | None = None  # and when none was any more
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="flex-start-watch", daemon=True)

    def __enter__(self) -> GrantWatch:
        self.progress(f"flex-start: GCE's Dynamic Workload Scheduler grants the VMs when it has capacity; "
                      f"waiting at most {self.spec.flex_start_deadline_minutes:g}m")
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=POLL_SECONDS * 5)
        if self.pending_since is not None:  # granted, or given up at the deadline
            ended = self.granted_at or time.time()
            self.progress(CapacityWait(f"flex-start: the VMs waited {waited(ended - self.pending_since)} "
                                       "in PENDING for GCE's grant", self.pending_since, ended))

    def _note_wait(self, status: dict[str, str | None]) -> None:
        pending = any(state == "PENDING" for state in status.values())
        if pending and self.pending_since is None:
            self.pending_since = time.time()
        elif not pending and self.pending_since is not None and self.granted_at is None:
            self.granted_at = time.time()

    def _run(self) -> None:
        said_at = 0.0
        while not self._stop.wait(POLL_SECONDS):
            try:
                status = node_kind(self.spec).status(node_names(self.spec))
            except Exception:  # noqa: BLE001 - a failed read only skips one report; up decides
                continue
            self._note_wait(status)
            now = time.monotonic()
            if status != self.last or now - said_at >= REMIND_SECONDS:
                self.last, said_at = status, now
                self.progress(f"flex-start: {states_line(status)}; waited {waited(now - self.started)} "
                              f"of {self.spec.flex_start_deadline_minutes:g}m")

    def still_pending(self) -> list[str]:
        """The VMs still waiting for their grant; none when Compute cannot be read (the error
        `up` failed with is then the one to show)."""
        try:
            status = node_kind(self.spec).status(node_names(self.spec))
        except Exception:  # noqa: BLE001
            return []
        return [node for node, state in status.items() if state == "PENDING"]


def await_grant(spec: ClusterSpec, run_up: Callable[[], T], progress: Progress) -> T:
    """`run_up()` (the stack's `pulumi up`), watched while its flex-start VMs wait for capacity.
    Raises FlexStartNotGranted when it failed with VMs still PENDING: the deadline passed."""
    if not (spec.flex_start and spec.runs_on_vms):
        return run_up()
    with GrantWatch(spec, progress) as watch:
        try:
            return run_up()
        except Exception:
            pending = watch.still_pending()
            if not pending:
                raise
            raise FlexStartNotGranted(
                f"stack {spec.name}: GCE granted no flex-start capacity for {', '.join(pending)} "
                f"({spec.machine_type} in {spec.zone}) within flex_start_deadline_minutes "
                f"{spec.flex_start_deadline_minutes:g}; try again later, in another zone, or with a longer "
                "flex_start_deadline_minutes (at most 120)") from None
