"""One name on the controller for every registry made for a single stack (the local stack's):
pushes go to `ALIAS_HOST:ALIAS_PORT`, relayed to the stack's registry while they run, so buildah
keeps one record of what each layer is called there and never sends again a layer an earlier
stack's registry already had."""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Iterator

# The controller pushes to every local stack's registry under this one name (`loopback_alias`).
ALIAS_HOST = "127.0.0.1"
ALIAS_PORT = 5099


@contextlib.contextmanager
def loopback_alias(target: str) -> Iterator[str | None]:
    """`ALIAS_HOST:ALIAS_PORT` relayed to `target` (host:port) while the block runs; None when
    another push holds the port (that push then goes to the stack's own address)."""
    try:
        server = socket.create_server((ALIAS_HOST, ALIAS_PORT))
    except OSError:
        yield None
        return
    host, port = target.rsplit(":", 1)
    stop = threading.Event()

    def pipe(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(1 << 16):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def relay(client: socket.socket) -> None:
        with client, socket.create_connection((host, int(port)), timeout=30) as upstream:
            upstream.settimeout(None)
            back = threading.Thread(target=pipe, args=(upstream, client), daemon=True)
            back.start()
            pipe(client, upstream)
            back.join()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                client, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=relay, args=(client,), daemon=True).start()

    acceptor = threading.Thread(target=serve, daemon=True)
    acceptor.start()
    try:
        yield f"{ALIAS_HOST}:{ALIAS_PORT}"
    finally:
        stop.set()
        acceptor.join()
        server.close()
