"""The restart policy on GKE: pod restarts inside the Job, reruns of the Job, permanent exits."""

from __future__ import annotations

import json
import re

from tests.fakes.kube_fixtures import KubernetesApi, PodRun, k8s, launch_job  # noqa: F401 (k8s: fixture)

from trainctl.launchers.run_logs import RESULT_FILE

RUNNING = PodRun(lines=("epoch 1",), exit_code=None)  # until the Job controller or trainctl stops it


def jobs_created(fake: KubernetesApi) -> int:
    return len([r for r in fake.calls("POST", r".*/jobs") if r.status == 201])


def saved_result(tmp_path) -> dict:
    return json.loads((tmp_path / "runs/r1/logs/launch" / RESULT_FILE).read_text())


def test_a_permanent_exit_code_fails_the_job_at_once_without_a_rerun(k8s, tmp_path):
    # pod1's program exits 2 (a usage error): the Job's podFailurePolicy fails the Job at once,
    # although restarts and reruns are left; pod0, stopped by the Job controller, is collateral.
    k8s.pods.script = lambda attempt, index, try_: PodRun(lines=("bad flag",), exit_code=2) if index == 1 else RUNNING
    result, echoed = launch_job(k8s, tmp_path, max_restarts=5, job_retries=3)
    assert not result.ok and result.attempts == 1 and result.permanent_failure == 2
    assert jobs_created(k8s) == 1 and sorted(k8s.pod_tries.values()) == [1, 1]  # no pod restart either
    assert [o.node for o in result.failures()] == ["pod1"]
    assert "pod1 (rank 1) failed: permanent error: its program exited with code 2" in result.describe_failures()
    assert "[pod1 r1]:bad flag" in result.describe_failures()
    assert any(re.search(r"job r1 failed: PodFailurePolicy: .*exit code 2", line) for line in echoed)
    assert saved_result(tmp_path)["failures"] == [
        {"node": "pod1", "rank": 1, "exit_code": 2,
         "error": "permanent error: its program exited with code 2"}]
    assert k8s.names("jobs") == [] and k8s.refused() == []


def test_a_permanent_worker_exit_under_torchrun_stops_the_job_at_once(k8s, tmp_path):
    # torchrun would restart the workers and exit 1 in the end: trainctl reads the worker's exit
    # code in torchrun's log, as on SSH, and stops the Job.
    agent = "torch.distributed.elastic.agent: worker group failed (exitcode: 2) local_rank: 0"
    k8s.pods.script = lambda attempt, index, try_: (
        PodRun(lines=("[pod1 r1]:bad flag", agent), exit_code=None) if index == 1 else RUNNING)
    result, echoed = launch_job(k8s, tmp_path, framework="torch", job_retries=3)
    assert not result.ok and result.attempts == 1 and result.permanent_failure == 2
    assert jobs_created(k8s) == 1
    assert f"[pod1] {agent}" in echoed and "[trainctl] permanent exit code 2 on pod1: stopping job r1" in echoed
    assert [o.node for o in result.failures()] == ["pod1"]  # pod0 was stopped by trainctl
    assert k8s.names("jobs") == [] and k8s.names("pods") == [] and k8s.refused() == []


def test_a_transient_failure_reruns_the_job_which_then_succeeds(k8s, tmp_path):
    k8s.pods.script = lambda attempt, index, try_: (
        PodRun(lines=("oom",), exit_code=137) if (attempt, index) == (0, 1)
        else RUNNING if attempt == 0 else PodRun(lines=(f"resumed {index}",)))
    result, echoed = launch_job(k8s, tmp_path, max_restarts=0, job_retries=3)
    assert result.ok and result.attempts == 2 and saved_result(tmp_path)["attempts"] == 2
    assert jobs_created(k8s) == 2
    assert "[trainctl] job failed; rerun 1/3 from the latest checkpoint" in echoed
    logs = tmp_path / "runs/r1/logs/launch"
    assert (logs / "attempt-01/pod1.log").read_text() == "[pod1 r1]:oom\n"
    assert (logs / "attempt-02/pod1.log").read_text() == "[pod1 r1]:resumed 1\n"
    # The second Job is created only once the first is gone with its pods (same pod hostnames).
    calls = [(r.method, r.status) for r in k8s.requests if re.fullmatch(r".*/jobs(/r1)?", r.path)]
    deleted, recreated = calls.index(("DELETE", 200)), calls.index(("POST", 201), 2)
    assert deleted < recreated and calls[recreated - 1] == ("GET", 404)
    assert k8s.names("jobs") == [] and k8s.refused() == []


def test_failed_pods_restart_inside_the_job_up_to_max_restarts(k8s, tmp_path):
    k8s.pods.script = lambda attempt, index, try_: (
        PodRun(lines=(f"try {try_}",), exit_code=1 if index == 1 and try_ < 2 else 0))
    result, echoed = launch_job(k8s, tmp_path, max_restarts=2, job_retries=0)
    assert result.ok and result.attempts == 1 and jobs_created(k8s) == 1
    assert (tmp_path / "runs/r1/logs/launch/attempt-01/pod1.log").read_text().splitlines() == [
        "[pod1 r1]:try 0", "[pod1 r1]:try 1", "[pod1 r1]:try 2"]
    assert sum(line.startswith("[trainctl] pod1: replacement pod") for line in echoed) == 2


def test_pod_failures_past_max_restarts_fail_the_attempt_and_the_reruns_run_out(k8s, tmp_path):
    k8s.pods.script = lambda attempt, index, try_: PodRun(lines=("boom",), exit_code=1 if index == 1 else 0)
    result, echoed = launch_job(k8s, tmp_path, max_restarts=1, job_retries=1)
    assert not result.ok and result.attempts == 2 and jobs_created(k8s) == 2
    assert [(o.node, o.exit_code) for o in result.failures()] == [("pod1", 1)]
    assert any("BackoffLimitExceeded" in line for line in echoed)
    assert saved_result(tmp_path)["ok"] is False
    assert k8s.names("jobs") == [] and k8s.refused() == []


def test_a_preempted_pod_is_replaced_without_spending_the_restart_budget(k8s, tmp_path):
    k8s.pods.script = lambda attempt, index, try_: PodRun(preempted=(index, try_) == (0, 0))
    result, echoed = launch_job(k8s, tmp_path, max_restarts=0, job_retries=0)
    assert result.ok and jobs_created(k8s) == 1
    assert any("was disrupted (PreemptionByScheduler); replaced without spending a restart" in line
               for line in echoed)



def test_a_failure_no_retry_can_fix_is_not_rerun_and_says_why(k8s, tmp_path):
    import subprocess
    import sys

    died = subprocess.run([sys.executable, "-c", "import tensorflow_datasets_nosuch"], capture_output=True,
                          text=True)
    traceback = tuple(died.stderr.splitlines())  # as the pod's program prints it
    k8s.pods.script = lambda attempt, index, try_: PodRun(lines=traceback, exit_code=1) if index == 1 else RUNNING
    result, echoed = launch_job(k8s, tmp_path, max_restarts=0, job_retries=3)
    assert not result.ok and result.attempts == 1 and jobs_created(k8s) == 1
    assert "[trainctl] no retry can fix ModuleNotFoundError: No module named 'tensorflow_datasets_nosuch': " \
           "no rerun" in echoed
    assert "module tensorflow_datasets_nosuch is not installed on the nodes" in result.describe_failures()
    assert k8s.names("jobs") == [] and k8s.refused() == []
