"""When a stack counts as idle: the rule every idle watch applies, wherever it runs.

A stack is idle while nobody uses it (no SSH session open on its nodes: every `run`, `launch`,
`bootstrap`, `exec` and `ssh` works through one) and its nodes do nothing (CPU below
IDLE_CPU_CORES since the last look, accelerators below IDLE_ACCELERATOR_PERCENT); it is brought
down once it has been idle for `idle_minutes` on end. The local stack's watch (on the controller)
and a GCP stack's watch (on its node 0, shipped there as source) both apply it, so this module
uses the standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

IDLE_CPU_CORES = 0.05  # below this, summed over a node's processes, the node does nothing
IDLE_ACCELERATOR_PERCENT = 1.0  # NVML's utilisation (percent of time a kernel ran) below this


def poll_seconds(idle_seconds: float) -> float:
    """How often a watch looks: often enough to act within a fifth of the window."""
    return min(30.0, max(0.5, idle_seconds / 5))


def cores_used(before: Mapping[int, float], after: Mapping[int, float], seconds: float) -> float:
    """CPU processes used between two looks (CPU seconds by pid), in cores; a process that
    appeared counts whole."""
    spent = sum(now - before.get(pid, 0.0) for pid, now in after.items())
    return max(0.0, spent) / max(seconds, 1e-6)


def busy(sessions: int, cores: float, accelerator_percent: float | None = None) -> bool:
    """Whether one look saw the stack used or working; None: no accelerator to ask."""
    return (sessions > 0 or cores > IDLE_CPU_CORES
            or (accelerator_percent is not None and accelerator_percent >= IDLE_ACCELERATOR_PERCENT))


@dataclass
class IdleWindow:
    """Idle since when (wall clock, for `trainctl ls`), and whether that has lasted long enough."""

    idle_seconds: float
    idle_since: float | None = None

    def observe(self, was_busy: bool, now: float, poll: float) -> None:
        """One look, `poll` seconds after the last: idle time starts with the first idle look's
        interval and ends with any busy one."""
        if was_busy:
            self.idle_since = None
        elif self.idle_since is None:
            self.idle_since = now - poll

    def expired(self, now: float) -> bool:
        return self.idle_since is not None and now - self.idle_since >= self.idle_seconds
