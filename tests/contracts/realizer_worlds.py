"""What the realizer contract needs to know of each provider's world, one small adapter each:
how to list what of a stack exists there, in the kinds and names of the provider's plan rows,
and what else a second `up` must leave as it was. The contract itself (test_realizer_contract.py)
asks only these and the realizer the registry gives; a new provider adds its world here."""

from __future__ import annotations

import contextlib
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from infra.providers.protocol import PlanRow
from infra.spec.cluster import ClusterSpec
from infra.spec.stack_config import load_stack

Found = set[tuple[str, str]]  # (plan row kind, name)


@dataclass
class World:
    """One provider's world with the spec of the stack the contract shares between its cases."""

    spec: ClusterSpec
    absent: str  # a stack that is known to the provider (its file, if it needs one) and never up
    existing: Callable[[], Found]  # what of the stack is there now
    kinds: frozenset[str]  # the plan row kinds `existing` can see (not parts of others, nor bindings)
    unchanged: Callable[[], Any]  # equal before and after a call: the call changed nothing
    left_behind: Callable[[], list[str]]  # what `down` must not leave (processes, state, locks)
    next_command: Callable[[], None] = lambda: None  # what a later trainctl command does first
    said: list[str] = field(default_factory=list)

    def progress(self, line: str) -> None:
        self.said.append(line)

    def observed(self, rows: list[PlanRow]) -> Found:
        return {(row.kind, row.name) for row in rows if row.kind in self.kinds}


# --- the local stack: this machine's namespaces, links, folders and iptables -----------------

def _on_this_machine(stack: str) -> Found:
    from infra.providers.local.layout import Names
    from infra.providers.stack_home import state_dir
    from namespace_nodes import netns

    names = Names(stack)
    found = {("netns", ns) for ns in netns.list_netns() if ns.startswith(names.netns_prefix)}
    found |= {("dir", str(p)) for p in Path("/etc/netns").glob(f"{names.netns_prefix}*")}
    if state_dir(stack).is_dir():
        found.add(("dir", str(state_dir(stack))))
    if netns.link_exists(names.bridge):
        found.add(("bridge", names.bridge))
    rule = netns.host_forward_rule(names.bridge)
    if subprocess.run(["iptables", "-C", *rule], capture_output=True).returncode == 0:
        found.add(("host_rule", ""))  # the forward rule's row has no name (local/plan.py)
    return found


@contextlib.contextmanager
def local_world(_request: pytest.FixtureRequest) -> Iterator[World]:
    from conftest import leftovers, private_home
    from infra.providers.stack_home import state_dir

    with pytest.MonkeyPatch.context() as monkeypatch, private_home(monkeypatch):
        spec = load_stack("local", name="rcontract", overrides={"nodes": 2})
        yield World(spec, absent="rcontract-never-up", existing=lambda: _on_this_machine(spec.name),
                    kinds=frozenset({"netns", "dir", "bridge", "host_rule"}),
                    unchanged=lambda: (_on_this_machine(spec.name),
                                       (state_dir(spec.name) / "state.json").read_text()),
                    left_behind=lambda: leftovers(spec.name))


# --- a simulated GCP project: the simulator's world document ---------------------------------

# The simulator's collections (gcpsim's world.json) as the plan's kinds; a key's last path part
# (before an account's @) is the resource's name.
COLLECTIONS = {"buckets": "storage/bucket", "compute.firewalls": "compute/firewall",
               "compute.instances": "compute/instance", "compute.networks": "compute/network",
               "compute.subnetworks": "compute/subnetwork", "compute.routers": "compute/router",
               "repositories": "artifactregistry/repository", "service_accounts": "serviceaccount/account"}
# Collections that hold no resource of a plan row of their own: an instance's boot disk is the
# instance's (its row), IAM policies are the bindings of *IamMember rows, which have no name in
# the project; reservations are the project's, never the stack's.
PARTS = {"compute.disks", "iam_policies", "compute.reservations"}


def _in_project(home: Path, project: str) -> Found:
    world = json.loads((home / "world.json").read_text())
    found: Found = set()
    for collection, items in world["projects"][project].get("collections", {}).items():
        if collection in PARTS:
            continue
        kind = COLLECTIONS.get(collection, f"unplanned collection {collection}")
        found |= {(kind, key.rsplit("/", 1)[-1].split("@")[0]) for key in items}
    return found


@contextlib.contextmanager
def gcp_world(request: pytest.FixtureRequest) -> Iterator[World]:
    from pulumi import automation as auto

    from infra.providers.stack_home import state_dir
    from tests.fakes.sim_stacks import shared_project

    with shared_project(request, "contract-gcp") as (simulated, project):
        spec = project.stack("gpu-t4x2")

        def left_behind() -> list[str]:
            stacks = [s.name for s in auto.LocalWorkspace(work_dir=str(project.root)).list_stacks()]
            return [f"pulumi stack {s}" for s in stacks] + (
                [f"state {state_dir(spec.name)}"] if state_dir(spec.name).exists() else [])

        yield World(spec, absent="gpu-l4-spot",  # a stack file of the project, never brought up
                    existing=lambda: _in_project(simulated.home, project.id),
                    kinds=frozenset(COLLECTIONS.values()),
                    unchanged=lambda: (_in_project(simulated.home, project.id), project.operations()),
                    left_behind=left_behind, next_command=project.next_command)


WORLDS = {"local": local_world, "gcp": gcp_world}
