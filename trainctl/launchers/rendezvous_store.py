"""The command of the node (or pod) whose torchrun agent would host the c10d rendezvous store:
rendezvous_store_server.py hosts it instead, runs the agent as a client like every other agent,
and keeps the store until the other agents have left."""

from __future__ import annotations

from pathlib import Path

# How long node 0 keeps the store for the other agents once its own has succeeded. They need it
# for well under a second (leaving the exit barrier, closing the rendezvous); the bound only
# matters when a peer vanished without closing its connection.
DRAIN_SECONDS = 30

SERVER_SOURCE = (Path(__file__).parent / "rendezvous_store_server.py").read_text()

# Every agent is the store's client; none hosts it.
RDZV_CONF = "is_host=false"


def hosting(python: str, host: str, port: int, torchrun: list[str]) -> list[str]:
    """The argv that runs `torchrun` beside the store it meets at `host`:`port`, exiting with
    torchrun's status."""
    return [python, "-c", SERVER_SOURCE, host, str(port), str(DRAIN_SECONDS), *torchrun]
