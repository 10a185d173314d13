"""GKE launch plans: Service + Indexed Job, validated against the Kubernetes models."""

from __future__ import annotations

import json
import subprocess

import pytest

from infra import catalog
from infra.inventory import Inventory
from infra.stack_config import load_stack
from trainctl.gke import manifests, validate
from trainctl.launch import LaunchSpec

INV = Inventory(stack="g", provider="gcp", nodes=(), bucket_uri="gs://bkt", ssh_private_key="", known_hosts="")


def plan_for(stack: str, framework: str):
    spec = LaunchSpec(run_id="r1", framework=framework,
                      command=("python", "-m", "trainers.digits_ddp", "--job-dir", "{job_dir}"))
    return load_stack(stack), manifests(load_stack(stack), INV, spec)


@pytest.mark.parametrize("stack, framework", [("gke-l4", "torch"), ("gke-l4", "tensorflow"),
                                              ("gke-tpu-v5e", "tensorflow"), ("gke-tpu-v5e", "torch")])
def test_manifests_validate_against_kubernetes_models(stack, framework):
    cluster, (service, job) = plan_for(stack, framework)
    assert type(validate(service)).__name__ == "V1Service"
    assert type(validate(job)).__name__ == "V1Job"
    assert service["spec"]["clusterIP"] == "None"
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == cluster.node_count
    pod = job["spec"]["template"]["spec"]
    assert pod["subdomain"] == service["metadata"]["name"]
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    assert env["AIP_CHECKPOINT_DIR"] == "gs://bkt/r1/checkpoints"


def test_gpu_pool_torchrun_meets_at_pod_zero():
    _, (_, job) = plan_for("gke-l4", "torch")
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    script = container["command"][2]
    assert "--rdzv-endpoint=r1-0.r1-svc:29400" in script and "--nnodes=2" in script
    assert script.endswith("--module trainers.digits_ddp --job-dir gs://bkt/r1")


def test_tpu_pool_selects_the_slice_and_requests_its_chips():
    cluster, (_, job) = plan_for("gke-tpu-v5e", "tensorflow")
    tpu = catalog.TPUS[cluster.tpu.type]
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
                                   "cloud.google.com/gke-tpu-topology": "4x4"}
    assert pod["containers"][0]["resources"]["limits"] == {"google.com/tpu": str(tpu.chips_per_host)}
    assert "TF_CONFIG" not in pod["containers"][0]["command"][2]


@pytest.mark.parametrize("index, task", [(0, {"type": "chief", "index": 0}), (1, {"type": "worker", "index": 0})])
def test_tf_config_computed_in_the_pod_is_ai_platform_shaped(index, task):
    _, (_, job) = plan_for("gke-l4", "tensorflow")
    script = job["spec"]["template"]["spec"]["containers"][0]["command"][2]
    prelude = script.split("python -m", 1)[0]
    out = subprocess.run(["bash", "-c", prelude + 'printf %s "$TF_CONFIG"'], capture_output=True,
                         text=True, env={"JOB_COMPLETION_INDEX": str(index)}, check=True).stdout
    assert json.loads(out) == {"cluster": {"chief": ["r1-0.r1-svc:2222"], "worker": ["r1-1.r1-svc:2222"]},
                               "task": task}


def test_a_malformed_manifest_is_rejected():
    _, (_, job) = plan_for("gke-l4", "torch")
    del job["spec"]["template"]["spec"]["containers"][0]["name"]
    with pytest.raises(Exception, match="name"):
        validate(job)
