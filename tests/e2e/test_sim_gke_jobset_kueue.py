"""A DDP run on a simulated GKE cluster where an admin installed JobSet and Kueue: trainctl
submits a JobSet labelled for the LocalQueue, Kueue admits it from the ClusterQueue's GPU quota,
JobSet's controller creates the child Job, and its two pods (processes on this machine, the
catalog's PyTorch image stood in for by an environment with torch) meet under torchrun at the
name the JobSet gives pod 0 and all-reduce a tensor with gloo."""

from __future__ import annotations

import pytest

from tests.e2e.test_sim_kubernetes_pods import launch
from tests.fakes.sim_fixtures import make_sim  # noqa: F401
from tests.unit.providers.simulator.test_sim_kubernetes_api import gke_cluster  # noqa: F401 (fixture)

pytestmark = pytest.mark.e2e  # pods run in mount and UTS namespaces of their own

DDP = ("import os, torch, torch.distributed as dist; dist.init_process_group('gloo'); "
       "t = torch.tensor([float(dist.get_rank() + 1)]); dist.all_reduce(t); "
       "print(f'rank {dist.get_rank()} of {dist.get_world_size()} sum {t.item():g}', flush=True)")


def admin_installs_jobset_and_kueue(config) -> None:
    """What an admin applies: the CRDs (of the release manifests), a ClusterQueue with quota
    for the pool's 2 GPUs, a LocalQueue in trainctl's namespace."""
    from kubernetes import client, config as kube_config

    api = kube_config.new_client_from_config(config_file=str(config), persist_config=False)
    crds = client.ApiextensionsV1Api(api)
    for kind, plural, group, version, scope in (("JobSet", "jobsets", "jobset.x-k8s.io", "v1alpha2", "Namespaced"),
                                                ("LocalQueue", "localqueues", "kueue.x-k8s.io", "v1beta2", "Namespaced"),
                                                ("ClusterQueue", "clusterqueues", "kueue.x-k8s.io", "v1beta2", "Cluster")):
        # The shape of the release manifests' CRDs; the simulator runs the controller it models for the name.
        crds.create_custom_resource_definition({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": scope, "names": {"kind": kind, "plural": plural},
                     "versions": [{"name": version, "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                         "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}},
            _preload_content=False).read()  # raw: the client's model wants every field of a real CRD's status
    custom = client.CustomObjectsApi(api)
    custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cluster-q"},
        "spec": {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
            {"name": "default", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 2}]}]}]}})
    custom.create_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "default", "localqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "team-a"},
        "spec": {"clusterQueue": "cluster-q"}})


def test_a_ddp_run_goes_through_a_jobset_admitted_from_a_kueue_queue(gke_cluster, tmp_path):
    sim, _, _, config = gke_cluster
    admin_installs_jobset_and_kueue(config)
    result, lines = launch(gke_cluster, tmp_path, None, ("env", "python", "-c", DDP), run_id="ddp", framework="torch",
                           queue="team-a")
    assert result.ok, lines[-30:]
    assert "[trainctl] jobset ddp queued in Kueue LocalQueue team-a: its pods start once the queue admits it" in lines
    said = sorted(line.split("]:", 1)[1] for line in lines if "sum " in line)
    assert said == ["rank 0 of 2 sum 3", "rank 1 of 2 sum 3"]
