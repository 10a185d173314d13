"""The simulator as a service: one per simulator home, started on demand, gone when idle.

Whoever needs the simulated cloud (trainctl, the Pulumi stand-in it starts, a second trainctl in
another terminal) calls `ensure_running(home)` and gets its URL; the first caller starts it,
detached, and later ones find it by its record (home/daemon.json). Its port stays the same for
the life of the home, because machines are told where their storage endpoint is when they boot.
It serves the controller on loopback and, once a simulated network exists, the machines on the
service address (SERVICE_IP) that their networks route to. It exits when it has had no request
for `idle_seconds` and no machine is alive in the world, or when asked to while idle.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from gcpsim.errors import SimulatorError


SERVICE_IP = "10.215.0.1"  # where simulated machines reach the simulator (machines.py's networks)
IDLE_SECONDS = 30.0
STOP_GRACE_SECONDS = 1.0
START_TIMEOUT_SECONDS = 20.0


class SimulatorUnavailable(SimulatorError):
    pass


def _record_path(home: Path) -> Path:
    return home / "daemon.json"


def _read_record(home: Path) -> dict[str, Any] | None:
    try:
        return json.loads(_record_path(home).read_text())
    except (OSError, ValueError):
        return None


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/trainctl-sim/v1/health", timeout=2) as response:
            return response.status == 200
    except (OSError, urllib.error.URLError):
        return False


def _alive(pid: int) -> bool:
    try:  # an exited process its parent (PID 1 here) has not reaped yet is no longer serving
        with open(f"/proc/{pid}/stat") as fh:
            if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
    except (OSError, IndexError):
        pass
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def process_alive(home: Path) -> bool:
    """Whether the service's process still runs (asks it nothing: a request would count as a
    caller and void a stop it was asked for)."""
    record = _read_record(home)
    return record is not None and _alive(record["pid"])


def url_of(home: Path) -> str | None:
    """The running simulator's URL, or None."""
    record = _read_record(home)
    if record and _alive(record["pid"]):
        url = f"http://127.0.0.1:{record['port']}"
        if _answers(url):
            return url
    return None


def _free_port(preferred: int | None) -> int:
    for port in ([preferred] if preferred else []) + [0]:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds it
            try:
                s.bind(("127.0.0.1", port))
                return s.getsockname()[1]
            except OSError:
                continue
    raise SimulatorUnavailable("no free loopback port for the GCP simulator")


def ensure_running(home: Path, *, api_only: bool = False) -> str:
    """The URL of the simulator serving `home`, started (detached) if it is not running."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(home / "daemon.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        url = url_of(home)
        if url:
            return url
        previous = _read_record(home) or {}
        port = _free_port(previous.get("port"))
        log = open(home / "daemon.log", "ab")
        # setsid -f: not this process's child (it outlives it, and is never left a zombie)
        argv = ["setsid", "-f", sys.executable, "-m", "gcpsim", "serve", "--home", str(home),
                "--port", str(port)]
        if api_only:
            argv.append("--api-only")
        subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, check=True,
                       cwd=str(Path(__file__).resolve().parents[1]))
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if _answers(url):
                return url
            time.sleep(0.05)
        raise SimulatorUnavailable(f"the GCP simulator did not start within {START_TIMEOUT_SECONDS:.0f} s "
                                   f"(its log: {home / 'daemon.log'})")


def stop(home: Path, timeout: float = 10.0) -> bool:
    """Ends the simulator of `home` (its state stays on disk); whether one was running."""
    record = _read_record(home)
    if not record or not _alive(record["pid"]):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(record["pid"], signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(record["pid"]):
        time.sleep(0.05)
    return True


def serve(home: Path, port: int, *, api_only: bool = False, idle_seconds: float = IDLE_SECONDS) -> None:
    """The daemon's body: serve until idle (no request, no machine) or SIGTERM. With real
    machines it also serves them at SERVICE_IP, and on leaving removes what it made on this
    machine that no simulated network still uses."""
    from gcpsim.pulumi import zygote
    from gcpsim.server import Simulator

    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    backend = None
    if not api_only:
        from gcpsim import nodes, vpc

        backend = nodes.NodeMachines(home)
    sim = Simulator(home, backend)
    sim.start("127.0.0.1", port)
    if not api_only:
        # under the lock: another home's last network going must not take the address away
        # between its making and this listener, which then keeps it (vpc.service_users)
        with vpc.host_lock():
            vpc.ensure_service()
            sim.start_also(SERVICE_IP, port)
    _record_path(home).write_text(json.dumps({"pid": os.getpid(), "port": port}))
    # the stand-in `pulumi`'s fork server lives as long as this service: a `down` that ends the
    # service leaves nothing of it running
    pulumi_server = zygote.start(zygote.socket_path(home))
    try:
        while not done.wait(0.2):
            # a stop asked for after a `down` waits out a short quiet spell: a caller that found
            # the service just before must not lose it between two of its requests
            quiet = time.time() - sim.last_request > STOP_GRACE_SECONDS
            if sim.stop_requested.is_set() and quiet and sim.busy.count == 0 and not sim.has_machines():
                break
            if time.time() - sim.last_request > idle_seconds and not sim.has_machines():
                break
    finally:
        zygote.stop(pulumi_server)
        sim.stop()
        if not api_only:
            with vpc.host_lock():
                vpc.remove_service_if_unused()
