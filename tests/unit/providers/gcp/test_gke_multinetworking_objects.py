"""A GKE GPUDirect pool's cluster objects: one GKENetworkParamSet + Network pair per extra network
(NetDevice for gVNIC networks, RDMA for a RoCE network's subnets) and the plugin's installer
DaemonSets, listed by `plan`, created through the kubeconfig after `up` (kept when already there)
and deleted by `down`; the simulated API server stores them as one with the CRDs installed does,
refuses what their schemas refuse, and does not create a Job's pod that names a missing Network."""

from __future__ import annotations

import copy
import json

import pytest
from kubernetes import client, config

from infra.providers.gcp import gke_cluster_objects
from infra.providers.inventory import Inventory
from infra.spec.gke_gpudirect import network_objects
from infra.spec.stack_config import load_stack
from tests.fakes.kube_fixtures import GSA, KubernetesApi, k8s  # noqa: F401 (k8s: fixture)
from trainctl.launchers.gke.manifests import manifests
from trainctl.launchers.spec import LaunchSpec

A3MEGA = load_stack("gke-a3mega")


def a3ultra():
    return A3MEGA.model_copy(update={"machine_type": "a3-ultragpu-8g",
                                     "gpu": A3MEGA.gpu.model_copy(update={"type": "nvidia-h200-141gb"})})


def apis(api: KubernetesApi, tmp_path):
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    api_client = config.new_client_from_config(config_file=str(kubeconfig), persist_config=False)
    return kubeconfig, client.CustomObjectsApi(api_client), client.BatchV1Api(api_client), client.CoreV1Api(api_client)


def names(custom, plural: str) -> list[str]:
    listed = custom.list_cluster_custom_object("networking.gke.io", "v1", plural)["items"]
    return sorted(o["metadata"]["name"] for o in listed)


def test_plan_lists_a_pair_per_network_and_the_installers_and_nothing_for_other_pools():
    rows = gke_cluster_objects.plan_rows(A3MEGA)
    kinds = [r.kind for r in rows]
    assert kinds.count("kubernetes/GKENetworkParamSet") == kinds.count("kubernetes/Network") == 8
    assert {r.name for r in rows if r.kind == "kubernetes/DaemonSet"} == {"nccl-tcpxo-installer", "device-injector"}
    first = next(r for r in rows if r.kind == "kubernetes/GKENetworkParamSet")
    assert dict(first.values) == {"vpc": "gke-a3mega-gpunet-0", "vpcSubnet": "gke-a3mega-gpusub-0",
                                  "deviceMode": "NetDevice"}
    assert gke_cluster_objects.plan_rows(load_stack("gke-l4")) == []
    assert gke_cluster_objects.plan_rows(load_stack("gpu-a3mega-x2")) == []  # VMs: no cluster to hold them


def test_a3_ultra_gets_its_gvnic_as_netdevice_and_each_roce_subnet_as_rdma():
    sets = [o for o in network_objects(a3ultra()) if o["kind"] == "GKENetworkParamSet"]
    assert [s["spec"]["deviceMode"] for s in sets] == ["NetDevice"] + ["RDMA"] * 8
    assert {s["spec"]["vpc"] for s in sets[1:]} == {"gke-a3mega-rdma"}
    assert [s["spec"]["vpcSubnet"] for s in sets[1:]] == [f"gke-a3mega-rdmasub-{i}" for i in range(8)]
    daemons = [o["metadata"]["name"] for o in gke_cluster_objects.declared(a3ultra()) if o["kind"] == "DaemonSet"]
    assert daemons == ["nccl-rdma-installer"]


def test_up_creates_them_again_keeps_them_and_down_deletes_them(k8s, tmp_path):  # noqa: F811
    kubeconfig, custom, _, _ = apis(k8s, tmp_path)
    said: list[str] = []
    gke_cluster_objects.apply(A3MEGA, kubeconfig, said.append)
    expected = [f"gke-a3mega-gpunet-{i}" for i in range(8)]
    assert names(custom, "gkenetworkparamsets") == names(custom, "networks") == expected
    assert sorted(k8s.names("daemonsets")) == ["device-injector", "nccl-tcpxo-installer"]
    network = custom.get_cluster_custom_object("networking.gke.io", "v1", "networks", expected[0])
    assert network["spec"]["parametersRef"] == {"group": "networking.gke.io", "kind": "GKENetworkParamSet",
                                                "name": expected[0]}
    gke_cluster_objects.apply(A3MEGA, kubeconfig, said.append)  # `up` again
    assert said[-1].startswith("cluster objects: 0 created, 18 already there")
    gke_cluster_objects.remove({"spec": A3MEGA.model_dump(mode="json")}, tmp_path, said.append)
    assert said[-1] == "cluster objects: 18 deleted"
    assert names(custom, "gkenetworkparamsets") == names(custom, "networks") == [] == k8s.names("daemonsets")
    assert k8s.refused() == []


