"""A GPUDirect stack in a simulated project, the whole way: GKE A3 Mega (the pool's eight additional
node networks on a multi-networking cluster) gets its networks' GKENetworkParamSet and Network
objects and the TCPXO installer DaemonSets, trains as a Job whose pods name those networks, run
the rxdm sidecar and carry NCCL's settings, and goes with its objects.

The VM families need no training to prove what sets them apart: a simulated VM's machine has
its first NIC only (gcpsim/apis/compute_instance_spec.py, machine()), so DDP across GPUDirect
VMs proves nothing that tests/e2e/test_gcp_stack_on_the_simulator.py does not. Their networks,
NICs, boot disks and placement are proved on the program's plan
(tests/unit/providers/gcp/test_gpudirect_networks_as_documented.py) and through its Pulumi run
against the simulator (A3 Mega, A3 Ultra: tests/integration/providers/gcp/test_pulumi_program_on_the_simulator.py;
A4: tests/integration/providers/gcp/test_a4_program_on_the_simulator.py), their GPU-family quota and
`gpunet` step in tests/unit/providers/gcp/test_gpudirect_families_without_a_full_run.py."""

from __future__ import annotations

import json
import os
import re
import time

import pytest
from kubernetes import client, config

from tests.conftest import Streamed
from tests.e2e.test_gcp_stack_on_the_simulator import _leftovers, simulated_home  # noqa: F401 (fixture)

pytestmark = pytest.mark.e2e


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
