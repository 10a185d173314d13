"""The stand-in `pulumi` started anew for every command (baseline) against the same commands
handed to the simulator's fork server (gcpsim/pulumi/zygote.py).

    .venv/bin/python bench/simulated_pulumi.py [--rounds 3]

One round is what a test of a GCP stack makes the CLI do, through the Automation API as the
realizer drives it: a stack created and brought up (bucket, network, subnetwork, firewall,
service account, VM against the in-process GCP simulator), its outputs read, a second `up` that
changes nothing, and `destroy`. Both sides run in this process, alternating, on the same
simulator. CPU-s: user+system of every process the round started (the clients, and for the
served side the server's forked commands, read from its children's times in /proc).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gcpsim.pulumi import zygote  # noqa: E402
from tests.fakes.sim_fixtures import PROJECT, start_sim  # noqa: E402
from tests.fakes.sim_pulumi_gcp_project import GcpProject  # noqa: E402
from cpu_wall import report  # noqa: E402  (bench/, this script's folder)

TICKS = os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def server_cpu(pid: int) -> float:
    """The server's own CPU and that of the commands it forked and reaped (utime..cstime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(value) for value in fields[11:15]) / TICKS


def one_round(root: Path, sim_url: str, prefix: str, server: Path | None) -> None:
    project = GcpProject(root, sim_url, PROJECT, prefix, server)
    stack = project.stack("bench")
    stack.up()
    assert stack.outputs()["bucket_url"].value
    assert stack.up().summary.resource_changes.get("same", 0) > 0
    stack.destroy()


def measure(root: Path, sim_url: str, prefix: str, server: Path | None, server_pid: int | None) -> tuple[float, float]:
    cpu_before = children_cpu() + (server_cpu(server_pid) if server_pid else 0.0)
    started = time.monotonic()
    one_round(root, sim_url, prefix, server)
    wall = time.monotonic() - started
    cpu = children_cpu() + (server_cpu(server_pid) if server_pid else 0.0) - cpu_before
    return cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-pulumi-") as tmp:
        base = Path(tmp)
        sim = start_sim(base / "sim")
        sim.enable("cloudresourcemanager.googleapis.com", "compute.googleapis.com", "storage.googleapis.com",
                   "iam.googleapis.com")
        socket_path = base / zygote.SOCKET_NAME
        server = zygote.start(socket_path)
        results: dict[str, list[tuple[float, float]]] = {"baseline": [], "served": []}
        try:
            one_round(base / "warm", sim.url, "bench-warm", socket_path)  # the server's preload is done
            for index in range(args.rounds):
                results["baseline"].append(measure(base / f"b{index}", sim.url, f"bench-b{index}", None, None))
                results["served"].append(measure(base / f"s{index}", sim.url, f"bench-s{index}", socket_path, server.pid))
        finally:
            zygote.stop(server)
            sim.simulator.stop()
    report(results, "baseline", "served")

if __name__ == "__main__":
    main()
