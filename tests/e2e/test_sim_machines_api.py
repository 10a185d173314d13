"""The real machine backend behind the Compute API: a VM inserted through google-cloud-compute
is a machine the controller logs in to, with the key it put in metadata and the host key the
API's getGuestAttributes returns; deleting the VM and its network leaves nothing."""

from __future__ import annotations

import ipaddress
import json
import shutil
import uuid
from typing import Iterator

import pytest
from google.cloud import compute_v1

from conftest import TEST_HOMES
from namespace_nodes import keys
from gcpsim import nodes
from tests.fakes.sim_machines_fixtures import CALLER_IP, SimMachines, root_leftovers
from tests.fakes.sim_compute import PROJECT, REGION, ZONE, ComputeSim, instance_body
from tests.fakes.sim_fixtures import start_sim

pytestmark = pytest.mark.e2e


@pytest.fixture
def api_machines() -> Iterator[tuple[ComputeSim, SimMachines]]:
    home = TEST_HOMES / f"sim-api-{uuid.uuid4().hex[:8]}"
    home.mkdir(parents=True, mode=0o700)
    backend = nodes.NodeMachines(home)
    running = start_sim(home, backend, caller_ip=CALLER_IP)
    running.enable("compute.googleapis.com")
    key = home / "client" / "id_ed25519"
    own_range = backend.external_range()
    try:
        yield ComputeSim(running, backend), SimMachines(home, backend, key, keys.write_ed25519_keypair(key, "me"),
                                                        own_range)
    finally:
        running.simulator.stop()
        nodes.cleanup_all(home)
        left = nodes.leftovers(home)
        shutil.rmtree(home, ignore_errors=True)
        assert left == [] and root_leftovers(own_range) == []


def test_a_vm_inserted_through_the_api_is_a_machine_reached_with_the_apis_host_key(api_machines):
    sim, machines = api_machines
    sim.network(source_ranges=(f"{CALLER_IP}/32",))
    metadata = {"ssh-keys": f"trainctl:{machines.public} trainctl", "enable-guest-attributes": "TRUE",
                "block-project-ssh-keys": "TRUE"}
    client = sim.client(compute_v1.InstancesClient)
    body = compute_v1.Instance.from_json(json.dumps(instance_body("vm-0", metadata=metadata)))
    client.insert(project=PROJECT, zone=ZONE, instance_resource=body).result(timeout=30)
    vm = client.get(project=PROJECT, zone=ZONE, instance="vm-0")
    with machines.backend.ledger.edit() as data:
        machine = nodes.machine_of(data["machines"][f"{PROJECT}/{ZONE}/vm-0"]["machine"])
    assert machine.external_ip == vm.network_interfaces[0].access_configs[0].nat_i_p
    assert ipaddress.ip_address(machine.external_ip) in machines.own_range  # this world's, no other's
    published = machines.host_keys(machine)  # by the guest agent, as the VM booted
    from_api = client.get_guest_attributes(request=compute_v1.GetGuestAttributesInstanceRequest(
        project=PROJECT, zone=ZONE, instance="vm-0", query_path="hostkeys/"))  # as the GCP realizer asks
    assert [(i.key, i.value) for i in from_api.query_value.items] == [(a["key"], a["value"]) for a in published]
    assert machines.ssh(machine, "hostname; sudo -n true && echo ok") == "vm-0\nok\n"
    client.delete(project=PROJECT, zone=ZONE, instance="vm-0").result(timeout=30)
    for path in ("global/firewalls/vpc-ssh", f"regions/{REGION}/subnetworks/vpc-subnet", "global/networks/vpc"):
        status, answer = sim.http("DELETE", sim.compute(path))
        assert status == 200, answer
    assert not machines.backend.alive()
    assert nodes.leftovers(machines.home) == []  # the ledger stays, recording nothing
