"""GKE in the simulator, through google-cloud-container: cluster and node pool lifecycles with
GKE's own validation, operations, and node VMs that carry the cluster's labels."""

from __future__ import annotations

import base64
import time

import pytest
from google.api_core.exceptions import BadRequest, Conflict, NotFound
from google.cloud import compute_v1, container_v1

from tests.fakes.sim_fixtures import PROJECT, make_sim, sim  # noqa: F401

ZONE = "us-central1-a"
PARENT = f"projects/{PROJECT}/locations/{ZONE}"
CLUSTER = f"{PARENT}/clusters/stack-gke"
LABELS = {"managed-by": "trainctl", "trainctl-stack": "stack"}


def said(exc):
    """The error's message as GKE wrote it (the REST client prefixes the request line)."""
    return exc.response.json()["error"]["message"]


def network(s):
    s.enable("compute.googleapis.com", "container.googleapis.com", "iam.googleapis.com")
    s.client(compute_v1.NetworksClient).insert(project=PROJECT, network_resource=compute_v1.Network(
        name="stack-vpc", auto_create_subnetworks=False)).result()
    s.client(compute_v1.SubnetworksClient).insert(project=PROJECT, region="us-central1", subnetwork_resource=compute_v1.Subnetwork(
        name="stack-subnet", network=f"projects/{PROJECT}/global/networks/stack-vpc", ip_cidr_range="10.128.0.0/20")).result()
    return s.client(container_v1.ClusterManagerClient)


def cluster(name="stack-gke", **extra):
    return container_v1.Cluster(
        name=name, network=f"projects/{PROJECT}/global/networks/stack-vpc",
        subnetwork=f"projects/{PROJECT}/regions/us-central1/subnetworks/stack-subnet", resource_labels=LABELS,
        release_channel=container_v1.ReleaseChannel(channel="REGULAR"),
        node_pools=[container_v1.NodePool(name="pool", initial_node_count=2,
                                          config=container_v1.NodeConfig(machine_type="e2-standard-2"))], **extra)


def done(gke, op, timeout=5.0):
    deadline = time.monotonic() + timeout
    while gke.get_operation(name=f"{PARENT}/operations/{op.name}").status != container_v1.Operation.Status.DONE:
        assert time.monotonic() < deadline, f"operation {op.name} not done"
        time.sleep(0.02)
    return gke.get_operation(name=f"{PARENT}/operations/{op.name}")


@pytest.fixture
def gke(make_sim):
    s = make_sim()
    return s, network(s)


def node_vms(s):
    found = {}
    for _, scoped in s.client(compute_v1.InstancesClient).aggregated_list(project=PROJECT):
        found.update({i.name: i for i in scoped.instances})
    return found


def test_a_cluster_name_over_40_characters_is_refused_in_gkes_words(gke):
    _, client = gke
    with pytest.raises(BadRequest) as caught:
        client.create_cluster(parent=PARENT, cluster=cluster(name="a" * 41))
    assert said(caught.value) == "Cluster.name must be less than 40 characters."
    with pytest.raises(BadRequest) as caught:
        client.create_cluster(parent=PARENT, cluster=cluster(name="Stack_GKE"))
    assert said(caught.value).startswith('Invalid value for field "cluster.name": "Stack_GKE". Must be a match of regex')


def test_a_node_pool_name_over_40_characters_is_refused(gke):
    _, client = gke
    client.create_cluster(parent=PARENT, cluster=cluster())
    with pytest.raises(BadRequest) as caught:
        client.create_node_pool(parent=CLUSTER, node_pool=container_v1.NodePool(name="p" * 41, initial_node_count=1))
    assert said(caught.value) == "Node_pool.name must be less than 40 characters."


def test_a_cluster_provisions_then_runs_with_an_endpoint_and_its_ca(make_sim):
    from cryptography import x509

    s = make_sim(delays={"cluster_create": 0.2})
    client = network(s)
    op = client.create_cluster(parent=PARENT, cluster=cluster())
    assert op.operation_type == container_v1.Operation.Type.CREATE_CLUSTER
    assert client.get_cluster(name=CLUSTER).status == container_v1.Cluster.Status.PROVISIONING
    done(client, op)
    got = client.get_cluster(name=CLUSTER)
    assert got.status == container_v1.Cluster.Status.RUNNING and got.endpoint
    ca = x509.load_pem_x509_certificate(base64.b64decode(got.master_auth.cluster_ca_certificate))
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert [p.name for p in got.node_pools] == ["pool"]


def test_a_second_cluster_of_the_same_name_is_409(gke):
    _, client = gke
    client.create_cluster(parent=PARENT, cluster=cluster())
    with pytest.raises(Conflict) as caught:
        client.create_cluster(parent=PARENT, cluster=cluster())
    assert said(caught.value) == f"Already exists: projects/{PROJECT}/locations/{ZONE}/clusters/stack-gke."


