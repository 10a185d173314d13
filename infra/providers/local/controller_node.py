"""The local realizer of a detached run's controller: a node of its own on this machine.

It is a machine as the stack's nodes are (namespace_nodes/sshd.py): its own network namespace on
a bridge of its own, OpenSSH sshd as PID 1 of its own PID, mount and UTS namespace, private
/root and /tmp, its host key written here and pinned in the inventory this returns. What a GCP
controller VM gets from its service account, the right to create and delete the run's
machines, this one gets as two file descriptors on this machine's network and mount namespaces,
held by a process of the node (HOLDER_PID): `on_target` runs a command through them, so the
controller makes local stacks as `trainctl up` here does, while its processes live and die
with the node (killing its sshd kills them all, as a VM's end does).

Names come from Names(name) as a stack's do (infra/providers/local/layout.py), so `remove` finds
every part by name, also after a crash; it is safe to repeat, and safe to call from the
controller itself: its last act, as a VM that deletes itself.
"""

from __future__ import annotations

import os
import shlex
import signal
import time
import shutil
from pathlib import Path

from infra.providers.inventory import Inventory, Node
from infra.providers.local.layout import Addresses, LocalStackError, Names, pick_subnet
from infra.providers.protocol import Progress
from infra.providers.stack_home import global_lock, trainctl_home
from namespace_nodes import keys, netns, sshd

HOSTNAME = "controller"
HOLDER_PID = "/run/host-namespaces.pid"
# Fds 8 and 9 of the boot chain (sshd.HOST_NAMESPACE_FDS), kept open by a process that does
# nothing else: sshd closes every descriptor above stderr when it starts.
HOLD_HOST_NAMESPACES = f"sleep infinity & echo $! > {HOLDER_PID}"
ANSWER_SECONDS = 20.0
GONE_SECONDS = 5.0  # SIGKILLed processes leave in milliseconds


def controller_dir(name: str) -> Path:
    """The controller's disk and state, beside the stacks' (not a stack: `ls` lists it apart)."""
    return trainctl_home() / "controllers" / name


def names() -> list[str]:
    """Every controller this machine holds (its folder, or what a crash left of it)."""
    base = trainctl_home() / "controllers"
    return sorted(p.name for p in base.iterdir() if p.is_dir()) if base.is_dir() else []


def _ssh_rules(host_ip: str) -> list[list[str]]:
    """SSH from this machine's side of the controller's bridge only, as a VPC firewall rule
    admits the operator's range only."""
    return [["-i", "lo", "-j", "ACCEPT"],
            ["-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"],
            ["-p", "tcp", "-s", f"{host_ip}/32", "--dport", "22", "-j", "ACCEPT"]]


def start(name: str, progress: Progress) -> Inventory:
    """Create the controller and wait for its sshd; returns its one-node inventory."""
    layout, cdir = Names(name), controller_dir(name)
    if cdir.exists():
        raise LocalStackError(f"controller {name} exists already ({cdir})")
    for sub in ("root", "tmp", "work", "keys"):
        (cdir / sub).mkdir(parents=True, exist_ok=True)
    os.chmod(cdir / "root", 0o700)
    os.chmod(cdir / "tmp", 0o1777)
    client_pub = keys.write_ed25519_keypair(cdir / "keys" / "id_ed25519", f"trainctl@{name}")
    (cdir / "keys" / "authorized_keys").write_text(client_pub + "\n")
    os.chmod(cdir / "keys" / "authorized_keys", 0o600)
    host_key = cdir / "ssh_host_ed25519_key"
    host_pub = keys.write_ed25519_keypair(host_key, name)
    with global_lock():  # as a stack's bridge: two picking at once would pick the same /24
        addr = Addresses(pick_subnet(name))
        (cdir / "subnet").write_text(str(addr.subnet))  # intent: what `remove` will find by name
        netns.create_bridge(layout.bridge, addr.cidr(addr.controller))
    ip = addr.node(0)
    netns.create_node_netns(layout.node_netns(0), layout.veth(0), layout.bridge, addr.cidr(ip))
    netns.apply_iptables(layout.node_netns(0), _ssh_rules(addr.controller))
    config = cdir / "sshd_config"
    config.write_text(sshd.sshd_config(ip, host_key, cdir / "keys" / "authorized_keys"))
    script = sshd.node_boot_script(HOSTNAME, cdir / "root", cdir / "tmp", config, cdir / "sshd.log", None,
                                   before_sshd=(HOLD_HOST_NAMESPACES,))
    sshd.start_supervised(layout.node_netns(0), HOSTNAME, script, cdir / "console.log", hold_host_namespaces=True,
                          while_exists=config)
    if not sshd.wait_for_port(ip, 22, ANSWER_SECONDS):
        raise LocalStackError(f"controller {name} not answering on {ip}:22 after {ANSWER_SECONDS:.0f} s "
                              f"(its console: {cdir / 'console.log'})")
    progress(f"controller {name} up at {ip}")
    return _inventory(name, ip, host_pub)


