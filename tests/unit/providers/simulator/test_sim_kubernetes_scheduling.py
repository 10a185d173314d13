"""A simulated cluster's scheduler: pods land only on nodes whose labels (the ones GKE puts on a
pool's nodes: its name, a TPU pool's accelerator and topology) match their nodeSelector, so each
slice's Job of a multislice run lands on its own slice's pool; a pod no node takes waits."""

from __future__ import annotations

from gcpsim.kubernetes import control_planes
from gcpsim.kubernetes.api import KubernetesApi
from gcpsim.kubernetes.jobs import JobController
from gcpsim.kubernetes.scripted import PodRun, ScriptedPods

# Two multi-host v5e slice pools as the simulated GKE API keeps them (4 nodes each, 4x4).
CLUSTER = {"pools": {
    f"s-pool-{i}": {"name": f"s-pool-{i}", "config": {"machineType": "ct5lp-hightpu-4t"},
                    "placementPolicy": {"type": "COMPACT", "tpuTopology": "4x4"},
                    "nodes": [f"us-west4-a/gke-s-pool-{i}-{n}" for n in range(4)]} for i in range(2)}}


def job(name: str, selector: dict[str, str]) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": {
        "completionMode": "Indexed", "completions": 4, "parallelism": 4,
        "template": {"metadata": {"labels": {}}, "spec": {
            "restartPolicy": "Never", "nodeSelector": selector,
            "containers": [{"name": "trainer", "image": "i", "command": ["true"]}]}}}}


def pods_of(api: JobController, name: str) -> list[dict]:
    return [o for (res, _, _), o in api.objects.items()
            if res == "pods" and o["metadata"]["ownerReferences"][0]["name"] == name]


def test_each_slices_job_lands_on_its_own_pool_and_a_selector_no_node_matches_waits():
    api = KubernetesApi(ScriptedPods(lambda attempt, index, try_: PodRun(exit_code=None)), "token")
    names = tuple(k.split("/", 1)[1] for p in CLUSTER["pools"].values() for k in p["nodes"])
    api.set_nodes(names, control_planes.node_labels(CLUSTER))
    tpu = {"cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice", "cloud.google.com/gke-tpu-topology": "4x4"}
    for i in range(2):
        api.create("jobs", "default", job(f"r-s{i}", {**tpu, "cloud.google.com/gke-nodepool": f"s-pool-{i}"}), {})
    api.create("jobs", "default", job("elsewhere", {**tpu, "cloud.google.com/gke-tpu-topology": "8x8"}), {})
    try:
        for i in range(2):
            placed = sorted(p["spec"]["nodeName"] for p in pods_of(api, f"r-s{i}"))
            assert placed == [f"gke-s-pool-{i}-{n}" for n in range(4)]
        waiting = pods_of(api, "elsewhere")
        assert len(waiting) == 4 and all("nodeName" not in p["spec"] for p in waiting)
        (condition,) = waiting[0]["status"]["conditions"]
        assert condition["reason"] == "Unschedulable"
        assert condition["message"] == "0/8 nodes are available: 8 node(s) didn't match Pod's node affinity/selector."
    finally:
        api.close()
