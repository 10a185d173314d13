"""A fork server for the stand-in `pulumi`: one process per simulator that has already imported
the stand-in, the Pulumi SDK and the pulumi-gcp classes the program declares, and forks a copy
of itself for every `pulumi` command instead of starting a new interpreter.

Why: the Automation API starts the CLI eight to ten times per `up` (version, stack select,
config, up, stack output, history...), and every start re-imports the SDK; `up` also imports
pulumi-gcp's compute, container and storage classes (a 4.8 MB `compute/_inputs.py`), about
1.4 CPU-seconds of the ~2 an `up` costs here. `bench/simulated_pulumi.py` measures the whole
saving. The real CLI is a Go binary that starts in milliseconds, so this makes the stand-in
cost what the real thing costs, not less.

Each command runs in its own forked process with the caller's argv, environment, working
directory, umask and standard streams (passed over the socket), in a process group of its
own; the client (`zygote_client.py`, the `pulumi` on PATH) forwards the signals it gets to that
group and exits as the command did. The simulator daemon starts one at its start and ends it
at its end (daemon.serve), so nothing of it outlives the simulator.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

SOCKET_NAME = "pulumi.sock"
# What a command imports that costs a new interpreter its time: the stand-in, the SDK's runtime
# and the pulumi-gcp packages of the program's resources (each package loads whole on first use).
PRELOAD_MODULES = (
    "gcpsim.pulumi.cli",
    "gcpsim.pulumi.operations",
    "gcpsim.pulumi.engine",
    "gcpsim.pulumi.langhost",
    "gcpsim.pulumi.policy",
    "gcpsim.pulumi.gcp",
    "infra.providers.gcp.program.cluster",
    "pulumi.runtime.proto.analyzer_pb2_grpc",
)
PRELOAD_GCP_PACKAGES = ("compute", "container", "projects", "serviceaccount", "storage", "tpu",
                        "cloudscheduler", "artifactregistry")
HEADER = struct.Struct("!I")
PR_SET_PDEATHSIG = 1


def socket_path(home: Path) -> Path:
    return home / SOCKET_NAME


def start(path: Path) -> subprocess.Popen[bytes]:
    """A fork server listening on `path`, a child of this process (it ends when this does)."""
    return subprocess.Popen([sys.executable, "-m", "gcpsim.pulumi.zygote", str(path)],
                            stdin=subprocess.DEVNULL, cwd=str(Path(__file__).resolve().parents[2]))


def stop(server: subprocess.Popen[bytes]) -> None:
    """The server goes; commands it started are processes of their own and run to their end."""
    server.terminate()
    try:
        server.wait(timeout=5)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def preload() -> None:
    for name in PRELOAD_MODULES:
        importlib.import_module(name)
    import pulumi_gcp

    for package in PRELOAD_GCP_PACKAGES:
        getattr(getattr(pulumi_gcp, package), "__all__", None)  # lazy packages load on first use


def serve(path: Path) -> None:
    """Bind first (clients queue until the preload is done), preload, then fork per connection
    until the parent (the simulator daemon) is gone or the socket is no longer ours."""
    _die_with_parent()
    parent = os.getppid()
    listener = _bind(path)
    preload()
    inode = os.stat(path).st_ino
    while True:
        _reap()
        if os.getppid() != parent or not _still_ours(path, inode):
            return
        if not select.select([listener], [], [], 1.0)[0]:
            continue
        conn, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            try:
                _handle(conn)
            finally:
                os._exit(0)
        conn.close()


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _bind(path: Path) -> socket.socket:
    """A socket path can be longer than sun_path's 108 bytes: bind it relative to its folder."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    here = os.getcwd()
    os.chdir(path.parent)
    try:
        if os.path.lexists(path.name):
            os.unlink(path.name)
        old = os.umask(0o177)  # the owner only: a command runs with whatever environment it is sent
        try:
            listener.bind(path.name)
        finally:
            os.umask(old)
    finally:
        os.chdir(here)
    listener.listen(64)
    return listener


def _still_ours(path: Path, inode: int) -> bool:
    try:
        return os.stat(path).st_ino == inode
    except OSError:
        return False


def _reap() -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


def _handle(conn: socket.socket) -> None:
    """One command: receive it, fork the process that runs it, relay signals, report its end."""
    uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[1]
    request, fds = _receive(conn)
    same_interpreter = (request.get("python") == sys.executable
                        and request["env"].get("PYTHONPATH") == os.environ.get("PYTHONPATH"))
    if uid != os.getuid() or not same_interpreter or len(fds) != 3:
        conn.sendall(b"refused\n")  # the client runs the command itself
        return
    # The command waits at this gate until "started" has gone out: a client that does not hear
    # it runs the command itself, so a command that ran before (or without) the answer would run
    # twice on the caller's stdout (issue 44: two `stack history --json` documents in one output).
    gate, opened = os.pipe()
    pid = os.fork()
    if pid == 0:
        conn.close()
        os.close(opened)
        if not os.read(gate, 1):  # this process went before saying "started": the client runs it
            os._exit(1)
        os.close(gate)
        try:
            _run_command(request, fds)
        except BaseException:  # noqa: BLE001 - the command could not be set up: say why, fail
            traceback.print_exc()
        os._exit(1)
    os.close(gate)
    for fd in fds:
        os.close(fd)
    conn.sendall(b"started\n")
    os.write(opened, b"\n")
    os.close(opened)
    conn.sendall(f"{_supervise(conn, pid)}\n".encode())


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    data, fds, _, _ = socket.recv_fds(conn, 65536, 3)
    while len(data) < HEADER.size:
        data += conn.recv(65536)
    (size,) = HEADER.unpack_from(data)
    while len(data) < HEADER.size + size:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return json.loads(data[HEADER.size:HEADER.size + size]), fds


def _supervise(conn: socket.socket, pid: int) -> str:
    """Forward `kill N` lines to the command's process group until it ends; a client that goes
    away (killed) takes the command with it, as a killed `pulumi` would be gone."""
    exited = os.pidfd_open(pid)
    pending = b""
    while True:
        ready = select.select([conn.fileno(), exited], [], [])[0]
        if exited in ready:
            status = os.waitpid(pid, 0)[1]
            return f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit {os.WEXITSTATUS(status)}"
        chunk = conn.recv(4096)
        if not chunk:
            _kill_group(pid, signal.SIGKILL)
            continue
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line.startswith(b"kill "):
                _kill_group(pid, int(line.split()[1]))


def _kill_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        pass


def _run_command(request: dict[str, Any], fds: list[int]) -> None:
    """In the forked process: become `python -m gcpsim.pulumi ARGS` as
    started by the client, run it, and leave as the interpreter would."""
    os.setpgid(0, 0)
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.umask(request["umask"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = [str(Path(__file__).with_name("__main__.py")), *request["args"]]
    sys.path[0] = request["cwd"]  # as `python -m` puts it first
    code = _main(request["args"])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _main(args: list[str]) -> int:
    from gcpsim.pulumi.cli import main

    try:
        code = main(args)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        traceback.print_exc()
        _exit_by(signal.SIGINT)  # as the interpreter ends on an uncaught KeyboardInterrupt
    except BaseException:  # noqa: BLE001 - reported as the interpreter reports it
        traceback.print_exc()
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # what interpreter exit waits for
    return code


def _exit_by(signum: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
