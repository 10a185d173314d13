"""The REST calls the Terraform google provider makes for the program's Compute resources
(resource_compute_instance.go, compute_operation.go, image.go; MMv1 Network, Subnetwork,
Firewall, Router, RouterNat), as plain HTTP, answered with state."""

from __future__ import annotations

from tests.fakes.sim_compute import PROJECT, REGION, ZONE, ComputeSim, csim, instance_body, make_csim  # noqa: F401


def op_url(sim: ComputeSim, op: dict) -> str:
    """What ComputeOperationWaiter polls: by the operation's zone, region or else global scope."""
    if op.get("zone"):
        return sim.compute(f"zones/{op['zone'].rsplit('/', 1)[-1]}/operations/{op['name']}")
    if op.get("region"):
        return sim.compute(f"regions/{op['region'].rsplit('/', 1)[-1]}/operations/{op['name']}")
    return sim.compute(f"global/operations/{op['name']}")


def test_operations_are_read_where_the_provider_polls_them(make_csim):
    sim = make_csim(delays={"network_insert": 30, "subnetwork_insert": 30, "instance_insert": 30})
    for path, body in ((sim.compute("global/networks"), {"name": "vpc", "autoCreateSubnetworks": False}),
                       (sim.compute(f"regions/{REGION}/subnetworks"),
                        {"name": "vpc-subnet", "network": f"projects/{PROJECT}/global/networks/vpc",
                         "ipCidrRange": "10.128.0.0/20"}),
                       (sim.compute(f"zones/{ZONE}/instances"), instance_body("vm-0"))):
        status, op = sim.http("POST", path, body)
        assert status == 200 and op["status"] == "RUNNING"
        assert sim.http("GET", op_url(sim, op))[1]["status"] == "RUNNING"
        assert sim.http("POST", op_url(sim, op) + "/wait")[1]["name"] == op["name"]
        sim.advance(31)
        polled = sim.http("GET", op_url(sim, op))[1]
        assert polled["status"] == "DONE" and polled["progress"] == 100 and "endTime" in polled
        assert polled["targetLink"].endswith(f"{path.split('/compute/v1/')[-1]}/{body['name']}")
    assert sim.http("GET", sim.compute(f"zones/{ZONE}/operations/operation-nope"))[0] == 404


def test_the_boot_disk_is_read_back_as_the_provider_flattens_it(csim):
    csim.network()
    csim.http("POST", csim.compute(f"zones/{ZONE}/instances"), instance_body("vm-0"))
    inst = csim.http("GET", csim.compute(f"zones/{ZONE}/instances/vm-0"))[1]
    boot = inst["disks"][0]
    assert boot["boot"] and boot["autoDelete"] and boot["deviceName"] == "vm-0"
    source = boot["source"].split("/compute/v1/")[-1]
    disk = csim.http("GET", f"/compute/v1/{source}")[1]
    assert disk["type"].endswith(f"zones/{ZONE}/diskTypes/pd-balanced") and disk["sizeGb"] == "100"
    assert disk["users"] == [inst["selfLink"]]


def test_public_image_families_resolve_from_any_project(csim):
    status, image = csim.http("GET", "/compute/v1/projects/deeplearning-platform-release/global/images/family/"
                                     "common-cu128-ubuntu-2204-nvidia-570")
    assert status == 200 and image["family"] == "common-cu128-ubuntu-2204-nvidia-570" and image["status"] == "READY"
    by_name = csim.http("GET", f"/compute/v1/{image['selfLink'].split('/compute/v1/')[-1]}")
    assert by_name == (200, image)
    status, answer = csim.http("GET", "/compute/v1/projects/ubuntu-os-cloud/global/images/family/no-such-family")
    assert status == 404 and "images/family/no-such-family" in answer["error"]["message"]
    assert csim.http("GET", "/compute/v1/projects/ubuntu-os-cloud/global/networks")[0] == 404  # only images


