"""Where trainctl keeps what it knows about each stack, whatever its provider.

One directory per stack under $TRAINCTL_HOME/stacks: the provider that owns it (recorded at
`up`, never guessed from which files exist), the realizer's own state, the inventory, keys. The
lock is an flock, which the kernel drops when its holder dies: a lock from a dead process is
never stale.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from infra.errors import ConfigError

DEFAULT_HOME = "/var/lib/trainctl"
DEFAULT_CACHE = "/var/cache/trainctl"
# Local nodes get private /tmp, /root, /run and /var/log: state kept there would be invisible to
# them, and sshd's StrictModes refuses key files under world-writable directories.
_FORBIDDEN_PREFIXES = ("/tmp", "/root", "/run", "/var/log", "/var/tmp", "/dev/shm")


def _checked_dir(env: str, default: str) -> Path:
    path = Path(os.environ.get(env, default)).resolve()
    for prefix in _FORBIDDEN_PREFIXES:
        if path == Path(prefix) or Path(prefix) in path.parents:
            raise ConfigError(
                f"{env}={path} is under {prefix}, which local nodes see as a private or "
                f"world-writable directory; choose a path such as {default}")
    return path


def trainctl_home() -> Path:
    return _checked_dir("TRAINCTL_HOME", DEFAULT_HOME)


def cache_dir() -> Path:
    return _checked_dir("TRAINCTL_CACHE", DEFAULT_CACHE)


def stacks_dir() -> Path:
    return trainctl_home() / "stacks"


class StackLocked(ConfigError):
    pass


def state_dir(stack: str) -> Path:
    return stacks_dir() / stack


def kill_clients(stack: str) -> list[int]:
    """SIGKILL every other process whose command line names the stack's state folder (its key,
    its known_hosts): the ssh and rsync clients of a controller killed with -9 outlive it, and
    would wait out their timeouts against nodes that are going. Returns their pids."""
    wanted, me, killed = f"{state_dir(stack)}/".encode(), os.getpid(), []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            named = wanted in Path(f"/proc/{entry.name}/cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        if named:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
            except ProcessLookupError:
                pass
    return killed


PROVIDER_FILE = "provider"


def record_provider(stack: str, provider: str) -> None:
    """Written when a realizer first creates (or adopts) the stack's state, before resources."""
    directory = state_dir(stack)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(directory, 0o700)
    (directory / PROVIDER_FILE).write_text(provider + "\n")


def recorded_provider(stack: str) -> str | None:
    try:
        return (state_dir(stack) / PROVIDER_FILE).read_text().strip() or None
    except FileNotFoundError:
        return None


def trash_dir() -> Path:
    return trainctl_home() / "trash"


def discard(path: Path) -> None:
    """Remove a directory without waiting for it: renamed out of the way at once (it is gone as
    far as every command can tell), deleted by a detached `rm -rf`. A stack's directory holds
    its nodes' disks, tens of thousands of files in their environments: deleting them inline
    would be most of `down`. Whatever an interrupted deletion left is retried on the next call."""
    if not path.exists():
        return
    trash = trash_dir()
    trash.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.rename(path, trash / f"{path.name}-{uuid.uuid4().hex[:8]}")
    # Its own session: a Ctrl-C to trainctl's process group does not stop the deletion.
    subprocess.Popen(["rm", "-rf", "--one-file-system", *map(str, trash.iterdir())],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True)


DELETING_FILE = "deleting"


def mark_deleting(stack: str) -> None:
    """Written by `down` before it removes anything, so that a job still running on the stack
    knows at once that a lost node is the teardown, not a fault to rerun after."""
    directory = state_dir(stack)
    if directory.is_dir():
        (directory / DELETING_FILE).touch()


def stack_still_up(stack: str) -> bool:
    directory = state_dir(stack)
    return directory.is_dir() and not (directory / DELETING_FILE).exists()


def stacks_with_state() -> list[str]:
    """Stacks that have a state directory here, by name."""
    if not stacks_dir().is_dir():
        return []
    return sorted(p.name for p in stacks_dir().iterdir() if p.is_dir())


def lock_path(stack: str) -> Path:
    return stacks_dir() / f".{stack}.lock"


@contextmanager
def stack_lock(stack: str, action: str) -> Iterator[Callable[[], None]]:
    """Exclusive per-stack lock; a second `up`/`down` of the same stack is refused at once.

    Yields `remove`: `down` deletes the lock file with the stack while still holding it. A
    process that opened the file before the delete finds, once it holds the lock, that the path
    names another inode (or none) and tries again, so two holders can never coexist."""
    stacks_dir().mkdir(parents=True, exist_ok=True, mode=0o700)
    path = lock_path(stack)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise StackLocked(f"stack {stack!r} is busy: {holder}; wait for it or stop it") from None
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} is running '{action}'".encode(), 0)
        yield lambda: path.unlink(missing_ok=True)
    finally:
        os.close(fd)


# Subnets and interface names belong to the machine, not to one TRAINCTL_HOME: two homes (two
# users, or tests in parallel) picking at once would otherwise pick the same /24.
HOST_ALLOCATION_LOCK = Path("/run/lock/trainctl-allocate.lock")


@contextmanager
def global_lock() -> Iterator[None]:
    """Held while picking subnets and interface names, so two `up`s never pick the same."""
    HOST_ALLOCATION_LOCK.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(HOST_ALLOCATION_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
