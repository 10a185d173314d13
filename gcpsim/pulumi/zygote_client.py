"""The stand-in `pulumi` on PATH: `python -I -S zygote_client.py SOCKET ARGS...`.

It hands the command (argv, environment, working directory, umask, and its standard streams
as file descriptors) to the simulator's fork server (zygote.py), forwards the signals it gets,
and exits as the command did. Where no server answers, or it refuses, it runs the stand-in
itself, as the launcher did before there was a server. Standard library only, run without
site-packages: it must start in milliseconds, which is the point of the server.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys
from typing import NoReturn

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
MODULE = "gcpsim.pulumi"


def run_here(args: list[str]) -> NoReturn:
    os.execv(sys.executable, [sys.executable, "-m", MODULE, *args])


def connect(path: str) -> socket.socket | None:
    """Connected to the server, or None; the path may be longer than sun_path allows."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    here = os.getcwd()
    try:
        os.chdir(os.path.dirname(path))
        conn.connect(os.path.basename(path))
        return conn
    except OSError:
        conn.close()
        return None
    finally:
        os.chdir(here)


def standard_fds() -> list[int]:
    """0, 1 and 2, a closed one replaced by /dev/null (a descriptor must be sent for each)."""
    fds = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            fds.append(fd)
        except OSError:
            fds.append(os.open(os.devnull, os.O_RDWR))
    return fds


def send(conn: socket.socket, args: list[str]) -> None:
    body = json.dumps({"args": args, "env": dict(os.environ), "cwd": os.getcwd(),
                       "umask": current_umask(), "python": sys.executable}).encode()
    payload = struct.pack("!I", len(body)) + body
    sent = socket.send_fds(conn, [payload[:4096]], standard_fds())
    conn.sendall(payload[sent:])


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def read_line(conn: socket.socket, buffered: list[bytes]) -> str | None:
    while b"\n" not in buffered[0]:
        chunk = conn.recv(4096)
        if not chunk:
            return None
        buffered[0] += chunk
    line, buffered[0] = buffered[0].split(b"\n", 1)
    return line.decode()


def finish(outcome: str) -> NoReturn:
    kind, number = outcome.split()
    if kind == "signal":
        signum = int(number)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    sys.exit(int(number))


def main() -> None:
    path, args = sys.argv[1], sys.argv[2:]
    conn = connect(path)
    if conn is None:
        run_here(args)
    buffered = [b""]
    try:
        send(conn, args)
        answer = read_line(conn, buffered)
    except OSError:
        answer = None
    if answer != "started":  # refused, or the server went before starting it: nothing ran
        conn.close()
        run_here(args)
    for signum in FORWARDED:
        signal.signal(signum, lambda got, _frame: conn.sendall(f"kill {got}\n".encode()))
    outcome = read_line(conn, buffered)  # signals interrupt it, are forwarded, and it goes on (PEP 475)
    if outcome is None:
        sys.exit(255)  # the server was killed mid-command: fail as a crashed CLI would
    finish(outcome)


if __name__ == "__main__":
    main()
