"""Where a local stack's parts are: their names on this machine and their addresses on its subnet.

Layout of a stack with N nodes on subnet 10.210.S.0/24 (S derived from the stack name):
  bridge  tcb<hash>     10.210.S.1   the controller's address (this process, root namespace)
  netns   tc-<stack>-bucket  .2     the GCS emulator (the bucket) and the GCE metadata server
  netns   tc-<stack>-registry .3    the container registry (docker-registry, TLS)
  netns   tc-<stack>-n<i>    .10+i  node i: sshd as PID 1 of its own PID + mount namespace
Names are derived from the stack name alone, so `down --force` finds a stack without its state.
"""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from infra.errors import ProvisionError
from namespace_nodes import netns

POOL = ipaddress.IPv4Network("10.210.0.0/16")
EMULATOR_PORT = 9023
RENDEZVOUS_PORT = 29400
NODE_IFNAME = "eth0"


class LocalStackError(ProvisionError):
    pass


@dataclass(frozen=True)
class Names:
    stack: str

    @property
    def digest(self) -> str:
        return hashlib.sha1(self.stack.encode()).hexdigest()

    @property
    def bridge(self) -> str:
        return f"tcb{self.digest[:8]}"

    def veth(self, index: int) -> str:
        return f"tcv{self.digest[:6]}n{index}"  # <= 12 chars; the peer adds "p" (IFNAMSIZ 15)

    def node(self, index: int) -> str:
        return f"node{index}"

    def node_netns(self, index: int) -> str:
        return f"tc-{self.stack}-n{index}"

    def node_etc(self, index: int) -> Path:
        """`ip netns exec` bind-mounts the files here over /etc (the node's hosts file)."""
        return Path("/etc/netns") / self.node_netns(index)

    @property
    def bucket_netns(self) -> str:
        return f"tc-{self.stack}-bucket"

    @property
    def bucket_veth(self) -> str:
        return f"tcv{self.digest[:6]}bk"

    @property
    def bucket(self) -> str:
        return f"trainctl-{self.stack}"

    @property
    def registry_netns(self) -> str:
        return f"tc-{self.stack}-registry"

    @property
    def registry_veth(self) -> str:
        return f"tcv{self.digest[:6]}rg"

    @property
    def netns_prefix(self) -> str:
        return f"tc-{self.stack}-"


@dataclass(frozen=True)
class Addresses:
    subnet: ipaddress.IPv4Network

    @property
    def controller(self) -> str:
        return str(self.subnet.network_address + 1)

    @property
    def bucket(self) -> str:
        return str(self.subnet.network_address + 2)

    @property
    def registry(self) -> str:
        return str(self.subnet.network_address + 3)

    def node(self, index: int) -> str:
        return str(self.subnet.network_address + 10 + index)

    def nodes(self, count: int) -> list[str]:
        return [self.node(i) for i in range(count)]

    def cidr(self, ip: str) -> str:
        return f"{ip}/{self.subnet.prefixlen}"


def pick_subnet(stack: str) -> ipaddress.IPv4Network:
    """A /24 of the pool derived from the stack name, skipping any that is in use on this host."""
    used = [ipaddress.IPv4Interface(a).network for a in netns.used_ipv4_networks()]
    subnets: list[ipaddress.IPv4Network] = list(POOL.subnets(new_prefix=24))
    start = int(hashlib.sha1(stack.encode()).hexdigest(), 16) % len(subnets)
    for offset in range(len(subnets)):
        candidate = subnets[(start + offset) % len(subnets)]
        if not any(candidate.overlaps(u) for u in used):
            return candidate
    raise LocalStackError(f"no free /24 left in {POOL} for stack {stack!r}")
