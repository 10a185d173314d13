"""Simulated VPC networks on this machine: one bridge and one edge namespace per network.

    root namespace                      edge namespace (one per VPC network)        machines
    ───────────────                     ─────────────────────────────────────        ────────
    tcsim-svc  10.215.0.1 (SERVICE_IP)  lo      169.254.169.254 (metadata server)
    tcsv<h><n> 10.214.x.2k/31 ───veth── uplink  10.214.x.2k+1/31, default route    eth0 10.128.0.2/20
      routes: <external>/32 via uplink  br0     10.128.0.1/20 (the gateway) ──veth── eth0 10.128.0.3/20

The edge owns the subnetworks' gateway addresses, serves the GCE metadata server to its
machines, and is the 1:1 NAT of their external addresses (DNAT inbound, SNAT outbound).
Internal ranges are never routed in the root namespace, so two networks may both use
10.128.0.0/20. Traffic from the controller arrives for an external address and is seen by the
machines as coming from the project's caller_ip (a user's public address, which the network's
firewall rules must admit). Machines reach nothing off their network but SERVICE_IP, where the
simulator's own endpoint answers; root iptables chains keep SERVICE_IP unreachable from
anything but the simulated networks, and the simulated networks from everything else.

Names: a home's namespaces start "tcs-<home>-", its root links "tcsv<home>" (the local stack
uses tc-/tcb/tcv); every other interface lives inside a namespace of ours. Each home's external
addresses come from a range of its own (external_ranges.py), so its /32 routes are its own. The
address, service link, chains and pool routes in the root namespace are shared by every
simulator home on the machine: they are made under a host-wide lock and removed by the last
home that uses them (`service_users`: a network, or a simulator serving at SERVICE_IP).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import psutil

from gcpsim.external_ranges import EXTERNAL_POOL  # one /24 per home
from namespace_nodes import metadata, netns
from namespace_nodes.netns import run

SERVICE_IP = "10.215.0.1"
SERVICE_LINK = "tcsim-svc"
LINK_POOL = ipaddress.IPv4Network("10.214.0.0/16")  # one /31 per network: root side, edge side
CHAINS = {"INPUT": "TCSIM-INPUT", "FORWARD": "TCSIM-FORWARD"}
UPLINK, BRIDGE = "uplink", "br0"
ADMIN_PORT = metadata.ADMIN_PORT
HOST_LOCK = Path("/run/lock/trainctl-sim-net.lock")
ALL_NETWORK_LINKS = "tcsv"  # every home's network links start so (the chains match "tcsv+")


@dataclass(frozen=True)
class Names:
    """What one simulator home calls its things on this machine."""
    home: Path

    @property
    def tag(self) -> str:
        return hashlib.sha1(str(self.home.resolve()).encode()).hexdigest()[:5]

    @property
    def netns_prefix(self) -> str:
        return f"tcs-{self.tag}-"

    @property
    def link_prefix(self) -> str:
        return f"{ALL_NETWORK_LINKS}{self.tag}"

    def edge(self, network: str) -> str:
        return f"{self.netns_prefix}net.{network.replace('/', '.')}"

    def uplink(self, network: str) -> str:  # 15 characters, IFNAMSIZ's limit
        return f"{self.link_prefix}{hashlib.sha1(network.encode()).hexdigest()[:6]}"

    def machine(self, key: str) -> str:
        return f"{self.netns_prefix}vm.{key.replace('/', '.')}"


@dataclass(frozen=True)
class Link:
    """The point-to-point link between the root namespace and one edge."""
    net: str  # a /31 of LINK_POOL

    @property
    def root_ip(self) -> str:
        return str(ipaddress.IPv4Network(self.net).network_address)

    @property
    def edge_ip(self) -> str:
        return str(ipaddress.IPv4Network(self.net).network_address + 1)

    @property
    def admin_url(self) -> str:
        return f"http://{self.edge_ip}:{ADMIN_PORT}"


def gateway(cidr: str) -> str:
    return str(ipaddress.IPv4Network(cidr, strict=False).network_address + 1)


def with_prefix(ip: str, cidr: str) -> str:
    return f"{ip}/{ipaddress.IPv4Network(cidr, strict=False).prefixlen}"


@contextlib.contextmanager
def host_lock() -> Iterator[None]:
    """Serialises what homes share: the service address, the chains, the link pool."""
    HOST_LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(HOST_LOCK, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def free_link() -> Link:
    """A /31 of LINK_POOL no interface of this machine uses (call under host_lock)."""
    used = {ipaddress.IPv4Interface(a).ip for a in netns.used_ipv4_networks()}
    for net in LINK_POOL.subnets(new_prefix=31):
        if net.network_address not in used and net.network_address + 1 not in used:
            return Link(str(net))
    raise netns.CommandFailed(f"no free /31 left in {LINK_POOL} for another simulated network")


# -- what every simulated network needs in the root namespace -------------------------------


def root_rules() -> dict[str, list[list[str]]]:
    svc = f"{SERVICE_IP}/32"
    nets = f"{ALL_NETWORK_LINKS}+"
    return {
        "INPUT": [["-i", nets, "-d", svc, "-p", "tcp", "-j", "ACCEPT"],
                  ["-i", nets, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"],
                  ["-i", nets, "-j", "DROP"],
                  ["-d", svc, "!", "-i", "lo", "-j", "DROP"]],
        "FORWARD": [["-i", nets, "-j", "DROP"], ["-o", nets, "-j", "DROP"]],
    }


def ensure_service() -> None:
    """The service address and the root chains, if not there yet (call under host_lock)."""
    if not netns.link_exists(SERVICE_LINK):
        # A bridge without ports: a named interface that only holds the address (kernels
        # without the dummy driver, like this machine's, have bridges, which networks need).
        run(["ip", "link", "add", SERVICE_LINK, "type", "bridge"])
        run(["ip", "addr", "add", f"{SERVICE_IP}/32", "dev", SERVICE_LINK])
        run(["ip", "link", "set", SERVICE_LINK, "up"])
    # Addresses of the pools that no network holds (a stopped VM's, one never allocated) must
    # not leave through this host's default route: they are unreachable, at once.
    for pool in (EXTERNAL_POOL, LINK_POOL):
        run(["ip", "route", "replace", "unreachable", str(pool)])
    for hook, chain in CHAINS.items():
        if run(["iptables", "-n", "-L", chain], check=False).returncode != 0:
            run(["iptables", "-N", chain])
            for rule in root_rules()[hook]:
                run(["iptables", "-A", chain, *rule])
        netns.add_host_rule([hook, "-j", chain])


def service_users() -> list[str]:
    """What still needs the shared root pieces, of any home: its networks' links and the
    simulators listening at SERVICE_IP (a daemon waiting for its world's first network)."""
    users = [f"link {link}" for link in os.listdir("/sys/class/net") if link.startswith(ALL_NETWORK_LINKS)]
    users += [f"listener {c.laddr.ip}:{c.laddr.port} (pid {c.pid})" for c in psutil.net_connections("tcp4")
              if c.status == psutil.CONN_LISTEN and c.laddr.ip == SERVICE_IP]
    return users


def remove_service_if_unused() -> bool:
    """Remove the shared root pieces once no home uses them (call under host_lock). Returns
    whether they are gone."""
    if service_users():
        return False
    for hook, chain in CHAINS.items():
        netns.delete_host_rule([hook, "-j", chain])
        run(["iptables", "-F", chain], check=False)
        run(["iptables", "-X", chain], check=False)
    for pool in (EXTERNAL_POOL, LINK_POOL):
        run(["ip", "route", "del", "unreachable", str(pool)], check=False)
    netns.delete_link(SERVICE_LINK)
    return True


# -- one network ----------------------------------------------------------------------------


def create_edge(edge: str, uplink: str, link: Link) -> None:
    run(["ip", "netns", "add", edge])
    run(["ip", "-n", edge, "link", "set", "lo", "up"])
    run(["ip", "-n", edge, "addr", "add", f"{metadata.METADATA_IP}/32", "dev", "lo"])
    run(["ip", "-n", edge, "link", "add", BRIDGE, "type", "bridge"])
    run(["ip", "-n", edge, "link", "set", BRIDGE, "up"])
    run(["ip", "link", "add", uplink, "type", "veth", "peer", "name", UPLINK, "netns", edge])
    run(["ip", "addr", "add", f"{link.root_ip}/31", "dev", uplink])
    run(["ip", "link", "set", uplink, "up"])
    run(["ip", "-n", edge, "addr", "add", f"{link.edge_ip}/31", "dev", UPLINK])
    run(["ip", "-n", edge, "link", "set", UPLINK, "up"])
    run(["ip", "-n", edge, "route", "add", "default", "via", link.root_ip])
    run(["sysctl", "-qw", "net.ipv4.ip_forward=1"], netns=edge)
    # Frames between machines on the bridge are the machines' firewalls' business, not the
    # edge's (with br_netfilter loaded they would otherwise cross the edge's FORWARD chain).
    run(["sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=0"], netns=edge, check=False)


def add_gateway(edge: str, cidr: str) -> None:
    address = with_prefix(gateway(cidr), cidr)
    shown = run(["ip", "-n", edge, "-4", "-o", "addr", "show", "dev", BRIDGE]).stdout
    if f" {address} " not in shown:
        run(["ip", "-n", edge, "addr", "add", address, "dev", BRIDGE])


def remove_edge(edge: str, uplink: str) -> None:
    netns.delete_netns(edge)  # its veth ends go with it, and their peers, and their routes
    netns.delete_link(uplink)


@dataclass(frozen=True)
class Nat:
    internal_ip: str
    external_ip: str


def edge_rules(link: Link, nats: list[Nat], caller_ip: str | None) -> str:
    """The edge's iptables-restore document: NAT, the metadata server, and nothing else."""
    nat = ["*nat", ":PREROUTING ACCEPT [0:0]", ":INPUT ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]",
           ":POSTROUTING ACCEPT [0:0]"]
    nat += [f"-A PREROUTING -i {UPLINK} -d {n.external_ip}/32 -j DNAT --to-destination {n.internal_ip}"
            for n in nats]
    if caller_ip:  # what arrived for an external address comes from the user's address
        nat.append(f"-A POSTROUTING -o {BRIDGE} -m conntrack --ctstate DNAT -j SNAT --to-source {caller_ip}")
    nat += [f"-A POSTROUTING -o {UPLINK} -s {n.internal_ip}/32 -j SNAT --to-source {n.external_ip}"
            for n in nats]
    nat += [f"-A POSTROUTING -o {UPLINK} -j SNAT --to-source {link.edge_ip}", "COMMIT"]
    flt = ["*filter", ":INPUT DROP [0:0]", ":FORWARD DROP [0:0]", ":OUTPUT ACCEPT [0:0]",
           "-A INPUT -i lo -j ACCEPT",
           "-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT",
           f"-A INPUT -i {BRIDGE} -p tcp -d {metadata.METADATA_IP}/32 --dport 80 -j ACCEPT",
           f"-A INPUT -i {UPLINK} -p tcp -s {link.root_ip}/32 -d {link.edge_ip}/32 --dport {ADMIN_PORT} -j ACCEPT",
           f"-A INPUT -i {BRIDGE} -j REJECT",
           "-A FORWARD -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT",
           f"-A FORWARD -i {BRIDGE} -o {BRIDGE} -j ACCEPT",
           f"-A FORWARD -i {UPLINK} -o {BRIDGE} -m conntrack --ctstate DNAT -j ACCEPT",
           f"-A FORWARD -i {BRIDGE} -o {UPLINK} -p tcp -d {SERVICE_IP}/32 -j ACCEPT",
           # No route off the machine: say so at once instead of letting connections hang.
           f"-A FORWARD -i {BRIDGE} -j REJECT --reject-with icmp-net-unreachable",
           "COMMIT"]
    return "\n".join([*nat, *flt, ""])


def apply_edge(edge: str, link: Link, nats: list[Nat], caller_ip: str | None) -> None:
    from gcpsim.firewall import IPV6_CLOSED

    run(["iptables-restore"], netns=edge, input=edge_rules(link, nats, caller_ip))
    run(["ip6tables-restore"], netns=edge, input=IPV6_CLOSED)


def route_external(external_ip: str, uplink: str, link: Link) -> None:
    run(["ip", "route", "replace", f"{external_ip}/32", "via", link.edge_ip, "dev", uplink])


def unroute_external(external_ip: str, uplink: str) -> None:
    run(["ip", "route", "del", f"{external_ip}/32", "dev", uplink], check=False)


# -- one machine's place on its network -------------------------------------------------------


def attach_machine(ns: str, edge: str, port: str, address: str, gateway_ip: str) -> None:
    """A namespace for the machine, its eth0 plugged into the network's bridge."""
    run(["ip", "netns", "add", ns])
    run(["ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", port, "netns", edge])
    run(["ip", "-n", edge, "link", "set", port, "master", BRIDGE])
    run(["ip", "-n", edge, "link", "set", port, "up"])
    run(["ip", "-n", ns, "link", "set", "lo", "up"])
    run(["ip", "-n", ns, "addr", "add", address, "dev", "eth0"])
    run(["ip", "-n", ns, "link", "set", "eth0", "up"])
    run(["ip", "-n", ns, "route", "add", "default", "via", gateway_ip])


def detach_machine(ns: str, edge: str, port: str) -> None:
    """The machine is off its network once this returns: its processes end, its port leaves the
    bridge (its eth0 goes with it, the other end of the pair), then its namespace goes. The kernel
    frees a deleted namespace's interfaces later, seconds later on a busy host; until then a
    stopped machine's eth0 still answered ARP at its address and reset TCP connections there,
    those of a new machine that had been given the address meanwhile (a whole cluster moved to
    another zone re-used its addresses: the moved node's SSH session was cut). A deleted GCE VM
    answers nothing."""
    netns.kill_netns_processes(ns)
    run(["ip", "-n", edge, "link", "del", port], check=False)  # gone already where the edge is
    netns.delete_netns(ns)


def port_name(key: str) -> str:
    """The machine's veth end on the edge's bridge (a name inside the edge namespace)."""
    return "m" + hashlib.sha1(key.encode()).hexdigest()[:12]
