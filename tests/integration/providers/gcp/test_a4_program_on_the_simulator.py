"""trainctl's Pulumi program for the A4 stack (gpu-a4-x2, GPUDirect RDMA) run by the simulator's
pulumi against the GCP simulator, as tests.integration.providers.gcp.test_pulumi_program_on_the_simulator.py
runs A3 Mega and A3 Ultra: its extra gVNIC network, the zone's RoCE network with a subnet per MRDMA
NIC, hyperdisk boot disks and the compact placement policy are created as declared, and destroy
removes them. (What a full simulated run of this stack proved besides: its GPU-family quota and
its `gpunet` step are in test_gpudirect_families_without_a_full_run.py; a GPUDirect training,
the GKE A3 Mega one, stays in tests/e2e/test_gpudirect_stack_on_the_simulator.py.)"""

from __future__ import annotations

import time

from infra.spec.stack_config import REPO_ROOT
from tests.integration.providers.gcp.test_pulumi_program_on_the_simulator import (COMPUTE, program_stack,  # noqa: F401
                                                                           sim)

STACK = "gpu-a4-x2"


def test_an_a4_stack_gets_its_roce_network_a_subnet_per_mrdma_nic_and_one_placement_policy_and_goes(sim, tmp_path):  # noqa: F811
    stack = program_stack(sim, tmp_path, STACK, int(time.time()) + 3600)
    result = stack.up(policy_packs=[str(REPO_ROOT / "policy")])
    nodes = result.outputs["inventory"].value["nodes"]
    assert [n["machine_type"] for n in nodes] == ["a4-highgpu-8g"] * 2
    zone, region = f"{COMPUTE}/zones/us-central1-b", f"{COMPUTE}/regions/us-central1"
    policy = f"{region}/resourcePolicies/{STACK}-placement"
    assert sim.http("GET", policy)[1]["groupPlacementPolicy"]["collocation"] == "COLLOCATED"
    rdma_subnets = [f"{STACK}-rdmasub-{i}" for i in range(8)]
    for name in (n["name"] for n in nodes):
        vm = sim.http("GET", f"{zone}/instances/{name}")[1]
        nics = [(nic["network"].rsplit("/", 1)[-1], nic.get("nicType")) for nic in vm["networkInterfaces"]]
        assert nics == [(f"{STACK}-vpc", "GVNIC"), (f"{STACK}-gpunet-0", "GVNIC")] + [(f"{STACK}-rdma", "MRDMA")] * 8
        assert [nic["subnetwork"].rsplit("/", 1)[-1] for nic in vm["networkInterfaces"]][2:] == rdma_subnets
        assert [p.rsplit("/", 1)[-1] for p in vm["resourcePolicies"]] == [f"{STACK}-placement"]
        assert sim.http("GET", f"{zone}/disks/{name}")[1]["type"].endswith("/diskTypes/hyperdisk-balanced")
    rdma = sim.http("GET", f"{COMPUTE}/global/networks/{STACK}-rdma")[1]
    assert rdma["mtu"] == 8896 and rdma["networkProfile"].endswith("/networkProfiles/us-central1-b-vpc-roce")
    assert all(sim.http("GET", f"{region}/subnetworks/{s}")[0] == 200 for s in rdma_subnets)

    stack.destroy()
    gone = [policy, f"{COMPUTE}/global/networks/{STACK}-rdma", f"{COMPUTE}/global/networks/{STACK}-gpunet-0",
            *(f"{region}/subnetworks/{s}" for s in rdma_subnets), *(f"{zone}/disks/{n['name']}" for n in nodes)]
    assert [path for path in gone if sim.http("GET", path)[0] != 404] == []
