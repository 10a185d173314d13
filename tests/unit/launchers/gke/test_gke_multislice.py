"""A multislice TPU run on GKE: one Indexed Job per slice, pinned to its slice's node pool, every
pod told its slice's MEGASCALE_* and TPU_WORKER_* values; run as JobSet runs the set (a failed
slice stops and restarts every slice), against the loopback Kubernetes API with scripted pods."""

from __future__ import annotations

import re

import pytest
from tests.fakes.kube_fixtures import GSA, PodRun, k8s, launch_job  # noqa: F401 (k8s: fixture)

from infra.errors import ConfigError
from infra.providers.inventory import Inventory
from infra.spec.stack_config import load_stack
from trainctl.launchers.gke.launcher import GkeJob
from trainctl.launchers.gke.manifests import manifests, validate
from trainctl.launchers.spec import LaunchSpec

STACK = "gke-tpu-v5e-2x16"  # 2 slices of v5litepod-16: 4 hosts each
INV = Inventory(stack=STACK, provider="gcp", nodes=(), bucket_uri="gs://bkt", ssh_private_key="", known_hosts="")
RUNNING = PodRun(lines=("step",), exit_code=None)  # until its Job is deleted


def env_of(job: dict) -> dict[str, str]:
    container = job["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value") or e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}


def test_each_slice_is_an_indexed_job_on_its_own_node_pool_with_its_slices_values():
    objects = manifests(load_stack(STACK), INV, LaunchSpec(run_id="r1", command=("python", "t.py")), gsa=GSA)
    for obj in objects:
        validate(obj)
    _, service, *jobs = objects
    assert [j["metadata"]["name"] for j in jobs] == ["r1-s0", "r1-s1"]
    for index, job in enumerate(jobs):
        spec, pod = job["spec"], job["spec"]["template"]["spec"]
        assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"] == 4
        assert spec["backoffLimit"] == 0  # a slice cannot restart alone: the set restarts
        assert pod["subdomain"] == service["metadata"]["name"] == "r1-svc"
        assert pod["nodeSelector"] == {"cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
                                       "cloud.google.com/gke-tpu-topology": "4x4",
                                       "cloud.google.com/gke-nodepool": f"{STACK}-pool-{index}"}
        env = env_of(job)
        assert {k: v for k, v in env.items() if k.startswith(("MEGASCALE", "TPU_"))} == {
            "MEGASCALE_COORDINATOR_ADDRESS": "r1-s0-0.r1-svc:8081", "MEGASCALE_NUM_SLICES": "2",
            "MEGASCALE_SLICE_ID": str(index), "MEGASCALE_PORT": "8081",
            "TPU_WORKER_HOSTNAMES": ",".join(f"r1-s{index}-{w}.r1-svc" for w in range(4)),
            "TPU_WORKER_ID": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
    assert service["spec"]["selector"] == {"trainctl/run": "r1"}  # every slice's pods by name


def test_parallel_trials_on_a_multislice_stack_are_refused():
    with pytest.raises(ConfigError, match="would split the 2 slices"):
        GkeJob().check_slots(load_stack(STACK), 2)


def test_every_slice_runs_to_the_end_and_each_pod_logs_under_its_place_in_the_set(k8s, tmp_path):
    k8s.pods.job_script = lambda job, attempt, index, try_: PodRun(lines=(f"{job} worker {index}",))
    result, echoed = launch_job(k8s, tmp_path, stack=STACK, framework="torch")
    assert result.ok and result.attempts == 1 and len(result.outcomes) == 8
    assert "[pod5 r5]:r1-s1 worker 1" in echoed  # slice 1's worker 1 is the set's pod 5
    assert k8s.names("jobs") == [] and k8s.names("services") == [] and k8s.refused() == []


def test_a_failed_pod_in_one_slice_stops_and_restarts_every_slice(k8s, tmp_path):
    # Attempt 0: slice 1's worker 2 dies; slice 0 runs on (it would wait for slice 1 forever).
    k8s.pods.job_script = lambda job, attempt, index, try_: (
        (PodRun(lines=("oom",), exit_code=137) if (job, index) == ("r1-s1", 2) else RUNNING) if attempt == 0
        else PodRun(lines=(f"resumed {job} {index}",)))
    result, echoed = launch_job(k8s, tmp_path, stack=STACK, framework="torch", max_restarts=1, job_retries=0)
    assert result.ok and result.attempts == 2
    created = [r.path.rsplit("/", 1)[-1] for r in k8s.calls("POST", r".*/jobs") if r.status == 201]
    assert len(created) == 4  # both slices' Jobs, twice
    assert any(re.search(r"job r1-s1 failed: BackoffLimitExceeded", line) for line in echoed)
    assert "[trainctl] slice job r1-s1 failed: stopping every slice (a multislice program needs them all)" in echoed
    assert "[trainctl] every slice's job restarted; rerun 1/1 from the latest checkpoint" in echoed
    assert k8s.names("jobs") == [] and k8s.names("pods") == [] and k8s.refused() == []


def test_a_set_that_keeps_failing_stops_after_its_restarts_and_names_the_failed_pod(k8s, tmp_path):
    k8s.pods.job_script = lambda job, attempt, index, try_: (
        PodRun(lines=("bad",), exit_code=1) if (job, index) == ("r1-s0", 3) else RUNNING)
    result, _ = launch_job(k8s, tmp_path, stack=STACK, framework="torch", max_restarts=1, job_retries=1)
    assert not result.ok and result.attempts == 3  # the first, then max_restarts + job_retries
    assert [o.node for o in result.failures()] == ["pod3"]
    assert k8s.names("jobs") == [] and k8s.names("pods") == []