@pytest.mark.parametrize("change, code, message", [
    (lambda o: o["spec"].update(deviceMode="SRIOV"), 422,
     'spec.deviceMode: Unsupported value: "SRIOV": supported values: "DPDK-VFIO", "NetDevice", "RDMA"'),
    (lambda o: o["spec"].pop("vpcSubnet"), 422, "spec.vpcSubnet: Required value"),
    (lambda o: o["spec"].update(subnet="x"), 400, 'strict decoding error: unknown field "spec.subnet"'),
], ids=["device-mode", "no-subnet", "unknown-field"])
def test_the_api_refuses_a_parameter_set_its_schema_refuses(k8s, tmp_path, change, code, message):  # noqa: F811
    _, custom, _, _ = apis(k8s, tmp_path)
    body = copy.deepcopy(network_objects(A3MEGA)[0])
    change(body)
    with pytest.raises(client.ApiException) as refused:
        custom.create_cluster_custom_object("networking.gke.io", "v1", "gkenetworkparamsets", body,
                                            field_validation="Strict")
    assert refused.value.status == code and message in json.loads(refused.value.body)["message"]


def test_a_jobs_pod_naming_a_missing_network_is_not_created_until_the_networks_exist(k8s, tmp_path):  # noqa: F811
    kubeconfig, _, batch, core = apis(k8s, tmp_path)
    inventory = Inventory(stack="gke-a3mega", provider="gcp", nodes=(), bucket_uri="gs://b", ssh_private_key="",
                          known_hosts="", gke_service_account=GSA, kubeconfig=str(kubeconfig))

    def create_job(run_id: str) -> None:
        job = manifests(A3MEGA, inventory, LaunchSpec(run_id=run_id, framework="torch", command=("true",)))[2]
        batch.create_namespaced_job("default", job, field_validation="Strict")

    create_job("before")
    assert core.list_namespaced_pod("default", label_selector="job-name=before").items == []
    events = core.list_namespaced_event("default").items
    assert len(events) == A3MEGA.node_count  # one per pod the Job controller could not create
    assert {(e.reason, e.involved_object.name) for e in events} == {("FailedCreate", "before")}
    assert events[0].message.startswith("Error creating: ") and "gke-a3mega-gpunet-0" in events[0].message
    gke_cluster_objects.apply(A3MEGA, kubeconfig, lambda _: None)
    create_job("after")
    pods = core.list_namespaced_pod("default", label_selector="job-name=after").items
    assert len(pods) == A3MEGA.node_count
    assert pods[0].spec.init_containers[0].name == "tcpxo-daemon"
    assert "gke-a3mega-gpunet-7" in pods[0].metadata.annotations["networking.gke.io/interfaces"]


def test_a_cluster_that_refuses_an_object_fails_up_as_a_provisioning_error(k8s, tmp_path, monkeypatch):  # noqa: F811
    from infra.errors import ProvisionError

    kubeconfig, _, _, _ = apis(k8s, tmp_path)
    wrong = copy.deepcopy(network_objects(A3MEGA)[0])
    wrong["spec"]["deviceMode"] = "SRIOV"  # as an API of another GKE version might refuse one of ours
    monkeypatch.setattr(gke_cluster_objects, "declared", lambda spec: [wrong])
    with pytest.raises(ProvisionError, match="stack gke-a3mega: the cluster refused its GPUDirect objects .*422"):
        gke_cluster_objects.apply(A3MEGA, kubeconfig, lambda _: None)


def test_a_run_on_a_cluster_without_the_networks_is_refused_before_its_job_exists(k8s, tmp_path):  # noqa: F811
    from infra.errors import ConfigError
    from trainctl.launchers.gke.job import run_job

    kubeconfig, _, _, _ = apis(k8s, tmp_path)
    inventory = Inventory(stack="gke-a3mega", provider="gcp", nodes=(), bucket_uri="gs://b", ssh_private_key="",
                          known_hosts="", gke_service_account=GSA, kubeconfig=str(kubeconfig))
    spec = LaunchSpec(run_id="r1", framework="torch", command=("true",))
    with pytest.raises(ConfigError, match=r"no Network object gke-a3mega-gpunet-0, .*gpunet-7 .*trainctl up --stack"):
        run_job(A3MEGA, inventory, spec, tmp_path / "logs", lambda _: None, poll=0.02)
    assert k8s.names("jobs") == []
