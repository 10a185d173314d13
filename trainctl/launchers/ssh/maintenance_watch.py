"""A watch on a node's `instance/maintenance-event` while the run's command runs, held open the
way the preemption watch is (trainctl/launchers/ssh/session.py).

GCE's metadata server announces host maintenance there ahead of it
(https://cloud.google.com/compute/docs/metadata/getting-live-migration-notice): NONE,
MIGRATE_ON_HOST_MAINTENANCE (a live migration: the VM and its processes go on), or
TERMINATE_ON_HOST_MAINTENANCE (the VM will be stopped: an hour's notice on GPU VMs, 60 s
otherwise). A node announcing TERMINATE is drained while it still can be: the run is stopped
everywhere (the trainers checkpoint on the stop's SIGTERM), and it is recovered as a preempted
node is, started before the host takes the node away. A migration needs no drain; both are
recorded in the run's events.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any, Callable

from infra.providers.inventory import Node
from trainctl.launchers.result import NodeOutcome
from trainctl.launchers.ssh.session import mark_preempted

MIGRATE, TERMINATE = "MIGRATE_ON_HOST_MAINTENANCE", "TERMINATE_ON_HOST_MAINTENANCE"
METADATA = "http://metadata.google.internal/computeMetadata/v1"
MARK = "TRAINCTL_MAINTENANCE"
MARKED = re.compile(MARK + r" (\S*)")

DRAIN = "drained: the run is stopped everywhere (the trainers checkpoint) before the host stops the node"
NO_DRAIN = "no drain: a live migration keeps the node and its programs running"
ENDED = "the host maintenance is over"


def watch_script(metadata: str = METADATA) -> str:
    """Prints `TRAINCTL_MAINTENANCE <value>` at the start and on each change, waiting with
    `wait_for_change` and the last answer's ETag, as GCE's docs do, so no change falls between
    two requests. No answer at first: no metadata server, the watch ends. A failed wait later
    (GCE may answer 503 during maintenance) is tried again. Each wait is bounded and followed by
    a write, so the watch dies of SIGPIPE within 30 s of its session closing."""
    return (f"u={metadata}/instance/maintenance-event; h='Metadata-Flavor: Google'; e=0; v=; "
            "while :; do "
            "if r=$(curl -sfi -H \"$h\" \"$u?wait_for_change=true&last_etag=$e&timeout_sec=30\"); then "
            "e=$(printf '%s\\n' \"$r\" | sed -n 's/^[Ee][Tt][Aa][Gg]: *//p' | tr -d '\\r'); "
            "n=$(printf '%s\\n' \"$r\" | tail -n 1); "
            f"if [ \"$n\" != \"$v\" ]; then v=$n; echo \"{MARK} $v\" || exit 0; else printf . || exit 0; fi; "
            "else [ \"$e\" = 0 ] && exit 0; sleep 1; printf . || exit 0; fi; "
            "done")


class MaintenanceWatch:
    """What the watch's output means for the node: each value it reports becomes an event of
    the run; TERMINATE drains the node (once), through `on_drain`."""

    def __init__(self, node: str, outcome: NodeOutcome, on_drain: Callable[[], None],
                 echo: Callable[[str], None]) -> None:
        self.node, self.outcome, self.on_drain, self.echo = node, outcome, on_drain, echo
        self.value = "NONE"
        self.pending = ""

    def feed(self, text: str) -> None:
        """Output of the watch as it arrives, in pieces of any size."""
        *lines, self.pending = (self.pending + text).split("\n")
        for line in lines:
            found = MARKED.search(line)
            if found:
                self.seen(found.group(1))

    def seen(self, value: str) -> None:
        before, self.value = self.value, value
        if value == before:
            return
        if value == TERMINATE:
            self.record(value, DRAIN)
            if mark_preempted(self.outcome, f"host maintenance ({TERMINATE}): drained before the host stops it"):
                self.outcome.drained = True
                self.echo(f"[trainctl] {self.node}: {TERMINATE} announced: draining it (checkpoint, stop the "
                          "run), then recovering it as a preempted node")
                self.on_drain()
        elif value == MIGRATE:
            self.record(value, NO_DRAIN)
            self.echo(f"[trainctl] {self.node}: {MIGRATE} announced: {NO_DRAIN}")
        elif value == "NONE":
            self.record(value, ENDED)
            self.echo(f"[trainctl] {self.node}: {ENDED}")
        else:
            self.record(value, f"no drain: {value!r} is not a value GCE documents")
            self.echo(f"[trainctl] {self.node}: maintenance-event {value!r} (undocumented): no drain")

    def record(self, event: str, action: str) -> None:
        notice: dict[str, Any] = {"node": self.node, "event": event, "at": round(time.time(), 1), "action": action}
        self.outcome.maintenance.append(notice)


def watch_maintenance(conn, node: Node, outcome: NodeOutcome, done: threading.Event,
                      on_drain: Callable[[], None], echo: Callable[[str], None]) -> None:
    """The watch on the node's session until the run's command ends there."""
    watch = MaintenanceWatch(node.name, outcome, lambda: None if done.is_set() else on_drain(), echo)
    try:
        channel = conn.transport.open_session()
        channel.exec_command(watch_script())
        while not done.is_set() and not channel.exit_status_ready():
            if channel.recv_ready():
                watch.feed(channel.recv(4096).decode(errors="replace"))
            done.wait(0.2)
        channel.close()
    except Exception:
        return  # the session ended with the run, or the node is gone: the heartbeat says so
