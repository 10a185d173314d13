"""GKE runs as JobSets, against the simulator's Kubernetes API with scripted pods, on a cluster
where an admin installed JobSet and Kueue (their CRDs) and made a ClusterQueue and LocalQueue:
Kueue admits the suspended set when the queue's quota covers it, JobSet's controller creates
the child Jobs; a run the cluster cannot admit is refused before anything is created."""

from __future__ import annotations

import threading

import pytest
from tests.fakes.kube_fixtures import PodRun, k8s, launch_job  # noqa: F401 (k8s: fixture)

from infra.errors import ConfigError

MULTISLICE = "gke-tpu-v5e-2x16"
RUNNING = PodRun(lines=("step",), exit_code=None)  # until its Job is deleted
KUEUE = ("localqueues.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io", "resourceflavors.kueue.x-k8s.io")


def install(api, *crds: str, gpus: int = 2) -> None:
    """What an admin does: the CRDs applied, a ClusterQueue with GPU quota, a LocalQueue on it."""
    for crd in crds:
        api.create("customresourcedefinitions", "", {"apiVersion": "apiextensions.k8s.io/v1",
                                                     "kind": "CustomResourceDefinition", "metadata": {"name": crd}}, {})
    if "clusterqueues.kueue.x-k8s.io" in crds:
        api.create("clusterqueues", "", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                                         "metadata": {"name": "cluster-q"}, "spec": {"resourceGroups": [{
                                             "coveredResources": ["nvidia.com/gpu", "google.com/tpu"],
                                             "flavors": [{"name": "default", "resources": [
                                                 {"name": "nvidia.com/gpu", "nominalQuota": gpus},
                                                 {"name": "google.com/tpu", "nominalQuota": 32}]}]}]}}, {})
        api.create("localqueues", "default", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                                               "metadata": {"name": "team-a"}, "spec": {"clusterQueue": "cluster-q"}}, {})


def jobset_states(api) -> list[bool]:
    """The JobSet's `suspend` in every version the API stored."""
    return [bool(obj["spec"].get("suspend")) for _, res, _, obj in api.history if res == "jobsets"]


def test_a_queued_run_is_admitted_by_kueue_and_runs_as_a_jobset(k8s, tmp_path):
    install(k8s, "jobsets.jobset.x-k8s.io", *KUEUE)
    k8s.pods.job_script = lambda job, attempt, index, try_: PodRun(lines=(f"{job} worker {index}",))
    result, echoed = launch_job(k8s, tmp_path, framework="torch", queue="team-a")
    assert result.ok and result.attempts == 1 and len(result.outcomes) == 2
    assert "[trainctl] jobset r1 queued in Kueue LocalQueue team-a: its pods start once the queue admits it" in echoed
    assert "[pod1] r1-w-0 worker 1" in echoed  # the child Job JobSet named <jobset>-w-0
    assert "[trainctl] jobset r1 admitted by Kueue from LocalQueue team-a" in echoed
    states = jobset_states(k8s)
    assert states[0] is True and states[-1] is False  # created suspended, unsuspended on admission
    assert k8s.names("jobsets") == [] and k8s.names("jobs") == [] and k8s.names("services") == []
    assert k8s.refused() == []


def test_a_queue_without_room_for_the_set_starts_none_of_its_pods(k8s, tmp_path):
    install(k8s, "jobsets.jobset.x-k8s.io", *KUEUE, gpus=1)  # the run's 2 pods need 2 GPUs
    cancel, lines = threading.Event(), []

    def echo(line: str) -> None:
        lines.append(line)
        if "queued in Kueue" in line:
            cancel.set()  # a user giving up on the queue: the pruned trial's path

    result, _ = launch_job(k8s, tmp_path, framework="torch", queue="team-a", echo=echo, cancel=cancel)
    assert result.cancelled and not result.ok
    assert set(jobset_states(k8s)) == {True}
    assert not any(res == "pods" for _, res, _, _ in k8s.history)
    assert k8s.names("jobsets") == [] and k8s.names("jobs") == []


@pytest.mark.parametrize("crds, said", [
    ((), "does not serve jobset.x-k8s.io/v1alpha2"),
    (("jobsets.jobset.x-k8s.io",), "does not serve kueue.x-k8s.io"),
    (("jobsets.jobset.x-k8s.io", "localqueues.kueue.x-k8s.io"), "has no Kueue LocalQueue 'team-b'"),
])
def test_a_queued_run_the_cluster_cannot_admit_is_refused_before_anything_is_created(k8s, tmp_path, crds, said):
    install(k8s, *crds)
    with pytest.raises(ConfigError, match=said):
        launch_job(k8s, tmp_path, framework="torch", queue="team-b")
    assert k8s.calls("POST", r".*/(jobsets|jobs|services|serviceaccounts)") == []


def test_without_a_queue_a_cluster_serving_jobset_gets_one_and_a_bare_one_an_indexed_job(k8s, tmp_path):
    k8s.pods.job_script = lambda job, attempt, index, try_: PodRun(lines=(f"{job} {index}",))
    result, _ = launch_job(k8s, tmp_path, framework="torch")
    assert result.ok and [r.status for r in k8s.calls("POST", r".*/jobsets")] == []
    install(k8s, "jobsets.jobset.x-k8s.io")
    result, _ = launch_job(k8s, tmp_path, run_id="r2", framework="torch")
    assert result.ok and [r.status for r in k8s.calls("POST", r".*/jobsets")] == [201]
    assert not any(obj["spec"].get("suspend") for _, res, _, obj in k8s.history if res == "jobsets")


def test_a_failed_slice_fails_the_jobset_whose_controller_stops_the_others_and_trainctl_reruns_it(k8s, tmp_path):
    install(k8s, "jobsets.jobset.x-k8s.io", *KUEUE)
    k8s.pods.job_script = lambda job, attempt, index, try_: (
        (PodRun(lines=("oom",), exit_code=137) if (job, index) == ("r1-s1-0", 2) else RUNNING) if attempt == 0
        else PodRun(lines=(f"resumed {job} {index}",)))
    result, echoed = launch_job(k8s, tmp_path, stack=MULTISLICE, framework="torch", queue="team-a",
                                max_restarts=1, job_retries=0)
    assert result.ok and result.attempts == 2 and len(result.outcomes) == 8
    failed = [obj["status"] for _, res, _, obj in k8s.history if res == "jobsets"
              and any(c["type"] == "Failed" for c in obj["status"].get("conditions", []))]
    assert failed[0]["conditions"][-1]["message"] == ("jobset failed due to one or more job failures "
                                                      "(first failed job: r1-s1-0)")
    assert "[trainctl] every slice's job restarted; rerun 1/1 from the latest checkpoint" in echoed
    assert k8s.names("jobsets") == [] and k8s.names("jobs") == [] and k8s.names("pods") == []
    assert k8s.refused() == []
