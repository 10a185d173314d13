"""GKE launch plans: Service + Indexed Job, validated against the Kubernetes models."""

from __future__ import annotations

import json
import subprocess

import pytest

from infra.spec import catalog
from infra.providers.inventory import Inventory
from infra.spec.stack_config import ConfigError, load_stack
from trainctl.launchers.gke.manifests import manifests, validate
from trainctl.launchers.rendezvous_store import SERVER_SOURCE
from trainctl.launchers.spec import LaunchSpec

INV = Inventory(stack="g", provider="gcp", nodes=(), bucket_uri="gs://bkt", ssh_private_key="", known_hosts="")


GSA = "g-sa@p.iam.gserviceaccount.com"
TF_TPU_IMAGE = "example.invalid/my-tf-tpu:1"


def plan_for(stack: str, framework: str, image: str | None = None):
    spec = LaunchSpec(run_id="r1", framework=framework,
                      command=("python", "-m", "trainers.digits_ddp", "--job-dir", "{job_dir}"))
    if image is None and framework == "tensorflow" and load_stack(stack).tpu:
        image = TF_TPU_IMAGE
    sa, service, job = manifests(load_stack(stack), INV, spec, image=image, gsa=GSA)
    assert sa["kind"] == "ServiceAccount"
    return load_stack(stack), (service, job)


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
    assert script.endswith("--module trainers.digits_ddp --job-dir gs://bkt/r1; fi")


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


@pytest.mark.parametrize("stack, framework", [("gke-l4", "torch"), ("gke-tpu-v5e", "torch")])
def test_pods_run_as_a_workload_identity_bound_service_account(stack, framework):
    """Defect 5: without a KSA annotated with the nodes' GSA, pods get 403 on the bucket."""
    spec = LaunchSpec(run_id="r1", framework=framework, command=("python", "t.py"))
    sa, _, job = manifests(load_stack(stack), INV, spec, gsa=GSA)
    assert type(validate(sa)).__name__ == "V1ServiceAccount"
    assert sa["metadata"]["annotations"] == {"iam.gke.io/gcp-service-account": GSA}
    assert sa["metadata"]["name"] == catalog.GKE_KSA_NAME
    assert sa["metadata"]["namespace"] == catalog.GKE_KSA_NAMESPACE
    assert job["spec"]["template"]["spec"]["serviceAccountName"] == catalog.GKE_KSA_NAME


def test_manifests_take_the_google_service_account_from_the_inventory():
    spec = LaunchSpec(run_id="r1", framework="torch", command=("python", "t.py"))
    sa, _, _ = manifests(load_stack("gke-l4"), INV.model_copy(update={"gke_service_account": GSA}), spec)
    assert sa["metadata"]["annotations"] == {"iam.gke.io/gcp-service-account": GSA}


def test_manifests_refuse_without_a_google_service_account():
    spec = LaunchSpec(run_id="r1", framework="torch", command=("python", "t.py"))
    with pytest.raises(ConfigError, match="gke_service_account"):
        manifests(load_stack("gke-l4"), INV, spec)


@pytest.mark.parametrize("stack, framework, expected", [
    ("gke-tpu-v5e", "torch", "tpu-pytorch-releases/docker/xla:"),
    ("gke-l4", "torch", "deeplearning-platform-release/gcr.io/pytorch-cu"),
    ("gke-l4", "tensorflow", "deeplearning-platform-release/gcr.io/tf2-gpu."),
])
def test_default_image_follows_the_pools_accelerator(stack, framework, expected):
    """Defect 6: torch on TPU needs torch_xla; TensorFlow on an L4 pool needs a GPU build."""
    spec = LaunchSpec(run_id="r1", framework=framework, command=("python", "t.py"))
    _, _, job = manifests(load_stack(stack), INV, spec, gsa=GSA)
    image = job["spec"]["template"]["spec"]["containers"][0]["image"]
    assert expected in image
    assert image == catalog.GKE_IMAGES[(framework, "tpu" if "tpu" in stack else "gpu")]


def test_tensorflow_on_tpu_asks_for_an_image():
    spec = LaunchSpec(run_id="r1", framework="tensorflow", command=("python", "t.py"))
    with pytest.raises(ConfigError, match="no default GKE image for framework 'tensorflow' on a tpu"):
        manifests(load_stack("gke-tpu-v5e"), INV, spec, gsa=GSA)


@pytest.mark.parametrize("index, under_the_store", [(0, True), (1, False)])
def test_pod_zero_runs_its_agent_under_the_rendezvous_store_and_no_agent_hosts_it(tmp_path, index, under_the_store):
    """As on VM stacks: the store outlives every agent (rendezvous_store.py). The pod's script
    runs for real, with `python` and `torchrun` that print what they were given."""
    _, (_, job) = plan_for("gke-l4", "torch")
    script = job["spec"]["template"]["spec"]["containers"][0]["command"][2]
    for tool in ("python", "torchrun"):
        (tmp_path / tool).write_text(f"#!/bin/sh\necho {tool}; printf '%s\\n' \"$@\"; "
                                     "echo share=$TORCH_DISABLE_SHARE_RDZV_TCP_STORE\n")
        (tmp_path / tool).chmod(0o755)
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True,
                         env={"JOB_COMPLETION_INDEX": str(index), "PATH": f"{tmp_path}:/usr/bin:/bin"}).stdout
    words = out.split("\n")
    assert words[0] == ("python" if under_the_store else "torchrun")
    assert (SERVER_SOURCE in out) == under_the_store
    assert "--rdzv-conf=is_host=false" in words
    assert "share=1" in words  # each restart's workers get a store of their own (rendezvous_store.AGENT_ENV)


