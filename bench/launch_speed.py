"""Launch → every rank past init_process_group, 4 local nodes: `trainctl launch` vs the same
torchrun command lines started by hand over ssh on each node (median of 3, same process).
Goal: ratio <= 1.2. Run as root: TRAINCTL_HOME=/var/lib/trainctl-bench .venv/bin/python bench/launch_speed.py
"""

from __future__ import annotations

import re
import secrets
import statistics
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bootstrap.plan import BootstrapSpec
from bootstrap.runner import bootstrap
from bootstrap.ssh import openssh_command
from infra.providers.local import realizer
from infra.spec.stack_config import REPO_ROOT, load_stack
from trainctl.launchers.spec import LaunchSpec
from trainctl.launchers.ssh.commands import plan
from trainctl.launchers.ssh.supervisor import launch

NODES = 4
COMMAND = ("python", "-m", "trainers.init_probe")


def by_trainctl(inv, logs: Path) -> float:
    spec = LaunchSpec(run_id=f"b-{secrets.token_hex(3)}", command=COMMAND)
    seen: set[str] = set()
    done_at: list[float] = []
    start = time.perf_counter()

    def echo(line: str) -> None:
        match = re.search(r"INIT_DONE rank=(\d+)", line)
        if match:
            seen.add(match.group(1))
            if len(seen) == NODES:
                done_at.append(time.perf_counter())

    result = launch(inv, spec, logs, echo)
    assert result.ok and done_at, result.describe_failures()
    return done_at[0] - start


def by_hand(inv) -> float:
    spec = LaunchSpec(run_id=f"h-{secrets.token_hex(3)}", command=COMMAND)
    commands = plan(inv, spec)
    start = time.perf_counter()
    stamps: list[float] = []

    def one(node) -> None:
        proc = subprocess.Popen([*openssh_command(inv, node), node.ssh_host, commands[node.name]],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:  # the same moment trainctl sees: the rank's INIT_DONE line
            if "INIT_DONE" in line:
                stamps.append(time.perf_counter())
        assert proc.wait() == 0

    with ThreadPoolExecutor(NODES) as pool:
        list(pool.map(one, inv.nodes))
    assert len(stamps) == NODES
    return max(stamps) - start


def main() -> None:
    realizer.require_root()
    name = "bench-launch"
    logs = Path(tempfile.mkdtemp(prefix="trainctl-bench-"))
    try:
        inv = realizer.up(load_stack("local", name=name, overrides={"nodes": NODES}))
        bootstrap(inv, BootstrapSpec(code_dir=REPO_ROOT, requirements="trainers/requirements.txt"), logs)
        by_hand(inv)  # warm the page cache for torch on every node
        ours = statistics.median(by_trainctl(inv, logs) for _ in range(3))
        hand = statistics.median(by_hand(inv) for _ in range(3))
        print(f"launch → all {NODES} ranks past init_process_group")
        print(f"  trainctl launch      {ours:6.2f} s")
        print(f"  torchrun over ssh    {hand:6.2f} s")
        print(f"  ratio                {ours / hand:6.2f}  (goal <= 1.2: {'met' if ours / hand <= 1.2 else 'MISSED'})")
    finally:
        realizer.down(name, force=True)


if __name__ == "__main__":
    main()
