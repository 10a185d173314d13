"""Remote commands that can be stopped: a marker in their environment, and the shell command
that ends every process carrying it.

Closing an SSH channel does not end the command behind it (without a terminal nothing sends it
SIGHUP), and its processes may have left the session (torchrun's workers start their own). What
every one of them inherits is the environment, so that is where the mark goes: one scan of
/proc finds the whole tree, on any Linux node, with nothing installed. An interrupted bootstrap
(Interrupt) runs that scan on every node it has steps on.
"""

from __future__ import annotations

import secrets
import shlex
import threading
from typing import IO, Any, Protocol

STEP_MARKER = "TRAINCTL_BOOTSTRAP"
# An interrupted step's processes get this long to leave after SIGTERM: an interrupt is meant
# to stop the work, not to let it finish.
INTERRUPT_GRACE_SECONDS = 1.0


def marked(command: str, marker: str) -> str:
    """`command` run by the login shell as before, with `marker` (NAME=value) in the environment
    of that shell itself and of everything it starts."""
    return f'export {marker}; exec "${{SHELL:-/bin/sh}}" -c {shlex.quote(command)}'


def stop_marked(marker: str, grace: float, unwaited: str = "") -> str:
    """Kill every process on the node whose environment holds `marker`: TERM, up to `grace`
    seconds for them to leave, then KILL. Processes whose command line matches the shell case
    pattern `unwaited` are not waited for (they are killed with the rest).

    One grep reads every process's environment per look (NUL-separated entries, whole-entry
    match): a look costs one process, not two per process on the node, so polling ten times a
    second does not take the cores from the workers that are saving their checkpoint."""
    quoted = shlex.quote(marker)
    scan = (f"for f in $(grep -lxzF -e {quoted} /proc/[0-9]*/environ 2>/dev/null); do "
            "p=${{f#/proc/}}; p=${{p%/environ}}; {action}; done")
    waited = (f"case \"$(tr '\\0' ' ' < /proc/$p/cmdline 2>/dev/null)\" in {unwaited}) ;; *) left=1;; esac"
              if unwaited else "left=1")
    left = "left=0; " + scan.format(action=waited) + '; [ "$left" = 1 ]'
    polls = int(grace / 0.1)
    return (f"{scan.format(action='kill -TERM $p 2>/dev/null')}; "
            f"i=0; while [ $i -lt {polls} ] && {{ {left}; }}; do sleep 0.1; i=$((i+1)); done; "
            f"{scan.format(action='kill -KILL $p 2>/dev/null')}; true")


def stop_over(conn: Any, marker: str, log: IO[str]) -> None:
    """stop_marked(marker) on the node of an open fabric connection; nothing where it never
    connected or the node is gone (nothing runs there for us then)."""
    transport = conn.transport if conn is not None else None
    if transport is None or not transport.is_active():
        return
    try:
        channel = transport.open_session(timeout=5)
        try:
            channel.exec_command(stop_marked(marker, INTERRUPT_GRACE_SECONDS))
            channel.recv_exit_status()
        finally:
            channel.close()
    except Exception as exc:  # the node is unreachable: its work ends with its session
        log.write(f"stopping the step failed: {type(exc).__name__}: {exc}\n")


class StepsOnANode(Protocol):
    def stop_steps(self, marker: str) -> None:
        """Run stop_marked(marker, ...) on the node."""


class Interrupt:
    """What an interrupted bootstrap stops: every node's remote step, process tree and all,
    found on its node by this bootstrap's marker. Nodes start no further step, and report the
    one cut short as interrupted."""

    def __init__(self) -> None:
        self.marker = f"{STEP_MARKER}={secrets.token_hex(8)}"
        self.event = threading.Event()
        self.nodes: list[StepsOnANode] = []
        self.lock = threading.Lock()

    def join(self, node: StepsOnANode) -> None:
        with self.lock:
            self.nodes.append(node)

    def fire(self) -> None:
        """Stop the steps in flight on every node at once; returns when they are stopped."""
        self.event.set()
        with self.lock:
            nodes = list(self.nodes)
        threads = [threading.Thread(target=n.stop_steps, args=(self.marker,), daemon=True) for n in nodes]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=INTERRUPT_GRACE_SECONDS + 10)
