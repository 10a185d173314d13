"""What `up` creates for a local stack, declared once as typed rows.

`plan` shows these rows and `create` walks the same rows to make them (each row's `role` picks
its step there), recording each one's intent from the row: what the plan lists is what `up`
creates and what `down` removes. The stack's own directory comes first; every later row is a
record of the stack's state file, in the order `up` records them.
"""

from __future__ import annotations

from namespace_nodes import netns

from infra.providers.local import registry
from infra.providers.local.firewall import firewall_summary
from infra.providers.local.layout import EMULATOR_PORT, Names
from infra.providers.protocol import PlanRow
from infra.providers.stack_home import state_dir
from infra.spec.cluster import ClusterSpec


def plan(spec: ClusterSpec) -> list[PlanRow]:
    """What `up` would create, in order, without touching the machine."""
    names = Names(spec.name)
    rows = [
        PlanRow("dir", str(state_dir(spec.name)), {"role": "state"}),
        PlanRow("bridge", names.bridge, {"role": "bridge", "subnet": "10.210.x.0/24 (derived, free)"}),
        PlanRow("host_rule", values={"role": "forward", "rule": netns.host_forward_rule(names.bridge)}),
        PlanRow("netns", names.bucket_netns, {"role": "bucket", "service": f"gcs-emulator :{EMULATOR_PORT}",
                                              "bucket": f"gs://{names.bucket}", "veth": names.bucket_veth}),
    ]
    if registry.available():
        rows.append(PlanRow("netns", names.registry_netns, {
            "role": "registry", "service": f"docker-registry :{registry.REGISTRY_PORT} (TLS)",
            "veth": names.registry_veth}))
    # Every node's hosts file is in place before any node boots (its resolver reads it).
    rows += [PlanRow("dir", str(names.node_etc(i)), {"role": "hosts", "node": names.node(i)})
             for i in range(spec.node_count)]
    rows += [PlanRow("netns", names.node_netns(i), {"role": "node", "node": names.node(i), "service": "sshd :22",
                                                    "firewall": firewall_summary(), "veth": names.veth(i)})
             for i in range(spec.node_count)]
    return rows


def record_of(row: PlanRow) -> dict[str, str | list[str]]:
    """The state file's record of a row: what `down` needs to remove it."""
    if row.kind == "host_rule":
        return {"rule": row.values["rule"]}
    if row.kind == "netns":
        return {"name": row.name, "veth": row.values["veth"]}
    return {"name": row.name}
