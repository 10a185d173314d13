"""RoCE network profiles and Hyperdisk Balanced in the simulator: what A3 Ultra and A4 stacks
need (a `<zone>-vpc-roce` network for their MRDMA NICs, a hyperdisk boot disk), through the real
client (google-cloud-compute, REST) and raw HTTP."""

from __future__ import annotations

import json

from google.cloud import compute_v1

from tests.fakes.sim_compute import PROJECT, csim, instance_body, make_csim  # noqa: F401

ROCE_ZONE, ROCE_REGION = "us-central1-b", "us-central1"  # where a3-ultragpu-8g and a4-highgpu-8g exist


def test_each_zone_with_mrdma_machines_offers_its_roce_profile_and_others_do_not(csim):
    client = csim.client(compute_v1.NetworkProfilesClient)
    names = [p.name for p in client.list(project=PROJECT)]
    assert f"{ROCE_ZONE}-vpc-roce" in names and "us-east4-b-vpc-roce" in names
    assert "us-central1-a-vpc-roce" not in names  # no H200 or B200 there
    profile = client.get(project=PROJECT, network_profile=f"{ROCE_ZONE}-vpc-roce")
    assert profile.location.name == ROCE_ZONE and profile.location.scope == "ZONE"
    assert profile.profile_type.network_type == "RDMA" and profile.profile_type.rdma_subtype == "ROCE"
    assert list(profile.features.interface_types) == ["MRDMA"]
    status, body = csim.http("GET", csim.compute("global/networkProfiles/us-central1-a-vpc-roce"))
    assert status == 404 and body["error"]["errors"][0]["reason"] == "notFound"


def test_a_network_created_with_the_roce_profile_takes_its_mtu_and_keeps_the_profile(csim):
    profile = f"projects/{PROJECT}/global/networkProfiles/{ROCE_ZONE}-vpc-roce"
    status, _ = csim.http("POST", csim.compute("global/networks"),
                          {"name": "rdma", "autoCreateSubnetworks": False, "networkProfile": profile})
    assert status == 200
    network = csim.client(compute_v1.NetworksClient).get(project=PROJECT, network="rdma")
    assert network.mtu == 8896 and network.network_profile.endswith(f"/compute/v1/{profile}")
    status, subnet = csim.http("POST", csim.compute(f"regions/{ROCE_REGION}/subnetworks"), {
        "name": "rdma-sub-0", "network": f"projects/{PROJECT}/global/networks/rdma", "ipCidrRange": "192.168.64.0/24"})
    assert status == 200


def test_a_network_naming_a_profile_that_does_not_exist_is_refused_with_404(csim):
    missing = f"projects/{PROJECT}/global/networkProfiles/us-central1-a-vpc-roce"
    status, body = csim.http("POST", csim.compute("global/networks"),
                             {"name": "rdma", "autoCreateSubnetworks": False, "networkProfile": missing})
    assert status == 404 and body["error"]["message"] == f"The resource '{missing}' was not found"
    assert csim.http("GET", csim.compute("global/networks/rdma"))[0] == 404


def test_an_instance_boots_from_a_hyperdisk_balanced_disk(csim):
    disk_type = csim.client(compute_v1.DiskTypesClient).get(
        project=PROJECT, zone=ROCE_ZONE, disk_type="hyperdisk-balanced")
    assert disk_type.name == "hyperdisk-balanced" and disk_type.valid_disk_size == "4GB-65536GB"
    csim.network(region=ROCE_REGION)
    body = instance_body("vm-h", zone=ROCE_ZONE)
    body["disks"][0]["initializeParams"]["diskType"] = f"projects/{PROJECT}/zones/{ROCE_ZONE}/diskTypes/hyperdisk-balanced"
    client = csim.client(compute_v1.InstancesClient)
    client.insert(project=PROJECT, zone=ROCE_ZONE,
                  instance_resource=compute_v1.Instance.from_json(json.dumps(body))).result(timeout=10)
    disk = csim.http("GET", csim.compute(f"zones/{ROCE_ZONE}/disks/vm-h"))[1]
    assert disk["type"].endswith("/diskTypes/hyperdisk-balanced")


def test_a_roce_network_takes_mrdma_nics_only_and_an_mrdma_nic_only_a_roce_network(csim):
    csim.network(region=ROCE_REGION)
    csim.http("POST", csim.compute("global/networks"), {
        "name": "rdma", "autoCreateSubnetworks": False,
        "networkProfile": f"projects/{PROJECT}/global/networkProfiles/{ROCE_ZONE}-vpc-roce"})
    csim.http("POST", csim.compute(f"regions/{ROCE_REGION}/subnetworks"), {
        "name": "rdma-sub-0", "network": f"projects/{PROJECT}/global/networks/rdma", "ipCidrRange": "192.168.64.0/24"})
    rdma_nic = {"subnetwork": f"projects/{PROJECT}/regions/{ROCE_REGION}/subnetworks/rdma-sub-0"}
    for name, nic, refused_at in (("vm-a", rdma_nic, 1), ("vm-b", {**rdma_nic, "nicType": "GVNIC"}, 1)):
        body = instance_body(name, zone=ROCE_ZONE)
        body["networkInterfaces"].append(nic)
        status, answer = csim.http("POST", csim.compute(f"zones/{ROCE_ZONE}/instances"), body)
        assert status == 400 and f"networkInterfaces[{refused_at}].nicType" in answer["error"]["message"]
    body = instance_body("vm-c", zone=ROCE_ZONE)
    body["networkInterfaces"][0]["nicType"] = "MRDMA"
    status, answer = csim.http("POST", csim.compute(f"zones/{ROCE_ZONE}/instances"), body)
    assert status == 400 and "networkInterfaces[0].nicType" in answer["error"]["message"]
    body = instance_body("vm-d", zone=ROCE_ZONE)
    body["networkInterfaces"].append({**rdma_nic, "nicType": "MRDMA"})
    assert csim.http("POST", csim.compute(f"zones/{ROCE_ZONE}/instances"), body)[0] == 200
    vm = csim.http("GET", csim.compute(f"zones/{ROCE_ZONE}/instances/vm-d"))[1]
    assert [n.get("nicType") for n in vm["networkInterfaces"]] == [None, "MRDMA"]
