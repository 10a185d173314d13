"""GKE's preconditions for flex-start node pools and additional node networks in the simulator,
through google-cloud-container (the simulator's facts: facts/gke_node_pools.py)."""

from __future__ import annotations

import time

import pytest
from google.api_core.exceptions import BadRequest
from google.cloud import container_v1

from gcpsim.facts import gke_node_pools
from tests.fakes.sim_fixtures import PROJECT, make_sim, sim  # noqa: F401
from tests.unit.providers.simulator.test_sim_container import CLUSTER, cluster, done, gke, node_vms, said  # noqa: F401

NO_RESERVATION = container_v1.ReservationAffinity(consume_reservation_type=container_v1.ReservationAffinity.Type.NO_RESERVATION)


def flex_pool(*, spot=False, auto_repair=False, reservation=NO_RESERVATION, autoscaled=True):
    return container_v1.NodePool(
        name="flex", initial_node_count=0,
        config=container_v1.NodeConfig(machine_type="g2-standard-8", flex_start=True, spot=spot,
                                       reservation_affinity=reservation, accelerators=[container_v1.AcceleratorConfig(
                                           accelerator_type="nvidia-l4", accelerator_count=1)]),
        autoscaling=container_v1.NodePoolAutoscaling(
            enabled=True, total_min_node_count=0, total_max_node_count=2,
            location_policy=container_v1.NodePoolAutoscaling.LocationPolicy.ANY) if autoscaled else None,
        management=container_v1.NodeManagement(auto_upgrade=True, auto_repair=auto_repair))


@pytest.mark.parametrize("broken, row", [
    ({"spot": True}, 0), ({"auto_repair": True}, 1), ({"reservation": None}, 2), ({"autoscaled": False}, 3)])
def test_a_flex_start_pool_breaking_a_precondition_is_refused_naming_it(gke, broken, row):
    s, client = gke
    done(client, client.create_cluster(parent=f"projects/{PROJECT}/locations/us-central1-a", cluster=cluster()))
    with pytest.raises(BadRequest) as caught:
        client.create_node_pool(parent=CLUSTER, node_pool=flex_pool(**broken))
    assert said(caught.value) == gke_node_pools.FLEX_START[row][1]
    assert "flex" not in {p.name for p in client.get_cluster(name=CLUSTER).node_pools}


def test_a_flex_start_pool_that_meets_them_is_made_empty_for_the_autoscaler(gke):
    s, client = gke
    done(client, client.create_cluster(parent=f"projects/{PROJECT}/locations/us-central1-a", cluster=cluster()))
    before = set(node_vms(s))
    done(client, client.create_node_pool(parent=CLUSTER, node_pool=flex_pool()))
    got = client.get_node_pool(name=f"{CLUSTER}/nodePools/flex")
    assert got.status == container_v1.NodePool.Status.RUNNING and got.autoscaling.total_max_node_count == 2
    assert set(node_vms(s)) == before


def test_an_additional_node_network_given_as_a_path_is_refused(gke):
    s, client = gke
    done(client, client.create_cluster(parent=f"projects/{PROJECT}/locations/us-central1-a", cluster=cluster()))
    path = f"projects/{PROJECT}/global/networks/stack-vpc"
    pool = container_v1.NodePool(name="multi", initial_node_count=1, network_config=container_v1.NodeNetworkConfig(
        additional_node_network_configs=[container_v1.AdditionalNodeNetworkConfig(network=path, subnetwork="stack-subnet")]))
    with pytest.raises(BadRequest) as caught:
        client.create_node_pool(parent=CLUSTER, node_pool=pool)
    assert said(caught.value).startswith(
        'Invalid value for field "node_pool.network_config.additional_node_network_configs[0].network": '
        f'"{path}". Must be the name')


def test_pods_waiting_for_a_flex_start_pool_get_nodes_from_the_autoscaler_up_to_its_maximum(gke, tmp_path, monkeypatch):
    import os

    from kubernetes import client as kube, config as kube_config

    from infra.providers.gcp.program.gke import kubeconfig
    from gcpsim.kubernetes import auth

    s, client = gke
    done(client, client.create_cluster(parent=f"projects/{PROJECT}/locations/us-central1-a", cluster=cluster()))
    done(client, client.create_node_pool(parent=CLUSTER, node_pool=flex_pool()))
    got = client.get_cluster(name=CLUSTER)
    auth.write_auth_plugin(tmp_path / "bin", s.simulator.home)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / "kubeconfig").write_text(kubeconfig(got.name, got.endpoint, got.master_auth.cluster_ca_certificate))
    api = kube_config.new_client_from_config(config_file=str(tmp_path / "kubeconfig"), persist_config=False)
    template = {"metadata": {"labels": {}}, "spec": {
        "restartPolicy": "Never", "nodeSelector": {"cloud.google.com/gke-nodepool": "flex"},
        "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "60"]}]}}
    kube.BatchV1Api(api).create_namespaced_job("default", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {"completionMode": "Indexed", "completions": 3, "parallelism": 3, "template": template}})
    flex_nodes: set[str] = set()
    placed: list[str] = []
    deadline = time.monotonic() + 300  # only a hang reaches it: the scale-up and scheduling are events
    while len(flex_nodes) < 2 or len(placed) < 2:
        assert time.monotonic() < deadline, f"flex pool nodes: {flex_nodes}, pods placed on: {placed}"
        time.sleep(0.05)  # a poll: neither Compute nor this client offers a watch of both
        pool = client.get_node_pool(name=f"{CLUSTER}/nodePools/flex")
        flex_nodes = {n for n, vm in node_vms(s).items() if vm.labels.get("goog-k8s-node-pool-name") == "flex"}
        pods = kube.CoreV1Api(api).list_namespaced_pod("default").items
        placed = [p.spec.node_name for p in pods if p.spec.node_name]
    assert len(pods) == 3 and set(placed) <= flex_nodes and len(placed) >= 2  # a third waits: the pool's maximum is 2
    assert pool.autoscaling.total_max_node_count == 2 and len(flex_nodes) == 2
