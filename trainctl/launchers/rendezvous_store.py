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

# The environment of every torchrun agent. Since torch 2.4 the agents hand their workers one
# store for the whole run, created at the first rendezvous, and the workers key it by rank
# alone (torch/distributed/rendezvous.py: "a new TCPStore for every retry", which it is not):
# after an in-place restart the new workers read their predecessors' addresses, gloo's or
# NCCL's, connect to ports nobody listens on any more, and fail again, until torchrun's
# restarts are spent (pytorch/pytorch#135712). Measured on the local stack: a killed worker on
# one of 3 nodes cost 5 failed restarts and a job rerun, ~55 s; with the workers' own store,
# one restart in 3 s. Their store then lives in rank 0's worker, as it did before torch 2.4.
AGENT_ENV = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}


def hosting(python: str, host: str, port: int, torchrun: list[str]) -> list[str]:
    """The argv that runs `torchrun` beside the store it meets at `host`:`port`, exiting with
    torchrun's status."""
    return [python, "-c", SERVER_SOURCE, host, str(port), str(DRAIN_SECONDS), *torchrun]
