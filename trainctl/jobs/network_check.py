"""The network pre-flight: before step 0, a short all-reduce across every node (one process
each, NCCL on GPUs, gloo on CPUs) measures the bus bandwidth the job will get, and compares it
with what the catalog expects of the stack's network. Below `min_fraction` of it the run is
refused (or, by setting, warned about), naming the figure and the transport the collective
used: a slow link (a node's NIC, NCCL falling back to TCP) is known before hours are spent.

The all-reduce runs through the stack's own launcher as a job of its own (torchrun, rendezvous
and all), so it measures the path the training will take. busbw is NCCL-tests' figure:
bytes x 2(n-1)/n / time per all-reduce.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from infra.errors import RemoteError
from infra.providers.inventory import Inventory
from infra.spec.cluster import ClusterSpec
from trainctl.launchers.protocol import Launcher
from trainctl.launchers.spec import LaunchSpec

MARK = "TRAINCTL_BUSBW "
# Runs on every node under torchrun (its environment: RANK, WORLD_SIZE, MASTER_ADDR, ...).
PROGRAM = r"""
import json, os, time
import torch
import torch.distributed as dist
cuda = torch.cuda.is_available()
dist.init_process_group("nccl" if cuda else "gloo")
n = dist.get_world_size()
size = int(os.environ["TRAINCTL_NETCHECK_MB"]) * 2**20
device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else torch.device("cpu")
x = torch.ones(size // 4, device=device)
dist.all_reduce(x)  # the first one makes the connections
iters = int(os.environ["TRAINCTL_NETCHECK_ITERS"])
if cuda:
    torch.cuda.synchronize()
start = time.perf_counter()
for _ in range(iters):
    dist.all_reduce(x)
if cuda:
    torch.cuda.synchronize()
per_op = (time.perf_counter() - start) / iters
if dist.get_rank() == 0:
    busbw = size * 2 * (n - 1) / n / per_op / 1e9
    print("TRAINCTL_BUSBW " + json.dumps({"gbps": round(busbw, 3), "backend": dist.get_backend(),
                                          "world": n, "seconds_per_op": round(per_op, 4)}), flush=True)
dist.destroy_process_group()
"""
def figure_of(line: str) -> dict[str, Any]:
    """Rank 0's figure from its line. torchrun's log tail prefixes what it reads, and a line it read
    before its newline was written ends in the next prefix (`...}[node0 r0]:`, seen in CI): the
    figure is the first JSON value after the mark."""
    found, _end = json.JSONDecoder().raw_decode(line.split(MARK, 1)[1])
    return dict(found)


# What NCCL says it picked, with NCCL_DEBUG=INFO ("NET/Socket", "NET/IB", a GPUDirect plugin's).
NCCL_NET = re.compile(r"NCCL INFO (?:Using network (\S+)|NET/(\S+))")


class NetworkTooSlow(RemoteError):
    title = "network check failed"


@dataclass(frozen=True)
class NetworkFigure:
    gbps: float
    expected_gbps: float
    transport: str
    world: int

    @property
    def fraction(self) -> float:
        return self.gbps / self.expected_gbps if self.expected_gbps else 1.0

    def describe(self) -> str:
        return (f"all-reduce bus bandwidth {self.gbps:.3f} GB/s across {self.world} nodes over "
                f"{self.transport}: {self.fraction:.0%} of the {self.expected_gbps:.3f} GB/s expected")


def check_spec(run_id: str, size_mb: int, iters: int) -> LaunchSpec:
    # `env python`: torchrun runs it as a command (--no-python), from the node's environment
    return LaunchSpec(run_id=f"{run_id}-netcheck", command=("env", "python", "-c", PROGRAM), framework="torch",
                      max_restarts=0, job_retries=0,
                      env={"TRAINCTL_NETCHECK_MB": str(size_mb), "TRAINCTL_NETCHECK_ITERS": str(iters),
                           "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"})


def measure(launcher: Launcher, cluster: ClusterSpec, inventory: Inventory, spec: LaunchSpec,
            log_dir: Path, expected_gbps: float) -> NetworkFigure:
    """One all-reduce job on every node; its rank 0's figure."""
    lines: list[str] = []
    result = launcher.run(launcher.dryrun(cluster, inventory, spec), log_dir, lines.append)
    found = [figure_of(line) for line in lines if MARK in line]
    if not result.ok or not found:
        raise NetworkTooSlow(f"the network check's all-reduce did not finish (logs in {log_dir}; it needs "
                             f"torch in the nodes' environment): {result.describe_failures()}")
    nets = {m.group(1) or m.group(2) for line in lines for m in NCCL_NET.finditer(line)}
    transport = ", ".join(sorted(nets)) if nets else f"TCP ({found[0]['backend']})"
    return NetworkFigure(found[0]["gbps"], expected_gbps, transport, found[0]["world"])


def judge(figure: NetworkFigure, min_fraction: float, below: str, echo: Callable[[str], None]) -> None:
    said = figure.describe()
    if figure.fraction >= min_fraction:
        echo(f"[trainctl] network check: {said}")
        return
    if below == "warn":
        echo(f"[trainctl] WARNING network check: {said} (below {min_fraction:.0%}); training anyway")
        return
    raise NetworkTooSlow(f"{said}, below the {min_fraction:.0%} this run requires; a node's link is slower "
                         "than its network should be (network_check.below: warn runs anyway)")


def preflight(launcher: Launcher, cluster: ClusterSpec, inventory: Inventory, run_id: str, log_dir: Path,
              echo: Callable[[str], None], *, min_fraction: float = 0.5, below: str = "refuse",
              size_mb: int = 32, iterations: int = 5) -> NetworkFigure | None:
    """Measure, compare, refuse or warn; None where there is nothing to hold the run to."""
    from infra.spec import catalog

    if len(inventory.nodes) < 2:
        echo("[trainctl] network check: one node, no network between nodes to measure")
        return None
    expected = catalog.expected_busbw_gbps(cluster.node_machine_type)
    figure = measure(launcher, cluster, inventory, check_spec(run_id, size_mb, iterations), log_dir,
                     expected or 0.0)
    if expected is None:
        echo(f"[trainctl] network check: {figure.gbps:.3f} GB/s over {figure.transport}; the catalog "
             f"has no expected figure for {cluster.node_machine_type}, so nothing is held to it")
        return figure
    judge(figure, min_fraction, below, echo)
    return figure
