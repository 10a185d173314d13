"""The idle watch's process (idle.py says what it watches and why): started detached by `up`,
it ends with the stack, or ends the stack through the realizer's own `down`."""

from __future__ import annotations

import sys
import time

from infra.providers.idle_rule import IdleWindow, busy, poll_seconds
from infra.providers.local import realizer
from infra.providers.local.idle import cores_used, record, sample
from infra.providers.stack_home import stack_still_up


def watch(stack: str, nodes: int, idle_seconds: float) -> None:
    """Until the stack is gone: bring it down after `idle_seconds` unused and idle."""
    poll = poll_seconds(idle_seconds)
    last, last_at = sample(stack, nodes), time.monotonic()
    window = IdleWindow(idle_seconds)
    while stack_still_up(stack):
        time.sleep(poll)
        now, now_at = sample(stack, nodes), time.monotonic()
        window.observe(busy(now.sessions, cores_used(last, now, now_at - last_at)), time.time(), poll)
        last, last_at = now, now_at
        record(stack, window.idle_since)
        if window.expired(time.time()):
            print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} idle for {idle_seconds:.0f} s: bringing stack {stack} down",
                  flush=True)
            realizer.down(stack, progress=lambda m: print(m, flush=True))
            return


if __name__ == "__main__":
    # argv: stack, nodes, idle seconds, and the log's path, which names the state folder for kill_clients
    watch(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]))
