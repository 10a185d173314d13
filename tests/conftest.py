"""Shared fixtures. End-to-end tests build real local stacks (namespaces, sshd, emulator) under a
private TRAINCTL_HOME and prove afterwards that nothing of theirs is left on the machine."""

from __future__ import annotations

import contextlib
import fcntl
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TEST_HOMES = Path("/var/lib/trainctl-tests")


def pytest_collection_modifyitems(config, items):
    # mypy of the whole tree (40 s from a clean clone) is the slowest unit test and would be
    # scheduled last, alone: it starts first instead, beside the end-to-end files.
    items.sort(key=lambda item: not item.nodeid.startswith("tests/unit/test_typecheck.py"))
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="end-to-end tests need root (namespaces, sshd)")
        for item in items:
            if "e2e" in item.keywords:
                item.add_marker(skip)


@pytest.hookimpl(wrapper=True)
def pytest_collection(session):
    """pytest caches its assertion-rewritten test modules as bytecode, except where
    PYTHONDONTWRITEBYTECODE is set (as on these machines): then every worker of every run
    rewrites all ~230 modules again, about 6 of the 13 CPU-s each worker spends collecting the unit
    tier. The suite's own rewritten modules are written while it collects; the environment's
    setting holds for everything else."""
    saved = sys.dont_write_bytecode
    sys.dont_write_bytecode = False
    try:
        return (yield)
    finally:
        sys.dont_write_bytecode = saved


def work_unit(nodeid: str) -> str:
    """What one test worker runs in order (pytest-xdist's scope). The tests of an end-to-end file
    name their stacks alike (netns names come from stack names), so they stay together; unit tests
    spread one by one. Simulated worlds of two files coexist (each its own home, names and
    external range; the root pieces they share go with the last of them), so a simulator file
    is a unit like any other; so is a contract file (one live stack per provider, shared)."""
    path = nodeid.split("::")[0]
    if not path.startswith(("tests/e2e/", "tests/reliability/", "tests/contracts/")):
        return nodeid
    return path


@pytest.fixture(autouse=True)
def environment_restored():
    """Each test starts from the state the one before it started from: a test, or the CLI it runs
    in-process, may change os.environ and the endpoints the process reaches Google through
    (`--simulate`), or latch an interrupt (a budget or TTL reached outside `trainctl run`, which
    the CLI clears with every run): a later test on the same worker must not inherit them."""
    from infra.providers.gcp import private_endpoints
    from trainctl.launchers import interrupts

    saved, saved_endpoints = dict(os.environ), private_endpoints.in_use()
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)
    private_endpoints._in_use = saved_endpoints
    interrupts._pending = None


@pytest.hookimpl(optionalhook=True)  # defined only where pytest-xdist is loaded
def pytest_xdist_make_scheduler(config, log):
    # xdist's own `loadgroup` marks do not group under pytest 9 (a static
    # @pytest.mark.xdist_group spread one file's tests over both workers), so the grouping is
    # a scope function of xdist's LoadScopeScheduling, which the largest units start first.
    from xdist.scheduler import LoadScopeScheduling

    class ByWorkUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return ByWorkUnit(config, log)


@contextlib.contextmanager
def private_home(monkeypatch: pytest.MonkeyPatch):
    """A private state home (a test's, or a module's); afterwards every stack in it is forced
    down and the home removed."""
    home = TEST_HOMES / uuid.uuid4().hex[:12]
    home.mkdir(parents=True, mode=0o700)
    monkeypatch.setenv("TRAINCTL_HOME", str(home))
    try:
        yield home
    finally:
        # A failed test can leave its trainctl process running; it must end before the sweep
        # below, or it would recreate state in the home after the sweep removed it.
        Streamed.stop_all()
        from infra.providers.local import realizer
        for stack in [p.name for p in (home / "stacks").glob("*") if p.is_dir()]:  # none: no folder
            try:
                realizer.down(stack, force=True)
            except Exception as exc:  # report, but keep cleaning
                print(f"cleanup of {stack} failed: {exc}", file=sys.stderr)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def trainctl_home(monkeypatch):
    with private_home(monkeypatch) as home:
        yield home


