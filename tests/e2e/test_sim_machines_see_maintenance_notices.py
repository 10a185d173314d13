"""A simulated GCE machine's guest reads host maintenance where a VM reads it: the simulator's
announcement reaches `instance/maintenance-event` on the machine's metadata server, and the
launcher's own watch, run on the machine, reports it."""

from __future__ import annotations

import shlex

import pytest

from tests.fakes.sim_machines_fixtures import SimMachines, sim_machines, wait_for  # noqa: F401
from trainctl.launchers.ssh.maintenance_watch import TERMINATE, watch_script

pytestmark = pytest.mark.e2e

EVENT = "curl -s -H 'Metadata-Flavor: Google' http://metadata.google.internal/computeMetadata/v1/instance/maintenance-event"


def test_the_guest_sees_the_announced_maintenance_and_the_watch_reports_it(sim_machines):  # noqa: F811
    vm, = sim_machines.boot(sim_machines.machine("vm0"))
    assert sim_machines.ssh(vm, EVENT) == "NONE"
    sim_machines.ssh(vm, f"nohup bash -c {shlex.quote(watch_script())} > /tmp/watch.out 2>&1 &")
    wait_for(lambda: "TRAINCTL_MAINTENANCE NONE" in sim_machines.ssh(vm, "cat /tmp/watch.out"), what="the watch's start")
    sim_machines.backend.announce_maintenance(vm.key, TERMINATE)
    assert sim_machines.ssh(vm, EVENT) == TERMINATE
    wait_for(lambda: f"TRAINCTL_MAINTENANCE {TERMINATE}" in sim_machines.ssh(vm, "cat /tmp/watch.out"),
             what="the watch's report")
    sim_machines.backend.announce_maintenance(vm.key, "NONE")
    assert sim_machines.ssh(vm, EVENT) == "NONE"
