"""Networks, subnetworks, firewalls and routers in the simulator: GCE's dependency rules, and
the firewall rules handed to the machine backend."""

from __future__ import annotations

import pytest
from google.api_core import exceptions
from google.cloud import compute_v1

from gcpsim.machines import FirewallRule
from tests.fakes.sim_compute import PROJECT, REGION, ZONE, csim, instance_body, make_csim  # noqa: F401


def test_a_network_in_use_fails_its_delete_operation_naming_the_user(csim):
    csim.network()
    client = csim.client(compute_v1.NetworksClient)
    with pytest.raises(exceptions.BadRequest) as caught:
        client.delete(project=PROJECT, network="vpc").result(timeout=10)
    assert caught.value.errors[0].code == "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE"
    assert caught.value.errors[0].message == (
        f"The network resource 'projects/{PROJECT}/global/networks/vpc' is already being used by "
        f"'projects/{PROJECT}/regions/{REGION}/subnetworks/vpc-subnet'")
    assert client.get(project=PROJECT, network="vpc").name == "vpc"
    assert csim.backend.called("remove_network") == []


def test_a_subnetwork_with_instances_is_refused_until_they_are_gone(make_csim):
    sim = make_csim(delays={"instance_delete": 30})
    sim.network()
    sim.http("POST", sim.compute(f"zones/{ZONE}/instances"), instance_body("vm-0"))
    path = sim.compute(f"regions/{REGION}/subnetworks/vpc-subnet")
    status, answer = sim.http("DELETE", path)
    assert status == 400 and answer["error"]["errors"][0]["reason"] == "resourceInUseByAnotherResource"
    assert answer["error"]["message"] == (
        f"The subnetwork resource 'projects/{PROJECT}/regions/{REGION}/subnetworks/vpc-subnet' is already being "
        f"used by 'projects/{PROJECT}/zones/{ZONE}/instances/vm-0'")
    sim.http("DELETE", sim.compute(f"zones/{ZONE}/instances/vm-0"))
    assert sim.http("DELETE", path)[0] == 400  # still STOPPING: its address is held until it is gone
    sim.advance(31)
    assert sim.http("DELETE", path)[0] == 200


def test_the_stack_network_comes_down_in_order_and_leaves_no_trace(csim):
    csim.network()
    fw = csim.client(compute_v1.FirewallsClient)
    fw.delete(project=PROJECT, firewall="vpc-ssh").result(timeout=10)
    csim.client(compute_v1.SubnetworksClient).delete(project=PROJECT, region=REGION,
                                                     subnetwork="vpc-subnet").result(timeout=10)
    csim.client(compute_v1.NetworksClient).delete(project=PROJECT, network="vpc").result(timeout=10)
    assert csim.backend.called("remove_network") == [f"{PROJECT}/vpc"]
    assert csim.http("GET", csim.compute("global/networks/vpc"))[0] == 404
    assert csim.http("POST", csim.compute("global/networks"), {"name": "vpc", "autoCreateSubnetworks": False})[0] == 200


def test_firewall_rules_reach_the_backend_with_the_callers_address(make_csim):
    sim = make_csim(caller_ip="198.51.100.9")
    sim.network()
    network, rules, caller = sim.backend.called("apply_firewall")[-1]
    assert network == f"{PROJECT}/vpc" and caller == "198.51.100.9"
    assert rules == (FirewallRule(name="vpc-ssh", source_ranges=("203.0.113.0/24",), source_tags=(),
                                  target_tags=("node",), allowed=(("tcp", ("22",)),), priority=1000),)
    sim.http("POST", sim.compute("global/firewalls"), {
        "name": "internal", "network": f"projects/{PROJECT}/global/networks/vpc", "sourceTags": ["node"],
        "targetTags": ["node"], "allowed": [{"IPProtocol": p} for p in ("tcp", "udp", "icmp")]})
    _, rules, _ = sim.backend.called("apply_firewall")[-1]
    assert [r.name for r in rules] == ["internal", "vpc-ssh"]
    sim.http("PATCH", sim.compute("global/firewalls/vpc-ssh"), {"sourceRanges": ["0.0.0.0/0"]})
    _, rules, _ = sim.backend.called("apply_firewall")[-1]
    assert next(r for r in rules if r.name == "vpc-ssh").source_ranges == ("0.0.0.0/0",)
    sim.http("DELETE", sim.compute("global/firewalls/internal"))
    assert [r.name for r in sim.backend.called("apply_firewall")[-1][1]] == ["vpc-ssh"]


def test_a_firewall_on_a_network_that_does_not_exist_is_404(csim):
    status, answer = csim.http("POST", csim.compute("global/firewalls"), {
        "name": "fw", "network": f"projects/{PROJECT}/global/networks/none",
        "allowed": [{"IPProtocol": "tcp", "ports": ["22"]}]})
    assert status == 404 and f"projects/{PROJECT}/global/networks/none" in answer["error"]["message"]


def test_overlapping_subnetworks_in_one_network_are_refused(csim):
    csim.network()
    status, _ = csim.http("POST", csim.compute("regions/us-east1/subnetworks"), {
        "name": "again", "network": f"projects/{PROJECT}/global/networks/vpc", "ipCidrRange": "10.128.8.0/24"})
    assert status == 400


def test_a_router_nat_is_patched_into_its_router_as_the_provider_does(csim):
    csim.network()
    routers = csim.compute(f"regions/{REGION}/routers")
    assert csim.http("POST", routers, {"name": "rt", "network": f"projects/{PROJECT}/global/networks/vpc"})[0] == 200
    router = csim.http("GET", f"{routers}/rt")[1]
    nat = {"name": "nat", "natIpAllocateOption": "AUTO_ONLY",
           "sourceSubnetworkIpRangesToNat": "ALL_SUBNETWORKS_ALL_IP_RANGES"}
    assert csim.http("PATCH", f"{routers}/rt", {"nats": [*router.get("nats", []), nat]})[0] == 200
    assert [n["name"] for n in csim.http("GET", f"{routers}/rt")[1]["nats"]] == ["nat"]
    status, answer = csim.http("DELETE", csim.compute("global/networks/vpc"))
    assert status == 200 and answer["status"] == "DONE" and answer["error"]["errors"][0]["code"] \
        == "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE"
    assert csim.http("PATCH", f"{routers}/rt", {"nats": []})[0] == 200
    assert csim.http("DELETE", f"{routers}/rt")[0] == 200


def test_an_auto_mode_network_has_a_subnetwork_in_each_region(csim):
    assert csim.http("POST", csim.compute("global/networks"), {"name": "auto", "autoCreateSubnetworks": True})[0] == 200
    subnet = csim.http("GET", csim.compute(f"regions/{REGION}/subnetworks/auto"))[1]
    assert subnet["network"].endswith("/global/networks/auto") and subnet["ipCidrRange"].endswith("/20")
    body = instance_body("vm-0")
    body["networkInterfaces"] = [{"network": "global/networks/auto"}]
    assert "error" not in csim.http("POST", csim.compute(f"zones/{ZONE}/instances"), body)[1]
