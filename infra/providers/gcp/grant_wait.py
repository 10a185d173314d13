"""Waiting for capacity that Google grants when it has some: DWS flex-start VMs (flex_start.py)
and a queued TPU (queued_tpu.py) share this one wait. It reads the states from the API, and says
what waits, its state and the time waited against the deadline whenever the states change (and
at least every `remind_s` while they do not): "flex-start: node-0 PENDING, waited 0m04s of 5m".
It gives up at the deadline: the caller's removal of what waited, then CapacityUnavailable (exit 3).

It waits in two ways. A queued TPU is polled until it is granted (`until_granted`). Flex-start
VMs are watched on a thread while `pulumi up` creates them (`watching`), then, where the provider
gave up on them still PENDING, polled until granted for what is left of the deadline
(flex_start.py)."""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, NoReturn

from tenacity import RetryCallState

from infra.errors import CapacityUnavailable
from infra.providers.protocol import Progress
from infra.retry import on_results

States = dict[str, "str | None"]  # what waits (a VM, a queued resource) -> its state; None: not there yet


def duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s"


def deadline_text(seconds: float) -> str:
    """Whole minutes as the user set them ("60m"), anything shorter to the second ("0m03s")."""
    return f"{seconds / 60:g}m" if seconds % 60 == 0 else duration(seconds)


def wait_line(what: str, states: States, waited: float, deadline_s: float) -> str:
    shown = ", ".join(f"{name} {state or 'not created yet'}" for name, state in states.items())
    return f"{what}: {shown}, waited {duration(waited)} of {deadline_text(deadline_s)}"


@dataclass
class GrantWait:
    """`read()` gives the states; `waiting(state)` says whether that state still waits for the grant."""
    what: str  # how the lines name it: "flex-start", "queued TPU"
    deadline_s: float
    read: Callable[[], States]
    waiting: Callable[[str | None], bool]
    progress: Progress
    remind_s: float = 30.0
    # states still waiting for capacity (default: `waiting`); a queued TPU PROVISIONING is granted
    ungranted: Callable[[str | None], bool] | None = None
    started: float = field(default_factory=time.monotonic)
    _last: States | None = None
    _said_at: float = 0.0
    _ungranted_since: float | None = None  # unix seconds: for the ledger's capacity wait
    _granted_at: float | None = None

    def capacity_wait(self) -> tuple[float, float] | None:
        """When what waits was first seen without capacity and when it was granted (or now);
        None: it never waited."""
        if self._ungranted_since is None:
            return None
        return self._ungranted_since, self._granted_at or time.time()

    def _note(self, states: States) -> None:
        ungranted = any((self.ungranted or self.waiting)(s) for s in states.values())
        if ungranted and self._ungranted_since is None:
            self._ungranted_since = time.time()
        elif not ungranted and self._ungranted_since is not None and self._granted_at is None:
            self._granted_at = time.time()

    def report(self, states: States) -> None:
        self._note(states)
        now = time.monotonic()
        if states != self._last or now - self._said_at >= self.remind_s:
            self._last, self._said_at = states, now
            self.progress(wait_line(self.what, states, now - self.started, self.deadline_s))

    def pending(self, states: States) -> list[str]:
        return [name for name, state in states.items() if self.waiting(state)]

    def left_s(self) -> float:
        """What is left of the deadline, counted from `started`."""
        return max(0.0, self.deadline_s - (time.monotonic() - self.started))

    def until_granted(self, first_poll_s: float, poll_cap_s: float) -> States:
        """Read the states until nothing waits or the deadline (counted from `started`) has
        passed (polls growing from `first_poll_s` to `poll_cap_s`); the last states read."""
        def between(attempt: RetryCallState) -> None:
            if attempt.outcome is not None:
                self.report(attempt.outcome.result())

        states: States
        if self.left_s() <= 0:  # read once: what the deadline leaves
            states = self.read()
        else:
            states = on_results(lambda s: bool(self.pending(s)), within=self.left_s(), first=first_poll_s,
                                cap=poll_cap_s, before_sleep=between)(self.read)
        self._note(states)
        return states

    @contextlib.contextmanager
    def watching(self, poll_s: float) -> Iterator[GrantWait]:
        """The states read and reported every `poll_s` on a thread while the block waits."""
        stop = threading.Event()

        def watch() -> None:
            while not stop.wait(poll_s):
                try:
                    states = self.read()
                except Exception:  # noqa: BLE001 - a failed read only skips one report; the block decides
                    continue
                self.report(states)

        thread = threading.Thread(target=watch, name=f"{self.what}-watch", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join(timeout=poll_s * 5)

    def still_waiting(self) -> list[str]:
        """What still waits, read once; nothing when the API cannot be read (the error the wait
        ended with is then the one to show)."""
        try:
            return self.pending(self.read())
        except Exception:  # noqa: BLE001
            return []

    def give_up(self, why: str, remove: Callable[[], None] | None,
                error: type[CapacityUnavailable] = CapacityUnavailable) -> NoReturn:
        """Remove what waited (None: the caller removes it, after it has let go of the stack)
        and refuse with `why` (exit 3)."""
        if remove is not None:
            remove()
        raise error(why)
