"""`down` hands a stack's directory (its nodes' disks) to a detached deletion: the directory is
gone at once for every command, and the files are deleted without the user waiting for them."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from infra.providers.stack_home import discard, kill_clients, state_dir, trash_dir


def wait_until_empty(directory, timeout: float = 30.0) -> list:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = list(directory.iterdir()) if directory.exists() else []
        if not left:
            return []
        time.sleep(0.05)
    return left


def test_a_discarded_directory_is_gone_at_once_and_deleted_in_the_background(trainctl_home):
    stack = trainctl_home / "stacks" / "s"
    for i in range(200):
        (stack / "nodes" / f"n{i % 4}").mkdir(parents=True, exist_ok=True)
        (stack / "nodes" / f"n{i % 4}" / f"f{i}").write_text("x")
    discard(stack)
    assert not stack.exists()
    assert wait_until_empty(trash_dir()) == []


def test_what_an_interrupted_deletion_left_is_deleted_by_the_next_discard(trainctl_home):
    trash_dir().mkdir(parents=True)
    (trash_dir() / "old-1234" / "deep").mkdir(parents=True)
    (trash_dir() / "old-1234" / "deep" / "f").write_text("left by a killed rm")
    fresh = trainctl_home / "stacks" / "t"
    fresh.mkdir(parents=True)
    discard(fresh)
    assert wait_until_empty(trash_dir()) == []


def test_discarding_nothing_is_a_no_op(trainctl_home):
    discard(trainctl_home / "stacks" / "never-made")
    assert not trash_dir().exists()


def test_down_kills_the_clients_a_killed_controller_left_and_only_those(trainctl_home):
    # An rsync's ssh names the stack's key and known_hosts: as these stand-ins name its folder.
    ours = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", f"{state_dir('s1')}/keys/id_ed25519"])
    other_stack = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", f"{state_dir('s10')}/keys/id_ed25519"])
    try:
        assert kill_clients("s1") == [ours.pid]
        assert ours.wait(timeout=5) == -signal.SIGKILL
        assert other_stack.poll() is None  # s10 is not s1
    finally:
        other_stack.kill()
        other_stack.wait()
