"""Shared fixtures. End-to-end tests build real local stacks (namespaces, sshd, emulator) under a
private TRAINCTL_HOME and prove afterwards that nothing of theirs is left on the machine."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TEST_HOMES = Path("/var/lib/trainctl-tests")


def pytest_collection_modifyitems(config, items):
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="end-to-end tests need root (namespaces, sshd)")
        for item in items:
            if "e2e" in item.keywords:
                item.add_marker(skip)


@pytest.fixture
def trainctl_home(monkeypatch):
    """A private state home; afterwards every stack in it is forced down and checked gone."""
    home = TEST_HOMES / uuid.uuid4().hex[:12]
    home.mkdir(parents=True, mode=0o700)
    monkeypatch.setenv("TRAINCTL_HOME", str(home))
    yield home
    stacks = [p.name for p in (home / "stacks").glob("*") if p.is_dir()] if (home / "stacks").exists() else []
    from infra.local import realizer

    for stack in stacks:
        try:
            realizer.down(stack, force=True)
        except Exception as exc:  # report, but keep cleaning
            print(f"cleanup of {stack} failed: {exc}", file=sys.stderr)
    shutil.rmtree(home, ignore_errors=True)


def leftovers(stack: str) -> list[str]:
    """Everything on this machine that still belongs to the stack."""
    from infra.local import netns as nets
    from infra.local.realizer import Names
    from infra.local.state import state_dir

    names = Names(stack)
    found = [f"netns {ns}" for ns in nets.list_netns() if ns.startswith(names.netns_prefix)]
    found += [f"link {link}" for link in os.listdir("/sys/class/net")
              if link.startswith(f"tcv{names.digest[:6]}") or link == names.bridge]
    found += [f"etc {p}" for p in Path("/etc/netns").glob(f"{names.netns_prefix}*")]
    rule = nets.host_forward_rule(names.bridge)
    if subprocess.run(["iptables", "-C", *rule], capture_output=True).returncode == 0:
        found.append("iptables FORWARD rule")
    if state_dir(stack).exists():
        found.append(f"state {state_dir(stack)}")
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    found += [f"process {line.strip()}" for line in ps.splitlines()
              if f"/stacks/{stack}/" in line or f"tc-{stack}-" in line]
    return found


def trainctl(*args: str, env: dict | None = None, timeout: float = 600, cwd: Path = REPO,
             **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trainctl.cli", *args], cwd=cwd, text=True,
                          capture_output=True, timeout=timeout, env={**os.environ, **(env or {})},
                          **kwargs)


@pytest.fixture
def local_stack(trainctl_home):
    """Factory: real local stacks that are removed (and verified gone) after the test."""
    from infra.local import realizer
    from infra.stack_config import load_stack

    made = []

    def make(name: str, nodes: int = 2):
        spec = load_stack("local", name=name, overrides={"nodes": nodes})
        inventory = realizer.up(spec)
        made.append(name)
        return inventory

    yield make
    for name in made:
        realizer.down(name, force=True)
        assert leftovers(name) == []


PROBE = ("import socket,sys\ntry:\n socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2)"
         "\n print('open')\nexcept OSError as e:\n print('blocked', e)")


def reach(ns: str | None, host: str, port: int) -> str:
    """'open …' or 'blocked …': a TCP connect from inside namespace `ns` (None: the controller)."""
    cmd = (["ip", "netns", "exec", ns] if ns else []) + ["python3", "-c", PROBE, host, str(port)]
    return subprocess.run(cmd, capture_output=True, text=True).stdout


@contextlib.contextmanager
def listening(ns: str, ip: str, port: int):
    """A TCP listener inside a namespace for the duration of the block."""
    proc = subprocess.Popen(
        ["ip", "netns", "exec", ns, "python3", "-c",
         "import socket,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1);"
         f"s.bind(('{ip}', {port})); s.listen(8); time.sleep(60)"])
    try:
        deadline = time.monotonic() + 10
        while not reach(ns, ip, port).startswith("open") and time.monotonic() < deadline:
            time.sleep(0.1)
        yield
    finally:
        proc.kill()
        proc.wait()
