"""A simulated GKE cluster's Kubernetes API: at the cluster's endpoint, over TLS that the
cluster's CA vouches for, open to the token gke-gcloud-auth-plugin (the simulator's stand-in)
hands out, for as long as the cluster exists; its pods are processes of this machine that find
each other by the names cluster DNS gives an Indexed Job's pods."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from google.cloud import container_v1

from tests.fakes.sim_fixtures import PROJECT, make_sim  # noqa: F401
from tests.unit.providers.simulator.test_sim_container import CLUSTER, PARENT, cluster, done, network

from infra.providers.gcp.program.gke import kubeconfig
from gcpsim.kubernetes import auth, control_planes, images
from gcpsim.state import World


@pytest.fixture
def gke_cluster(make_sim, tmp_path, monkeypatch):
    """A RUNNING cluster of 2 nodes; the kubeconfig trainctl's program writes for it, with the
    simulator's credential helper on PATH."""
    s = make_sim()
    client = network(s)
    done(client, client.create_cluster(parent=PARENT, cluster=cluster()))
    got = client.get_cluster(name=CLUSTER)
    bin_dir = tmp_path / "bin"
    auth.write_auth_plugin(bin_dir, s.simulator.home)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    config = tmp_path / "kubeconfig"
    config.write_text(kubeconfig(got.name, got.endpoint, got.master_auth.cluster_ca_certificate))
    return s, client, got, config


def core_api(config: Path):
    from kubernetes import client, config as kube_config

    return client.CoreV1Api(kube_config.new_client_from_config(config_file=str(config), persist_config=False))


def test_the_endpoint_is_a_loopback_address_serving_the_api_with_a_certificate_of_the_clusters_ca(gke_cluster):
    s, client, got, config = gke_cluster
    assert got.endpoint.startswith("127.")
    # https://<endpoint> means port 443; a process that may not bind it names its port
    assert (":" not in got.endpoint) == control_planes.may_bind_443()
    pods = core_api(config).list_namespaced_pod("default")
    assert pods.items == [] and pods.kind == "PodList"


def test_a_request_without_the_plugins_token_is_refused_with_401(gke_cluster, tmp_path):
    import base64
    import ssl
    import urllib.error
    import urllib.request

    _, _, got, _ = gke_cluster
    ca = tmp_path / "ca.pem"
    ca.write_bytes(base64.b64decode(got.master_auth.cluster_ca_certificate))
    context = ssl.create_default_context(cafile=str(ca))
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"https://{got.endpoint}/api/v1/namespaces/default/pods", context=context, timeout=10)
    assert refused.value.code == 401 and json.loads(refused.value.read())["reason"] == "Unauthorized"


def test_the_plugin_prints_an_exec_credential_as_the_real_one(gke_cluster, tmp_path):
    s = gke_cluster[0]
    printed = subprocess.run(["gke-gcloud-auth-plugin"], capture_output=True, text=True, check=True,
                             env={**os.environ, "KUBERNETES_EXEC_INFO": json.dumps(
                                 {"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential"})})
    credential = json.loads(printed.stdout)
    assert credential["kind"] == "ExecCredential"
    assert credential["apiVersion"] == "client.authentication.k8s.io/v1beta1"
    assert credential["status"]["token"] == auth.token(s.simulator.home)
    assert credential["status"]["expirationTimestamp"].endswith("Z")


def test_deleting_the_cluster_ends_its_api(gke_cluster):
    import urllib3

    _, client, got, config = gke_cluster
    done(client, client.delete_cluster(name=CLUSTER))
    with pytest.raises(urllib3.exceptions.MaxRetryError):
        core_api(config).list_namespaced_pod("default", _request_timeout=5)


def test_an_experiments_code_stands_in_for_its_image_and_only_the_newest_three_are_kept(tmp_path):
    home, code = tmp_path / "sim", tmp_path / "code"
    code.mkdir()
    made = []
    for version in range(5):
        (code / "train.py").write_text(f"print({version})\n")
        made.append(images.stand_in_code(home, "exp", code, None))
    assert len(set(made)) == 5 and all(m.startswith(images.SIMULATED_REGISTRY + "/exp:") for m in made)
    newest = images.resolve(home, made[-1])
    assert newest.workdir is not None and (newest.workdir / "train.py").read_text() == "print(4)\n"
    for gone in made[:2]:
        with pytest.raises(images.ImageUnavailable):
            images.resolve(home, gone)
    assert len([p for p in (home / "kubernetes/images/exp").iterdir() if p.name != "staging"]) == 3


def test_a_simulator_started_over_a_world_with_a_cluster_serves_its_api_again(gke_cluster):
    """Its Kubernetes objects lived in the process that stopped; the API itself comes back."""
    from gcpsim.server import Simulator

    s, _, got, config = gke_cluster
    s.simulator.stop()
    again = Simulator(s.simulator.home)
    again.start()
    try:
        assert core_api(config).list_namespaced_pod("default").items == []
    finally:
        again.stop()


def test_two_worlds_on_one_machine_never_get_the_same_cluster_endpoint(tmp_path: Path, monkeypatch):
    # Worlds whose homes start at the same place, creating clusters at once: neither API server
    # listens yet (it binds once its cluster runs), so only the host-wide claim keeps them apart.
    registry = tmp_path / "claims" / "cluster-endpoints.json"
    monkeypatch.setattr(control_planes, "endpoint_registry", lambda: registry)
    homes = [tmp_path / "ab", tmp_path / "ba"]  # the same bytes: both start at the same address
    for home in homes:
        home.mkdir()
    worlds = [World({}), World({})]
    first = control_planes.allocate_endpoint(worlds[0], homes[0], "c1")
    second = control_planes.allocate_endpoint(worlds[1], homes[1], "c2")
    assert first[0] != second[0]
    assert json.loads(registry.read_text()) == {first[0]: str(homes[0]), second[0]: str(homes[1])}
    control_planes.release(Sim(homes[0]), worlds[0], {"id": "c1", "name": "c1", "_kube": {"address": first[0]}})
    assert json.loads(registry.read_text()) == {second[0]: str(homes[1])}
    homes[1].rmdir()  # a world whose home is gone holds nothing
    assert control_planes.allocate_endpoint(World({}), homes[0], "c3")[0] in (first[0], second[0])


class Sim:
    def __init__(self, home: Path) -> None:
        self.home = home
