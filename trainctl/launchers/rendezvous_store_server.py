"""The c10d rendezvous store of a torchrun job, in a process of its own that runs node 0's agent.

Run on that node (or pod) with the job's own interpreter, so it imports nothing but the standard
library and torch: `python -c <this file's source> HOST PORT DRAIN_SECONDS TORCHRUN ARGS...`.

Why: torchrun's agent that hosts the store (`is_host=true`) leaves as soon as its own exit barrier
returns, while the other agents still need the store to leave that barrier and to close the
rendezvous; they then print c10d's stack traces ("failed to shutdown the rendezvous", "Broken
pipe") after a run that succeeded (pytorch/pytorch#69520, open). torch's remedy for the workers'
own store was the same as here (pytorch/pytorch#128096): the server outlives its clients. (That
remedy, one workers' store for the whole run, is turned off for another defect of it:
rendezvous_store.AGENT_ENV.)

So every agent is a client (`is_host=false`), and this process hosts the store and runs node
0's agent. A torchrun agent runs in this very process, as its console script would (torch is
imported once for both: a second interpreter importing it cost each multi-node launch ~1.1
CPU-seconds on node 0); any other command runs as its child (on_signal: what this process does
with a stop's signal then). When the agent succeeded, the store stays up until no other process
is connected to it, DRAIN_SECONDS at most; when it failed, this process ends at once with the
agent's status, so a failure shows as soon as before.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from functools import partial

ESTABLISHED = "01"  # the state column of /proc/net/tcp{,6}
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _sockets() -> list[tuple[int, int, str, str]]:
    """(local port, remote port, state, inode) of every TCP socket in this network namespace."""
    rows = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            rows.append((int(fields[1].rsplit(":", 1)[1], 16), int(fields[2].rsplit(":", 1)[1], 16),
                         fields[3], fields[9]))
    return rows


def _own_inodes() -> set[str]:
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed meanwhile (the listing's own descriptor among them)
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    return inodes


def peers(port: int) -> int:
    """Connections to the store from other processes: the server's established sockets, less
    those that serve this process's own client (TCPStore's master keeps one)."""
    rows, mine = _sockets(), _own_inodes()
    served = sum(1 for local, _remote, state, _inode in rows if local == port and state == ESTABLISHED)
    own = sum(1 for _local, remote, state, inode in rows
              if remote == port and state == ESTABLISHED and inode in mine)
    return served - own


def drain(port: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while peers(port) > 0 and time.monotonic() < deadline:
        time.sleep(0.1)


def exit_as(code: int) -> None:
    """End with the agent's status: its exit code, or the signal that killed it."""
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


def on_signal(agent: subprocess.Popen, got: int, _frame: object) -> None:
    """A pod's PID 1 passes the signal on: the kernel gives its children none. On a VM the stop
    that sent it signals the agent too; the store stays until the agent has gone, as it did
    when the agent hosted it (a lingering one meets the stop's SIGKILL)."""
    if os.getpid() == 1:
        agent.send_signal(got)


def start_store(host: str, port: int) -> object:
    import torch.distributed as dist

    return dist.TCPStore(host, port, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=60))


def is_torchrun(argv: list[str]) -> bool:
    return os.path.basename(argv[0]) == "torchrun"


def run_torchrun_here(argv: list[str]) -> int:
    """torchrun's console script in this process: its argv, its output, its exit (a failed
    group raises ChildFailedError, which ends the interpreter with its trace and status 1)."""
    from torch.distributed.run import main as torchrun_main

    sys.argv = list(argv)
    try:
        torchrun_main()
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    return 0


def main(host: str, port: int, drain_seconds: float, agent_argv: list[str]) -> None:
    if is_torchrun(agent_argv):
        store = start_store_or_exit(host, port, agent=None)
        code = run_torchrun_here(agent_argv)
    else:
        # The agent first: importing torch here takes seconds, and agents retry until the store is up.
        agent = subprocess.Popen(agent_argv)
        for sig in FORWARDED:
            signal.signal(sig, partial(on_signal, agent))
        store = start_store_or_exit(host, port, agent)
        code = agent.wait()
    if code == 0:
        drain(port, drain_seconds)
    del store
    exit_as(code)


def start_store_or_exit(host: str, port: int, agent: subprocess.Popen | None) -> object:
    try:
        return start_store(host, port)
    except Exception as exc:  # the port is taken, say: no agent could meet
        print(f"the rendezvous store could not start on port {port}: {exc}", file=sys.stderr, flush=True)
        if agent is not None:
            agent.terminate()
            agent.wait()
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4:])
