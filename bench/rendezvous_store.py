"""Node 0's side of a 2-node torchrun job: the rendezvous store's process starting node 0's agent
as a child (baseline) against running it in its own process (trainctl/launchers/
rendezvous_store_server.py today), in this one script.

    .venv/bin/python bench/rendezvous_store.py [--rounds 3]   (needs the trainers' environment)

Both run the same two agents (c10d on loopback, one worker each, a worker that only prints):
  baseline  node 0's agent as `python -m torch.distributed.run ...`, which the store's process
            does not recognise as torchrun's console script, so it starts it as a child
  in-process  node 0's agent as `.../bin/torchrun ...`, run in the store's process
CPU-s is user+system of node 0's processes (the store's process and everything it started),
from getrusage of the reaped children, with node 1's agent run apart and not counted.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from conftest import REPO, free_port, seeded_python  # noqa: E402
from trainctl.launchers.rendezvous_store import hosting  # noqa: E402
from cpu_wall import compare  # noqa: E402  (bench/, this script's folder)

WORKER = "import os; print('rank', os.environ['RANK'], flush=True)\n"


def agent_args(port: int, script: Path) -> list[str]:
    return ["--nnodes=2", "--nproc-per-node=1", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}",
            "--rdzv-id=bench", "--rdzv-conf=is_host=false", "--max-restarts=0", "--monitor-interval=0.2", str(script)]


def one_job(python: Path, script: Path, in_process: bool) -> tuple[float, float]:
    """(CPU-s of node 0's processes, wall-s until both agents are done)."""
    port = free_port()
    node0 = ([str(python.parent / "torchrun")] if in_process else [str(python), "-m", "torch.distributed.run"])
    started = time.monotonic()
    node1 = subprocess.Popen([str(python.parent / "torchrun"), *agent_args(port, script)], stdout=subprocess.DEVNULL)
    pid = os.fork()
    if pid == 0:  # node 0 in a child of its own, so that its reaped CPU is apart from node 1's
        code = subprocess.call(hosting(str(python), "127.0.0.1", port, [*node0, *agent_args(port, script)]),
                               stdout=subprocess.DEVNULL)
        os._exit(code)
    _, status, usage = os.wait4(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and node1.wait(timeout=120) == 0
    return usage.ru_utime + usage.ru_stime, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    python = seeded_python(REPO / "trainers" / "requirements.txt")
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "worker.py"
        script.write_text(WORKER)
        compare(args.rounds, ("baseline", lambda: one_job(python, script, in_process=False)),
                ("in-process", lambda: one_job(python, script, in_process=True)))

if __name__ == "__main__":
    main()
