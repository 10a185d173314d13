"""Compute instances in the simulator: GCE's checks, states and addresses, through the real
client (google-cloud-compute, REST) and raw HTTP."""

from __future__ import annotations

import ipaddress
import json

import pytest
from google.api_core import exceptions
from google.cloud import compute_v1

from tests.fakes.sim_compute import PROJECT, REGION, ZONE, ComputeSim, csim, instance_body, make_csim  # noqa: F401


def insert(sim: ComputeSim, body: dict, zone: str = ZONE) -> tuple[int, dict]:
    return sim.http("POST", sim.compute(f"zones/{zone}/instances"), body)


def test_an_instance_is_provisioning_then_staging_then_running(make_csim):
    sim = make_csim(delays={"instance_insert": 30, "instance_boot": 30})
    sim.network()
    status, op = insert(sim, instance_body("vm-0"))
    assert status == 200 and op["kind"] == "compute#operation" and op["status"] == "RUNNING"
    client = sim.client(compute_v1.InstancesClient)
    assert client.get(project=PROJECT, zone=ZONE, instance="vm-0").status == "PROVISIONING"
    sim.advance(31)
    assert client.get(project=PROJECT, zone=ZONE, instance="vm-0").status == "STAGING"
    sim.advance(61)
    assert client.get(project=PROJECT, zone=ZONE, instance="vm-0").status == "RUNNING"
    done = sim.client(compute_v1.ZoneOperationsClient).get(project=PROJECT, zone=ZONE, operation=op["name"])
    assert done.status == compute_v1.Operation.Status.DONE and done.operation_type == "insert"


def test_the_real_client_creates_and_deletes_an_instance_and_its_boot_disk(csim):
    csim.network()
    client = csim.client(compute_v1.InstancesClient)
    resource = compute_v1.Instance.from_json(json.dumps(instance_body("vm-1")))
    client.insert(project=PROJECT, zone=ZONE, instance_resource=resource).result(timeout=10)
    inst = client.get(project=PROJECT, zone=ZONE, instance="vm-1")
    assert inst.status == "RUNNING" and inst.machine_type.endswith(f"zones/{ZONE}/machineTypes/n1-standard-8")
    disk = csim.http("GET", csim.compute(f"zones/{ZONE}/disks/vm-1"))[1]
    assert disk["sourceImage"].endswith("projects/ubuntu-os-cloud/global/images/ubuntu-2204-lts-simulated")
    assert disk["sizeGb"] == "100" and disk["type"].endswith("/diskTypes/pd-balanced")
    client.delete(project=PROJECT, zone=ZONE, instance="vm-1").result(timeout=10)
    with pytest.raises(exceptions.NotFound):
        client.get(project=PROJECT, zone=ZONE, instance="vm-1")
    assert csim.http("GET", csim.compute(f"zones/{ZONE}/disks/vm-1"))[0] == 404
    assert ("delete", f"{PROJECT}/{ZONE}/vm-1") in csim.backend.calls


def test_a_name_that_exists_answers_409_as_gce_does(csim):
    csim.network()
    assert insert(csim, instance_body("vm-1"))[0] == 200
    status, body = insert(csim, instance_body("vm-1"))
    assert status == 409
    assert body["error"]["errors"][0]["reason"] == "alreadyExists"
    assert body["error"]["message"] == f"The resource 'projects/{PROJECT}/zones/{ZONE}/instances/vm-1' already exists"


