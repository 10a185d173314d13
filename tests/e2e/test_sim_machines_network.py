"""Simulated VPC networks: the firewall decides what reaches a machine (the controller counts
as the project's caller_ip), networks with the same internal range coexist behind their
external addresses, machines reach the simulator's SERVICE_IP and nothing else off their
network, and a removed network leaves nothing on this machine."""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import subprocess
import threading
from typing import Iterator

import pytest

from conftest import listening, reach
from gcpsim import nodes, vpc
from gcpsim.machines import FirewallRule
from namespace_nodes import netns
from namespace_nodes.netns import run
from tests.fakes.sim_machines_fixtures import CALLER_IP, INTERNAL, SSH_FROM_CALLER, root_leftovers, sim_machines  # noqa: F401

pytestmark = pytest.mark.e2e


def test_the_controller_reaches_ssh_only_where_a_rule_admits_the_callers_address(sim_machines):  # noqa: F811
    vm, = sim_machines.boot(sim_machines.machine("vm0"))
    assert sim_machines.ssh(vm, "hostname") == "vm0\n"
    elsewhere = FirewallRule("ssh-from-office", ("198.51.100.0/24",), (), (), (("tcp", ("22",)),))
    sim_machines.backend.apply_firewall(vm.network, [elsewhere, INTERNAL], CALLER_IP)
    assert reach(None, vm.external_ip, 22).startswith("blocked")
    sim_machines.backend.apply_firewall(vm.network, [elsewhere, INTERNAL], "198.51.100.20")
    assert reach(None, vm.external_ip, 22).startswith("open")
    # What sshd sees as the client's address is the user's public one.
    assert sim_machines.ssh(vm, "echo $SSH_CLIENT").split()[0] == "198.51.100.20"


def test_machines_reach_each_other_as_the_internal_rule_allows(sim_machines):  # noqa: F811
    vm0, vm1 = sim_machines.boot(sim_machines.machine("vm0"), sim_machines.machine("vm1"))
    # GCE's internal names resolve on the machines
    resolved = sim_machines.ssh(vm0, "getent ahostsv4 vm1 | head -1").split()
    assert (resolved[0], resolved[-1]) == (vm1.internal_ip, "vm1.us-central1-a.c.sim-machines.internal")
    with listening(sim_machines.netns(vm1), "0.0.0.0", 29400):
        assert reach(sim_machines.netns(vm0), vm1.internal_ip, 29400).startswith("open")
        sim_machines.backend.apply_firewall(vm0.network, [SSH_FROM_CALLER], CALLER_IP)
        assert reach(sim_machines.netns(vm0), vm1.internal_ip, 29400).startswith("blocked")
        tagged = FirewallRule("workers", (), ("worker",), ("worker",), (("tcp", ("29400",)),))
        sim_machines.backend.apply_firewall(vm0.network, [SSH_FROM_CALLER, tagged], CALLER_IP)
        assert reach(sim_machines.netns(vm0), vm1.internal_ip, 29400).startswith("blocked")  # untagged
        for vm in (vm0, vm1):
            sim_machines.backend.set_metadata(dataclasses.replace(vm, tags=("worker",)))
        assert reach(sim_machines.netns(vm0), vm1.internal_ip, 29400).startswith("open")


def test_two_networks_with_the_same_internal_range_are_told_apart_by_external_address(sim_machines):  # noqa: F811
    a = sim_machines.machine("alpha", network="net-a")
    b = sim_machines.machine("beta", network="net-b")
    b = dataclasses.replace(b, internal_ip=a.internal_ip)  # 10.128.0.x in both networks
    sim_machines.boot(a, b)
    assert sim_machines.ssh(a, "hostname -I") == sim_machines.ssh(b, "hostname -I")
    assert (sim_machines.ssh(a, "hostname"), sim_machines.ssh(b, "hostname")) == ("alpha\n", "beta\n")


@contextlib.contextmanager
def service_listener(port: int) -> Iterator[list[str]]:
    """A TCP server on the simulator's SERVICE_IP (as the simulator's endpoint listens there);
    yields the peer addresses it accepted."""
    server = socket.create_server((vpc.SERVICE_IP, port))
    peers: list[str] = []

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, peer = server.accept()
                peers.append(peer[0])
                conn.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield peers
    finally:
        server.close()