@pytest.mark.parametrize("framework", ["torch", "tensorflow"])
def test_the_job_maps_the_restart_policy_and_still_validates(framework):
    """Worker restarts are pod restarts inside the Job; a preempted pod costs nothing; a
    permanent exit code fails the Job at once. Job reruns are trainctl's, not the Job's."""
    spec = LaunchSpec(run_id="r1", framework=framework, command=("python", "t.py"), max_restarts=4,
                      job_retries=7, permanent_exit_codes=(3, 2, 0, 3))
    _, _, job = manifests(load_stack("gke-l4"), INV, spec, gsa=GSA)
    typed = validate(job)
    assert job["spec"]["backoffLimit"] == typed.spec.backoff_limit == 4
    assert job["spec"]["podFailurePolicy"] == {"rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
        # sorted, unique, without 0: what the API accepts under operator In
        {"action": "FailJob", "onExitCodes": {"containerName": "trainer", "operator": "In", "values": [2, 3]}},
    ]}
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"  # podFailurePolicy requires it
    assert typed.spec.pod_failure_policy.rules[1].on_exit_codes.values == [2, 3]


def test_without_permanent_exit_codes_only_disruptions_are_ruled():
    spec = LaunchSpec(run_id="r1", command=("python", "t.py"), permanent_exit_codes=())
    _, _, job = manifests(load_stack("gke-l4"), INV, spec, gsa=GSA)
    assert [r["action"] for r in job["spec"]["podFailurePolicy"]["rules"]] == ["Ignore"]
    validate(job)


def test_validate_refuses_a_field_the_models_do_not_know():
    """The client's models drop unknown fields silently; the API server (Strict) refuses them."""
    _, (_, job) = plan_for("gke-l4", "torch")
    job["spec"]["podFailurePolicy"]["rules"][0]["onExitCode"] = {"values": [2]}
    with pytest.raises(ValueError, match=r"unknown field\(s\) spec.podFailurePolicy.rules\[0\].onExitCode"):
        validate(job)


@pytest.mark.parametrize("index", [0, 1])
def test_torchrun_in_a_pod_prefixes_worker_lines_with_the_pod_index(index):
    _, (_, job) = plan_for("gke-l4", "torch")
    script = job["spec"]["template"]["spec"]["containers"][0]["command"][2]
    echo = script.split("if [", 1)[0] + 'printf %s "$TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"'
    out = subprocess.run(["bash", "-c", echo], capture_output=True, text=True,
                         env={"JOB_COMPLETION_INDEX": str(index)}, check=True).stdout
    assert out == f"[pod{index} r${{rank}}]:"  # torchrun fills in ${rank}


def test_data_inputs_are_read_only_gcsfuse_volumes_in_every_pod():
    from bootstrap.data_inputs import DataInput

    data = (DataInput(source="gs://user-datasets/digits/", path="digits"),
            DataInput(source="gs://more-data/", path="tokens/all", mode="mount"))
    spec = LaunchSpec(run_id="r1", command=("python", "train.py"), data=data)
    _, _, job = manifests(load_stack("gke-l4"), INV, spec, image="example.invalid/x:1", gsa=GSA)
    validate(job)
    template = job["spec"]["template"]
    assert template["metadata"]["annotations"] == {"gke-gcsfuse/volumes": "true"}  # the sidecar's webhook
    assert template["spec"]["volumes"] == [
        {"name": "trainctl-data-0", "csi": {"driver": "gcsfuse.csi.storage.gke.io", "readOnly": True, "volumeAttributes": {
            "bucketName": "user-datasets", "mountOptions": "implicit-dirs,only-dir=digits"}}},
        {"name": "trainctl-data-1", "csi": {"driver": "gcsfuse.csi.storage.gke.io", "readOnly": True, "volumeAttributes": {
            "bucketName": "more-data", "mountOptions": "implicit-dirs"}}}]
    container = template["spec"]["containers"][0]
    assert container["volumeMounts"] == [
        {"name": "trainctl-data-0", "mountPath": "/data/digits", "readOnly": True},
        {"name": "trainctl-data-1", "mountPath": "/data/tokens/all", "readOnly": True}]
    assert {"name": "TRAINCTL_DATA_DIR", "value": "/data"} in container["env"]
    # without data: no annotation, no volumes
    _, _, plain = manifests(load_stack("gke-l4"), INV, spec.model_copy(update={"data": ()}),
                            image="example.invalid/x:1", gsa=GSA)
    assert "annotations" not in plain["spec"]["template"]["metadata"]
    assert "volumes" not in plain["spec"]["template"]["spec"]


def test_pods_of_a_cluster_whose_nodes_share_one_machines_cores_get_their_share_of_threads(monkeypatch):
    cluster = load_stack("gke-l4")
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(4 * cluster.node_count)))
    spec = LaunchSpec(run_id="r1", command=("python", "train.py"))
    shared = INV.model_copy(update={"on_controller": True})  # a simulated project's

    def env_of(inventory: Inventory) -> dict[str, str]:
        job = manifests(cluster, inventory, spec, gsa=GSA)[-1]
        return {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}

    assert {k: v for k, v in env_of(shared).items() if "THREADS" in k} == {
        "OMP_NUM_THREADS": "4", "TF_NUM_INTRAOP_THREADS": "4"}
    assert not [k for k in env_of(INV) if "THREADS" in k]  # GKE nodes: each has its own cores