@pytest.mark.parametrize("change, code, reason, words", [
    ({"machineType": f"projects/{PROJECT}/zones/{ZONE}/machineTypes/n9-huge-8"}, 400, "invalid",
     "Machine type with name 'n9-huge-8' does not exist in zone 'us-central1-a'."),
    ({"guestAccelerators": [{"acceleratorType": f"projects/{PROJECT}/zones/{ZONE}/acceleratorTypes/nvidia-tesla-p100",
                             "acceleratorCount": 1}], "scheduling": {"onHostMaintenance": "TERMINATE"}},
     404, "notFound", f"The resource 'projects/{PROJECT}/zones/{ZONE}/acceleratorTypes/nvidia-tesla-p100' was not found"),
    ({"guestAccelerators": [{"acceleratorType": f"projects/{PROJECT}/zones/{ZONE}/acceleratorTypes/nvidia-tesla-t4",
                             "acceleratorCount": 1}], "scheduling": {"onHostMaintenance": "MIGRATE"}},
     400, "badRequest", "Instances with guest accelerators do not support live migration."),
    ({"machineType": f"projects/{PROJECT}/zones/{ZONE}/machineTypes/g2-standard-8"},  # bundled L4, MIGRATE
     400, "badRequest", "Instances with guest accelerators do not support live migration."),
    ({"disks": [{"boot": True, "initializeParams": {
        "sourceImage": "projects/ubuntu-os-cloud/global/images/family/ubuntu-1804-lts"}}]},
     404, "notFound", "The resource 'projects/ubuntu-os-cloud/global/images/family/ubuntu-1804-lts' was not found"),
    ({"networkInterfaces": [{"subnetwork": f"projects/{PROJECT}/regions/{REGION}/subnetworks/nope"}]},
     404, "notFound", f"'projects/{PROJECT}/regions/{REGION}/subnetworks/nope' was not found"),
    ({"networkInterfaces": [{"network": f"projects/{PROJECT}/global/networks/vpc"}]}, 400, "invalid",
     "Subnetwork should be specified for custom subnetmode network"),
    ({"name": "Bad_Name"}, 400, "invalid", "Must be a match of regex"),
])
def test_insert_is_checked_as_gce_checks_it(csim, change, code, reason, words):
    csim.network()
    body = {**instance_body("vm-1"), **change}
    if "onHostMaintenance" not in str(change) and "g2-" not in str(change):
        body["scheduling"] = instance_body("vm-1")["scheduling"]
    status, answer = insert(csim, body)
    assert status == code, answer
    assert answer["error"]["errors"][0]["reason"] == reason
    assert words in answer["error"]["message"]
    assert csim.http("GET", csim.compute(f"zones/{ZONE}/instances/vm-1"))[0] == 404
    assert csim.backend.called("boot") == []


def test_a_machine_type_exists_only_in_the_zones_of_its_gpus(csim):
    csim.network()
    # H100s in us-central1: -a, -b, -c, not -f (facts/gpus.py), where T4s are
    body = instance_body("a3-0", machine="a3-highgpu-8g", zone="us-central1-f")
    status, answer = insert(csim, body, zone="us-central1-f")
    assert status == 400
    assert "Machine type with name 'a3-highgpu-8g' does not exist in zone 'us-central1-f'." in answer["error"]["message"]
    assert insert(csim, instance_body("a3-1", machine="a3-highgpu-8g"))[0] == 200


def test_an_unknown_zone_is_refused_in_gce_words(csim):
    status, answer = csim.http("GET", csim.compute("zones/us-central1/instances"))
    assert status == 400 and answer["error"]["message"] == "Invalid value for field 'zone': 'us-central1'. Unknown zone."


def test_an_insert_without_a_resource_is_refused(csim):
    status, answer = csim.http("POST", csim.compute(f"zones/{ZONE}/instances"), {})
    assert status == 400 and answer["error"]["message"] == "Required field 'resource' not specified"


def test_internal_addresses_skip_what_gcp_reserves_and_external_ones_are_unique_across_projects(make_csim):
    sim = make_csim()
    sim.network(cidr="10.128.0.0/29")  # 8 addresses: .0 network, .1 gateway, .6 and .7 reserved
    for i in range(4):
        assert insert(sim, instance_body(f"vm-{i}"))[0] == 200
    status, answer = insert(sim, instance_body("vm-4"))
    assert status == 400 and "exhausted" in answer["error"]["message"]
    nics = [sim.http("GET", sim.compute(f"zones/{ZONE}/instances/vm-{i}"))[1]["networkInterfaces"][0] for i in range(4)]
    assert [n["networkIP"] for n in nics] == ["10.128.0.2", "10.128.0.3", "10.128.0.4", "10.128.0.5"]
    other = ComputeSim.__new__(ComputeSim)
    other.running, other.backend, other.project = sim.running, sim.backend, "other-project"
    sim.running.create_project(project="other-project", delays={"instance_insert": 0, "instance_boot": 0})
    sim.running.enable("compute.googleapis.com", project="other-project")
    other.network()  # the same internal range: networks may overlap
    assert insert(other, instance_body("vm-0", project="other-project"))[0] == 200
    theirs = other.http("GET", other.compute(f"zones/{ZONE}/instances/vm-0"))[1]["networkInterfaces"][0]
    assert theirs["networkIP"] == "10.128.0.2"
    externals = [n["accessConfigs"][0]["natIP"] for n in nics] + [theirs["accessConfigs"][0]["natIP"]]
    assert len(set(externals)) == 5
    assert all(ipaddress.ip_address(ip) in ipaddress.ip_network("10.213.0.0/16") for ip in externals)


