"""What a detached run is made of, below the real controller (tests/e2e/test_detached_runs.py):
its record, read by both sides and never half-written; `ls`'s index of them; the stop that a
cancel is (the budget's own path: the job cancelled, then collected); the refusals that come
before anything exists (a target without a controller, what --detach does not carry); the
controller machine's boot (no metadata server to publish its key to, its host-namespace holder
before sshd)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import REPO, trainctl
from infra.errors import RunCancelled
from namespace_nodes.sshd import node_boot_script
from trainctl.jobs import detached_record as records
from trainctl.jobs.detached_record import DetachedRecord
from trainctl.jobs.spending import Spending


def a_record(runs: Path, state: str = "submitted") -> DetachedRecord:
    return DetachedRecord(run_id="quick-abc123", provider="local", controller="ctl-quick-abc123",
                          state=state, submitted=1000.0, updated=1000.0).write(runs)


def test_a_record_moves_through_its_states_and_is_never_half_written(tmp_path):
    first = a_record(tmp_path)
    assert records.read(tmp_path, "quick-abc123") == first and not first.terminal
    running = first.moved(tmp_path, "running", pid=37)
    ended = running.moved(tmp_path, "succeeded")
    assert records.read(tmp_path, "quick-abc123") == ended and ended.terminal and ended.pid == 37
    assert ended.updated > first.updated
    assert sorted(p.name for p in (tmp_path / "quick-abc123").iterdir()) == ["detached.json"]  # no partial file
    assert records.read(tmp_path, "another-run") is None  # an attached run has no record


def test_a_cancel_is_a_file_any_machine_with_the_runs_can_write(tmp_path):
    a_record(tmp_path, "running")
    assert not records.cancel_asked(tmp_path, "quick-abc123")
    records.ask_cancel(tmp_path, "quick-abc123")
    assert records.cancel_asked(tmp_path, "quick-abc123")


def test_ls_finds_detached_runs_from_any_folder_and_forgets_deleted_ones(tmp_path, trainctl_home):
    kept, deleted = tmp_path / "project-a" / "runs", tmp_path / "project-b" / "runs"
    for runs in (kept, deleted):
        a_record(runs)
    records.remember(kept, "quick-abc123")
    records.remember(deleted, "quick-abc123")  # the same id in another project: the later wins
    assert [(d, r.run_id) for d, r in records.remembered()] == [(deleted.resolve(), "quick-abc123")]
    shutil.rmtree(deleted)
    assert records.remembered() == [] and not list((trainctl_home / "detached").iterdir())


def test_a_cancel_stops_a_running_job_through_the_launchers_cancel_and_says_so():
    said: list[str] = []
    spending = Spending(None, 0.5, said.append)
    with spending.launching() as cancel:
        spending.stop("cancelled by `trainctl cancel`")
        assert cancel.is_set()  # the launcher stops every node's program; collect follows
    error = spending.stopped("run quick-abc123")
    assert isinstance(error, RunCancelled) and error.exit_code == 130
    assert "quick-abc123 cancelled by `trainctl cancel`" in str(error)
    assert said == ["[trainctl] cancelled by `trainctl cancel`: stopping the job, then collecting"]


def test_a_target_without_a_controller_refuses_detach_before_anything_exists(tmp_path, trainctl_home):
    runs = tmp_path / "runs"
    done = trainctl("run", str(REPO / "examples" / "digits-ddp.yaml"), "--stack", "gpu-t4x2", "--detach",
                    "--runs-dir", str(runs), env={"TRAINCTL_HOME": str(trainctl_home)})
    assert done.returncode == 2, done.stderr
    said = " ".join(done.stderr.split())
    assert "`run --detach` is not available on gcp stacks: no controller runs there yet" in said, said
    assert not runs.exists() and not (trainctl_home / "controllers").exists()


def test_detach_refuses_what_it_does_not_carry_to_the_controller(tmp_path, trainctl_home):
    spec = tmp_path / "config.yaml"
    spec.write_text(json.dumps({"trainingInput": {"scaleTier": "BASIC"}}))
    done = trainctl("run", str(REPO / "examples" / "digits-ddp.yaml"), "--detach", "--keep",
                    "--runs-dir", str(tmp_path / "runs"), env={"TRAINCTL_HOME": str(trainctl_home)})
    assert done.returncode == 2 and "not with --keep" in " ".join(done.stderr.split()), done.stderr
    done = trainctl("run", str(spec), "--detach", "--module-name", "trainer.task",
                    "--runs-dir", str(tmp_path / "runs"), env={"TRAINCTL_HOME": str(trainctl_home)})
    assert done.returncode == 2 and "job-spec flags, a job spec" in " ".join(done.stderr.split()), done.stderr


def test_the_controller_machine_boots_without_publishing_a_key_and_holds_the_host_first(tmp_path):
    script = node_boot_script("controller", tmp_path / "root", tmp_path / "tmp", tmp_path / "sshd_config",
                              tmp_path / "sshd.log", None, before_sshd=("sleep infinity & echo $! > /run/h.pid",))
    assert "guest-attributes" not in script  # no metadata server: its maker pinned the key it wrote
    steps = script.split("; ")
    assert steps[-2] == "sleep infinity & echo $! > /run/h.pid" and steps[-1].startswith("exec /usr/sbin/sshd")
    assert steps.index("mount -t tmpfs -o mode=0755 tmpfs /run") < len(steps) - 2  # its pid file on the private /run
    published = node_boot_script("node0", tmp_path / "root", tmp_path / "tmp", tmp_path / "sshd_config",
                                 tmp_path / "sshd.log", tmp_path / "key.pub")
    assert "guest-attributes/hostkeys/" in published  # the stack's nodes still publish theirs


def test_plan_says_what_detaching_costs_beside_the_stack(tmp_path, trainctl_home):
    done = trainctl("plan", "--stack", "local", env={"TRAINCTL_HOME": str(trainctl_home)})
    assert done.returncode == 0, done.stderr
    assert ("run --detach: its controller is a namespace node of its own on this machine (nothing billed), "
            "one per run, removed when the run ends") in done.stdout


def test_plan_of_a_target_without_a_controller_says_detaching_is_not_available():
    from infra.providers import realizers
    from infra.spec.stack_config import load_stack
    from trainctl.cli.stack_verbs import _detached_line

    assert _detached_line(realizers.capabilities(load_stack("gpu-t4x2"))) == (
        "run --detach: not available on this target (it has no controller yet)")


def test_reap_tears_down_a_detached_run_whose_controller_is_gone(tmp_path, trainctl_home):
    runs = tmp_path / "runs"
    a_record(runs).moved(runs, "running", pid=37)  # its controller's machine never existed here
    records.remember(runs, "quick-abc123")
    done = trainctl("reap", env={"TRAINCTL_HOME": str(trainctl_home)})
    assert done.returncode == 0, done.stderr
    assert "quick-abc123 (detached; its controller was lost) torn down" in done.stdout
    lost = records.read(runs, "quick-abc123")
    assert lost is not None and lost.state == "lost" and "ctl-quick-abc123 was lost" in lost.detail
    again = trainctl("reap", env={"TRAINCTL_HOME": str(trainctl_home)})
    assert "quick-abc123" not in again.stdout  # found once, recorded: nothing left to reap


def test_a_submission_nobody_took_is_abandoned_once_its_submitter_gave_up(tmp_path, trainctl_home):
    from infra.providers.local.controller_node import controller_dir
    from trainctl.jobs.detached import observe

    runs = tmp_path / "runs"
    record = a_record(runs)  # submitted long ago (epoch second 1000), by a submitter killed mid-way
    controller_dir(record.controller).mkdir(parents=True)  # what it made of the controller
    lost = observe(runs, record.run_id, print)
    assert lost is not None and lost.state == "lost" and not controller_dir(record.controller).exists()


def test_a_cancel_stops_the_job_but_never_cuts_short_the_collect_after_it(tmp_path):
    from trainctl.jobs.detached import _watch_cancel

    a_record(tmp_path, "running")
    records.ask_cancel(tmp_path, "quick-abc123")
    for trained, stopped in ((False, ["cancelled by `trainctl cancel`"]), (True, [])):
        stops: list[str] = []
        said: list[str] = []
        _watch_cancel(tmp_path, "quick-abc123", stops.append, lambda: trained, said.append).join(timeout=60)
        assert stops == stopped
        assert bool(said) == trained  # after the job: said, and left to finish
