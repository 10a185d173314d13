"""A VPC network's ingress firewall rules as iptables rules inside one machine's namespace.

GCE's model (firewalls resource, compute v1 discovery document; https://cloud.google.com/
compute/docs/reference/rest/v1/firewalls): ingress is denied unless an ALLOW rule matches;
a rule applies to the instances carrying one of its targetTags (every instance when it has
none); its sources are sourceRanges OR the primary internal addresses of the network's
instances carrying one of its sourceTags (tags never match traffic to an external address);
`allowed` lists (IPProtocol, ports), ports only for tcp/udp/sctp, "22" or "8000-9000".
Connections are stateful: replies are always admitted.

Choices where the simulator must pick:
  - A rule with neither sourceRanges nor sourceTags admits every source: the API fills in
    0.0.0.0/0 for such a rule (the Compute module may already have done so).
  - Only ALLOW rules exist here (FirewallRule has no DENY side); priorities then cannot change
    the outcome, and `disabled` rules are not passed in by the API.
  - IPv6 is closed on machines (VPCs here are IPv4 only): nothing but loopback is admitted.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from gcpsim.machines import FirewallRule

# IPProtocol names the API accepts, as IP protocol numbers (iptables resolves names through
# /etc/protocols, where "ipip" is not protocol 4).
PROTOCOLS = {"tcp": 6, "udp": 17, "icmp": 1, "esp": 50, "ah": 51, "sctp": 132, "ipip": 4}
PORTED = {"tcp", "udp", "sctp"}
MULTIPORT_MAX = 15  # iptables' multiport takes up to 15 ports, a range counting as two


@dataclass(frozen=True)
class Peer:
    """A machine of the network as firewall rules see it."""
    ip: str
    tags: tuple[str, ...]


def applies_to(rule: FirewallRule, tags: tuple[str, ...]) -> bool:
    return not rule.target_tags or bool(set(rule.target_tags) & set(tags))


def sources(rule: FirewallRule, peers: list[Peer]) -> list[str]:
    if not rule.source_ranges and not rule.source_tags:
        return ["0.0.0.0/0"]
    ranges = [r for r in rule.source_ranges if ipaddress.ip_network(r, strict=False).version == 4]
    tagged = sorted({f"{p.ip}/32" for p in peers if set(p.tags) & set(rule.source_tags)})
    return ranges + tagged


def protocol_matches(protocol: str, ports: tuple[str, ...]) -> list[list[str]]:
    """iptables match arguments for one `allowed` entry (several when ports need chunks)."""
    name = protocol.lower()
    if name == "all":
        return [[]]
    number = PROTOCOLS.get(name, int(name) if name.isdigit() else None)
    if number is None:
        raise ValueError(f"firewall protocol {protocol!r} is not one GCE accepts "
                         f"({', '.join(PROTOCOLS)}, all, or a protocol number)")
    if not ports or name not in PORTED:
        return [["-p", str(number)]]
    matches: list[list[str]] = []
    chunk: list[str] = []
    weight = 0
    for port in ports:
        spec = port.replace("-", ":")
        cost = 2 if ":" in spec else 1
        if weight + cost > MULTIPORT_MAX:
            matches.append(chunk)
            chunk, weight = [], 0
        chunk.append(spec)
        weight += cost
    matches.append(chunk)
    return [["-p", name, "-m", "multiport", "--dports", ",".join(c)] for c in matches]


def machine_rules(rules: list[FirewallRule], tags: tuple[str, ...], peers: list[Peer]) -> list[list[str]]:
    """INPUT rules (after loopback and replies) that admit what the network's rules allow
    to a machine carrying `tags`; `peers` are the network's machines (for source tags)."""
    admitted: list[list[str]] = []
    for rule in sorted(rules, key=lambda r: (r.priority, r.name)):
        if not applies_to(rule, tags):
            continue
        for protocol, ports in rule.allowed:
            for match in protocol_matches(protocol, tuple(ports)):
                admitted += [["-s", src, *match, "-j", "ACCEPT"] for src in sources(rule, peers)]
    return admitted


# What every machine admits before the network's rules: itself, and answers to its requests.
LOOPBACK_AND_REPLIES = [["-i", "lo", "-j", "ACCEPT"],
                        ["-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"]]
IPV6_CLOSED = "\n".join(["*filter", ":INPUT DROP [0:0]", ":FORWARD DROP [0:0]", ":OUTPUT ACCEPT [0:0]",
                         "-A INPUT -i lo -j ACCEPT", "COMMIT", ""])
