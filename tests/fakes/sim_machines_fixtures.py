"""Simulated machines for e2e tests: the real backend (gcpsim/nodes.py) on a
private home, driven directly (no API module), with SSH as a user logs in: the metadata's key,
the host key pinned from guest attributes, paramiko's RejectPolicy. After the test every trace
of the home is removed and checked gone.

    def test_x(sim_machines):
        vm = sim_machines.boot(sim_machines.machine("vm0"))
        assert sim_machines.ssh(vm, "hostname") == "vm0\\n"
"""

from __future__ import annotations

import base64
import dataclasses
import ipaddress
import json
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import paramiko
import pytest

from conftest import TEST_HOMES
from namespace_nodes import keys
from gcpsim import nodes, vpc
from gcpsim.machines import FirewallRule, Machine

PROJECT = "sim-machines"
CALLER_IP = "203.0.113.7"
SUBNET = "10.128.0.0/20"
SSH_FROM_CALLER = FirewallRule("allow-ssh", (f"{CALLER_IP}/32",), (), (), (("tcp", ("22",)),))
INTERNAL = FirewallRule("allow-internal", (SUBNET,), (), (), (("all", ()),))
STARTUP = "#!/bin/bash\necho started by $(id -un)\nid -u > /root/startup-ran\n"


@dataclasses.dataclass
class SimMachines:
    home: Path
    backend: nodes.NodeMachines
    key: Path  # the client's private key; its public half is in every machine's ssh-keys
    public: str
    own_range: ipaddress.IPv4Network  # this world's external addresses (external_ranges.py)
    _next_ip: int = 2

    def machine(self, name: str, network: str = "net1", **fields: Any) -> Machine:
        """A machine as the Compute module would declare it, with the next free addresses."""
        index = self._next_ip
        self._next_ip += 1
        external = self.own_range.network_address + index
        metadata = {"ssh-keys": f"trainctl:{self.public} trainctl", "enable-guest-attributes": "TRUE",
                    "block-project-ssh-keys": "TRUE", "startup-script": STARTUP}
        base = dict(key=f"{PROJECT}/us-central1-a/{name}", project=PROJECT, zone="us-central1-a", name=name,
                    network=f"{PROJECT}/{network}", subnet_cidr=SUBNET, internal_ip=f"10.128.0.{index}",
                    external_ip=str(external), metadata=metadata, machine_type="e2-standard-2")
        return Machine(**{**base, **fields})

    def boot(self, *machines: Machine, rules: tuple[FirewallRule, ...] = (SSH_FROM_CALLER, INTERNAL)) -> list[Machine]:
        for network in sorted({m.network for m in machines}):
            self.backend.apply_firewall(network, list(rules), CALLER_IP)
        for m in machines:
            self.backend.boot(m)
        return list(machines)

    def host_keys(self, machine: Machine, timeout: float = 90.0) -> list[dict[str, str]]:
        # A boot is ~1 s here; the long bound is for a loaded CI machine, the console for a diagnosis.
        deadline = time.monotonic() + timeout
        while not (items := self.backend.guest_attributes(machine.key, "hostkeys/")):
            assert time.monotonic() < deadline, \
                f"{machine.name} published no host key; its console:\n{self.console(machine)}"
            time.sleep(0.05)
        return items

    def client(self, machine: Machine, user: str = "trainctl", key: Path | None = None,
               pinned: list[dict[str, str]] | None = None, timeout: float = 20.0) -> paramiko.SSHClient:
        """Logged in over the machine's external address, its host key pinned; retried only
        while sshd is not listening yet."""
        assert machine.external_ip, f"{machine.name} has no external address: the controller cannot reach it"
        client = paramiko.SSHClient()
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        for item in pinned if pinned is not None else self.host_keys(machine):
            client.get_host_keys().add(machine.external_ip, item["key"],
                                       paramiko.PKey.from_type_string(item["key"], base64.b64decode(item["value"])))
        deadline = time.monotonic() + timeout
        while True:
            try:
                client.connect(machine.external_ip, username=user, key_filename=str(key or self.key), timeout=3,
                               allow_agent=False, look_for_keys=False, banner_timeout=5, auth_timeout=5)
                return client
            except (paramiko.ssh_exception.NoValidConnectionsError, socket.timeout, ConnectionError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def ssh(self, machine: Machine, command: str, **kwargs: Any) -> str:
        client = self.client(machine, **kwargs)
        try:
            _, out, err = client.exec_command(command, timeout=30)
            text = out.read().decode()
            assert out.channel.recv_exit_status() == 0, f"{command!r} on {machine.name}: {err.read().decode()}"
            return text
        finally:
            client.close()

    def netns(self, machine: Machine) -> str:
        return self.backend.names.machine(machine.key)

    def console(self, machine: Machine) -> str:
        return (self.backend.ledger.dir / f"vm-{vpc.port_name(machine.key)}" / "console.log").read_text()


def wait_for(check: Any, timeout: float = 15.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while not (result := check()):
        assert time.monotonic() < deadline, f"{what} not met after {timeout:g} s"
        time.sleep(0.1)
    return result


def root_leftovers(own_range: ipaddress.IPv4Network | None = None) -> list[str]:
    """This world's pieces in the root namespace (routes into its external range), and the
    shared ones, which must be gone once no home uses them (vpc.service_users)."""
    routes = json.loads(subprocess.run(["ip", "-j", "route", "show"], capture_output=True, text=True).stdout)
    found = [_shown(r) for r in routes if own_range and _within(r["dst"], own_range)]
    if vpc.service_users():
        return found  # another home's network or simulator still needs the shared pieces
    rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True).stdout
    found += [line for line in rules.splitlines() if "TCSIM" in line]
    found += [f"link {vpc.SERVICE_LINK}"] if Path(f"/sys/class/net/{vpc.SERVICE_LINK}").exists() else []
    found += [_shown(r) for r in routes if _in(r["dst"], (vpc.EXTERNAL_POOL, vpc.LINK_POOL))
              and _shown(r) not in found]
    return found


def _shown(route: dict[str, Any]) -> str:
    return f"route {route.get('type', 'unicast')} {route['dst']} {route.get('dev', '')}".strip()


def _within(destination: str, own_range: ipaddress.IPv4Network) -> bool:
    """A route to addresses of this world's range only (the pool's own route covers it too)."""
    try:
        return ipaddress.ip_network(destination, strict=False).subnet_of(own_range)  # type: ignore[arg-type]
    except (ValueError, TypeError):  # "default", an IPv6 route
        return False


def _in(destination: str, pools: tuple[ipaddress.IPv4Network, ...]) -> bool:
    """A route into one of `pools` (by address, not by text: a local stack's 10.210.213.0/24
    reads "10.213." too)."""
    try:
        net = ipaddress.ip_network(destination, strict=False)
    except ValueError:  # "default"
        return False
    return any(net.overlaps(pool) for pool in pools)


@pytest.fixture
def sim_machines() -> Iterator[SimMachines]:
    home = TEST_HOMES / f"sim-{uuid.uuid4().hex[:10]}"
    home.mkdir(parents=True, mode=0o700)
    key = home / "client" / "id_ed25519"
    public = keys.write_ed25519_keypair(key, "me@controller")
    backend = nodes.NodeMachines(home)
    own_range = backend.external_range()
    try:
        yield SimMachines(home, backend, key, public, own_range)
    finally:
        nodes.cleanup_all(home)
        left = nodes.leftovers(home)
        shutil.rmtree(home, ignore_errors=True)
        assert left == [] and root_leftovers(own_range) == []
