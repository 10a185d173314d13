"""With job reruns on by default, a launch whose stack is taken down must end, not rerun."""

from __future__ import annotations

from pathlib import Path

from infra.providers.inventory import Inventory, Node
from trainctl.launchers.ssh import supervisor as launch_mod
from trainctl.launchers.result import LaunchResult, NodeOutcome
from trainctl.launchers.spec import LaunchSpec

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOgJp3Gd3xmdD3fy5IHpfpCFk5tRCAzkj1xxYXfLSG6E"


def _inventory(stack: str) -> Inventory:
    return Inventory(stack=stack, provider="local", bucket_uri="gs://b", ssh_private_key="/k",
                     known_hosts="/kh", nodes=(Node(name="node0", rank=0, internal_ip="10.0.0.1",
                                                    ssh_host="10.0.0.1", host_keys=(KEY,), workdir="/w"),))


def _failing_launches(monkeypatch) -> list[int]:
    attempts: list[int] = []

    def launch_once(inventory, spec, log_dir, echo, attempt, cancel=None, on_lost=None, joining=None, commands=None):
        attempts.append(attempt)
        return LaunchResult(spec.run_id, [NodeOutcome("node0", 0, error="connection refused")])

    monkeypatch.setattr(launch_mod, "launch_once", launch_once)
    monkeypatch.setattr(launch_mod, "stop_run", lambda *args, **kwargs: None)
    return attempts


def test_a_failed_job_on_a_stack_that_was_taken_down_is_not_rerun(monkeypatch, trainctl_home, tmp_path: Path):
    attempts = _failing_launches(monkeypatch)
    result = launch_mod.launch(_inventory("gone"), LaunchSpec(run_id="r", command=("python", "t.py")),
                               tmp_path, echo=lambda _: None)
    assert not result.ok
    assert attempts == [0]


def test_a_failed_job_on_a_stack_being_taken_down_is_not_rerun(monkeypatch, trainctl_home, tmp_path: Path):
    """`down` deletes the nodes before the state: a job that lost its nodes in between must not
    spend a rerun waiting on addresses that are going away."""
    from infra.providers.stack_home import mark_deleting, state_dir

    state_dir("going").mkdir(parents=True)
    mark_deleting("going")
    attempts = _failing_launches(monkeypatch)
    result = launch_mod.launch(_inventory("going"), LaunchSpec(run_id="r", command=("python", "t.py")),
                               tmp_path, echo=lambda _: None)
    assert not result.ok
    assert attempts == [0]


def test_a_failed_job_on_a_stack_still_up_is_rerun_up_to_the_default(monkeypatch, trainctl_home, tmp_path: Path):
    from infra.providers.stack_home import state_dir

    state_dir("alive").mkdir(parents=True)
    attempts = _failing_launches(monkeypatch)
    spec = LaunchSpec(run_id="r", command=("python", "t.py"))
    launch_mod.launch(_inventory("alive"), spec, tmp_path, echo=lambda _: None)
    assert attempts == list(range(spec.job_retries + 1))
