"""Booting simulated GCE machines (the GCP simulator's real backend) against the floor: bare
local-stack nodes (a namespace on a bridge, sshd as PID 1 of its own namespaces) booted in the
same run, on the same machine.

  floor      N namespaces + veths on a bridge, each booting sshd with a key for root; done when
             every node accepts an SSH login (host key pinned)
  simulated  NodeMachines.boot() of N machines on one new VPC network (edge namespace, metadata
             server, NAT, firewall, guest agent creating the metadata's user, startup script);
             done when every machine accepts the metadata user's login over its external
             address, with the host key read from its guest attributes
Also shown: how long the boot() calls themselves took (the API holds the world's lock over
them) and when the last host key was published. Median of SAMPLES, alternating.
Run as root, under the e2e lock:
  flock /tmp/trainctl-e2e.lock .venv/bin/python bench/sim_machines_boot.py
"""

from __future__ import annotations

import base64
import shutil
import statistics
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import paramiko

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.fakes
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # for conftest, which they import

from namespace_nodes import keys  # noqa: E402
from namespace_nodes import netns, sshd  # noqa: E402
from tests.fakes.sim_machines_fixtures import SimMachines  # noqa: E402
from gcpsim import nodes  # noqa: E402

SIZES = (1, 8)
SAMPLES = 3
BENCH_HOMES = Path("/var/lib/trainctl-bench")


def login(host: str, user: str, key: Path, pinned: list[str], timeout: float = 30.0) -> None:
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    for line in pinned:
        kind, value = line.split()[:2]
        client.get_host_keys().add(host, kind, paramiko.PKey.from_type_string(kind, base64.b64decode(value)))
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.connect(host, username=user, key_filename=str(key), timeout=2, allow_agent=False,
                           look_for_keys=False)
            client.close()
            return
        except (OSError, paramiko.SSHException):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def floor(n: int, home: Path) -> float:
    """Bare nodes: what booting a namespace with its own sshd costs at least."""
    bridge = f"tcsbench{uuid.uuid4().hex[:4]}"
    key = home / "client"
    public = keys.write_ed25519_keypair(key, "bench")
    (home / "authorized_keys").write_text(public + "\n")
    start = time.monotonic()
    try:
        netns.create_bridge(bridge, "10.217.0.1/24")
        pinned = []
        for i in range(n):
            ndir = home / f"n{i}"
            for sub in ("root", "tmp"):
                (ndir / sub).mkdir(parents=True)
            host_key = ndir / "host_key"
            pinned.append(keys.write_ed25519_keypair(host_key, "n"))
            config = ndir / "sshd_config"
            config.write_text(sshd.sshd_config(f"10.217.0.{10 + i}", host_key, home / "authorized_keys"))
            netns.create_node_netns(f"tcsbench-{bridge}-{i}", f"{bridge}{i}", bridge, f"10.217.0.{10 + i}/24")
            script = "; ".join(["set -e", "mount -t tmpfs tmpfs /run", "mkdir -p /run/sshd",
                                f"mount --bind {ndir / 'root'} /root", f"mount --bind {ndir / 'tmp'} /tmp",
                                f"exec {sshd.SSHD} -D -f {config} -E {ndir / 'sshd.log'}"])
            sshd.start_supervised(f"tcsbench-{bridge}-{i}", f"n{i}", script, ndir / "console.log")
        with ThreadPoolExecutor(n) as pool:
            list(pool.map(lambda i: login(f"10.217.0.{10 + i}", "root", key, [pinned[i]]), range(n)))
        return time.monotonic() - start
    finally:
        for i in range(n):
            netns.delete_netns(f"tcsbench-{bridge}-{i}")
            netns.delete_link(f"{bridge}{i}")
        netns.delete_link(bridge)


def simulated(n: int, home: Path) -> tuple[float, float, float]:
    """(boot() calls, last host key published, all logged in), seconds from the first call."""
    key = home / "client"
    backend = nodes.NodeMachines(home)
    sim = SimMachines(home, backend, key, keys.write_ed25519_keypair(key, "bench"), backend.external_range())
    machines = [sim.machine(f"vm{i}") for i in range(n)]
    start = time.monotonic()
    try:
        sim.boot(*machines)
        booted = time.monotonic() - start
        published = [sim.host_keys(m) for m in machines]
        keyed = time.monotonic() - start
        with ThreadPoolExecutor(n) as pool:
            list(pool.map(lambda mk: login(mk[0].external_ip, "trainctl", key,
                                           [f"{i['key']} {i['value']}" for i in mk[1]]), zip(machines, published)))
        return booted, keyed, time.monotonic() - start
    finally:
        nodes.cleanup_all(home)


def main() -> None:
    print(f"{'N':>3} {'floor':>8} {'simulated':>10} {'ratio':>6} {'boot() calls':>13} {'host keys':>10}")
    for n in SIZES:
        floors, sims = [], []
        for _ in range(SAMPLES):
            for kind in ("floor", "sim"):
                home = BENCH_HOMES / uuid.uuid4().hex[:10]
                home.mkdir(parents=True)
                try:
                    if kind == "floor":
                        floors.append(floor(n, home))
                    else:
                        sims.append(simulated(n, home))
                finally:
                    shutil.rmtree(home, ignore_errors=True)
        f = statistics.median(floors)
        b, k, s = (statistics.median(x[i] for x in sims) for i in range(3))
        print(f"{n:>3} {f:>7.2f}s {s:>9.2f}s {s / f:>5.1f}x {b:>12.2f}s {k:>9.2f}s", flush=True)


if __name__ == "__main__":
    main()
