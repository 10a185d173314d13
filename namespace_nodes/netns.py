"""Linux network plumbing for local nodes: bridge, namespaces, veths, iptables.

Thin wrappers over iproute2/iptables (there is no maintained Python library that drives network
namespaces without reimplementing netlink; pyroute2 would be one more moving part for ~10 calls).
Every delete is idempotent: removing what is already gone is success.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path



class CommandFailed(RuntimeError):
    """A namespace, link or firewall command failed. The machinery is below both its users (the
    local stack and gcpsim), so it has no place in trainctl's error hierarchy: trainctl's CLI
    reports it as a provisioning failure (exit 3)."""


def run(args: list[str], *, check: bool = True, netns: str | None = None,
        input: str | None = None) -> subprocess.CompletedProcess[str]:
    if netns:
        args = ["ip", "netns", "exec", netns, *args]
    proc = subprocess.run(args, capture_output=True, text=True, input=input)
    if check and proc.returncode != 0:
        raise CommandFailed(f"{' '.join(args)} failed ({proc.returncode}): "
                                f"{(proc.stderr or proc.stdout).strip()}")
    return proc


def link_exists(name: str) -> bool:
    return os.path.exists(f"/sys/class/net/{name}")


def netns_exists(name: str) -> bool:
    return os.path.exists(f"/run/netns/{name}")


def list_netns() -> list[str]:
    try:
        return sorted(os.listdir("/run/netns"))
    except FileNotFoundError:
        return []


def create_bridge(name: str, address_cidr: str) -> None:
    run(["ip", "link", "add", name, "type", "bridge"])
    run(["ip", "addr", "add", address_cidr, "dev", name])
    run(["ip", "link", "set", name, "up"])


def delete_link(name: str) -> None:
    if link_exists(name):
        run(["ip", "link", "del", name], check=False)


def create_node_netns(ns: str, veth_host: str, bridge: str, address_cidr: str,
                      ifname: str = "eth0") -> None:
    run(["ip", "netns", "add", ns])
    peer = veth_host + "p"
    run(["ip", "link", "add", veth_host, "type", "veth", "peer", "name", peer])
    run(["ip", "link", "set", peer, "netns", ns])
    run(["ip", "link", "set", veth_host, "master", bridge])
    run(["ip", "link", "set", veth_host, "up"])
    run(["ip", "link", "set", peer, "name", ifname], netns=ns)
    run(["ip", "addr", "add", address_cidr, "dev", ifname], netns=ns)
    run(["ip", "link", "set", ifname, "up"], netns=ns)
    run(["ip", "link", "set", "lo", "up"], netns=ns)


def netns_pids(ns: str) -> list[int]:
    """The processes in a named namespace, found as `ip netns pids` finds them (the inode of
    each process's /proc/PID/ns/net), without a process of its own: teardown asks this until
    the namespace is empty."""
    try:
        target = os.stat(f"/run/netns/{ns}")
    except FileNotFoundError:
        return []
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                st = os.stat(f"/proc/{entry.name}/ns/net")
            except OSError:  # gone meanwhile, or a kernel thread
                continue
            if (st.st_ino, st.st_dev) == (target.st_ino, target.st_dev):
                found.append(int(entry.name))
    return found


def guest_pids(ns: str) -> dict[int, int]:
    """The node's own processes (host pid -> pid inside the node): those of the namespace that
    live in the node's PID namespace, not the supervisor that boots it."""
    found = {}
    for pid in netns_pids(ns):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("NSpid:") and len(line.split()) == 3:
                found[pid] = int(line.split()[2])
    return found


def kill_netns_processes(ns: str, timeout: float = 5.0) -> None:
    """SIGKILL everything living in the namespace and wait until it is gone."""
    deadline = time.monotonic() + timeout
    while True:
        pids = netns_pids(ns)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if time.monotonic() > deadline:
            raise CommandFailed(f"processes {pids} in namespace {ns} survived SIGKILL")
        time.sleep(0.005)


def terminate_workload(ns: str) -> list[int]:
    """What an ACPI shutdown does to a node's programs: SIGTERM to each of its processes but
    PID 1 (sshd, which keeps the node up until it is stopped). Returns the host pids signalled."""
    workload = [pid for pid, inner in guest_pids(ns).items() if inner != 1]
    for pid in workload:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    return workload


def delete_netns(ns: str) -> None:
    kill_netns_processes(ns)
    if netns_exists(ns):
        run(["ip", "netns", "del", ns], check=False)


def apply_iptables(ns: str, rules: list[list[str]]) -> None:
    """Load an INPUT policy into a namespace atomically (iptables-restore)."""
    lines = ["*filter", ":INPUT DROP [0:0]", ":FORWARD DROP [0:0]", ":OUTPUT ACCEPT [0:0]"]
    lines += [" ".join(["-A", "INPUT", *rule]) for rule in rules]
    lines.append("COMMIT")
    run(["iptables-restore"], netns=ns, input="\n".join(lines) + "\n")


def host_forward_rule(bridge: str) -> list[str]:
    # Hosts whose FORWARD policy is DROP (Docker sets it) would otherwise drop bridged traffic
    # between nodes when br_netfilter is loaded.
    return ["FORWARD", "-i", bridge, "-o", bridge, "-j", "ACCEPT"]


def add_host_rule(rule: list[str]) -> None:
    if run(["iptables", "-C", *rule], check=False).returncode != 0:
        run(["iptables", "-I", *rule])


def delete_host_rule(rule: list[str]) -> None:
    while run(["iptables", "-D", *rule], check=False).returncode == 0:
        pass  # until no copy is left


def used_ipv4_networks() -> list[str]:
    out = run(["ip", "-4", "-o", "addr", "show"], check=False).stdout
    return [line.split()[3] for line in out.splitlines() if len(line.split()) > 3]
