"""The loopback Kubernetes API refuses what the API server refuses: the GKE tests' passes mean
something only if the fake is not more lenient than the real thing."""

from __future__ import annotations

import copy
import json
import urllib.error
import urllib.request

import pytest
from tests.fakes.kube_fixtures import TOKEN, KubernetesApi, PodRun, k8s, launch_job  # noqa: F401 (k8s: fixture)


def post(fake: KubernetesApi, path: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(fake.url + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Authorization": f"Bearer {TOKEN}",
                                              "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture
def job_body(k8s, tmp_path) -> dict:
    """The Job body trainctl posted in a successful run."""
    launch_job(k8s, tmp_path)
    return copy.deepcopy(k8s.calls("POST", r".*/jobs")[0].body)


def test_an_unknown_field_is_refused_with_400(k8s, job_body):
    job_body["spec"]["template"]["spec"]["containers"][0]["restartPolicyy"] = "Never"
    code, status = post(k8s, "/apis/batch/v1/namespaces/default/jobs", job_body)
    assert code == 400 and status["kind"] == "Status" and status["reason"] == "BadRequest"
    assert 'unknown field "spec.template.spec.containers[0].restartPolicyy"' in status["message"]


@pytest.mark.parametrize("break_it, message", [
    (lambda rules: rules[1]["onExitCodes"].update(values=[3, 2]), "must be ordered and unique"),
    (lambda rules: rules[1]["onExitCodes"].update(values=[0, 2]), "0 with the In operator"),
    (lambda rules: rules[1]["onExitCodes"].update(containerName="main"), "no such container"),
    (lambda rules: rules[0].update(action="FailIndex"), "requires the backoffLimitPerIndex field"),
], ids=["unsorted-codes", "zero-under-In", "unknown-container", "FailIndex-without-per-index-limit"])
def test_an_invalid_pod_failure_policy_is_refused_with_422(k8s, job_body, break_it, message):
    break_it(job_body["spec"]["podFailurePolicy"]["rules"])
    code, status = post(k8s, "/apis/batch/v1/namespaces/default/jobs", job_body)
    assert (code, status["reason"]) == (422, "Invalid") and message in status["message"]


def test_a_duplicate_is_refused_with_409_already_exists(k8s, job_body):
    assert post(k8s, "/apis/batch/v1/namespaces/default/jobs", job_body)[0] == 201
    code, status = post(k8s, "/apis/batch/v1/namespaces/default/jobs", job_body)
    assert (code, status["reason"], status["message"]) == (409, "AlreadyExists", 'jobs.batch "r1" already exists')


def test_deleting_a_job_without_a_propagation_policy_orphans_its_pods(k8s, job_body, tmp_path):
    from kubernetes import client, config

    k8s.pods.script = lambda attempt, index, try_: PodRun(exit_code=None)
    api = config.new_client_from_config(config_file=str(tmp_path / "kubeconfig"), persist_config=False)
    batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
    batch.create_namespaced_job("default", job_body)
    batch.delete_namespaced_job("r1", "default")  # the batch/v1 API's default: orphan
    left = core.list_namespaced_pod("default", label_selector="job-name=r1").items
    assert len(left) == 2 and all(not p.metadata.owner_references for p in left)
    assert k8s.refused() == []
