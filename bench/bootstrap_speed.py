"""`trainctl bootstrap` as a user types it, against the floor: the same work by the plainest
means, in the same run, on the same real local nodes (network namespaces with their own sshd).

The work (issue 18): a 2,000-file tree (0.5-3 KB files in 40 packages) and one setup command.
  floor     per node, all nodes at once: one `rsync -a` of the tree and one `ssh node <setup>`,
            host keys pinned, nothing else
  trainctl  `trainctl bootstrap --stack S --nodes ... --code TREE --setup CMD` (a fresh process)
Scenarios: first (empty nodes), nothing changed, one file changed; N = 1, 4, 8; median of 5,
floor and trainctl alternating so that machine noise hits both alike.
Run as root: TRAINCTL_HOME=/var/lib/trainctl-bench .venv/bin/python bench/bootstrap_speed.py
"""

from __future__ import annotations

import os
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bootstrap.plan import node_paths
from bootstrap.ssh import join, openssh_command
from bootstrap.synced_nodes import SyncedNodes
from infra.providers.inventory import Inventory, Node
from infra.providers.local import realizer
from infra.spec.stack_config import load_stack

SETUP = "python3 -c 'import sys; print(sys.version)'"
SIZES = (1, 4, 8)
SAMPLES = 5
STACK = "bench-boot"
GOALS = {"first": 1.1, "nothing changed": 1.0, "one file changed": 1.1}


def make_tree(root: Path, files: int = 2000) -> None:
    rnd = random.Random(7)
    for i in range(files):
        d = root / f"pkg{i % 40}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"mod{i}.py").write_text(f"VALUE = {i}\n" + "#" * rnd.randint(500, 3000) + "\n")


def wipe(nodes: list[Node]) -> None:
    """Nodes as `up` leaves them: empty, and never synced by this controller."""
    for node in nodes:
        shutil.rmtree(node.workdir, ignore_errors=True)
        os.makedirs(node.workdir)
    SyncedNodes(STACK).forget([n.name for n in nodes])
    settle()


def settle() -> None:
    """Write back what the last sample left dirty: otherwise the kernel's flush of one sample's
    2,000 files lands in the middle of the next one, whichever it is."""
    os.sync()


def floor(inv: Inventory, nodes: list[Node], src: Path) -> None:
    def one(node: Node) -> None:
        ssh = openssh_command(inv, node)
        code = node_paths(node)["code"]
        subprocess.run(["rsync", "-a", "-e", join(ssh), f"{src}/", f"{node.ssh_host}:{code}/"], check=True)
        subprocess.run([*ssh, node.ssh_host, f"cd {shlex.quote(code)} && {SETUP}"], check=True,
                       stdout=subprocess.DEVNULL)

    with ThreadPoolExecutor(len(nodes)) as pool:
        list(pool.map(one, nodes))


def trainctl(nodes: list[Node], src: Path, cwd: Path) -> None:
    subprocess.run([str(Path(sys.executable).parent / "trainctl"), "bootstrap", "--stack", STACK,
                    "--nodes", ",".join(n.name for n in nodes), "--code", str(src), "--setup", SETUP],
                   cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def paired(a, b, prepare) -> tuple[float, float]:
    """Median seconds of a and of b, run alternately, each after prepare()."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(SAMPLES):
        for i, fn in enumerate((a, b)):
            prepare()
            start = time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def main() -> None:
    realizer.require_root()
    work = Path(tempfile.mkdtemp(prefix="trainctl-bench-"))
    src = work / "code"
    make_tree(src)
    edited = src / "pkg7" / "mod7.py"

    def edit_one() -> None:
        edited.write_text(edited.read_text() + "# edit\n")

    results: dict[tuple[str, int], tuple[float, float]] = {}
    try:
        inv = realizer.up(load_stack("local", name=STACK, overrides={"nodes": max(SIZES)}))
        trainctl(inv.nodes, src, work)  # warm: handshakes, page cache, the uv cache
        for n in SIZES:
            nodes = inv.nodes[:n]
            bench_floor = lambda: floor(inv, nodes, src)  # noqa: E731
            bench_ours = lambda: trainctl(nodes, src, work)  # noqa: E731
            results["first", n] = paired(bench_floor, bench_ours, lambda: wipe(nodes))
            results["nothing changed", n] = paired(bench_floor, bench_ours, settle)
            results["one file changed", n] = paired(bench_floor, bench_ours, lambda: (edit_one(), settle()))
    finally:
        realizer.down(STACK, force=True)
        shutil.rmtree(work, ignore_errors=True)

    print(f"{'scenario':<18}{'N':>3}{'floor s':>9}{'trainctl s':>11}{'ratio':>7}  goal")
    for (scenario, n), (base, ours) in results.items():
        goal = GOALS[scenario]
        print(f"{scenario:<18}{n:>3}{base:>9.2f}{ours:>11.2f}{ours / base:>7.2f}  "
              f"<= {goal}: {'met' if ours / base <= goal else 'MISSED'}")
    for who, index in (("floor", 0), ("trainctl", 1)):
        ratio = results["first", 8][index] / results["first", 1][index]
        print(f"first bootstrap, 8 nodes / 1 node, {who}: {ratio:.2f}")


if __name__ == "__main__":
    main()