def seeded_python(requirements: Path) -> Path:
    """An interpreter with a trainer's requirements, built as bootstrap seeds the nodes'
    environments (uv, the machine's shared uv cache and wheelhouse): trainers run here as plain
    processes."""
    import hashlib

    from infra.providers.offline_uv import LOCAL_WHEELHOUSE
    from infra.providers.stack_home import cache_dir

    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()[:16]
    seed = cache_dir() / "seed" / f"tests-{digest}"
    env = {**os.environ, "UV_CACHE_DIR": str(cache_dir() / "uv"), "UV_LINK_MODE": "hardlink",
           "UV_PYTHON_DOWNLOADS": "never"}
    if os.path.isdir(LOCAL_WHEELHOUSE):
        env["UV_FIND_LINKS"] = LOCAL_WHEELHOUSE
    seed.parent.mkdir(parents=True, exist_ok=True)
    with open(seed.parent / f".{seed.name}.lock", "w") as lock:  # test workers seed it once between them
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (seed / ".complete").exists():
            uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
            python = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or "python3"
            subprocess.run([uv, "venv", "-q", "--allow-existing", "--python", python, str(seed)], env=env, check=True)
            subprocess.run([uv, "pip", "install", "-q", "--python", str(seed / "bin" / "python"), "-r",
                            str(requirements)], env=env, check=True)
            (seed / ".complete").touch()
    return seed / "bin" / "python"


@pytest.fixture(scope="session")
def trainer_python() -> Path:
    """The PyTorch trainers' interpreter."""
    return seeded_python(REPO / "trainers" / "requirements.txt")


@pytest.fixture(scope="session")
def tf_trainer_python() -> Path:
    """The TensorFlow trainers' interpreter."""
    return seeded_python(REPO / "trainers" / "requirements-tf.txt")


def digits_shards(python: Path, folder: Path, per_shard: int = 100) -> None:
    """scikit-learn's 1,797 digits as .npz shards (arrays x, y) in `folder`, as a user would keep
    a dataset in a bucket: written by the trainers' interpreter `python`, which has the data."""
    script = ("import sys, numpy as np\n"
              f"sys.path.insert(0, {str(REPO)!r})\n"
              "from trainers.digits_data import load\n"
              "x, y = load()\n"
              f"for i in range(0, len(x), {per_shard}):\n"
              f"    np.savez(f'{{sys.argv[1]}}/shard-{{i // {per_shard}:03d}}.npz', x=x[i:i + {per_shard}], "
              f"y=y[i:i + {per_shard}])\n")
    subprocess.run([str(python), "-c", script, str(folder)], check=True)