def test_a_deleted_instance_gives_its_addresses_back(csim):
    csim.network(cidr="10.128.0.0/29")
    assert insert(csim, instance_body("vm-0"))[0] == 200
    csim.client(compute_v1.InstancesClient).delete(project=PROJECT, zone=ZONE, instance="vm-0").result(timeout=10)
    assert insert(csim, instance_body("vm-1"))[0] == 200
    nic = csim.http("GET", csim.compute(f"zones/{ZONE}/instances/vm-1"))[1]["networkInterfaces"][0]
    assert nic["networkIP"] == "10.128.0.2"


def test_the_machine_is_built_from_the_instance(csim):
    csim.network()
    body = instance_body("gpu-0", gpu=("nvidia-tesla-t4", 2), spot=True,
                         metadata={"ssh-keys": "me:ssh-ed25519 AAAA me", "startup-script": "echo hi"})
    assert insert(csim, body)[0] == 200
    m = csim.backend.machines[f"{PROJECT}/{ZONE}/gpu-0"]
    assert m.name == "gpu-0" and m.network == f"{PROJECT}/vpc" and m.subnet_cidr == "10.128.0.0/20"
    assert m.metadata == {"ssh-keys": "me:ssh-ed25519 AAAA me", "startup-script": "echo hi"}
    assert m.tags == ("node",) and m.spot and m.accelerators == {"nvidia-tesla-t4": 2}
    assert m.service_account == f"nodes@{PROJECT}.iam.gserviceaccount.com"
    assert m.internal_ip == "10.128.0.2" and m.external_ip is not None and m.machine_type == "n1-standard-8"
    bundled = instance_body("l4-0", machine="g2-standard-8")
    assert insert(csim, bundled)[0] == 200
    assert csim.backend.machines[f"{PROJECT}/{ZONE}/l4-0"].accelerators == {"nvidia-l4": 1}


def test_stop_then_start_keeps_the_machine_and_its_address(make_csim):
    sim = make_csim(delays={"instance_stop": 30})
    sim.network()
    client = sim.client(compute_v1.InstancesClient)
    assert insert(sim, instance_body("vm-0"))[0] == 200
    before = client.get(project=PROJECT, zone=ZONE, instance="vm-0").network_interfaces[0].network_i_p
    sim.http("POST", sim.compute(f"zones/{ZONE}/instances/vm-0/stop"))
    assert client.get(project=PROJECT, zone=ZONE, instance="vm-0").status == "STOPPING"
    status, answer = sim.http("POST", sim.compute(f"zones/{ZONE}/instances/vm-0/start"))
    assert status == 400 and answer["error"]["errors"][0]["reason"] == "resourceNotReady"
    sim.advance(31)
    assert client.get(project=PROJECT, zone=ZONE, instance="vm-0").status == "TERMINATED"
    client.start(project=PROJECT, zone=ZONE, instance="vm-0").result(timeout=10)
    after = client.get(project=PROJECT, zone=ZONE, instance="vm-0")
    assert after.status == "RUNNING" and after.network_interfaces[0].network_i_p == before
    key = f"{PROJECT}/{ZONE}/vm-0"
    assert [c for c in sim.backend.calls if c[0] in ("boot", "stop")] == [("boot", key), ("stop", key), ("boot", key)]