def _inventory(name: str, ip: str, host_pub: str) -> Inventory:
    cdir = controller_dir(name)
    inventory = Inventory(
        stack=name, provider="local", bucket_uri="",  # the controller has no bucket of its own
        nodes=(Node(name=HOSTNAME, rank=0, internal_ip=ip, ssh_host=ip, host_keys=(host_pub.strip(),),
                    workdir=str(cdir / "work")),),
        ssh_private_key=str(cdir / "keys" / "id_ed25519"), known_hosts=str(cdir / "keys" / "known_hosts"),
        on_controller=True)
    Path(inventory.known_hosts).write_text("\n".join(inventory.known_hosts_lines()) + "\n")
    os.chmod(inventory.known_hosts, 0o600)
    inventory.write(cdir / "inventory.json")
    return inventory


def inventory(name: str) -> Inventory | None:
    """The controller's inventory, None where it was never finished or is gone."""
    path = controller_dir(name) / "inventory.json"
    return Inventory.read(path) if path.exists() else None


def exists(name: str) -> bool:
    """Whether the controller's machine is there (its sshd's namespace has processes)."""
    return bool(netns.guest_pids(Names(name).node_netns(0)))


def on_target(command: str, cwd: str) -> str:
    """The shell line that runs `command` on the controller with the target's API: here, this
    machine's network and mount namespaces, in the controller's PID and UTS namespaces still.
    The mount namespace is a copy of this machine's with a /proc of the controller's own, so the
    process numbers it reads are those it can signal; the copy keeps the propagation of
    /run/netns (shared), so the namespaces it names appear on this machine as `ip netns` makes
    them here."""
    fds = f"/proc/$(cat {HOLDER_PID})/fd"
    # `cd` once inside: nsenter's --wd opens its folder before it enters the mount namespace,
    # where this machine's /tmp and /root are the controller's private ones (a checkout or a
    # run folder there was "No such file or directory")
    inner = f'mount -t proc proc /proc && cd {shlex.quote(cwd)} && exec /bin/sh -c "$0"'
    return (f"nsenter --net={fds}/8 --mount={fds}/9 -- "
            f"unshare --mount --propagation unchanged /bin/sh -c {shlex.quote(inner)} {shlex.quote(command)}")


def remove(name: str, progress: Progress) -> bool:
    """Remove the controller; True if anything of it existed. Its folder goes first (the loop
    that boots it boots it again only while its sshd_config exists), its machine last: from the
    controller itself, which sees its own PID namespace only, ending PID 1 ends the caller."""
    layout, cdir = Names(name), controller_dir(name)
    ns = layout.node_netns(0)
    existed = cdir.exists() or netns.netns_exists(ns) or netns.link_exists(layout.bridge)
    shutil.rmtree(cdir, ignore_errors=True)  # a few files: no environments live on it
    netns.delete_link(layout.veth(0))
    netns.delete_link(layout.bridge)
    pids = netns.netns_pids(ns)
    if netns.netns_exists(ns):
        netns.run(["ip", "netns", "del", ns], check=False)  # the name; the namespace goes with its processes
    if existed:
        progress(f"controller {name} removed")
    for pid in sorted(pids, key=lambda p: p == 1):
        # PID 1 is the controller's own sshd, seen from inside, where SIGKILL to it is ignored
        # (pid_namespaces(7)); SIGTERM, which sshd handles, ends it and its PID namespace.
        _kill(pid, signal.SIGTERM if pid == 1 else signal.SIGKILL)
    deadline = time.monotonic() + GONE_SECONDS  # from outside: returns once they are gone
    while any(os.path.exists(f"/proc/{pid}") for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.01)
    return existed


def _kill(pid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass

