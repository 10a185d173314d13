"""The watch on `instance/maintenance-event` that runs on every node during a run: the shell
watch itself, against the local stack's metadata server on loopback (the node is 127.0.0.1),
and what the launcher makes of what it reports; and the wait for a drained node's stop."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from typing import Callable

from namespace_nodes import metadata_admin
from trainctl.launchers.protocol import Recovery
from trainctl.launchers.result import NodeOutcome
from trainctl.launchers.ssh.maintenance_watch import MIGRATE, TERMINATE, MaintenanceWatch, watch_script
from trainctl.launchers.ssh.recovery import await_maintenance_stop
from tests.unit.providers.local.test_local_metadata_server import free_port, server  # noqa: F401 (a fixture)

WAIT_SECONDS = 20.0


def follow(proc: subprocess.Popen, watch: MaintenanceWatch) -> threading.Thread:
    def pump() -> None:
        assert proc.stdout is not None
        while chunk := os.read(proc.stdout.fileno(), 4096):
            watch.feed(chunk.decode())

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, "the watch did not report the change"
        time.sleep(0.05)


def test_a_terminate_notice_drains_the_node_once_and_a_migration_only_goes_on_record(server):  # noqa: F811
    base, admin = server
    outcome, drains, said = NodeOutcome("node0", 0), [], []
    watch = MaintenanceWatch("node0", outcome, lambda: drains.append(1), said.append)
    proc = subprocess.Popen(["bash", "-c", watch_script(base)], stdout=subprocess.PIPE)
    try:
        follow(proc, watch)
        for count, event in enumerate((MIGRATE, "NONE", TERMINATE), start=1):
            metadata_admin.announce_maintenance(admin, "node0", event)
            wait_until(lambda: len(outcome.maintenance) == count)
            if event == MIGRATE:
                assert not drains and not outcome.preempted  # a live migration stops nothing
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert [n["event"] for n in outcome.maintenance] == [MIGRATE, "NONE", TERMINATE]
    assert [n["action"].split(":")[0] for n in outcome.maintenance] == ["no drain", "the host maintenance is over",
                                                                        "drained"]
    assert drains == [1] and outcome.preempted and outcome.drained
    assert "host maintenance" in outcome.error
    assert any(f"{MIGRATE} announced: no drain" in line for line in said)


def test_without_a_metadata_server_the_watch_ends_at_once():
    closed = f"http://127.0.0.1:{free_port()}/computeMetadata/v1"
    done = subprocess.run(["bash", "-c", watch_script(closed)], capture_output=True, text=True, timeout=WAIT_SECONDS)
    assert (done.returncode, done.stdout) == (0, "")


def test_output_split_anywhere_is_read_whole_and_a_node_is_drained_once():
    outcome, drains = NodeOutcome("node1", 1), []
    watch = MaintenanceWatch("node1", outcome, lambda: drains.append(1), lambda _: None)
    for piece in ("TRAINCTL_MAINTENANCE NONE\n..TRAINCTL_MAI", "NTENANCE TERMINATE_ON_HOST", "_MAINTENANCE\n.",
                  "TRAINCTL_MAINTENANCE NONE\n", "TRAINCTL_MAINTENANCE TERMINATE_ON_HOST_MAINTENANCE\n"):
        watch.feed(piece)
    assert [n["event"] for n in outcome.maintenance] == [TERMINATE, "NONE", TERMINATE] and drains == [1]


def test_a_drained_node_is_recreated_only_once_the_provider_has_stopped_it():
    answers = [[], [], ["node1"]]
    slept: list[float] = []
    said: list[str] = []
    recovery = Recovery(lambda nodes: answers.pop(0), lambda nodes: None)  # type: ignore[arg-type, return-value]
    await_maintenance_stop(recovery, ["node1"], said.append, slept.append)
    assert answers == [] and len(slept) == 2
    assert "node1: waiting for the host maintenance to stop it" in said[0]
