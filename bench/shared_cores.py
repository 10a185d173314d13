"""CPU of a 2-node digits DDP run whose nodes share this machine's cores (as local and simulated
nodes do), with every rank's threads at torch's default (one per core) against the share the
launchers now give each rank (trainctl/launchers/cluster_env.thread_share), in this one run.

  baseline  two torchrun agents (c10d on loopback, 1 process each), OMP_NUM_THREADS etc. set to
            the core count: what torch picks by itself when nothing is set
  shared    the same group with thread_share's variables for a 2-node stack on these cores
Both run `trainers.digits_ddp --epochs 10` to the same steps and accuracy, alternating, 3 times
each; CPU-s is user+system of the agents and their ranks (getrusage of the reaped children).
Run: .venv/bin/python bench/shared_cores.py   (needs the trainers' environment: `make deps`)
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from conftest import REPO, free_port, seeded_python  # noqa: E402
from infra.providers.inventory import Inventory, Node  # noqa: E402
from trainctl.launchers.cluster_env import thread_share  # noqa: E402
from trainctl.launchers.spec import LaunchSpec  # noqa: E402

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDEuYCTEyVZpPfXSnA6n/xaBlH5vTfcOVaZcm3nX571U"


def two_node_share() -> dict[str, str]:
    nodes = tuple(Node(name=f"node{i}", rank=i, internal_ip="127.0.0.1", ssh_host="127.0.0.1", host_keys=(KEY,),
                       workdir="/w") for i in range(2))
    inventory = Inventory(stack="bench", provider="local", nodes=nodes, bucket_uri="gs://b", ssh_private_key="/k",
                          known_hosts="/k", on_controller=True)
    return thread_share(inventory, LaunchSpec(run_id="bench", command=("python",)), len(nodes))


def one_run(python: Path, env: dict[str, str]) -> tuple[float, float]:
    """(CPU-s, wall-s) of the 2-node group."""
    port = free_port()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as job_dir:
        agents = [subprocess.Popen(
            [str(python), "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=1", "--rdzv-backend=c10d",
             f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=bench", f"--rdzv-conf=is_host={'true' if rank == 0 else 'false'}",
             "-m", "trainers.digits_ddp", "--epochs", "10", "--job-dir", job_dir],
            cwd=REPO, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for rank in range(2)]
        codes = [agent.wait(timeout=600) for agent in agents]
        assert codes == [0, 0], codes
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, time.monotonic() - started


def main() -> None:
    python = seeded_python(REPO / "trainers" / "requirements.txt")
    cores = len(os.sched_getaffinity(0))
    default = dict.fromkeys(("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS"), str(cores))
    shared = two_node_share()
    results: dict[str, list[tuple[float, float]]] = {"baseline": [], "shared": []}
    one_run(python, shared)  # warm the page cache: the first run pays for the imports' reads
    for _ in range(3):
        results["baseline"].append(one_run(python, default))
        results["shared"].append(one_run(python, shared))
    for name, runs in results.items():
        print(f"{name:9s} {statistics.median(c for c, _ in runs):6.1f} CPU-s  {statistics.median(w for _, w in runs):6.1f} s wall"
              f"  ({', '.join(f'{c:.1f}' for c, _ in runs)})")
    ratio = statistics.median(c for c, _ in results["baseline"]) / statistics.median(c for c, _ in results["shared"])
    print(f"{cores} cores, share {shared['OMP_NUM_THREADS']} thread(s) per rank: the shared run uses "
          f"{ratio:.2f}x less CPU than the default threads")


if __name__ == "__main__":
    main()
