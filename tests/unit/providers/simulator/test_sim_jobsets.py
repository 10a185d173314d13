"""The simulated cluster's JobSet controller and Kueue, driven through the API's own methods (an
admin's and a controller's view, no launcher): JobSet's child Jobs by its naming and labels, and
what the simulator does not model said as an error a user sees."""

from __future__ import annotations

import pytest
from tests.fakes.kube_fixtures import PodRun, k8s  # noqa: F401 (k8s: fixture)
from tests.unit.launchers.gke.test_gke_jobset_runs import install

from gcpsim.kubernetes.objects import KubeError

JOB = {"completionMode": "Indexed", "completions": 2, "parallelism": 2, "template": {"spec": {
    "restartPolicy": "Never", "containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}


def jobset(name: str = "js", **spec: object) -> dict:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": name},
            "spec": {"replicatedJobs": [{"name": "w", "replicas": 2, "template": {"spec": JOB}}], **spec}}


def test_child_jobs_are_named_and_labelled_as_jobsets_controller_does_and_complete_the_set(k8s):
    install(k8s, "jobsets.jobset.x-k8s.io")
    k8s.pods.job_script = lambda job, attempt, index, try_: PodRun(lines=("ok",))
    created = k8s.create("jobsets", "default", jobset(), {})
    assert k8s.names("jobs") == ["js-w-0", "js-w-1"] and k8s.names("services") == ["js"]  # subdomain default
    job = k8s.get("jobs", "default", "js-w-1")
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert {k: labels[k] for k in ("jobset.sigs.k8s.io/jobset-name", "jobset.sigs.k8s.io/replicatedjob-name",
                                   "jobset.sigs.k8s.io/job-index", "jobset.sigs.k8s.io/job-global-index")} == {
        "jobset.sigs.k8s.io/jobset-name": "js", "jobset.sigs.k8s.io/replicatedjob-name": "w",
        "jobset.sigs.k8s.io/job-index": "1", "jobset.sigs.k8s.io/job-global-index": "1"}
    assert job["spec"]["template"]["spec"]["subdomain"] == "js"
    assert job["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    with k8s.cond:
        k8s.cond.wait_for(lambda: k8s.finished(k8s.get("jobsets", "default", "js")), timeout=30)
        status = k8s.get("jobsets", "default", "js")["status"]
    assert status["terminalState"] == "Completed"
    assert status["conditions"][-1]["reason"] == "AllJobsCompleted"


@pytest.mark.parametrize("spec, said", [
    ({"failurePolicy": {"maxRestarts": 2}}, "spec.failurePolicy: the simulated JobSet controller does not model it"),
    ({"successPolicy": {"operator": "Any"}}, "spec.successPolicy: the simulated JobSet controller does not model it"),
])
def test_a_jobset_field_the_simulator_does_not_model_is_refused_naming_it(k8s, spec, said):
    install(k8s, "jobsets.jobset.x-k8s.io")
    with pytest.raises(KubeError, match=said):
        k8s.create("jobsets", "default", jobset(**spec), {})


def test_jobsets_are_not_served_before_their_crd_and_an_unmodelled_crd_is_refused(k8s):
    with pytest.raises(KubeError, match="could not find the requested resource"):
        k8s.create("jobsets", "default", jobset(), {})
    with pytest.raises(KubeError, match="does not run CRD 'pytorchjobs.kubeflow.org'"):
        install(k8s, "pytorchjobs.kubeflow.org")
    assert [g["name"] for g in k8s.discovery()["groups"]] == ["batch", "apps", "apiextensions.k8s.io",
                                                             "networking.gke.io"]
