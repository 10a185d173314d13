"""The command of the node (or pod) whose torchrun agent would host the c10d rendezvous store:
rendezvous_store_server.py hosts it instead, runs the agent as a client like every other agent,
and keeps the store until the other agents have left."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Mapping

# How long node 0 keeps the store for the other agents once its own has succeeded. They need it
# for well under a second (leaving the exit barrier, closing the rendezvous); the bound only
# matters when a peer vanished without closing its connection.
DRAIN_SECONDS = 30

SERVER_SOURCE = (Path(__file__).parent / "rendezvous_store_server.py").read_text()
# How a plan shows the source (`python -c SOURCE` in node 0's command): by name, not ~150 lines.
SERVER_SHOWN = (f"<rendezvous server: {len(SERVER_SOURCE.splitlines())} lines of "
                "trainctl/launchers/rendezvous_store_server.py>")

# Every agent is the store's client; none hosts it.
RDZV_CONF = "is_host=false"

# The environment of every torchrun agent. Since pytorch/pytorch#128096 (2024) the agents hand
# their workers one store for the whole run, created at the first rendezvous, and the workers key
# it by rank alone (torch/distributed/rendezvous.py: "a new TCPStore for every retry", which it is
# not): after an in-place restart the new workers read their predecessors' addresses, gloo's or
# NCCL's, connect to ports nobody listens on any more, and fail again, until torchrun's restarts
# are spent (pytorch/pytorch#135712). Measured on the local stack: a killed worker on one of 3
# nodes cost 5 failed restarts and a job rerun, ~55 s; with the workers' own store, one restart in
# 3 s. Their store then lives in rank 0's worker, as it did before, which brings back what the
# sharing had fixed: ranks still talking to the store when rank 0's worker has exited see "Broken
# pipe" errors, so a program should end with a barrier (the reference trainers do). A job's env may
# set the variable to 0.
AGENT_ENV = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}


def agent_env(job_env: Mapping[str, str]) -> dict[str, str]:
    """AGENT_ENV, less what the job's own environment sets."""
    return {k: v for k, v in AGENT_ENV.items() if k not in job_env}


def hosting(python: str, host: str, port: int, torchrun: list[str]) -> list[str]:
    """The argv that runs `torchrun` beside the store it meets at `host`:`port`, exiting with
    torchrun's status."""
    return [python, "-c", SERVER_SOURCE, host, str(port), str(DRAIN_SECONDS), *torchrun]


def abbreviated(shown: Any) -> Any:
    """A command line, or a Kubernetes object's strings, with the sources trainctl runs as
    `python -c` (this server's, JAX's boot wrapper) named instead: what `launch --plan` prints."""
    if isinstance(shown, str):
        from trainctl.launchers.jax_env import BOOT_SHOWN, BOOT_SOURCE

        for source, name in ((SERVER_SOURCE, SERVER_SHOWN), (BOOT_SOURCE, BOOT_SHOWN)):
            shown = shown.replace(shlex.quote(source), name).replace(source, name)
        return shown
    if isinstance(shown, dict):
        return {k: abbreviated(v) for k, v in shown.items()}
    if isinstance(shown, list):
        return [abbreviated(v) for v in shown]
    return shown
