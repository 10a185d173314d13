"""A check of the GPUDirect stacks' declared networks that does not read trainctl's catalog: the
NICs, VPCs, subnets, MTUs, firewalls, boot disks and placement each family needs are written
here from GCP's pages (gpu-network-bandwidth: A3 High 4+1, A3 Mega 8+1, A3 Ultra/A4 8 CX-7 + 2
gVNIC; rdma-network-profiles: <zone>-vpc-roce, MRDMA only, 8896; the recipes' 8244 for TCPX(O))
and counted in what the program declares for every such stack in stacks/."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from infra.spec.stack_config import load_stack
from tests.unit.providers.gcp.test_gcp_program import GKE_STACKS, VM_STACKS, evaluated_stack


@dataclass(frozen=True)
class Documented:
    gvnic_nics: int  # NICs on ordinary VPCs, one VPC each (nic0 included)
    gpu_nics: int
    gpu_nic_type: str
    roce: bool  # the GPU NICs share one RoCE VPC, a subnet each
    mtu: int
    hyperdisk: bool


DOCUMENTED = {
    "a3-highgpu-8g": Documented(5, 4, "GVNIC", False, 8244, False),
    "a3-megagpu-8g": Documented(9, 8, "GVNIC", False, 8244, False),
    "a3-ultragpu-8g": Documented(2, 8, "MRDMA", True, 8896, True),
    "a4-highgpu-8g": Documented(2, 8, "MRDMA", True, 8896, True),
}


def _stacks(candidates: list[str]) -> list[str]:
    """The stacks of a documented family, from their specs: evaluating the program for this would
    cost every test process ~4 s at collection, before any test runs."""
    return [s for s in candidates if load_stack(s).machine_type in DOCUMENTED]


def test_the_gpudirect_stacks_exist() -> None:
    assert {"gpu-a3mega-x2", "gpu-a3ultra-x2", "gpu-a4-x2"} <= set(_stacks(VM_STACKS))
    assert "gke-a3mega" in _stacks(GKE_STACKS)


@pytest.mark.parametrize("stack", _stacks(VM_STACKS))
def test_each_vm_has_its_familys_nics_on_separate_networks(stack: str) -> None:
    spec, ev = evaluated_stack(stack)
    doc = DOCUMENTED[spec.machine_type]
    subnets = {r.name: r.inputs for r in ev.of_type("compute/subnetwork:Subnetwork")}
    for vm in ev.of_type("compute/instance:Instance"):
        nics = vm.inputs["networkInterfaces"]
        kinds = [nic.get("nicType") for nic in nics]
        total = doc.gvnic_nics + (doc.gpu_nics if doc.roce else 0)
        assert len(nics) == total, kinds
        assert kinds == ["GVNIC"] * doc.gvnic_nics + ([doc.gpu_nic_type] * doc.gpu_nics if doc.roce else [])
        assert len({str(nic["subnetwork"]) for nic in nics}) == total  # a subnet per NIC
        assert [bool(nic.get("accessConfigs")) for nic in nics][1:] == [False] * (total - 1)
        disk = vm.inputs["bootDisk"]["initializeParams"]["type"]
        assert disk.startswith("hyperdisk-") if doc.hyperdisk else disk == "pd-balanced"
    assert len(subnets) == doc.gvnic_nics + (doc.gpu_nics if doc.roce else 0)


@pytest.mark.parametrize("stack", _stacks(VM_STACKS) + _stacks(GKE_STACKS))
def test_networks_mtu_firewalls_and_roce_profile(stack: str) -> None:
    spec, ev = evaluated_stack(stack)
    doc = DOCUMENTED[spec.machine_type]
    networks = [r.inputs for r in ev.of_type("compute/network:Network")]
    roce = [n for n in networks if "networkProfile" in n]
    assert len(networks) == doc.gvnic_nics + (1 if doc.roce else 0)
    assert {n.get("mtu") for n in networks} == {doc.mtu}
    if doc.roce:
        (net,) = roce
        assert net["networkProfile"].endswith(f"/networkProfiles/{spec.zone}-vpc-roce")
    else:
        assert not roce
    # every ordinary network admits the stack's nodes from each other (none on the RoCE VPC,
    # whose ingress is allowed implicitly)
    internal = [f for f in ev.of_type("compute/firewall:Firewall") if f.inputs.get("sourceTags")]
    assert len(internal) == doc.gvnic_nics
    assert all(f.inputs["sourceTags"] == f.inputs["targetTags"] == [f"{spec.name}-node"] for f in internal)


@pytest.mark.parametrize("stack", _stacks(VM_STACKS))
def test_vms_share_one_compact_placement_policy(stack: str) -> None:
    spec, ev = evaluated_stack(stack)
    (policy,) = ev.of_type("compute/resourcePolicy:ResourcePolicy")
    assert policy.inputs["groupPlacementPolicy"] == {"collocation": "COLLOCATED"}
    links = {vm.inputs.get("resourcePolicies") for vm in ev.of_type("compute/instance:Instance")}
    assert len(links) == 1 and str(links.pop()).endswith(f"/resourcePolicies/{policy.inputs['name']}")


@pytest.mark.parametrize("stack", _stacks(GKE_STACKS))
def test_gke_pools_get_the_gpu_networks_as_additional_node_networks(stack: str) -> None:
    spec, ev = evaluated_stack(stack)
    doc = DOCUMENTED[spec.machine_type]
    (cluster,) = ev.of_type("container/cluster:Cluster")
    assert cluster.inputs["enableMultiNetworking"] is True
    assert cluster.inputs["datapathProvider"] == "ADVANCED_DATAPATH"
    for pool in ev.of_type("container/nodePool:NodePool"):
        extra = pool.inputs["networkConfig"]["additionalNodeNetworkConfigs"]
        assert len(extra) == doc.gvnic_nics - 1 + (doc.gpu_nics if doc.roce else 0)
        assert len({e["subnetwork"] for e in extra}) == len(extra)
        assert pool.inputs["placementPolicy"] == {"type": "COMPACT"}
        assert pool.inputs["nodeConfig"]["gvnic"] == {"enabled": True}


@pytest.mark.parametrize("stack", _stacks(GKE_STACKS))
def test_gke_pools_name_their_additional_networks_as_the_api_asks(stack: str) -> None:
    # container v1 AdditionalNodeNetworkConfig: "Name of the VPC ...", "Name of the subnetwork ..."
    _, ev = evaluated_stack(stack)
    names = {r.inputs["name"] for r in ev.of_type("compute/network:Network") + ev.of_type("compute/subnetwork:Subnetwork")}
    for pool in ev.of_type("container/nodePool:NodePool"):
        for extra in pool.inputs["networkConfig"]["additionalNodeNetworkConfigs"]:
            assert extra["network"] in names and extra["subnetwork"] in names, extra
