"""The local stack's firewall: the spec's rules as iptables rules inside each namespace, as a VPC
firewall admits traffic to a VM. Every namespace drops what these do not accept."""

from __future__ import annotations

from namespace_nodes import metadata

from infra.providers.local import registry
from infra.providers.local.layout import EMULATOR_PORT, Addresses


def firewall_summary() -> str:
    return ("INPUT drop; allow established, lo, tcp/22 from the controller, "
            "all from cluster nodes")


def _loopback_and_replies() -> list[list[str]]:
    """What every namespace accepts before its own rules: itself, and answers to its requests."""
    return [["-i", "lo", "-j", "ACCEPT"],
            ["-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"]]


def node_rules(addr: Addresses, node_ips: list[str], ssh_sources: list[str]) -> list[list[str]]:
    rules = _loopback_and_replies()
    rules += [["-p", "tcp", "-s", src, "--dport", "22", "-j", "ACCEPT"] for src in ssh_sources]
    rules += [["-s", f"{ip}/32", "-j", "ACCEPT"] for ip in node_ips]
    return rules


def bucket_rules(addr: Addresses, node_ips: list[str]) -> list[list[str]]:
    rules = _loopback_and_replies()
    for ip in [addr.controller, *node_ips]:
        rules.append(["-p", "tcp", "-s", f"{ip}/32", "--dport", str(EMULATOR_PORT), "-j", "ACCEPT"])
    # The metadata server: its GCE address for the nodes, its controller side for trainctl only.
    for ip in node_ips:
        rules.append(["-p", "tcp", "-s", f"{ip}/32", "-d", f"{metadata.METADATA_IP}/32",
                      "--dport", "80", "-j", "ACCEPT"])
    rules.append(["-p", "tcp", "-s", f"{addr.controller}/32", "-d", f"{addr.bucket}/32",
                  "--dport", str(metadata.ADMIN_PORT), "-j", "ACCEPT"])
    return rules


def registry_rules(addr: Addresses, node_ips: list[str]) -> list[list[str]]:
    rules = _loopback_and_replies()
    rules += [["-p", "tcp", "-s", f"{ip}/32", "--dport", str(registry.REGISTRY_PORT), "-j", "ACCEPT"]
              for ip in [addr.controller, *node_ips]]
    return rules
