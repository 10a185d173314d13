"""GKE launch plans as JobSets: a run naming a Kueue queue (or on a cluster serving the JobSet
API) is one JobSet, labelled for its LocalQueue and created suspended for Kueue to admit, whose
replicated jobs are the Indexed Jobs of the bare path: one for a stack without slices, one per
slice of a multislice TPU stack; pods keep the names the scripts meet at."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from infra.errors import ConfigError
from infra.providers.inventory import Inventory
from infra.spec.stack_config import load_stack
from trainctl.jobs.experiment import launch_spec
from trainctl.jobs.experiment_spec import Experiment
from trainctl.launchers.gke.jobset import ClusterApis
from trainctl.launchers.gke.manifests import manifests, validate
from trainctl.launchers.spec import LaunchSpec

GSA = "g-sa@p.iam.gserviceaccount.com"
MULTISLICE = "gke-tpu-v5e-2x16"  # 2 slices of v5litepod-16: 4 hosts each


def inventory(stack: str) -> Inventory:
    return Inventory(stack=stack, provider="gcp", nodes=(), bucket_uri="gs://bkt", ssh_private_key="", known_hosts="")


def plan(stack: str, apis: ClusterApis | None = None, **spec: object) -> list[dict]:
    launch = LaunchSpec(run_id="r1", command=("python", "-m", "trainers.digits_ddp"), **spec)  # type: ignore[arg-type]
    objects = manifests(load_stack(stack), inventory(stack), launch, gsa=GSA, apis=apis)
    for obj in objects:
        validate(obj)
    return objects


def env_of(template: dict) -> dict[str, str]:
    container = template["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value") or e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}


def test_a_queued_run_is_one_suspended_jobset_labelled_for_its_local_queue():
    _, service, jobset = plan("gke-l4", queue="team-a", priority_class="high")
    assert jobset["apiVersion"] == "jobset.x-k8s.io/v1alpha2" and jobset["kind"] == "JobSet"
    assert jobset["metadata"]["name"] == "r1"
    assert jobset["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "trainctl", "trainctl/run": "r1",
                                            "kueue.x-k8s.io/queue-name": "team-a"}
    spec = jobset["spec"]
    assert spec["suspend"] is True  # Kueue unsuspends it once the queue admits it
    assert spec["network"] == {"enableDNSHostnames": True, "subdomain": "r1-svc", "publishNotReadyAddresses": True}
    assert "failurePolicy" not in spec  # one failed Job fails the set; reruns are trainctl's
    [rjob] = spec["replicatedJobs"]
    assert rjob["name"] == "w" and rjob["replicas"] == 1
    job = rjob["template"]["spec"]
    assert job["completionMode"] == "Indexed" and job["completions"] == job["parallelism"] == 2
    pod = job["template"]["spec"]
    assert pod["subdomain"] == service["metadata"]["name"] == "r1-svc"
    assert pod["priorityClassName"] == "high"
    # The child Job is r1-w-0: torchrun meets at its pod 0 by the name the Service publishes.
    assert "--rdzv-endpoint=r1-w-0-0.r1-svc:29400" in pod["containers"][0]["command"][2]


def test_a_cluster_serving_jobset_gets_one_without_a_queue_and_a_bare_cluster_an_indexed_job():
    *_, jobset = plan("gke-l4", apis=ClusterApis(jobset=True))
    assert jobset["kind"] == "JobSet" and "suspend" not in jobset["spec"]
    assert "kueue.x-k8s.io/queue-name" not in jobset["metadata"]["labels"]
    *_, job = plan("gke-l4", apis=ClusterApis(), priority_class="high")
    assert job["kind"] == "Job" and job["metadata"]["name"] == "r1"
    assert job["spec"]["template"]["spec"]["priorityClassName"] == "high"
    assert "--rdzv-endpoint=r1-0.r1-svc:29400" in job["spec"]["template"]["spec"]["containers"][0]["command"][2]


def test_a_multislice_stack_is_one_jobset_with_a_replicated_job_per_slice():
    objects = plan(MULTISLICE, queue="tpu-queue")
    assert [o["kind"] for o in objects] == ["ServiceAccount", "Service", "JobSet"]
    jobset = objects[2]
    rjobs = jobset["spec"]["replicatedJobs"]
    assert [(r["name"], r["replicas"]) for r in rjobs] == [("s0", 1), ("s1", 1)]
    for index, rjob in enumerate(rjobs):
        job = rjob["template"]["spec"]
        assert job["completions"] == job["parallelism"] == 4 and job["backoffLimit"] == 0
        assert job["template"]["spec"]["nodeSelector"]["cloud.google.com/gke-nodepool"] == f"{MULTISLICE}-pool-{index}"
        assert rjob["template"]["metadata"]["labels"]["trainctl/slice"] == str(index)
        env = env_of(rjob["template"])
        # Slice s's Job is r1-s<s>-0 (JobSet's <jobset>-<replicated job>-<index>).
        assert env["MEGASCALE_COORDINATOR_ADDRESS"] == "r1-s0-0-0.r1-svc:8081"
        assert env["MEGASCALE_SLICE_ID"] == str(index) and env["MEGASCALE_NUM_SLICES"] == "2"
        assert env["TPU_WORKER_HOSTNAMES"] == ",".join(f"r1-s{index}-0-{w}.r1-svc" for w in range(4))


def test_a_long_run_id_is_cut_so_every_pod_name_fits_a_dns_label():
    run_id = "a" * 63
    launch = LaunchSpec(run_id=run_id, command=("python", "t.py"), queue="q")
    *_, jobset = manifests(load_stack("gke-l4"), inventory("gke-l4"), launch, gsa=GSA)
    # <jobset>-w-0-<pod index>-<5 characters> is at most 63 (JobSet's webhook checks it)
    assert len(jobset["metadata"]["name"]) + len("-w-0-1-abcde") == 63


def test_a_jobset_field_the_api_lacks_is_refused():
    *_, jobset = plan("gke-l4", queue="q")
    jobset["spec"]["queue"] = "q"
    with pytest.raises(ValueError, match=r"unknown field\(s\) spec.queue"):
        validate(jobset)


def test_the_experiment_queue_overrides_the_stack_and_a_vm_stack_refuses_one():
    stack = load_stack("gke-l4", overrides={"queue": "stack-q", "priority_class": "low"})
    exp = Experiment(name="e", stack="gke-l4", run={"command": "python t.py"}, queue="exp-q")
    spec = launch_spec(exp, "r1", 1, stack)
    assert (spec.queue, spec.priority_class) == ("exp-q", "low")
    with pytest.raises(ConfigError, match="apply to GKE stacks"):
        load_stack("gpu-t4x2", overrides={"queue": "q"})
    with pytest.raises(ValidationError, match="a Kubernetes object name"):
        Experiment(name="e", run={"command": "python t.py"}, queue="Team_A")


def test_a_run_that_stands_up_its_own_cluster_refuses_a_queue_before_anything_is_created(tmp_path):
    from trainctl.jobs.experiment import prepare_run

    exp = Experiment(name="e", stack="gke-l4", run={"command": "python t.py"}, queue="team-a")
    with pytest.raises(ConfigError, match="stands up a cluster of its own, which has no Kueue"):
        prepare_run(exp, "e-1", tmp_path / "runs", print)
    assert not (tmp_path / "runs").exists()