def test_aggregated_list_finds_instances_by_label_as_the_reaper_asks(csim):
    csim.network()
    insert(csim, instance_body("ours", labels={"managed-by": "trainctl", "trainctl-stack": "s"}))
    insert(csim, instance_body("theirs", labels={"team": "x"}))
    client = csim.client(compute_v1.InstancesClient)
    request = compute_v1.AggregatedListInstancesRequest(project=PROJECT, filter="labels.managed-by = trainctl")
    found = {scope: [i.name for i in scoped.instances] for scope, scoped in client.aggregated_list(request=request)}
    assert found[f"zones/{ZONE}"] == ["ours"]
    assert found["zones/us-west4-a"] == []  # a scope without results: present, with its warning
    status, answer = csim.http("GET", csim.compute("aggregated/instances?filter=labels.managed-by%3E%3Ctrainctl"))
    assert status == 400 and "Invalid list filter expression" in answer["error"]["message"]


def test_guest_attributes_come_from_the_machine_once_booted_and_enabled(make_csim):
    sim = make_csim(delays={"instance_insert": 30})
    sim.network()
    insert(sim, instance_body("on"))
    insert(sim, instance_body("off", metadata={"ssh-keys": "me:key me"}))
    client = sim.client(compute_v1.InstancesClient)

    def host_keys(name: str) -> list[str]:
        return [i.key for i in client.get_guest_attributes(request=compute_v1.GetGuestAttributesInstanceRequest(
            project=PROJECT, zone=ZONE, instance=name, query_path="hostkeys/")).query_value.items]

    with pytest.raises(exceptions.NotFound):
        host_keys("on")  # still provisioning: the guest agent has published nothing
    sim.advance(31)
    assert host_keys("on") == ["ssh-ed25519"]
    with pytest.raises(exceptions.NotFound):
        host_keys("off")  # guest attributes not enabled in its metadata


def test_set_metadata_needs_the_current_fingerprint_and_reaches_the_guest(csim):
    csim.network()
    insert(csim, instance_body("vm-0"))
    path = csim.compute(f"zones/{ZONE}/instances/vm-0")
    current = csim.http("GET", path)[1]["metadata"]
    status, answer = csim.http("POST", path + "/setMetadata", {"items": [{"key": "a", "value": "b"}]})
    assert status == 412 and answer["error"]["errors"][0]["reason"] == "conditionNotMet"
    assert answer["error"]["message"] == "Supplied fingerprint does not match current metadata fingerprint."
    status, _ = csim.http("POST", path + "/setMetadata",
                          {"fingerprint": current["fingerprint"], "items": [{"key": "a", "value": "b"}]})
    assert status == 200
    assert csim.backend.machines[f"{PROJECT}/{ZONE}/vm-0"].metadata == {"a": "b"}
    assert csim.http("GET", path)[1]["metadata"]["fingerprint"] != current["fingerprint"]


def test_set_labels_needs_the_label_fingerprint(csim):
    csim.network()
    insert(csim, instance_body("vm-0"))
    path = csim.compute(f"zones/{ZONE}/instances/vm-0")
    status, answer = csim.http("POST", path + "/setLabels", {"labels": {"a": "b"}, "labelFingerprint": "stale"})
    assert status == 412 and "Labels fingerprint either invalid" in answer["error"]["message"]
    fp = csim.http("GET", path)[1]["labelFingerprint"]
    assert csim.http("POST", path + "/setLabels", {"labels": {"a": "b"}, "labelFingerprint": fp})[0] == 200
    assert csim.http("GET", path)[1]["labels"] == {"a": "b"}


def test_the_service_account_changes_only_on_a_stopped_instance(csim):
    csim.network()
    insert(csim, instance_body("vm-0"))
    path = csim.compute(f"zones/{ZONE}/instances/vm-0")
    change = {"email": "other@x.iam.gserviceaccount.com", "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}
    assert csim.http("POST", path + "/setServiceAccount", change)[0] == 400
    csim.http("POST", path + "/stop")
    csim.advance(1)
    assert csim.http("POST", path + "/setServiceAccount", change)[0] == 200
    assert csim.http("GET", path)[1]["serviceAccounts"][0]["email"] == "other@x.iam.gserviceaccount.com"


def test_deletion_protection_refuses_a_delete(csim):
    csim.network()
    insert(csim, instance_body("vm-0", deletionProtection=True))
    status, _ = csim.http("DELETE", csim.compute(f"zones/{ZONE}/instances/vm-0"))
    assert status == 400
    assert csim.http("GET", csim.compute(f"zones/{ZONE}/instances/vm-0"))[1]["status"] == "RUNNING"
