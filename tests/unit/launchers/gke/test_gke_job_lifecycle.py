"""GKE runs end to end against the loopback Kubernetes API: logs, results, teardown."""

from __future__ import annotations

import json

import pytest
from tests.fakes.kube_fixtures import GSA, KubernetesApi, PodRun, k8s, launch_job  # noqa: F401 (k8s: fixture)

from infra.spec import catalog
from infra.spec.stack_config import ConfigError
from trainctl.launchers.run_logs import RESULT_FILE


def lines_of(index: int) -> tuple[str, ...]:
    return (f"epoch 1 on {index}", f"epoch 2 on {index}")


def nothing_left(fake: KubernetesApi) -> None:
    assert fake.names("jobs") == [] and fake.names("services") == [] and fake.names("pods") == []
    assert fake.names("serviceaccounts") == [catalog.GKE_KSA_NAME]  # shared by runs: kept
    assert fake.refused() == []


def test_a_successful_run_streams_every_pods_lines_and_leaves_no_job_or_service_behind(k8s, tmp_path):
    k8s.pods.script = lambda attempt, index, try_: PodRun(lines=lines_of(index))
    result, echoed = launch_job(k8s, tmp_path)
    assert result.ok and result.attempts == 1
    assert [(o.node, o.rank, o.exit_code) for o in result.outcomes] == [("pod0", 0, 0), ("pod1", 1, 0)]
    for index in (0, 1):
        shown = [f"[pod{index} r{index}]:{line}" for line in lines_of(index)]
        assert [line for line in echoed if line.startswith(f"[pod{index} ")] == shown
        log = tmp_path / "runs/r1/logs/launch/attempt-01" / f"pod{index}.log"
        assert log.read_text().splitlines() == shown
    saved = json.loads((tmp_path / "runs/r1/logs/launch" / RESULT_FILE).read_text())
    assert saved == {"run_id": "r1", "ok": True, "attempts": 1, "recoveries": [], "failures": []}
    # The Job went in the foreground (its pods first); the namespace holds nothing of the run.
    assert [r.query.get("propagationPolicy") for r in k8s.calls("DELETE", r".*/jobs/r1")] == ["Foreground"]
    nothing_left(k8s)


def test_the_pods_run_as_the_workload_identity_service_account(k8s, tmp_path):
    launch_job(k8s, tmp_path)
    (posted,) = k8s.calls("POST", r".*/serviceaccounts")
    assert posted.body["metadata"]["annotations"] == {"iam.gke.io/gcp-service-account": GSA}
    (job,) = k8s.calls("POST", r".*/jobs")
    assert job.body["spec"]["template"]["spec"]["serviceAccountName"] == catalog.GKE_KSA_NAME
    assert job.query == {"fieldValidation": "Strict"}  # an unknown field would be refused, not dropped


def test_a_second_run_reuses_the_service_account(k8s, tmp_path):
    first, _ = launch_job(k8s, tmp_path, run_id="r1")
    second, _ = launch_job(k8s, tmp_path, run_id="r2")
    assert first.ok and second.ok
    assert [r.status for r in k8s.calls("POST", r".*/serviceaccounts")] == [201, 409]
    assert not k8s.calls("DELETE", r".*/serviceaccounts/.*")
    nothing_left(k8s)


def test_a_keyboard_interrupt_from_echo_mid_stream_still_deletes_the_job_and_service(k8s, tmp_path):
    k8s.pods.script = lambda attempt, index, try_: PodRun(lines=lines_of(index), exit_code=None)  # never ends
    shown: list[str] = []

    def echo(line: str) -> None:
        if line.startswith("[pod"):
            raise KeyboardInterrupt
        shown.append(line)

    with pytest.raises(KeyboardInterrupt):
        launch_job(k8s, tmp_path, echo=echo)
    nothing_left(k8s)  # the running pods went with the Job
    assert not (tmp_path / "runs/r1/logs/launch" / RESULT_FILE).exists()  # as on SSH: no result


def test_a_cancelled_run_deletes_its_job_at_once_and_is_not_rerun(k8s, tmp_path):
    """A sweep prunes a trial by cancelling its run: the Job goes, no rerun is tried."""
    import threading

    k8s.pods.script = lambda attempt, index, try_: PodRun(lines=lines_of(index), exit_code=None)  # never ends
    cancel = threading.Event()

    def echo(line: str) -> None:
        if line.startswith("[pod"):
            cancel.set()

    result, _ = launch_job(k8s, tmp_path, echo=echo, cancel=cancel, job_retries=3)
    assert result.cancelled and not result.ok
    assert len(k8s.calls("POST", r".*/jobs")) == 1  # cancelled: never rerun
    nothing_left(k8s)


def test_a_job_of_the_same_name_is_refused_and_left_alone(k8s, tmp_path):
    launch_job(k8s, tmp_path)
    k8s.pods.script = lambda attempt, index, try_: PodRun(exit_code=None)
    k8s.create("jobs", "default", k8s.calls("POST", r".*/jobs")[0].body, {})  # another launch's Job
    with pytest.raises(ConfigError, match="already running"):
        launch_job(k8s, tmp_path)
    assert k8s.names("jobs") == ["r1"]
    assert len(k8s.calls("DELETE", r".*/jobs/r1")) == 1  # the first run's teardown only
    assert k8s.refused() == []


def test_a_run_finishes_by_polling_when_the_watches_break(k8s, tmp_path):
    k8s.break_watches = True
    k8s.pods.script = lambda attempt, index, try_: PodRun(lines=lines_of(index))
    result, echoed = launch_job(k8s, tmp_path)
    assert result.ok
    assert sum("polling every" in line for line in echoed) == 2
    assert {line for line in echoed if line.startswith("[pod")} == {
        f"[pod{i} r{i}]:{line}" for i in (0, 1) for line in lines_of(i)}
    nothing_left(k8s)


FIRST_LAUNCHES = """
import threading
import trainctl.launchers.gke.job  # trainctl's modules are imported; the kubernetes client is not, yet
errors, barrier = [], threading.Barrier(8)

def first_launch():
    barrier.wait()
    try:
        trainctl.launchers.gke.job.validate({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "x"}})
    except Exception as exc:
        errors.append(repr(exc))

threads = [threading.Thread(target=first_launch) for _ in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
print(errors[0] if errors else "OK")
"""


def test_parallel_first_launches_in_one_process_import_the_kubernetes_client_without_deadlock():
    """A sweep's parallel trials on GKE each start a Job from a thread of their own; the first
    import of the kubernetes client from two threads at once stopped one of them with
    _DeadlockError (3 of 8 fresh processes here). Six fresh processes, eight threads each."""
    import subprocess
    import sys

    from conftest import REPO

    runs = [subprocess.Popen([sys.executable, "-c", FIRST_LAUNCHES], cwd=REPO, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True) for _ in range(6)]
    said = [run.communicate(timeout=300)[0].strip().splitlines()[-1] for run in runs]
    assert said == ["OK"] * 6
