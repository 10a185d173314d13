"""The one wait for capacity Google grants later (flex-start VMs, queued TPUs), without Google:
states read until granted or the deadline, a line when they change saying what waits and for
how long of how long, removal of what waited and exit 3 when nothing was granted."""

from __future__ import annotations

import threading

import pytest

from infra.errors import CapacityUnavailable
from infra.providers.gcp.grant_wait import GrantWait, wait_line


def answers(*states: dict[str, str | None]):
    """A read() that gives these states in turn, then the last one again."""
    left = list(states)
    return lambda: left.pop(0) if len(left) > 1 else left[0]


def test_the_states_are_polled_until_granted_and_said_when_they_change() -> None:
    said: list[str] = []
    wait = GrantWait("flex-start", 300, answers({"node-0": None}, {"node-0": "PENDING"}, {"node-0": "PENDING"},
                                                {"node-0": "RUNNING"}),
                     lambda state: state in (None, "PENDING"), said.append)
    assert wait.until_granted(0.001, 0.001) == {"node-0": "RUNNING"}
    assert said == ["flex-start: node-0 not created yet, waited 0m00s of 5m",
                    "flex-start: node-0 PENDING, waited 0m00s of 5m"]  # the same state is not said twice


def test_at_the_deadline_what_waited_is_removed_and_the_wait_refused_with_exit_3() -> None:
    removed: list[str] = []
    wait = GrantWait("queued TPU", 0.05, lambda: {"qr": "WAITING_FOR_RESOURCES"},
                     lambda state: state == "WAITING_FOR_RESOURCES", lambda _line: None)
    last = wait.until_granted(0.001, 0.01)
    assert wait.pending(last) == ["qr"]
    with pytest.raises(CapacityUnavailable, match="not granted") as refused:
        wait.give_up("qr was not granted", remove=lambda: removed.append("qr"))
    assert removed == ["qr"] and refused.value.exit_code == 3


def test_a_wait_someone_else_blocks_on_is_watched_from_a_thread() -> None:
    said: list[str] = []
    heard = threading.Event()

    def progress(line: str) -> None:
        said.append(line)
        heard.set()

    wait = GrantWait("flex-start", 3600, lambda: {"node-0": "PENDING", "node-1": "RUNNING"},
                     lambda state: state == "PENDING", progress)
    with wait.watching(0.001):
        assert heard.wait(10)
    assert said[0] == "flex-start: node-0 PENDING, node-1 RUNNING, waited 0m00s of 60m"
    assert wait.still_waiting() == ["node-0"]


def test_a_deadline_shorter_than_a_minute_is_shown_to_the_second() -> None:
    assert wait_line("queued TPU", {"qr": "ACCEPTED"}, 61, 1.2) == "queued TPU: qr ACCEPTED, waited 1m01s of 0m01s"