def test_auto_upgrade_off_is_refused_on_a_release_channel_cluster(gke):
    _, client = gke
    client.create_cluster(parent=PARENT, cluster=cluster())
    pool = container_v1.NodePool(name="gpu", initial_node_count=1,
                                 management=container_v1.NodeManagement(auto_upgrade=False, auto_repair=True))
    with pytest.raises(BadRequest) as caught:
        client.create_node_pool(parent=CLUSTER, node_pool=pool)
    assert said(caught.value) == "Auto_upgrade cannot be false when release_channel REGULAR is set."


def test_a_second_mutation_while_an_operation_runs_is_refused(make_sim):
    s = make_sim(delays={"cluster_create": 60.0})
    client = network(s)
    op = client.create_cluster(parent=PARENT, cluster=cluster())
    with pytest.raises(BadRequest) as caught:
        client.create_node_pool(parent=CLUSTER, node_pool=container_v1.NodePool(name="more", initial_node_count=1))
    assert said(caught.value) == f"Cluster is running incompatible operation {op.name}."


def test_the_workload_pool_is_the_projects_own_and_exists_once_a_cluster_uses_it(gke):
    s, client = gke
    wrong = container_v1.WorkloadIdentityConfig(workload_pool="other-project.svc.id.goog")
    with pytest.raises(BadRequest):
        client.create_cluster(parent=PARENT, cluster=cluster(workload_identity_config=wrong))
    status, account = s.http("POST", f"/v1/projects/{PROJECT}/serviceAccounts", {"accountId": "nodes-sa"})
    binding = {"policy": {"bindings": [{"role": "roles/iam.workloadIdentityUser",
                                        "members": [f"serviceAccount:{PROJECT}.svc.id.goog[trainctl/trainctl]"]}]}}
    status, _ = s.http("POST", f"/v1/{account['name']}:setIamPolicy", binding)
    assert status == 400  # no pool yet
    own = container_v1.WorkloadIdentityConfig(workload_pool=f"{PROJECT}.svc.id.goog")
    client.create_cluster(parent=PARENT, cluster=cluster(workload_identity_config=own))
    status, policy = s.http("POST", f"/v1/{account['name']}:setIamPolicy", binding)
    assert status == 200, policy


def test_node_vms_carry_the_clusters_labels_and_go_with_it(gke):
    s, client = gke
    client.create_cluster(parent=PARENT, cluster=cluster())
    vms = node_vms(s)
    assert len(vms) == 2
    for vm in vms.values():
        assert vm.name.startswith("gke-stack-gke-pool-")
        assert dict(vm.labels) == {**LABELS, "goog-gke-node": "", "goog-k8s-cluster-name": "stack-gke",
                                   "goog-k8s-cluster-location": ZONE, "goog-k8s-node-pool-name": "pool"}
    got = client.get_cluster(name=CLUSTER)
    client.set_labels(request=container_v1.SetLabelsRequest(
        name=CLUSTER, resource_labels={**LABELS, "trainctl-expires": "1"}, label_fingerprint=got.label_fingerprint))
    assert all(vm.labels["trainctl-expires"] == "1" for vm in node_vms(s).values())
    client.delete_cluster(name=CLUSTER)
    with pytest.raises(NotFound):
        client.get_cluster(name=CLUSTER)
    assert node_vms(s) == {}


def test_a_multi_host_tpu_pool_holds_exactly_its_slices_hosts(gke):
    _, client = gke
    client.create_cluster(parent=PARENT, cluster=cluster())
    config = container_v1.NodeConfig(machine_type="ct5lp-hightpu-4t")

    def tpu_pool(count, topology):
        return container_v1.NodePool(name="tpu", initial_node_count=count, config=config,
                                     placement_policy=container_v1.NodePool.PlacementPolicy(type_="COMPACT", tpu_topology=topology))
    with pytest.raises(BadRequest) as caught:
        client.create_node_pool(parent=CLUSTER, node_pool=tpu_pool(2, "4x4"))
    assert said(caught.value) == "Node count 2 is not a valid size of TPU pod slice with topology 4x4"
    with pytest.raises(BadRequest) as caught:
        client.create_node_pool(parent=CLUSTER, node_pool=tpu_pool(1, "2x2"))
    assert said(caught.value).startswith("TPU topology can't be specified with single-host TPU slice pool")


def test_a_node_compute_cannot_make_fails_the_pools_operation(make_sim):
    s = make_sim(template="fresh")  # GPUS_ALL_REGIONS = 0
    client = network(s)
    client.create_cluster(parent=PARENT, cluster=cluster())
    gpu = container_v1.NodeConfig(machine_type="n1-standard-4", accelerators=[
        container_v1.AcceleratorConfig(accelerator_type="nvidia-tesla-t4", accelerator_count=1)])
    op = client.create_node_pool(parent=CLUSTER, node_pool=container_v1.NodePool(name="gpu", initial_node_count=1, config=gpu))
    finished = done(client, op)
    assert finished.error.message.startswith("Google Compute Engine: ")
    assert "GPUS_ALL_REGIONS" in finished.error.message
    assert client.get_node_pool(name=f"{CLUSTER}/nodePools/gpu").status == container_v1.NodePool.Status.ERROR
