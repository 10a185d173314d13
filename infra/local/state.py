"""Per-stack state for the local realizer: intent is recorded before anything is created.

`down` walks the records backwards and removes each one, whether or not its creation finished,
so a `kill -9` at any point leaves nothing that `down` cannot find. The lock is an flock, which
the kernel drops when its holder dies: a lock from a dead process is never stale.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from infra.stack_config import ConfigError

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


@dataclass
class StackState:
    """The state file of one stack: its spec, its resources in creation order, its status."""

    path: Path
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def resources(self) -> list[dict[str, Any]]:
        return self.data.setdefault("resources", [])

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as fh:
            json.dump(self.data, fh, indent=2)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)

    def intend(self, kind: str, **attrs: Any) -> dict[str, Any]:
        record = {"kind": kind, "status": "intent", **attrs}
        self.resources.append(record)
        self.save()
        return record

    def created(self, record: dict[str, Any]) -> None:
        record["status"] = "created"
        self.save()


def state_dir(stack: str) -> Path:
    return stacks_dir() / stack


def load_state(stack: str) -> StackState | None:
    """The stack's state, or None if it has none. A corrupt file raises with a way out."""
    path = state_dir(stack) / "state.json"
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or not isinstance(data.get("resources", []), list):
            raise ValueError("not a state object")
    except (ValueError, OSError) as exc:
        raise ConfigError(
            f"state file {path} is unreadable ({exc}); `trainctl down --stack {stack} --force` "
            "removes whatever of the stack still exists, found by its names") from None
    return StackState(path, data)


def new_state(stack: str, spec: dict[str, Any]) -> StackState:
    directory = state_dir(stack)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(directory, 0o700)
    state = StackState(directory / "state.json",
                       {"stack": stack, "created_at": time.time(), "spec": spec,
                        "status": "creating", "resources": []})
    state.save()
    return state


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


@contextmanager
def global_lock() -> Iterator[None]:
    """Held while picking subnets and interface names, so two `up`s never pick the same."""
    stacks_dir().mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(stacks_dir() / ".allocate.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
