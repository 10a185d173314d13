"""A detached run's record: runs/<id>/detached.json, where both sides read it.

The controller writes its state; the submitter, `status`, `ls`, `logs` and `cancel` read it,
from any process, after the submitting one is gone. A cancel is asked for by a file beside it
(CANCEL_FILE), which the controller watches. Writes are atomic (a rename), so a reader never
sees half a record.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Iterator

from infra.errors import ConfigError
from infra.providers.stack_home import trainctl_home

RECORD_FILE = "detached.json"
CANCEL_FILE = "cancel-requested"
TERMINAL = ("succeeded", "failed", "cancelled", "lost")


@dataclass(frozen=True)
class DetachedRecord:
    run_id: str
    provider: str  # the target, whose controller realizer holds the controller
    controller: str  # the controller's name on that target
    state: str  # submitted -> running -> one of TERMINAL
    submitted: float  # epoch seconds
    updated: float
    pid: int | None = None  # the controller process, as the controller's machine numbers it
    detail: str = ""  # why it ended so, in words

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    def age_h(self, now: float | None = None) -> float:
        return ((now or time.time()) - self.submitted) / 3600

    def write(self, runs_dir: Path) -> DetachedRecord:
        path = record_path(runs_dir, self.run_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(json.dumps(asdict(self), indent=2))
        os.replace(partial, path)
        return self

    def moved(self, runs_dir: Path, state: str, **changes: object) -> DetachedRecord:
        """The record in its next state, written."""
        return replace(self, state=state, updated=time.time(), **changes).write(runs_dir)  # type: ignore[arg-type]


def record_path(runs_dir: Path, run_id: str) -> Path:
    return runs_dir / run_id / RECORD_FILE


def read(runs_dir: Path, run_id: str) -> DetachedRecord | None:
    """The run's record; None where the run is not a detached one."""
    path = record_path(runs_dir, run_id)
    if not path.exists():
        return None
    try:
        return DetachedRecord(**json.loads(path.read_text()))
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{path} is not a detached run's record ({exc})") from None


def remember(runs_dir: Path, run_id: str) -> None:
    """Note where the run's record is, for `ls` from any folder (runs live in their project)."""
    index = trainctl_home() / "detached"
    index.mkdir(parents=True, exist_ok=True)
    (index / run_id).write_text(str(runs_dir.resolve()))


def remembered() -> list[tuple[Path, DetachedRecord]]:
    """(runs dir, record) of every detached run submitted from this home whose folder is still
    there; entries whose run folder was deleted are forgotten."""
    index = trainctl_home() / "detached"
    found = []
    for entry in sorted(index.iterdir()) if index.is_dir() else []:
        runs_dir = Path(entry.read_text())
        record = read(runs_dir, entry.name) if (runs_dir / entry.name).is_dir() else None
        if record is None:
            entry.unlink(missing_ok=True)
        else:
            found.append((runs_dir, record))
    return found


@contextlib.contextmanager
def locked(runs_dir: Path, run_id: str) -> Iterator[None]:
    """Held by whoever changes a run it does not own (a lost run's teardown): one at a time."""
    with open(runs_dir / run_id / ".detached.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def ask_cancel(runs_dir: Path, run_id: str) -> None:
    (runs_dir / run_id / CANCEL_FILE).write_text(f"{time.time()}\n")


def cancel_asked(runs_dir: Path, run_id: str) -> bool:
    return (runs_dir / run_id / CANCEL_FILE).exists()
