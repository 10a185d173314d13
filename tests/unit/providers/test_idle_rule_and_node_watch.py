"""The idle rule every watch applies (the local stack's and a GCP stack's on node 0): a stack
is idle only while nobody holds a session and neither CPU nor accelerators work, and goes once
that has lasted the whole window; node 0's watch reads sessions and CPU from /proc as a VM's
sshd leaves them, and asks no GPU where nvidia-ml-py is absent."""

from __future__ import annotations

import sys

import pytest

from infra.providers import idle_rule
from infra.providers.gcp import node_idle_watch
from infra.providers.idle_rule import IdleWindow, busy


def test_a_session_a_busy_cpu_or_a_busy_gpu_each_keep_a_stack_in_use():
    assert not busy(0, 0.0) and not busy(0, 0.01, accelerator_percent=0.0)
    assert busy(1, 0.0)  # an exec that costs no CPU still uses the stack
    assert busy(0, idle_rule.IDLE_CPU_CORES * 2)
    assert busy(0, 0.0, accelerator_percent=80.0)


def test_the_window_runs_from_the_first_idle_look_and_restarts_after_any_busy_one():
    window = IdleWindow(idle_seconds=60)
    window.observe(False, now=1000.0, poll=10.0)
    assert window.idle_since == 990.0 and not window.expired(1040.0)
    window.observe(True, now=1045.0, poll=10.0)  # used again: the wait starts over
    assert window.idle_since is None and not window.expired(2000.0)
    window.observe(False, now=1100.0, poll=10.0)
    window.observe(False, now=1110.0, poll=10.0)
    assert window.idle_since == 1090.0 and not window.expired(1149.0) and window.expired(1150.0)


def _proc(root, pid: int, parent: int, name: str, ticks: tuple[int, int, int, int] = (0, 0, 0, 0)) -> None:
    fields = ["S", str(parent)] + ["0"] * 9 + [str(t) for t in ticks] + ["0"] * 5
    (root / str(pid)).mkdir()
    (root / str(pid) / "stat").write_text(f"{pid} ({name}) {' '.join(fields)}\n")


def test_node_0_counts_a_session_as_an_sshd_under_an_sshd_and_leaves_its_own_cpu_out(tmp_path):
    hz = node_idle_watch.os.sysconf("SC_CLK_TCK")
    _proc(tmp_path, 1, 0, "systemd")
    _proc(tmp_path, 300, 1, "sshd")  # the listener: no session
    _proc(tmp_path, 400, 1, "python3", (hz, hz, 0, 0))  # this watch
    _proc(tmp_path, 500, 1, "my worker (x)", (3 * hz, 0, hz, 0))  # parentheses in a name
    (tmp_path / "self").mkdir()
    sessions, cpu = node_idle_watch.sessions_and_cpu(str(tmp_path), me=400)
    assert sessions == 0 and cpu == {1: 0.0, 300: 0.0, 500: 4.0}
    _proc(tmp_path, 600, 300, "sshd")  # a connection: [priv] then the user's process
    _proc(tmp_path, 601, 600, "sshd-session")
    sessions, _ = node_idle_watch.sessions_and_cpu(str(tmp_path), me=400)
    assert sessions == 2


def test_no_gpu_is_asked_where_nvidia_ml_py_is_absent(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails as where it is not installed
    assert node_idle_watch.gpu_percent() is None


@pytest.mark.parametrize("seconds, poll", [(15, 3.0), (1, 0.5), (3600, 30.0)])
def test_watches_look_often_enough_to_act_within_a_fifth_of_the_window(seconds, poll):
    assert idle_rule.poll_seconds(seconds) == poll
