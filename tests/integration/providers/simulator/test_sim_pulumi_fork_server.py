"""The stand-in `pulumi` handed to the simulator's fork server behaves as the stand-in started
on its own: the caller's arguments, environment, working directory and streams, its exit code,
the signals sent to it, and its end when it is killed. Without a server it runs by itself; the
daemon's server goes with the daemon."""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Iterator

import pytest

from gcpsim import daemon
from gcpsim.pulumi import write_launcher, zygote

# A program that says it started, then runs until it is stopped.
HANGING_PROGRAM = textwrap.dedent("""\
    import os, pathlib, time
    pathlib.Path("started").write_text(str(os.getpid()))
    time.sleep(120)
    """)


@pytest.fixture
def launchers(tmp_path: Path, pulumi_server: Path) -> tuple[Path, Path]:
    """(served, plain): the same command, through the server and on its own."""
    return (write_launcher(tmp_path / "served", server=pulumi_server),
            write_launcher(tmp_path / "plain"))


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "project"
    root.mkdir()
    (root / "Pulumi.yaml").write_text("name: hangs\nruntime: python\n")
    (root / "__main__.py").write_text(HANGING_PROGRAM)
    (tmp_path / "backend").mkdir()
    yield root


def run(launcher: Path, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(launcher), *args], capture_output=True, text=True, timeout=60, **kwargs)  # type: ignore[call-overload]


def project_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PULUMI_BACKEND_URL": f"file://{tmp_path / 'backend'}", "PULUMI_CONFIG_PASSPHRASE": "x"}


def test_a_served_command_answers_and_fails_exactly_as_the_stand_in_on_its_own(launchers, tmp_path):
    served, plain = launchers
    codes = []
    for args in (["version"], ["no-such-command"], ["stack", "ls", "--no-such-flag"]):
        a, b = run(served, *args, cwd=tmp_path), run(plain, *args, cwd=tmp_path)
        assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr), args
        codes.append(a.returncode)
    assert codes[0] == 0 and codes[1] != 0 and codes[2] != 0


def test_a_served_command_runs_in_the_callers_folder_with_the_callers_environment(launchers, project, tmp_path):
    served, _ = launchers
    env = project_env(tmp_path)
    assert run(served, "stack", "init", "dev", cwd=project, env=env).returncode == 0
    listed = run(served, "stack", "ls", "--json", cwd=project, env=env)
    assert listed.returncode == 0 and '"dev"' in listed.stdout, listed.stderr
    assert (tmp_path / "backend" / ".pulumi").is_dir()  # the backend the caller's environment named
    elsewhere = run(served, "stack", "ls", "--json", cwd=project,
                    env={**env, "PULUMI_BACKEND_URL": f"file://{tmp_path}"})
    assert '"dev"' not in elsewhere.stdout


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_served_command_reaches_its_program_and_nothing_is_left(launchers, project, tmp_path, signum):
    served, _ = launchers
    env = project_env(tmp_path)
    assert run(served, "stack", "init", "dev", cwd=project, env=env).returncode == 0
    up = subprocess.Popen([str(served), "up", "--yes", "--skip-preview", "-s", "dev"], cwd=project, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    program_pid = int(wait_for(project / "started"))
    up.send_signal(signum)
    up.communicate(timeout=30)
    assert up.returncode != 0
    assert gone(program_pid)


def test_a_killed_client_takes_its_command_with_it(launchers, project, tmp_path):
    served, _ = launchers
    env = project_env(tmp_path)
    assert run(served, "stack", "init", "dev", cwd=project, env=env).returncode == 0
    up = subprocess.Popen([str(served), "up", "--yes", "--skip-preview", "-s", "dev"], cwd=project, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    program_pid = int(wait_for(project / "started"))
    up.kill()
    up.wait(timeout=30)
    assert gone(program_pid)


def test_without_a_server_the_launcher_runs_the_command_itself(tmp_path):
    orphan = write_launcher(tmp_path / "bin", server=tmp_path / "nobody" / zygote.SOCKET_NAME)
    answered = run(orphan, "version")
    assert answered.returncode == 0 and answered.stdout.startswith("v"), answered.stderr


def test_the_daemons_server_answers_while_it_runs_and_goes_with_it(tmp_path):
    home = tmp_path / "sim"
    try:
        daemon.ensure_running(home, api_only=True)
        launcher = write_launcher(tmp_path / "bin", server=zygote.socket_path(home))
        assert run(launcher, "version").returncode == 0
        assert server_pids(home)
    finally:
        daemon.stop(home)
    assert server_pids(home) == []


# A connection handler of the fork server that dies the moment it would answer "started",
# as one killed between forking the command and answering does.
DIES_BEFORE_STARTED = textwrap.dedent("""\
    import os, signal, socket, sys
    from gcpsim.pulumi import zygote

    class Dying(socket.socket):
        def sendall(self, data, *flags):
            if data == b"started\\n":
                os.kill(os.getpid(), signal.SIGKILL)
            return super().sendall(data, *flags)

    zygote._handle(Dying(fileno=int(sys.argv[1])))
    """)


def test_a_command_whose_handler_dies_before_saying_started_does_not_run(tmp_path):
    """The client runs a command itself when it hears no "started"; had the server's copy run
    too, the caller's stdout would get the output twice (issue 44: `stack history --json`
    printed two documents and the Automation API's json.loads failed with "Extra data")."""
    client, handler_end = socket.socketpair()
    handler = subprocess.Popen([sys.executable, "-c", DIES_BEFORE_STARTED, str(handler_end.fileno())],
                               pass_fds=[handler_end.fileno()], cwd=str(Path(zygote.__file__).parents[2]))
    handler_end.close()
    out_r, out_w = os.pipe()
    body = json.dumps({"args": ["version"], "env": dict(os.environ), "cwd": str(tmp_path),
                       "umask": 0o022, "python": sys.executable}).encode()
    with open(os.devnull, "rb") as stdin:
        socket.send_fds(client, [struct.pack("!I", len(body)) + body], [stdin.fileno(), out_w, out_w])
    os.close(out_w)
    handler.wait(timeout=60)
    assert handler.returncode == -signal.SIGKILL
    with os.fdopen(out_r, "rb") as output:
        printed = output.read()  # EOF once every process holding the stdout it was sent is gone
    assert client.recv(64) == b"" and printed == b""  # no answer, and nothing ran on its stdout


def wait_for(path: Path, seconds: float = 30) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def gone(pid: int, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def server_pids(home: Path) -> list[str]:
    ps = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in ps.splitlines() if str(zygote.socket_path(home)) in line]