def test_metadata_tags_and_labels_update_as_the_provider_does(csim):
    csim.network()
    csim.http("POST", csim.compute(f"zones/{ZONE}/instances"), instance_body("vm-0"))
    path = csim.compute(f"zones/{ZONE}/instances/vm-0")
    inst = csim.http("GET", path)[1]
    assert csim.http("POST", path + "/setTags", {"items": ["node", "extra"],
                                                 "fingerprint": inst["tags"]["fingerprint"]})[0] == 200
    assert csim.http("POST", path + "/setTags", {"items": ["node"], "fingerprint": inst["tags"]["fingerprint"]})[0] == 412
    inst = csim.http("GET", path)[1]
    assert inst["tags"]["items"] == ["node", "extra"]
    status, op = csim.http("POST", path + "/setMetadata", {"fingerprint": inst["metadata"]["fingerprint"],
                                                           "items": [{"key": "ssh-keys", "value": "u:k u"}]})
    assert status == 200 and op["operationType"] == "setMetadata"
    assert csim.backend.machines[f"{PROJECT}/{ZONE}/vm-0"].tags == ("node", "extra")


def test_changing_the_service_account_stops_updates_and_starts_the_instance(csim):
    """allow_stopping_for_update: stop, setServiceAccount, start."""
    csim.network()
    csim.http("POST", csim.compute(f"zones/{ZONE}/instances"), instance_body("vm-0"))
    path = csim.compute(f"zones/{ZONE}/instances/vm-0")
    assert csim.http("POST", path + "/stop")[0] == 200
    csim.advance(1)
    status, _ = csim.http("POST", path + "/setServiceAccount",
                          {"email": "new@p.iam.gserviceaccount.com", "scopes": ["https://www.googleapis.com/auth/cloud-platform"]})
    assert status == 200
    assert csim.http("POST", path + "/start")[0] == 200
    csim.advance(1)
    inst = csim.http("GET", path)[1]
    assert inst["status"] == "RUNNING" and inst["serviceAccounts"][0]["email"] == "new@p.iam.gserviceaccount.com"
    assert csim.backend.machines[f"{PROJECT}/{ZONE}/vm-0"].service_account == "new@p.iam.gserviceaccount.com"


def test_scheduling_keeps_the_gpu_rule(csim):
    csim.network()
    csim.http("POST", csim.compute(f"zones/{ZONE}/instances"), instance_body("gpu-0", gpu=("nvidia-tesla-t4", 1)))
    path = csim.compute(f"zones/{ZONE}/instances/gpu-0/setScheduling")
    status, answer = csim.http("POST", path, {"onHostMaintenance": "MIGRATE"})
    assert status == 400 and "live migration" in answer["error"]["message"]
    assert csim.http("POST", path, {"onHostMaintenance": "TERMINATE", "automaticRestart": False})[0] == 200


def test_a_subnetwork_patch_needs_its_fingerprint_and_google_access_has_its_own_call(csim):
    csim.network()
    path = csim.compute(f"regions/{REGION}/subnetworks/vpc-subnet")
    assert csim.http("POST", path + "/setPrivateIpGoogleAccess", {"privateIpGoogleAccess": True})[0] == 200
    subnet = csim.http("GET", path)[1]
    assert subnet["privateIpGoogleAccess"] is True and subnet["gatewayAddress"] == "10.128.0.1"
    assert csim.http("PATCH", path, {"logConfig": {"enable": True}})[0] == 412
    assert csim.http("PATCH", path, {"logConfig": {"enable": True}, "fingerprint": subnet["fingerprint"]})[0] == 200


def test_a_subnetwork_range_can_only_grow(csim):
    csim.network()
    path = csim.compute(f"regions/{REGION}/subnetworks/vpc-subnet/expandIpCidrRange")
    assert csim.http("POST", path, {"ipCidrRange": "10.128.0.0/24"})[0] == 400  # smaller
    assert csim.http("POST", path, {"ipCidrRange": "10.130.0.0/16"})[0] == 400  # elsewhere
    assert csim.http("POST", path, {"ipCidrRange": "10.128.0.0/16"})[0] == 200
    subnet = csim.http("GET", csim.compute(f"regions/{REGION}/subnetworks/vpc-subnet"))[1]
    assert subnet["ipCidrRange"] == "10.128.0.0/16"
