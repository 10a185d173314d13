"""`trainctl bootstrap` as a user types it, against the floor: the same work by the plainest
means, in the same run, on the same real local nodes (network namespaces with their own sshd).

The work (issue 18): a 2,000-file tree (0.5-3 KB files in 40 packages) and one setup command.
  floor     per node, all nodes at once: one `rsync -a` of the tree and one `ssh node <setup>`,
            host keys pinned, nothing else
  trainctl  `trainctl bootstrap --stack S --nodes ... --code TREE --setup CMD` (a fresh process)
Scenarios: first (empty nodes), nothing changed, one file changed; N = 1, 8, 16; median of 3,
floor and trainctl alternating so that machine noise hits both alike; the ratio to the floor is
printed per scenario and N (issue 45's goal: first bootstrap <= 1.1x at N=1, 8 and 16).
Run as root: TRAINCTL_HOME=/var/lib/trainctl-bench .venv/bin/python bench/bootstrap_speed.py
  [--sizes 1,8,16] [--samples 3] [--scenarios first,nothing,one]
"""

from __future__ import annotations

import argparse
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
SIZES = (1, 8, 16)
SAMPLES = 3
SCENARIOS = {"first": "first", "nothing": "nothing changed", "one": "one file changed"}
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


def paired(a, b, prepare, samples: int) -> tuple[float, float]:
    """Median seconds of a and of b, run alternately, each after prepare(); the order turns each
    sample (a b, b a, ...): on this machine the later of two runs in a row was measured ~10%
    slower, whichever it was."""
    times: tuple[list[float], list[float]] = ([], [])
    for sample in range(samples):
        for i, fn in (((0, a), (1, b)) if sample % 2 == 0 else ((1, b), (0, a))):
            prepare()
            start = time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="node counts (default %(default)s)")
    parser.add_argument("--samples", type=int, default=SAMPLES, help="repetitions of each side (median)")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="of " + ",".join(SCENARIOS))
    args = parser.parse_args()
    args.sizes = [int(n) for n in args.sizes.split(",")]
    args.scenarios = [SCENARIOS[s] for s in args.scenarios.split(",")]
    return args


def main() -> None:
    args = arguments()
    realizer.require_root()
    work = Path(tempfile.mkdtemp(prefix="trainctl-bench-"))
    src = work / "code"
    make_tree(src)
    edited = src / "pkg7" / "mod7.py"

    def edit_one() -> None:
        edited.write_text(edited.read_text() + "# edit\n")

    results: dict[tuple[str, int], tuple[float, float]] = {}
    try:
        inv = realizer.up(load_stack("local", name=STACK, overrides={"nodes": max(args.sizes)}))
        trainctl(inv.nodes, src, work)  # warm: handshakes, page cache, the uv cache
        for n in args.sizes:
            nodes = inv.nodes[:n]
            bench_floor = lambda: floor(inv, nodes, src)  # noqa: E731
            bench_ours = lambda: trainctl(nodes, src, work)  # noqa: E731
            prepare = {"first": lambda: wipe(nodes), "nothing changed": settle,
                       "one file changed": lambda: (edit_one(), settle())}
            for scenario in args.scenarios:
                if scenario != "first" and ("first", n) not in results:
                    trainctl(nodes, src, work)  # the nodes hold the tree these scenarios start from
                results[scenario, n] = paired(bench_floor, bench_ours, prepare[scenario], args.samples)
                print(f"{scenario:<18}{n:>3}  floor {results[scenario, n][0]:.2f} s  trainctl "
                      f"{results[scenario, n][1]:.2f} s", file=sys.stderr, flush=True)
    finally:
        realizer.down(STACK, force=True)
        shutil.rmtree(work, ignore_errors=True)

    print(f"{'scenario':<18}{'N':>3}{'floor s':>9}{'trainctl s':>11}{'ratio':>7}  goal")
    for (scenario, n), (base, ours) in results.items():
        goal = GOALS[scenario]
        print(f"{scenario:<18}{n:>3}{base:>9.2f}{ours:>11.2f}{ours / base:>7.2f}  "
              f"<= {goal}: {'met' if ours / base <= goal else 'MISSED'}")
    big, small = max(args.sizes), min(args.sizes)
    if ("first", big) in results and big != small:
        for who, index in (("floor", 0), ("trainctl", 1)):
            ratio = results["first", big][index] / results["first", small][index]
            print(f"first bootstrap, {big} nodes / {small} node(s), {who}: {ratio:.2f}")


if __name__ == "__main__":
    main()