def undisturbed_training(world_size: int, args: list[str]) -> dict:
    """metrics.json of `trainers.digits_ddp ARGS` trained undisturbed by `world_size` ranks.

    The digits trainer is deterministic for a given world size and arguments, wherever its ranks
    run (gloo on loopback or across nodes give the same steps and accuracy: checked against a
    3-node local stack), so the undisturbed twin of a disturbed run is one torchrun on this
    host, computed once per trainer code and arguments and shared by the test workers."""
    import hashlib
    import json

    from infra.providers.stack_home import cache_dir

    python = seeded_python(REPO / "trainers" / "requirements.txt")
    code = b"".join(p.read_bytes() for p in sorted((REPO / "trainers").glob("*.py")))
    key = hashlib.sha256(code + repr((world_size, args, str(python))).encode()).hexdigest()[:16]
    cached = cache_dir() / "tests-undisturbed" / f"{key}.json"
    cached.parent.mkdir(parents=True, exist_ok=True)
    with open(cached.parent / f".{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not cached.exists():
            job_dir = Path(tempfile.mkdtemp(prefix="undisturbed-", dir=cached.parent))
            try:
                done = subprocess.run([str(python), "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
                                       "--nproc-per-node", str(world_size), "-m", "trainers.digits_ddp",
                                       "--job-dir", str(job_dir), *args],
                                      cwd=REPO, capture_output=True, text=True, timeout=300)
                assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
                cached.write_text((job_dir / "metrics.json").read_text())
            finally:
                shutil.rmtree(job_dir, ignore_errors=True)
        return json.loads(cached.read_text())


def free_port() -> int:
    """A loopback port nothing listens on now (for an emulator or server a test starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def leftovers(stack: str) -> list[str]:
    """Everything on this machine that still belongs to the stack."""
    from namespace_nodes import netns as nets
    from infra.providers.local.layout import Names
    from infra.providers.stack_home import lock_path, state_dir

    names = Names(stack)
    found = [f"netns {ns}" for ns in nets.list_netns() if ns.startswith(names.netns_prefix)]
    found += [f"link {link}" for link in os.listdir("/sys/class/net")
              if link.startswith(f"tcv{names.digest[:6]}") or link == names.bridge]
    found += [f"etc {p}" for p in Path("/etc/netns").glob(f"{names.netns_prefix}*")]
    rule = nets.host_forward_rule(names.bridge)
    if subprocess.run(["iptables", "-C", *rule], capture_output=True).returncode == 0:
        found.append("iptables FORWARD rule")
    if state_dir(stack).exists():  # keys, inventory, partial downloads of `collect`
        found.append(f"state {state_dir(stack)}")
    if lock_path(stack).exists():
        found.append(f"lock {lock_path(stack)}")
    ps = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True).stdout
    # sshds and ssh/rsync clients name the state folder; the emulator names its bucket.
    found += [f"process {line.strip()}" for line in ps.splitlines()
              if f"/stacks/{stack}/" in line or f"tc-{stack}-" in line or line.endswith(f" {names.bucket}")]
    return found


def trainctl(*args: str, env: dict | None = None, timeout: float = 600, cwd: Path = REPO,
             **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trainctl.cli", *args], cwd=cwd, text=True,
                          capture_output=True, timeout=timeout, env={**os.environ, **(env or {})},
                          **kwargs)


@pytest.fixture
def local_stack(trainctl_home):
    """Factory: real local stacks that are removed (and verified gone) after the test."""
    from infra.providers.local import realizer
    from infra.spec.stack_config import load_stack

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


def experiment(tmp_path: Path, args: str, nodes: int = 2, name: str = "e2e", extra: str = "") -> Path:
    """An experiment file for the digits trainer; `extra` is appended YAML (restart:, sweep:)."""
    f = tmp_path / f"{name}.yaml"
    f.write_text(f"""
name: {name}
stack: local
overrides: {{nodes: {nodes}}}
code: {REPO}
requirements: trainers/requirements.txt
run:
  command: python -m trainers.digits_ddp --job-dir {{job_dir}} {args}
ttl_hours: 1
""" + extra)
    return f


def run_id_of(output: str) -> str:
    match = re.search(r"\[trainctl\] run (\S+):", output)
    assert match, output
    return match.group(1)


def kill_on_node1(stack: str, pattern: str) -> None:
    """SIGKILL the processes matching `pattern` on node1 only, through `trainctl exec`."""
    killed = trainctl("exec", "--stack", stack, "--nodes", "node1", "--", "pkill", "-9", "-f", "--",
                      f"'{pattern}'")
    assert killed.returncode == 0, killed.stdout + killed.stderr


def _default_sigint() -> None:
    """A terminal's job gets Ctrl-C; a test run from a background shell would pass SIGINT on
    ignored, and Python then never turns it into KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Streamed:
    """A trainctl process whose output is read as it comes."""

    running: list[Streamed] = []

    def __init__(self, *args: str, cwd: Path = REPO) -> None:
        # Its own process group, as a shell job has: Ctrl-C can be sent the way a terminal does.
        self.proc = subprocess.Popen([sys.executable, "-m", "trainctl.cli", *args], cwd=cwd,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                     start_new_session=True, preexec_fn=_default_sigint)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.pump = threading.Thread(target=self._pump, daemon=True)
        self.pump.start()
        Streamed.running.append(self)

    @classmethod
    def stop_all(cls, grace: float = 90) -> None:
        """Ctrl-C to each process still running (it tears its stack down), then SIGKILL."""
        for streamed in cls.running:
            if streamed.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(streamed.proc.pid, signal.SIGINT)
                try:
                    streamed.proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(streamed.proc.pid, signal.SIGKILL)
                    streamed.proc.wait()
        cls.running.clear()

    def _pump(self) -> None:
        assert self.proc.stdout
        for line in self.proc.stdout:
            self.lines.put(line)

    def wait_for(self, pattern: str, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=1)
            except queue.Empty:
                assert self.proc.poll() is None, "exited early:\n" + "".join(self.seen[-40:])
                continue
            self.seen.append(line)
            if re.search(pattern, line):
                return
        raise AssertionError(f"{pattern!r} not seen:\n" + "".join(self.seen[-40:]))

    @classmethod
    def run(cls, experiment_file: Path, runs: Path) -> tuple[Streamed, str]:
        """`trainctl run` in the background; returns it once its run id is known."""
        proc = cls("run", str(experiment_file), "--runs-dir", str(runs))
        proc.wait_for(r"\[trainctl\] run ")
        return proc, run_id_of("".join(proc.seen))

    def finish(self, timeout: float = 120) -> str:
        self.proc.wait(timeout=timeout)
        self.pump.join(timeout=10)  # the pipe's last lines
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return "".join(self.seen)
