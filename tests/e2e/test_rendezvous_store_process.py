"""The process that hosts torchrun's rendezvous store and runs node 0's agent, with real torch
stores: after an agent that succeeded it stays up until the other agents (here, one client) have
left; after one that failed it ends at once with the agent's exit code, a client still connected.
(Under real torchrun agents on the local stack: test_failing_ranks.py.)"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import free_port
from trainctl.launchers.rendezvous_store import hosting

pytestmark = pytest.mark.e2e

# Another agent: connects to the store, says so, stays `hold` seconds, notes that it left.
CLIENT = """
import sys, time, datetime, pathlib
import torch.distributed as dist
folder, port, hold = pathlib.Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=datetime.timedelta(seconds=60))
store.set("joined", "1")
(folder / "connected").touch()
time.sleep(hold)
del store
(folder / "left").touch()
"""


@pytest.mark.parametrize("agent_exit, hold", [(0, 3), (3, 60)])
def test_the_store_outlives_an_agent_that_succeeded_until_the_others_leave_and_not_one_that_failed(
        trainer_python: Path, tmp_path: Path, agent_exit: int, hold: int):
    port = free_port()
    agent = ["sh", "-c", f'until [ -e "{tmp_path}/connected" ]; do sleep 0.05; done; exit {agent_exit}']
    store = subprocess.Popen(hosting(str(trainer_python), "127.0.0.1", port, agent))
    client = subprocess.Popen([str(trainer_python), "-c", CLIENT, str(tmp_path), str(port), str(hold)])
    try:
        assert store.wait(timeout=120) == agent_exit
        if agent_exit == 0:
            assert (tmp_path / "left").exists()  # it waited for the other agent
        else:
            assert client.poll() is None  # it did not: the failure is seen at once
    finally:
        client.kill()
        store.kill()
        client.wait()
        store.wait()


# A worker that notes its rank and its agent's pid.
WORKER = """
import os, pathlib, sys
pathlib.Path(sys.argv[1], f"rank{os.environ['RANK']}").write_text(str(os.getppid()))
"""


def test_a_torchrun_agent_runs_in_the_stores_own_process_and_both_agents_finish(trainer_python: Path, tmp_path: Path):
    port = free_port()
    script = tmp_path / "worker.py"
    script.write_text(WORKER)

    def torchrun() -> list[str]:
        return [str(trainer_python.parent / "torchrun"), "--nnodes=2", "--nproc-per-node=1", "--rdzv-backend=c10d",
                f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=in-process", "--rdzv-conf=is_host=false",
                "--max-restarts=0", "--monitor-interval=0.2", str(script), str(tmp_path)]

    store = subprocess.Popen(hosting(str(trainer_python), "127.0.0.1", port, torchrun()))
    other = subprocess.Popen(torchrun())
    try:
        assert store.wait(timeout=180) == 0 and other.wait(timeout=60) == 0
        agents = {int((tmp_path / f"rank{rank}").read_text()) for rank in (0, 1)}
        assert agents == {store.pid, other.pid}  # no second interpreter: the store's process is the agent
    finally:
        for proc in (store, other):
            proc.kill()
            proc.wait()
