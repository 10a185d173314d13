"""A VPC network's firewall rules as the iptables rules a simulated machine gets (the e2e tests
in test_sim_machines_network.py prove the kernel then enforces them)."""

from __future__ import annotations

import pytest

from gcpsim.firewall import Peer, machine_rules
from gcpsim.machines import FirewallRule


def rule(name: str = "r", ranges: tuple[str, ...] = (), source_tags: tuple[str, ...] = (),
         target_tags: tuple[str, ...] = (), allowed=(("tcp", ("22",)),)) -> FirewallRule:
    return FirewallRule(name, ranges, source_tags, target_tags, allowed)


def test_a_rule_admits_its_source_ranges_on_its_ports_only():
    admitted = machine_rules([rule(ranges=("203.0.113.7/32",))], (), [])
    assert admitted == [["-s", "203.0.113.7/32", "-p", "tcp", "-m", "multiport", "--dports", "22", "-j", "ACCEPT"]]


def test_target_tags_limit_a_rule_to_the_machines_carrying_one():
    gpu_only = rule(ranges=("10.0.0.0/8",), target_tags=("gpu",))
    assert machine_rules([gpu_only], ("cpu",), []) == []
    assert machine_rules([gpu_only], ("cpu", "gpu"), []) != []


def test_source_tags_admit_the_tagged_machines_internal_addresses_besides_the_ranges():
    peers = [Peer("10.128.0.2", ("workers",)), Peer("10.128.0.3", ("other",)), Peer("10.128.0.4", ("workers",))]
    admitted = machine_rules([rule(ranges=("192.0.2.0/24",), source_tags=("workers",), allowed=(("all", ()),))],
                             (), peers)
    assert [r[1] for r in admitted] == ["192.0.2.0/24", "10.128.0.2/32", "10.128.0.4/32"]
    assert all(r[2:] == ["-j", "ACCEPT"] for r in admitted)  # "all": any protocol


def test_a_rule_without_sources_admits_every_source():
    assert machine_rules([rule()], (), [])[0][:2] == ["-s", "0.0.0.0/0"]


def test_port_ranges_and_long_port_lists_fit_iptables_multiport():
    ports = tuple(str(p) for p in range(1000, 1014)) + ("8000-9000",)
    admitted = machine_rules([rule(ranges=("0.0.0.0/0",), allowed=(("udp", ports),))], (), [])
    dports = [r[r.index("--dports") + 1] for r in admitted]
    assert dports == [",".join(ports[:14]), "8000:9000"]  # a range counts twice: 14 + 2 > 15


def test_protocols_without_ports_match_by_number():
    admitted = machine_rules([rule(ranges=("0.0.0.0/0",), allowed=(("icmp", ()), ("ipip", ()), ("47", ())))], (), [])
    assert [r[r.index("-p") + 1] for r in admitted] == ["1", "4", "47"]


def test_a_protocol_gce_does_not_know_is_refused_by_name():
    with pytest.raises(ValueError, match="'quic'"):
        machine_rules([rule(ranges=("0.0.0.0/0",), allowed=(("quic", ()),))], (), [])
