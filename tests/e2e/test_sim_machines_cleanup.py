"""A simulator that dies with its machines running leaves nothing cleanup_all cannot find:
namespaces, links, rules, processes and folders go, with or without a readable ledger."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO
from gcpsim import external_ranges, nodes, vpc
from namespace_nodes.netns import run
from tests.fakes.sim_machines_fixtures import SimMachines, root_leftovers, sim_machines  # noqa: F401

pytestmark = pytest.mark.e2e


def boot_and_die(sim: SimMachines, count: int) -> None:
    """Another process boots machines and is killed (-9) before it removes anything."""
    machines = [sim.machine(f"vm{i}") for i in range(count)]
    script = textwrap.dedent(f"""
        import json, os, signal
        from pathlib import Path
        from gcpsim import nodes
        from gcpsim.machines import Machine
        backend = nodes.NodeMachines(Path({str(sim.home)!r}))
        for doc in json.loads({json.dumps(json.dumps([m.__dict__ for m in machines]))}):
            backend.boot(nodes.machine_of(doc))
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr


def test_cleanup_after_a_crash_removes_every_machine_and_network(sim_machines):  # noqa: F811
    boot_and_die(sim_machines, 2)
    left = nodes.leftovers(sim_machines.home)
    assert any(item.startswith("netns") for item in left) and any(item.startswith("process") for item in left)
    found = nodes.cleanup_all(sim_machines.home)  # what it says it found: what was there
    assert [x for x in found if not x.startswith("process")] == [x for x in left if not x.startswith("process")]
    assert nodes.leftovers(sim_machines.home) == [] and root_leftovers(sim_machines.own_range) == []


def test_cleanup_finds_a_crashed_homes_traces_by_name_when_its_ledger_is_unreadable(sim_machines):  # noqa: F811
    boot_and_die(sim_machines, 1)
    sim_machines.backend.ledger.path.write_text("{not json")
    nodes.cleanup_all(sim_machines.home)
    assert nodes.leftovers(sim_machines.home) == [] and root_leftovers(sim_machines.own_range) == []


def test_the_leftover_check_finds_a_route_into_its_own_range_but_not_another_worlds(sim_machines):  # noqa: F811
    sim_machines.boot(sim_machines.machine("vm0"))  # this world's network: the shared pieces are in use
    mine = sim_machines.own_range.network_address + 200
    other_range = next(r for r in vpc.EXTERNAL_POOL.subnets(new_prefix=sim_machines.own_range.prefixlen)
                       if r != sim_machines.own_range and not external_ranges_claimed(r))
    theirs = other_range.network_address + 200
    try:
        for ip in (mine, theirs):
            run(["ip", "route", "add", "unreachable", f"{ip}/32"])
        found = root_leftovers(sim_machines.own_range)
        assert f"route unreachable {mine}" in found and not any(str(theirs) in item for item in found)
    finally:
        for ip in (mine, theirs):
            run(["ip", "route", "del", "unreachable", f"{ip}/32"], check=False)


def external_ranges_claimed(net: object) -> bool:
    registry = external_ranges.REGISTRY
    return registry.exists() and str(net) in json.loads(registry.read_text() or "{}")