def test_machines_reach_the_service_address_and_nothing_else_off_their_network(sim_machines):  # noqa: F811
    with_ip, = sim_machines.boot(sim_machines.machine("public"))
    private = sim_machines.machine("private", external_ip=None)
    sim_machines.boot(private)
    with sim_machines.backend.ledger.edit() as data:  # where the network's uplink is
        link = vpc.Link(data["networks"][with_ip.network]["link"])
    with service_listener(18123) as peers:
        for vm in (with_ip, private):
            assert reach(sim_machines.netns(vm), vpc.SERVICE_IP, 18123).startswith("open")
        # seen from its external address, or the network's own (no external address: NAT)
        assert peers == [with_ip.external_ip, link.edge_ip]
        with listening_in_root(link.root_ip, 18124):
            assert reach(sim_machines.netns(with_ip), link.root_ip, 18124).startswith("blocked")
        assert reach(sim_machines.netns(with_ip), link.edge_ip, vpc.ADMIN_PORT).startswith("blocked")
        assert reach(sim_machines.netns(with_ip), "10.213.255.254", 80).startswith("blocked")
        assert foreign_namespace_reaches_service(18123).startswith("blocked")


@contextlib.contextmanager
def listening_in_root(ip: str, port: int) -> Iterator[None]:
    server = socket.create_server((ip, port))
    try:
        yield
    finally:
        server.close()


def foreign_namespace_reaches_service(port: int) -> str:
    """A namespace that is not a simulated network, given a route to SERVICE_IP."""
    ns, veth = "tcs-probe-foreign", "tcsprobe0"
    try:
        run(["ip", "netns", "add", ns])
        run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
        run(["ip", "addr", "add", "10.216.0.1/30", "dev", veth])
        run(["ip", "link", "set", veth, "up"])
        run(["ip", "-n", ns, "addr", "add", "10.216.0.2/30", "dev", "eth0"])
        run(["ip", "-n", ns, "link", "set", "eth0", "up"])
        run(["ip", "-n", ns, "route", "add", f"{vpc.SERVICE_IP}/32", "via", "10.216.0.1"])
        return reach(ns, vpc.SERVICE_IP, port)
    finally:
        run(["ip", "netns", "del", ns], check=False)
        run(["ip", "link", "del", veth], check=False)


def test_a_deleted_machines_address_answers_nothing_while_the_kernel_still_frees_its_namespace(
        sim_machines):  # noqa: F811
    vm0, vm1 = sim_machines.boot(sim_machines.machine("vm0"), sim_machines.machine("vm1"))
    sim_machines.ssh(vm0, "true")
    assert reach(sim_machines.netns(vm1), vm0.internal_ip, 22).startswith("open")
    # The kernel frees a deleted namespace when its last reference goes, asynchronously: seconds
    # later on a busy host. A reference held here stands in for that delay.
    with open(f"/run/netns/{sim_machines.netns(vm0)}"):
        sim_machines.backend.delete(vm0.key)
        # no reset from vm0's address: a machine given it next would have its connections cut
        assert "refused" not in reach(sim_machines.netns(vm1), vm0.internal_ip, 22)


def test_removing_the_network_leaves_nothing_on_this_machine(sim_machines):  # noqa: F811
    vm0, vm1 = sim_machines.boot(sim_machines.machine("vm0"), sim_machines.machine("vm1"))
    sim_machines.ssh(vm0, "sleep 6062 >/dev/null 2>&1 &")
    assert sim_machines.backend.alive()
    sim_machines.backend.remove_network(vm0.network)
    assert not sim_machines.backend.alive()
    assert nodes.leftovers(sim_machines.home) == []  # the ledger stays, recording nothing
    ps = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True).stdout
    assert "sleep 6062" not in ps and str(sim_machines.home) not in ps
    # its routes, and the chains, service address and pool routes unless another home uses them
    assert root_leftovers(sim_machines.own_range) == []


def test_the_shared_pieces_stay_while_another_home_serves_at_the_service_address(sim_machines):  # noqa: F811
    vm, = sim_machines.boot(sim_machines.machine("vm0"))
    with service_listener(18125):  # as another home's simulator does, waiting for its first network
        sim_machines.backend.remove_network(vm.network)
        assert any(user.startswith(f"listener {vpc.SERVICE_IP}:18125") for user in vpc.service_users())
        assert netns.link_exists(vpc.SERVICE_LINK)  # the other home still serves its machines there
    with vpc.host_lock():
        assert vpc.remove_service_if_unused() == (vpc.service_users() == [])
    assert root_leftovers(sim_machines.own_range) == []
