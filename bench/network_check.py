"""The network pre-flight's bus bandwidth between 2 real local nodes, against the catalog's
expectation for the local family and against a plain TCP stream between the same two nodes, both
measured in this one run; then the catalog's figures for the GPU families, which no machine here
can measure.

  pre-flight   trainctl/jobs/network_check.measure: the same all-reduce job the pre-flight runs
               (torchrun through the SSH launcher, gloo on CPU, 32 MiB x 5 after one warm-up),
               median of 3; busbw = bytes x 2(n-1)/n / time per all-reduce
  expectation  infra/spec/catalog.py EXPECTED_BUSBW_GBPS for the stack's machine type (local
               nodes: the figure measured on veths, rounded down); the run is refused below 0.5
  baseline     one TCP stream node1 -> node0, 256 MiB through the same bridge (stdlib sockets),
               median of 3, alternating with the all-reduces: what the link gives a plain copy
Run as root: TRAINCTL_HOME=/var/lib/trainctl-bench .venv/bin/python bench/network_check.py
"""

from __future__ import annotations

import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bootstrap.plan import BootstrapSpec  # noqa: E402
from bootstrap.runner import bootstrap  # noqa: E402
from bootstrap.ssh import openssh_command  # noqa: E402
from infra.providers import realizers  # noqa: E402
from infra.providers.inventory import Inventory, Node  # noqa: E402
from infra.spec import catalog, gpu_networks  # noqa: E402
from infra.spec.stack_config import load_stack  # noqa: E402
from trainctl.jobs.network_check import check_spec, measure  # noqa: E402
from trainctl.launchers.registry import launcher_for_cluster  # noqa: E402

STACK = "bench-net"
REPO = Path(__file__).resolve().parent.parent
STREAM_MB = 256
PORT = 29611
RECEIVE = (f"import socket,time; s=socket.create_server(('{{ip}}',{PORT})); c,_=s.accept(); n=0; t=time.perf_counter()\n"
           "while (b:=c.recv(1<<20)): n+=len(b)\n"
           "print(n/(time.perf_counter()-t)/1e9)")
SEND = (f"import socket,time\nfor _ in range(100):\n    try: c=socket.create_connection(('{{ip}}',{PORT})); break\n"
        f"    except OSError: time.sleep(0.05)\nb=bytes(1<<20)\nfor _ in range({STREAM_MB}): c.sendall(b)\nc.close()")


def _ssh(inventory: Inventory, node: Node, program: str) -> str:
    remote = f"python3 -c {shlex.quote(program)}"
    done = subprocess.run([*openssh_command(inventory, node), node.ssh_host, remote], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def tcp_stream(inventory: Inventory) -> float:
    """GB/s of one TCP stream from node1 to node0."""
    receiver, sender = inventory.nodes[0], inventory.nodes[1]
    with ThreadPoolExecutor(2) as pool:
        got = pool.submit(_ssh, inventory, receiver, RECEIVE.format(ip=receiver.internal_ip))
        time.sleep(0.5)  # the receiver listening first
        pool.submit(_ssh, inventory, sender, SEND.format(ip=receiver.internal_ip)).result()
        return float(got.result().strip())


def catalog_lines() -> list[str]:
    lines = []
    for machine, family in sorted(gpu_networks.GPUDIRECT.items()):
        expected = catalog.expected_busbw_gbps(machine)
        lines.append(f"  {machine:16} {family.transport:24} GPU NICs {family.gpu_nics} x {family.gpu_nic_type}, line rate "
                     f"{family.line_rate_gbps} Gbit/s = {family.line_rate_gbps / 8:.0f} GB/s; expected busbw "
                     + (f"{expected} GB/s" if expected is not None else "none in the catalog (measured and said, not held)"))
    return lines


def main() -> None:
    spec = load_stack("local", name=STACK, overrides={"nodes": 2})
    realizer = realizers.for_spec(spec)
    inventory = realizer.up(spec)
    try:
        with tempfile.TemporaryDirectory() as logs:
            bootstrap(inventory, BootstrapSpec(code_dir=REPO / "trainers", requirements="requirements.txt"),
                      Path(logs) / "bootstrap")
            expected = catalog.expected_busbw_gbps(spec.node_machine_type)
            assert expected is not None
            launcher = launcher_for_cluster(spec)
            figures, streams = [], []
            for i in range(3):  # alternating, so neither side has the warmer machine
                streams.append(tcp_stream(inventory))
                figures.append(measure(launcher, spec, inventory, check_spec(f"bench-{i}", 32, 5),
                                       Path(logs) / f"check-{i}", expected))
        busbw, stream = statistics.median(f.gbps for f in figures), statistics.median(streams)
        print(f"pre-flight all-reduce, 2 local nodes over {figures[0].transport}: median {busbw:.3f} GB/s of "
              + ", ".join(f"{f.gbps:.3f}" for f in figures))
        print(f"one TCP stream between the same nodes: median {stream:.3f} GB/s of " + ", ".join(f"{s:.3f}" for s in streams))
        print(f"catalog expectation for local nodes: {expected:.3f} GB/s (refused below {0.5 * expected:.3f})")
        print(f"busbw / expectation:  {busbw / expected:.2f}")
        print(f"busbw / TCP stream:   {busbw / stream:.2f}")
        print("GPU families (catalog values, not measured here):")
        print("\n".join(catalog_lines()))
    finally:
        realizer.down(STACK, force=True)


if __name__ == "__main__":
    main()
