"""GPUDirect stacks in a simulated project, the whole way, one per target. A4 (GPUDirect RDMA: one
more gVNIC network and the zone's RoCE network for eight MRDMA NICs, hyperdisk boot disks) gets
its networks and compact placement policy through the provider's calls, bootstrap runs the
`gpunet` step (which on a simulated node installs nothing and says so), DDP trains across the
machines on their CPUs, and nothing is left. What the other VM families (A3 Mega, A3 Ultra) do
differently is proved without a training: their networks, NICs and placement on the program's
plan (tests/unit/providers/gcp/test_gpudirect_networks_as_documented.py) and through its Pulumi
run against the simulator (tests/unit/providers/gcp/test_pulumi_program_on_the_simulator.py),
their GPU-family quota and `gpunet` step in
tests/unit/providers/gcp/test_gpudirect_families_without_a_full_run.py.
GKE A3 Mega (the pool's eight additional node networks on a multi-networking cluster) gets its
networks' GKENetworkParamSet and Network objects and the TCPXO installer DaemonSets, trains as a
Job whose pods name those networks, run the rxdm sidecar and carry NCCL's settings, and goes with
its objects."""

from __future__ import annotations

import json
import os
import re
import time

import pytest
from kubernetes import client, config

from tests.conftest import Streamed, trainctl
from tests.e2e.test_gcp_stack_on_the_simulator import _leftovers, simulated_home  # noqa: F401 (fixture)

pytestmark = pytest.mark.e2e

# the run's log: A4's extra gVNIC network, its RoCE network and a subnet per MRDMA NIC
RDMA_NETWORKS = [r"gcp:compute:Network \S+-gpunet-0 created", r"gcp:compute:Network \S+-rdma created",
                 *(rf"gcp:compute:Subnetwork \S+-rdmasub-{i} created" for i in range(8))]


def test_an_a4_stack_with_its_gpu_networks_trains_in_a_simulated_project_and_leaves_nothing(
        simulated_home, tmp_path):  # noqa: F811
    done = trainctl("run", "examples/digits-ddp.yaml", "--stack", "gpu-a4-x2", "--simulate",
                    "--runs-dir", str(tmp_path / "runs"), timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    log = done.stdout + done.stderr
    assert "gcp:compute:ResourcePolicy" in log and "-placement created" in log
    assert [line for line in RDMA_NETWORKS if not re.search(line, log)] == []
    assert re.search(r"node-0 gpunet\s+done", log) and re.search(r"node-1 gpunet\s+done", log)
    assert "GPUS_PER_GPU_FAMILY:NVIDIA_B200 (us-central1) 16" in log
    run_id = re.search(r"\[trainctl\] run (\S+):", log)[1]
    metrics = json.loads((tmp_path / "runs" / run_id / "metrics.json").read_text())
    assert metrics["test_accuracy"] >= 0.95
    assert _leftovers(simulated_home) == []


def test_a_gke_a3_mega_stack_trains_as_a_job_on_its_gpu_networks_in_a_simulated_project_and_leaves_nothing(
        simulated_home, tmp_path, monkeypatch):  # noqa: F811
    run = Streamed("run", "examples/digits-ddp.yaml", "--stack", "gke-a3mega", "--simulate",
                   "--runs-dir", str(tmp_path / "runs"))
    run.wait_for(r"cluster objects: 18 created", timeout=600)
    # the cluster as a user's kubectl sees it, through the stack's kubeconfig and its credential helper
    monkeypatch.setenv("PATH", f"{simulated_home / 'simulator' / 'bin'}{os.pathsep}{os.environ['PATH']}")
    kubeconfig, = (simulated_home / "stacks").glob("*/kubeconfig")  # the run's own stack, made from gke-a3mega
    api = config.new_client_from_config(config_file=str(kubeconfig))
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    networks = [f"{kubeconfig.parent.name}-gpunet-{i}" for i in range(8)]
    for plural in ("gkenetworkparamsets", "networks"):
        listed = custom.list_cluster_custom_object("networking.gke.io", "v1", plural)["items"]
        assert sorted(o["metadata"]["name"] for o in listed) == networks
    assert {d.metadata.name for d in client.AppsV1Api(api).list_namespaced_daemon_set("kube-system").items} == {
        "nccl-tcpxo-installer", "device-injector"}
    pod = _first_pod(core, run)
    interfaces = json.loads(pod.metadata.annotations["networking.gke.io/interfaces"])
    assert [i["network"] for i in interfaces] == ["default", *networks]
    assert [c.name for c in pod.spec.init_containers] == ["tcpxo-daemon"]
    env = {e.name: e.value for e in pod.spec.containers[0].env}
    assert env["NCCL_FASTRAK_IFNAME"] == ",".join(f"eth{i}" for i in range(1, 9))
    log = run.finish(timeout=600)
    assert run.proc.returncode == 0, log[-4000:]
    assert [i for i in range(8) if not re.search(rf"gcp:compute:Network \S+-gpunet-{i} created", log)] == []
    assert "accelerators requested (nvidia.com/gpu=8) are declared, not present" in log
    assert "cluster objects: 18 deleted" in log
    run_id = re.search(r"\[trainctl\] run (\S+):", log)[1]
    assert json.loads((tmp_path / "runs" / run_id / "metrics.json").read_text())["test_accuracy"] >= 0.95
    assert_nothing_left(simulated_home)


def _first_pod(core, run: Streamed):
    """A pod of the run's Job, read while it runs (the Job and its pods go when the run ends)."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and run.proc.poll() is None:
        pods = core.list_namespaced_pod("default", label_selector="app.kubernetes.io/managed-by=trainctl").items
        if pods:
            return pods[0]
        time.sleep(0.2)
    raise AssertionError("no pod of the run's Job was seen:\n" + run.finish(timeout=60)[-4000:])


def assert_nothing_left(home) -> None:
    deadline = time.monotonic() + 15  # the simulator service leaves once idle: a moment after the down
    while (left := _leftovers(home)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == [], "\n".join(left)
