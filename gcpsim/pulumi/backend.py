"""Stacks in a self-managed (DIY) backend directory, laid out as the CLI's file:// backend lays
them out (pkg/backend/diy): <dir>/.pulumi/stacks/<project>/<stack>.json holds the checkpoint
(the latest deployment), <dir>/.pulumi/history/<project>/<stack>/ one file per update, and a
lock file under <dir>/.pulumi/locks/ while an update runs. The backend is PULUMI_BACKEND_URL, or
the `current` login in $PULUMI_HOME/credentials.json, as the CLI picks it. Only file:// URLs are
supported: the stand-in keeps its state on this machine.

Secrets are kept in the state as values marked secret, in plain text (the real CLI encrypts them
with the stack's passphrase); the passphrase is not asked for.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping

DATETIME = "%Y-%m-%dT%H:%M:%S"


class BackendError(Exception):
    """A problem with the backend or a stack in it; the message is the CLI's."""


def backend_dir(env: Mapping[str, str]) -> Path:
    url = env.get("PULUMI_BACKEND_URL")
    if not url:
        home = Path(env.get("PULUMI_HOME") or Path.home() / ".pulumi")
        try:
            url = json.loads((home / "credentials.json").read_text()).get("current")
        except (OSError, ValueError):
            url = None
    if not url:
        raise BackendError("PULUMI_ACCESS_TOKEN must be set for login during non-interactive CLI sessions")
    if not url.startswith("file://"):
        raise BackendError(f"the simulator's pulumi keeps stacks in a local directory only (a file:// "
                           f"backend), not {url}: set PULUMI_BACKEND_URL=file://<dir>")
    path = url.removeprefix("file://").split("?", 1)[0]
    if path in ("", "~") or path.startswith("~/"):
        path = str(Path.home()) + path[1:]
    return Path(path)


class Backend:
    def __init__(self, root: Path, project: str) -> None:
        self.root = root
        self.project = project
        self.meta = root / ".pulumi"
        self._write_lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"file://{self.root}"

    def _stack_file(self, stack: str) -> Path:
        return self.meta / "stacks" / self.project / f"{stack}.json"

    def _history_dir(self, stack: str) -> Path:
        return self.meta / "history" / self.project / stack

    def exists(self, stack: str) -> bool:
        return self._stack_file(stack).is_file()

    def stacks(self) -> list[str]:
        folder = self.meta / "stacks" / self.project
        return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []

    def create(self, stack: str) -> None:
        if self.exists(stack):
            raise BackendError(f"stack '{stack}' already exists")
        self.meta.mkdir(parents=True, exist_ok=True)
        (self.meta / "meta.yaml").write_text("version: 1\n")
        self._write(stack, {"version": 3, "checkpoint": {"stack": self.qualified(stack)}})

    def qualified(self, stack: str) -> str:
        return f"organization/{self.project}/{stack}"

    def require(self, stack: str) -> None:
        if not self.exists(stack):
            raise BackendError(f"no stack named '{stack}' found")

    def resources(self, stack: str) -> list[dict[str, Any]]:
        self.require(stack)
        doc = json.loads(self._stack_file(stack).read_text())
        return list((doc["checkpoint"].get("latest") or {}).get("resources") or [])

    def pending(self, stack: str) -> list[dict[str, Any]]:
        doc = json.loads(self._stack_file(stack).read_text())
        return list((doc["checkpoint"].get("latest") or {}).get("pending_operations") or [])

    def save(self, stack: str, deployment: dict[str, Any]) -> None:
        self._write(stack, {"version": 3, "checkpoint": {"stack": self.qualified(stack), "latest": deployment}})

    def _write(self, stack: str, doc: dict[str, Any]) -> None:
        path = self._stack_file(stack)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(doc)
        with self._write_lock:  # steps finish on several threads; the last save wins whole
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(text)
            os.replace(tmp, path)

    def remove(self, stack: str, force: bool) -> None:
        live = [r for r in self.resources(stack)]
        if live and not force:
            raise BackendError(
                f"'{stack}' still has resources; removal rejected. Possible actions:\n"
                f"- Make sure that '{stack}' is the stack that you want to destroy\n"
                "- Run `pulumi destroy` to delete the resources, then run `pulumi stack rm`\n"
                "- Run `pulumi stack rm --force` to override this error")
        self._stack_file(stack).unlink()

    # -- history -----------------------------------------------------------------------------

    def record(self, stack: str, info: dict[str, Any]) -> None:
        folder = self._history_dir(stack)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{stack}-{time.time_ns()}.history.json").write_text(json.dumps(info, indent=4))

    def history(self, stack: str) -> list[dict[str, Any]]:
        """Updates newest first, each numbered as the CLI numbers them (1 = the first)."""
        self.require(stack)
        folder = self._history_dir(stack)
        files = sorted(folder.glob("*.history.json"), key=lambda p: int(p.name.split("-")[-1].split(".")[0]))
        updates = [{**json.loads(p.read_text()), "version": i + 1} for i, p in enumerate(files)]
        return list(reversed(updates))

    # -- locking -----------------------------------------------------------------------------

    @contextmanager
    def lock(self, stack: str) -> Iterator[None]:
        folder = self.meta / "locks" / self.project / stack
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "update.lock"
        with open(path, "a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise BackendError(
                    f"the stack is currently locked by 1 lock(s). Either wait for the other process(es) "
                    f"to end or delete the lock file with `pulumi cancel`.\n  {path}") from None
            handle.seek(0)
            handle.truncate()
            handle.write(json.dumps({"pid": os.getpid(), "timestamp": time.time()}))
            handle.flush()
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def format_time(seconds: float) -> str:
    """The Automation API parses history times with %Y-%m-%dT%H:%M:%S.%fZ."""
    return time.strftime(DATETIME, time.gmtime(seconds)) + f".{int(seconds % 1 * 1000):03d}Z"
