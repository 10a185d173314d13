"""trainctl's own Pulumi program (infra/providers/gcp/program/__main__.py, what `pulumi up` runs in the repository)
driven through the Automation API, as the realizer drives it, by the simulator's pulumi against
the GCP simulator: every resource of a GPU VM stack created, a second up sending no mutating
call, a later expiry applied in place, and destroy leaving only the bucket a named stack keeps."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from pulumi import automation as auto

from infra.providers.gcp.reaper import API_ENDPOINT_ENV
from gcpsim.pulumi import write_launcher
from infra.spec.stack_config import REPO_ROOT, load_stack
from tests.fakes.sim_fixtures import PROJECT, RunningSim, start_sim
from tests.fakes.sim_pulumi_gcp_project import mutations, recorded_requests

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMOCKKEY trainctl@test"
COMPUTE = f"/compute/v1/projects/{PROJECT}"


@pytest.fixture
def sim(tmp_path: Path, pulumi_server: Path) -> Iterator[RunningSim]:
    running = start_sim(tmp_path / "sim")
    # the program enables the rest; reading a service back needs Cloud Resource Manager
    running.enable("cloudresourcemanager.googleapis.com")
    write_launcher(tmp_path / "cli" / "bin", server=pulumi_server)  # what program_stack runs
    yield running
    running.simulator.stop()


def program_stack(sim: RunningSim, tmp_path: Path, name: str, expires_at: int, **update: Any) -> Any:
    spec = load_stack(name).model_copy(update={"project": PROJECT, **update})
    (tmp_path / "backend").mkdir(exist_ok=True)
    env = {"PULUMI_BACKEND_URL": f"file://{tmp_path / 'backend'}", "PULUMI_CONFIG_PASSPHRASE": "simulated",
           "PULUMI_HOME": str(tmp_path / "cli" / "home"), API_ENDPOINT_ENV: sim.url,
           "TRAINCTL_SPEC_JSON": spec.model_dump_json(), "TRAINCTL_SSH_PUBLIC_KEY": KEY,
           "TRAINCTL_EXPIRES_AT": str(expires_at)}
    return auto.create_or_select_stack(stack_name=name, work_dir=str(REPO_ROOT), opts=auto.LocalWorkspaceOptions(
        env_vars=env, pulumi_command=auto.PulumiCommand(root=str(tmp_path / "cli"))))


def test_the_gpu_vm_stack_comes_up_stays_unchanged_takes_a_new_expiry_in_place_and_goes(sim, tmp_path):
    with recorded_requests(sim.simulator) as seen:
        applied_in_turn(sim, tmp_path, seen)


def applied_in_turn(sim: RunningSim, tmp_path: Path, seen: list[tuple[str, str]]) -> None:
    expires = int(time.time()) + 3600
    stack = program_stack(sim, tmp_path, "gpu-t4x2", expires)
    result = stack.up(policy_packs=[str(REPO_ROOT / "policy")])
    node = result.outputs["inventory"].value["nodes"][0]
    status, vm = sim.http("GET", f"{COMPUTE}/zones/us-central1-a/instances/{node['name']}")
    assert status == 200 and node["internal_ip"] == vm["networkInterfaces"][0]["networkIP"]
    assert vm["labels"]["trainctl-expires"] == str(expires)

    seen.clear()
    stack.up(policy_packs=[str(REPO_ROOT / "policy")])
    assert mutations(seen) == []

    stack = program_stack(sim, tmp_path, "gpu-t4x2", expires + 600)
    seen.clear()
    stack.up(policy_packs=[str(REPO_ROOT / "policy")])
    relabelled = sorted(path.rsplit("/", 2)[-2] for verb, path in seen if path.endswith("/setLabels"))
    assert relabelled == [node["name"]]
    assert not [c for c in seen if c[0] == "DELETE"]

    stack.destroy()
    bucket = result.outputs["bucket"].value.removeprefix("gs://")
    assert sim.http("GET", f"/storage/v1/b/{bucket}")[0] == 200  # a named stack keeps its bucket
    assert sim.http("GET", f"{COMPUTE}/zones/us-central1-a/instances/{node['name']}")[0] == 404
    assert sim.http("GET", f"{COMPUTE}/global/networks/gpu-t4x2-vpc")[0] == 404


def test_an_a3_mega_stack_gets_nine_nics_on_nine_networks_in_one_placement_policy_and_goes(sim, tmp_path):
    stack = program_stack(sim, tmp_path, "gpu-a3mega-x2", int(time.time()) + 3600)
    result = stack.up(policy_packs=[str(REPO_ROOT / "policy")])
    names = [n["name"] for n in result.outputs["inventory"].value["nodes"]]
    assert [n["machine_type"] for n in result.outputs["inventory"].value["nodes"]] == ["a3-megagpu-8g"] * 2
    policy = f"{COMPUTE}/regions/us-central1/resourcePolicies/gpu-a3mega-x2-placement"
    assert sim.http("GET", policy)[1]["groupPlacementPolicy"]["collocation"] == "COLLOCATED"
    for name in names:
        vm = sim.http("GET", f"{COMPUTE}/zones/us-central1-a/instances/{name}")[1]
        networks = [nic["network"].rsplit("/", 1)[-1] for nic in vm["networkInterfaces"]]
        assert len(set(networks)) == len(networks) == 9
        assert [p.rsplit("/", 1)[-1] for p in vm["resourcePolicies"]] == ["gpu-a3mega-x2-placement"]
    assert {sim.http("GET", f"{COMPUTE}/global/networks/{n}")[1]["mtu"] for n in networks} == {8244}
    stack.destroy()
    assert sim.http("GET", policy)[0] == 404
    assert all(sim.http("GET", f"{COMPUTE}/global/networks/{n}")[0] == 404 for n in networks)


def test_an_a3_ultra_stack_gets_its_roce_network_and_hyperdisk_boot_disks_and_goes(sim, tmp_path):
    stack = program_stack(sim, tmp_path, "gpu-a3ultra-x2", int(time.time()) + 3600)
    result = stack.up(policy_packs=[str(REPO_ROOT / "policy")])
    names = [n["name"] for n in result.outputs["inventory"].value["nodes"]]
    zone = f"{COMPUTE}/zones/us-central1-b"
    for name in names:
        vm = sim.http("GET", f"{zone}/instances/{name}")[1]
        nics = [(nic["network"].rsplit("/", 1)[-1], nic.get("nicType")) for nic in vm["networkInterfaces"]]
        assert nics[:2] == [("gpu-a3ultra-x2-vpc", "GVNIC"), ("gpu-a3ultra-x2-gpunet-0", "GVNIC")]
        assert nics[2:] == [("gpu-a3ultra-x2-rdma", "MRDMA")] * 8
        assert sim.http("GET", f"{zone}/disks/{name}")[1]["type"].endswith("/diskTypes/hyperdisk-balanced")
    rdma = sim.http("GET", f"{COMPUTE}/global/networks/gpu-a3ultra-x2-rdma")[1]
    assert rdma["mtu"] == 8896 and rdma["networkProfile"].endswith("/networkProfiles/us-central1-b-vpc-roce")
    stack.destroy()
    assert sim.http("GET", f"{COMPUTE}/global/networks/gpu-a3ultra-x2-rdma")[0] == 404
    assert all(sim.http("GET", f"{zone}/disks/{n}")[0] == 404 for n in names)


def test_a_gke_a3_mega_pool_gets_its_additional_node_networks_on_a_multi_networking_cluster_and_goes(sim, tmp_path):
    with recorded_requests(sim.simulator) as seen:
        a3_mega_pool_up_twice_and_gone(sim, tmp_path, seen)


def a3_mega_pool_up_twice_and_gone(sim: RunningSim, tmp_path: Path, seen: list[tuple[str, str]]) -> None:
    stack = program_stack(sim, tmp_path, "gke-a3mega", int(time.time()) + 3600)
    stack.up(policy_packs=[str(REPO_ROOT / "policy")])
    cluster = f"/v1beta1/projects/{PROJECT}/locations/us-central1-a/clusters/gke-a3mega-gke"
    got = sim.http("GET", cluster)[1]
    assert got["addonsConfig"]["gcsFuseCsiDriverConfig"] == {"enabled": True}  # pods mount data: inputs
    network = got["networkConfig"]
    assert network["enableMultiNetworking"] is True and network["datapathProvider"] == "ADVANCED_DATAPATH"
    pool = sim.http("GET", f"{cluster}/nodePools/gke-a3mega-pool")[1]
    assert pool["config"]["gvnic"] == {"enabled": True}
    # by name, as AdditionalNodeNetworkConfig asks (the simulated GKE refuses a path)
    extra = [n["network"] for n in pool["networkConfig"]["additionalNodeNetworkConfigs"]]
    assert extra == [f"gke-a3mega-gpunet-{i}" for i in range(8)]
    nodes = sim.http("GET", f"{COMPUTE}/zones/us-central1-a/instances")[1]["items"]
    assert len(nodes) == 2
    for node in nodes:
        nics = [(n["network"].rsplit("/", 1)[-1], n.get("nicType")) for n in node["networkInterfaces"]]
        assert nics[1:] == [(name, "GVNIC") for name in extra]
    seen.clear()
    stack.up(policy_packs=[str(REPO_ROOT / "policy")])  # the networks read back as declared: no replacement
    assert mutations(seen) == []
    stack.destroy()
    assert all(sim.http("GET", f"{COMPUTE}/global/networks/{n}")[0] == 404 for n in extra)


def test_a_gke_flex_start_pool_is_made_as_gke_takes_one_empty_for_the_autoscaler_and_stays(sim, tmp_path):
    # The simulated GKE refuses a flex-start pool with a static size, auto-repair, spot or a
    # reservation (facts/gke_node_pools.py, from Cluster Toolkit's gke-node-pool preconditions).
    stack = program_stack(sim, tmp_path, "gke-l4", int(time.time()) + 3600, provisioning="flex-start")
    with recorded_requests(sim.simulator) as seen:
        stack.up(policy_packs=[str(REPO_ROOT / "policy")])
        pool = sim.http("GET", f"/v1beta1/projects/{PROJECT}/locations/us-central1-a/clusters/gke-l4-gke/nodePools/gke-l4-pool")[1]
        assert pool["config"]["flexStart"] is True and pool["management"]["autoRepair"] is False
        assert pool["autoscaling"] == {"enabled": True, "minNodeCount": 0, "maxNodeCount": 0, "totalMinNodeCount": 0,
                                       "totalMaxNodeCount": 2, "locationPolicy": "ANY"}
        assert pool["initialNodeCount"] == 0
        assert sim.http("GET", f"{COMPUTE}/zones/us-central1-a/instances")[1].get("items", []) == []
        seen.clear()
        stack.up(policy_packs=[str(REPO_ROOT / "policy")])
        assert mutations(seen) == []
    stack.destroy()


def test_a_gke_multislice_stack_gets_every_slices_pool_although_gke_runs_one_cluster_operation_at_a_time(sim, tmp_path):
    # The pools are created at once; GKE refuses a second while the first's operation runs
    # (400 failedPrecondition) and the provider retries it, as terraform-provider-google does.
    stack = program_stack(sim, tmp_path, "gke-tpu-v5e-2x16", int(time.time()) + 3600)
    stack.up(policy_packs=[str(REPO_ROOT / "policy")])
    cluster = f"/v1beta1/projects/{PROJECT}/locations/us-west4-a/clusters/gke-tpu-v5e-2x16-gke"
    for i in range(2):
        pool = sim.http("GET", f"{cluster}/nodePools/gke-tpu-v5e-2x16-pool-{i}")[1]
        assert (pool["status"], pool["initialNodeCount"], pool["placementPolicy"]["tpuTopology"]) == ("RUNNING", 4, "4x4")
    stack.destroy()
    assert sim.http("GET", cluster)[0] == 404
