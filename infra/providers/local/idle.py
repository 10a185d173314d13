"""Idle autostop for a local stack stood up by `trainctl up` with `idle_minutes`.

`up` starts a process of its own (idle_watch.py), detached (it must outlive `up`), that looks at
the stack's nodes every few seconds and brings the stack down through the realizer's own `down`
once, for `idle_minutes` on end, no run has used it and its nodes' CPUs sat idle (the local stack
has no accelerators; CPU load is what its work shows as):

- used: an SSH session is open on a node (every `run`, `launch`, `bootstrap`, `exec`, `ssh`
  works through one), seen as a session process of the node's sshd;
- busy: the node's processes used more than IDLE_CPU_CORES of CPU since the last look (a
  program left running without a session still counts).
The rule (what counts, the window) is infra/providers/idle_rule.py's, shared with GCP's watch.

Its command line names the stack's state folder, so `down` (by hand, `reap`, or its own) ends it
with the stack's other clients (stack_home.kill_clients); it also ends when the stack is gone.
What it saw is written to `idle.json` in the state folder, for `trainctl ls`.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from infra.providers.idle_rule import cores_used as cores_between
from infra.providers.local.layout import Names
from namespace_nodes.netns import guest_pids
from infra.providers.stack_home import state_dir

if TYPE_CHECKING:  # only the watch process reads processes; `trainctl ls` never loads psutil
    import psutil

IDLE_FILE = "idle.json"
LOG_FILE = "idle-watch.log"


@dataclass(frozen=True)
class Sample:
    sessions: int  # SSH sessions open on the stack's nodes
    cpu_seconds: dict[int, float]  # per process of the nodes: user + system, its reaped children's too


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system + times.children_user + times.children_system


def sample(stack: str, nodes: int) -> Sample:
    """One look at every node's processes (their sshd is PID 1 of the node; sessions are its children)."""
    import psutil

    names, sessions, used = Names(stack), 0, {}
    for index in range(nodes):
        for pid, inner in guest_pids(names.node_netns(index)).items():
            try:
                process = psutil.Process(pid)
                sessions += inner != 1 and process.name().startswith("sshd")
                used[pid] = cpu_seconds(process)
            except psutil.Error:  # gone meanwhile
                continue
    return Sample(sessions, used)


def cores_used(before: Sample, after: Sample, seconds: float) -> float:
    """CPU the nodes used between two looks, in cores."""
    return cores_between(before.cpu_seconds, after.cpu_seconds, seconds)


def record(stack: str, idle_since: float | None) -> None:
    with contextlib.suppress(OSError):  # the stack's folder went with a `down` meanwhile
        (state_dir(stack) / IDLE_FILE).write_text(json.dumps({"idle_since": idle_since}))


def idle_hours(stack: str) -> float | None:
    """How long the stack has sat idle, as its watch last saw; None without a watch."""
    try:
        since = json.loads((state_dir(stack) / IDLE_FILE).read_text())["idle_since"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return 0.0 if since is None else (time.time() - float(since)) / 3600


def start_watch(stack: str, nodes: int, idle_minutes: float) -> None:
    """Start the watch, detached: it outlives `trainctl up`; its output goes to its log."""
    log = state_dir(stack) / LOG_FILE
    record(stack, None)
    with open(log, "ab") as out:
        subprocess.Popen([sys.executable, "-m", "infra.providers.local.idle_watch", stack, str(nodes),
                          str(idle_minutes * 60), str(log)],
                         stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

